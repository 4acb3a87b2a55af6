"""apex-style optimisation levels: ``mp.amp.initialize(model, optimizer, opt_level)``.

NVIDIA apex named four recipes for mixed-precision training; users know them
by name. ``initialize`` configures a float32 model and its optimizer for one of
them and returns ``(model, optimizer, scaler)``; the training loop is then the
same at every level::

    model, opt, scaler = mp.amp.initialize(model, opt, opt_level="O2")
    for x, y in data:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)     # the model's outputs come back float32
        scaler.scale(loss).backward()
        scaler.step(opt)                        # skipped when a gradient is inf/NaN
        scaler.update()

    O0  float32 everything: the accuracy baseline.
    O1  float32 weights; the forward runs under mp.autocast (each op's cast policy).
    O2  the model cast to float16 except normalisation layers (their parameters and
        math stay float32); float32 master copies of the float16 weights are what the
        optimizer steps; the model's weights are refreshed from them after each step.
    O3  everything float16, no masters: the speed baseline.

How O2 works (one mechanism, MasterWeights): the user's optimizer object keeps
its class and hyper-parameters, but its param_groups now hold float32 master
Parameters in place of the float16 model parameters (a float32 norm parameter
is its own master). The GradScaler, asked to unscale that optimizer, gets
(float16 model grad -> float32 master grad) pairs from MasterWeights and
unscales each pair in the same fused launch
(mp.amp.functional.non_finite_check_and_unscale_ with out=). The optimizer's
step() and zero_grad(), and the model's state_dict() and load_state_dict(),
are wrapped on those two objects (instance attributes; the classes are
untouched): step() steps the masters then rounds them into the model's weights,
zero_grad() clears both sets of gradients, and the model's state_dict holds
the float32 masters, so a checkpoint keeps full precision and loads into a
float32 model as well. See docs/opt-levels.md.
"""
from __future__ import annotations

import functools
import math
import numbers
import warnings
from dataclasses import dataclass
from collections.abc import Mapping

import numpy as np

from .. import backend as _be
from .. import dtypes as _dt
from ..autograd.grad_mode import enable_grad, no_grad
from ..tensor import Tensor, zero_grads
from . import functional as _F
from .autocast_mode import autocast
from .grad_scaler import GradScaler, _gradients

__all__ = ["initialize", "StaticGradScaler", "master_params"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_DEFAULT_MAX_LOSS_SCALE = 2.0 ** 24
_DYNAMIC_INIT_SCALE = 2.0 ** 16  # torch's and apex's starting scale


@dataclass(frozen=True)
class Properties:
    """What one level does; initialize() fills in the defaults and the user's overrides."""
    opt_level: str
    dtype: np.dtype          # the low-precision type (float16 or bfloat16)
    cast_model: bool         # model weights stored in dtype (O2, O3)
    autocast: bool           # forward under mp.autocast (O1)
    keep_norm_fp32: bool     # normalisation layers keep float32 parameters and math
    master_weights: bool     # the optimizer steps float32 masters of the dtype weights
    loss_scale: object       # "dynamic" or a float (static)
    min_loss_scale: float | None = None
    max_loss_scale: float | None = None


# Per-level defaults (apex's table); loss_scale None = "dynamic" for float16, 1.0 for bfloat16.
_LEVELS = {
    "O0": dict(cast_model=False, autocast=False, keep_norm_fp32=True, master_weights=False, loss_scale=1.0),
    "O1": dict(cast_model=False, autocast=True, keep_norm_fp32=True, master_weights=False, loss_scale=None),
    "O2": dict(cast_model=True, autocast=False, keep_norm_fp32=True, master_weights=True, loss_scale=None),
    "O3": dict(cast_model=True, autocast=False, keep_norm_fp32=False, master_weights=False, loss_scale=1.0),
}


def initialize(model, optimizer, opt_level="O1", *, dtype=_dt.float16, keep_norm_fp32=None,
               master_weights=None, loss_scale=None, min_loss_scale=None, max_loss_scale=_DEFAULT_MAX_LOSS_SCALE):
    """Configure a float32 model and its optimizer for opt_level; returns (model, optimizer, scaler).

    model: an mp.nn.Module with float32 parameters, already on its device.
    optimizer: an mp.optim.Optimizer over (some of) the model's parameters, not yet stepped.
    opt_level: "O0", "O1", "O2" or "O3" (the letter O). Defaults per level:

        level  weights            forward                keep_norm_fp32  master_weights  loss_scale
        O0     float32            float32                -               False           1.0 (static)
        O1     float32            mp.autocast(dtype)     -               False           "dynamic"
        O2     dtype, norms fp32  dtype                  True            True            "dynamic"
        O3     dtype              dtype                  False           False           1.0 (static)

    dtype: float16 (default) or bfloat16. bfloat16 has float32's exponent range,
      so gradients do not underflow or overflow the way float16's do and no loss
      scaling is needed: its default loss_scale is 1.0 at every level (asking for
      more scaling works, with a warning saying it is unnecessary).
    keep_norm_fp32, master_weights: override the level's default (O2/O3 only).
    loss_scale: "dynamic" (a GradScaler: init 2**16, backs off on overflow, grows
      every 2000 clean steps, bounded by min_loss_scale/max_loss_scale) or a number
      (a StaticGradScaler: that scale forever). Every scaler, static ones included,
      skips the optimizer step when a gradient is inf or NaN.

    The model and optimizer objects are changed in place and returned. The
    model's forward casts floating inputs to dtype (O2, O3) or runs under
    autocast (O1) and returns floating outputs in float32, so the loss is
    computed in float32. Errors (ValueError/TypeError) name any inconsistent
    choice, e.g. float16 weights stepped without masters under a loss scale
    other than 1 (their gradients would have to be unscaled in float16).
    """
    from ..nn import Module
    from ..optim import Optimizer
    if not isinstance(model, Module):
        raise TypeError(f"initialize: model must be an mp.nn.Module, got {type(model).__name__}")
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"initialize: optimizer must be an mp.optim.Optimizer, got {type(optimizer).__name__}")
    props = _properties(opt_level, dtype, keep_norm_fp32, master_weights, loss_scale, min_loss_scale,
                        max_loss_scale)
    for obj, what in ((model, "model"), (optimizer, "optimizer")):
        done = obj.__dict__.get("_amp_properties")
        if done is not None:
            raise RuntimeError(f"initialize: this {what} was already initialized at {done.opt_level}; build a "
                               "fresh float32 model and optimizer to choose another level")
    device = _check_float32(model, optimizer)
    if props.cast_model and optimizer.state:
        raise ValueError("initialize: the optimizer already has state (it has stepped); call initialize before "
                         "the first step, so its state is created in the right precision")

    if props.cast_model:
        pairs = _cast_model(model, optimizer, props)
        if props.master_weights:
            _attach_master_weights(model, optimizer, pairs)
        _wrap_forward(model, _cast_floating(props.dtype), None)
    elif props.autocast:
        _wrap_forward(model, None, autocast(device.type, dtype=props.dtype))
    object.__setattr__(model, "_amp_properties", props)
    optimizer._amp_properties = props
    return model, optimizer, _make_scaler(props, device.type)


def master_params(optimizer):
    """The tensors the optimizer steps: float32 masters after initialize at O2, its parameters otherwise.

    Clip these (after scaler.unscale_(optimizer)), not model.parameters(): at O2
    the model's float16 gradients are still scaled, the masters' are the true ones.
    """
    for group in optimizer.param_groups:
        yield from group["params"]


# ---------------------------------------------------------------- options
def _properties(opt_level, dtype, keep_norm_fp32, master_weights, loss_scale, min_loss_scale, max_loss_scale):
    """The level's defaults with the overrides applied; every inconsistent choice is an error here."""
    if not isinstance(opt_level, str) or opt_level not in _LEVELS:
        hint = " (the letter O, not zero)" if isinstance(opt_level, str) and opt_level[:1] == "0" else ""
        raise ValueError(f"opt_level must be one of {', '.join(map(repr, _LEVELS))}{hint}, got {opt_level!r}")
    try:
        dtype = _dt.as_dtype(dtype)
    except (TypeError, ValueError):
        dtype = None
    if dtype not in _dt.LOW_PRECISION:
        raise ValueError(f"initialize: dtype must be mp.float16 or mp.bfloat16 (the low-precision type; O0 is "
                         f"the float32 level), got {dtype if dtype is None else dtype.name!r}")
    for name, value in (("keep_norm_fp32", keep_norm_fp32), ("master_weights", master_weights)):
        if value is not None and not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"initialize: {name} must be True, False or None (the level's default), got {value!r}")
    level = dict(_LEVELS[opt_level])
    if not level["cast_model"]:
        if keep_norm_fp32 is False:
            raise ValueError(f"initialize: keep_norm_fp32=False contradicts {opt_level}, whose weights all stay "
                             "float32; use O3 (or O2 with keep_norm_fp32=False) for float16 norm layers")
        if master_weights:
            raise ValueError(f"initialize: master_weights=True makes no sense at {opt_level}: its weights are "
                             "already float32, there is nothing to keep a master copy of (use O2)")
    else:
        if keep_norm_fp32 is not None:
            level["keep_norm_fp32"] = bool(keep_norm_fp32)
        if master_weights is not None:
            level["master_weights"] = bool(master_weights)
    scale = _check_loss_scale(loss_scale)
    if scale is None:
        scale = level["loss_scale"]
        if scale is None:
            scale = "dynamic" if dtype == _dt.float16 else 1.0
    elif dtype == _dt.bfloat16 and scale != 1.0:
        warnings.warn(f"initialize: loss_scale={scale!r} with bfloat16: bfloat16 has float32's exponent range, so "
                      "gradients do not underflow and loss scaling is not needed (the default for bfloat16 is "
                      "1.0); scaling anyway as asked", UserWarning, stacklevel=3)
    level["loss_scale"] = scale
    lo = None if min_loss_scale is None else _check_scale(min_loss_scale, "min_loss_scale")
    hi = None if max_loss_scale is None else _check_scale(max_loss_scale, "max_loss_scale")
    if scale == "dynamic":
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"initialize: min_loss_scale ({lo}) must not exceed max_loss_scale ({hi})")
        level.update(min_loss_scale=lo, max_loss_scale=hi)
    elif lo is not None or hi != _DEFAULT_MAX_LOSS_SCALE:
        raise ValueError(f"initialize: min_loss_scale/max_loss_scale bound a dynamic loss scale; loss_scale="
                         f"{scale} is static (pass loss_scale='dynamic' to use bounds)")
    if level["cast_model"] and not level["master_weights"] and dtype == _dt.float16 and scale != 1.0:
        raise ValueError(f"initialize: {opt_level} with master_weights=False steps the float16 weights directly, "
                         f"so loss_scale={scale!r} would have to be unscaled in float16, where small gradients "
                         "underflow again (the reason torch refuses to unscale float16 gradients). Use "
                         "master_weights=True, loss_scale=1.0, or dtype=mp.bfloat16")
    return Properties(opt_level, dtype, **level)


def _check_loss_scale(x):
    if x is None or isinstance(x, str) and x == "dynamic":
        return x
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or not 0 < x <= _FLOAT32_MAX:
        raise ValueError(f"initialize: loss_scale must be 'dynamic' or a finite number > 0 that fits float32, "
                         f"got {x!r}")
    return float(x)


def _check_scale(x, name):
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or not 0 < x <= _FLOAT32_MAX:
        raise ValueError(f"initialize: {name} must be a finite number > 0 that fits float32, got {x!r}")
    return float(x)


def _check_float32(model, optimizer):
    """initialize casts the model itself: it must come in float32, on one device. Returns that device."""
    named = {id(p): name for name, p in model.named_parameters()}
    devices = set()
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        devices.add(t.device)
        if _dt.is_floating(t.dtype) and t.dtype != _dt.float32:
            raise ValueError(f"initialize expects a float32 model (it casts the model itself), but {name!r} is "
                             f"{t.dtype.name}; build the model in float32 and do not call .half() on it")
    for group in optimizer.param_groups:
        for p in group["params"]:
            devices.add(p.device)
            if p.dtype != _dt.float32:
                where = repr(named[id(p)]) if id(p) in named else "a tensor that is not the model's"
                raise ValueError(f"initialize expects the optimizer's parameters in float32, but {where} is "
                                 f"{p.dtype.name}")
    if len(devices) > 1:
        raise ValueError(f"initialize: the model and optimizer tensors are on several devices "
                         f"({', '.join(sorted(map(str, devices)))}); move the model to one device first")
    return devices.pop() if devices else _be.CPU


def _make_scaler(props, device_type):
    if props.loss_scale == "dynamic":
        lo, hi = props.min_loss_scale, props.max_loss_scale
        init = min(max(_DYNAMIC_INIT_SCALE, lo or 0.0), hi or math.inf)
        return GradScaler(device_type, init_scale=init, min_scale=lo, max_scale=hi)
    return StaticGradScaler(device_type, scale=props.loss_scale)


# ---------------------------------------------------------------- casting the model (O2, O3)
def _norm_types():
    from ..nn.layers import LayerNorm, _BatchNorm
    return (LayerNorm, _BatchNorm)


def _cast_model(model, optimizer, props):
    """Cast every module's own floating parameters and buffers to props.dtype (norm layers stay float32
    when keep_norm_fp32, and compute in float32). Returns [(model param, float32 master)] for the cast
    parameters the optimizer steps, the masters holding the original float32 values (O2)."""
    from ..nn import Parameter
    stepped = {id(p) for g in optimizer.param_groups for p in g["params"]}
    keep = _norm_types() if props.keep_norm_fp32 else ()
    pairs, seen = [], set()
    for module in model.modules():
        if isinstance(module, keep):
            _wrap_forward(module, _cast_floating(_dt.float32), None, output=_match_input)
            continue
        for p in module._parameters.values():
            if p is None or id(p) in seen:
                continue
            seen.add(id(p))
            with _be.on_device(p.device):
                if props.master_weights and id(p) in stepped:
                    pairs.append((p, Parameter(p.data.copy(), requires_grad=p.requires_grad)))
                p.data = p.data.astype(props.dtype)
                if p.grad is not None:
                    p.grad = Tensor._wrap(p.grad.data.astype(props.dtype))
            p._bump_version()
        for name, b in module._buffers.items():
            if b is not None and _dt.is_floating(b.dtype):
                with _be.on_device(b.device):
                    module._buffers[name] = Tensor._wrap(b.data.astype(props.dtype))
    return pairs


def _cast_floating(dtype):
    def cast(t):
        return t.to(dtype) if _dt.is_floating(t.dtype) else t
    return cast


def _to_float32(t):
    return t.to(_dt.float32) if _dt.is_floating(t.dtype) else t


def _match_input(output, inputs):
    """A float32 norm layer hands its output back in the dtype its input came in."""
    dtypes = {t.dtype for t in _tensors(inputs) if _dt.is_floating(t.dtype)}
    if len(dtypes) != 1:
        return output
    dtype = dtypes.pop()
    return _map_tensors(output, lambda t: t.to(dtype) if _dt.is_floating(t.dtype) else t)


def _wrap_forward(module, cast_inputs, region, output=None):
    """module.forward = cast the floating inputs, run (inside region, if any), then fix the outputs:
    output(outputs, original inputs) when given, else floating outputs to float32."""
    inner = module.forward

    @functools.wraps(inner)
    def forward(*args, **kwargs):
        new_args, new_kwargs = args, kwargs
        if cast_inputs is not None:
            new_args, new_kwargs = _map_tensors(args, cast_inputs), _map_tensors(kwargs, cast_inputs)
        if region is None:
            out = inner(*new_args, **new_kwargs)
        else:
            with region:
                out = inner(*new_args, **new_kwargs)
        return _map_tensors(out, _to_float32) if output is None else output(out, (args, kwargs))
    object.__setattr__(module, "forward", forward)


def _map_tensors(value, fn):
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple keeps its type
        return type(value)(*(_map_tensors(v, fn) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    if isinstance(value, Mapping):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


def _tensors(value):
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _tensors(v)


# ---------------------------------------------------------------- master weights (O2)
class MasterWeights:
    """float32 master copies of a model's low-precision parameters, stepped by the model's optimizer.

    The invariant: every model parameter equals its master rounded to the model's
    dtype. Master gradients live in float32 buffers allocated once, so their
    addresses never change (the CUDA unscale kernel keeps its pointer table).
    """

    def __init__(self, optimizer, pairs):
        self.optimizer = optimizer
        self.pairs = list(pairs)                                   # (model param, master)
        self._master_of = {id(p): m for p, m in self.pairs}
        self._model_of = {id(m): p for p, m in self.pairs}
        self._grad_buffers = {}                                    # id(master) -> float32 array
        self._filled = None  # {id(model param): (its grad, version)} as unscale_pairs read them; None: not yet

    def master_of(self, param):
        """The float32 master of a model parameter (None when it has none)."""
        return self._master_of.get(id(param))

    def unscale_pairs(self):
        """(gradient, destination) pairs for GradScaler.unscale_: every float16 model gradient into its
        master's float32 gradient, and in place for what the optimizer steps directly (a float32 norm
        parameter). A master whose model parameter got no gradient gets none (it is not stepped)."""
        pairs, filled = [], {}
        for group in self.optimizer.param_groups:
            for q in group["params"]:
                p = self._model_of.get(id(q))
                if p is None:
                    if q.grad is not None:
                        pairs.append((q.grad, q.grad))
                    continue
                if p.grad is None:
                    q.grad = None
                    continue
                q.grad = self._master_grad(q)
                pairs.append((p.grad, q.grad))
                filled[id(p)] = (p.grad, p.grad._version)
        self._filled = filled
        return pairs

    def _master_grad(self, master):
        buf = self._grad_buffers.get(id(master))
        if buf is None:
            with _be.on_device(master.device):
                buf = self._grad_buffers[id(master)] = _be.xp_of(master.device).empty(master.shape, np.float32)
        return master.grad if master.grad is not None and master.grad.data is buf else Tensor._wrap(buf)

    def prepare_step(self):
        """Before the optimizer steps the masters: their gradients must be the model's current ones.

        A scaler's unscale_ filled them (then nothing may have changed the model's
        gradients since), or no scaler was used and they are copied now.
        """
        if self._filled is None:
            self.copy_grads()
            return
        for p, _ in self.pairs:
            seen = self._filled.get(id(p))
            if (seen is None) != (p.grad is None) or seen is not None and (seen[0] is not p.grad or
                                                                           seen[1] != p.grad._version):
                raise RuntimeError("optimizer.step(): the model's gradients changed after scaler.unscale_(optimizer) "
                                   "read them. With master weights the optimizer steps float32 masters: clip or edit "
                                   "the gradients of mp.amp.master_params(optimizer), not model.parameters()")

    def copy_grads(self):
        """Copy (widen) the model's gradients into the masters' unchanged: optimizer.step() without a scaler."""
        pairs = [(s.data, d.data) for s, d in self.unscale_pairs() if s is not d]
        if pairs:
            device = _be.device_of_array(pairs[0][0])
            xp = _be.xp_of(device)
            with _be.on_device(device):
                flag, one = xp.zeros((1,), np.float32), xp.ones((1,), np.float32)
            _F.non_finite_check_and_unscale_([s for s, _ in pairs], flag, one, out=[d for _, d in pairs])

    @no_grad()
    def refresh_model(self, pairs=None):
        """model weight = master rounded to the model's dtype (round to nearest even)."""
        for p, m in self.pairs if pairs is None else pairs:
            p._assign("refreshing a weight from its master", m)  # also bumps its version: stale casts go

    def zero_grad(self, set_to_none=True):
        zero_grads((p for p, _ in self.pairs), set_to_none)
        self._filled = None


def _attach_master_weights(model, optimizer, pairs):
    """Re-point the optimizer at the masters and wrap step/zero_grad and the model's state_dict/load."""
    masters = MasterWeights(optimizer, pairs)
    for group in optimizer.param_groups:
        group["params"] = [p if masters.master_of(p) is None else masters.master_of(p) for p in group["params"]]
    optimizer._amp_master_weights = masters
    inner_step, inner_zero_grad = optimizer.step, optimizer.zero_grad

    @functools.wraps(inner_step)
    def step(closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        masters.prepare_step()
        inner_step()
        masters._filled = None
        masters.refresh_model()
        return loss

    @functools.wraps(inner_zero_grad)
    def zero_grad(set_to_none=True):
        inner_zero_grad(set_to_none)
        masters.zero_grad(set_to_none)

    optimizer.step, optimizer.zero_grad = step, zero_grad
    inner_state_dict, inner_load = model.state_dict, model.load_state_dict

    @functools.wraps(inner_state_dict)
    def state_dict(destination=None, prefix="", keep_vars=False):
        out = inner_state_dict(destination, prefix, keep_vars=True)
        for key, t in out.items():
            m = masters.master_of(t)
            t = t if m is None else m
            out[key] = t if keep_vars else t.detach()
        return out

    @functools.wraps(inner_load)
    def load_state_dict(state_dict, strict=True):
        result = inner_load(state_dict, strict)  # checks everything first; loads rounded values into the model
        loaded = []
        with no_grad():
            for key, p in inner_state_dict(keep_vars=True).items():
                m = masters.master_of(p)
                if m is not None and key in state_dict:
                    m._assign("load_state_dict", state_dict[key])
                    loaded.append((p, m))
        masters.refresh_model(loaded)  # exactly master rounded, whatever precision the file held
        return result

    object.__setattr__(model, "state_dict", state_dict)
    object.__setattr__(model, "load_state_dict", load_state_dict)


# ---------------------------------------------------------------- static loss scale
class StaticGradScaler(GradScaler):
    """A GradScaler whose scale never changes; steps with inf/NaN gradients are still skipped.

    StaticGradScaler(device="cuda", scale=1.0, enabled=True): the default scale of 1
    only checks and skips (what O0 and O3 use); pick a larger one for float16
    gradients that would underflow, small enough never to overflow. It is the dynamic
    scaler with growth and back-off factors of exactly 1: the update kernel's
    scale * 1.0 rounds to the same float32, so the state machine, the statistics
    (steps, skipped steps) and state_dict are GradScaler's. At scale 1.0,
    unscaling is only the inf/NaN check, so float16 gradients (O3) are accepted.
    """

    def __init__(self, device="cuda", scale=1.0, enabled=True):
        super().__init__(device, init_scale=scale, enabled=enabled)
        self._growth_factor = self._backoff_factor = 1.0

    def _unscale_pairs(self, optimizer):
        if self._init_scale == 1.0 and getattr(optimizer, "_amp_master_weights", None) is None:
            return [(g, g) for g in _gradients(optimizer, allow_float16=True)]
        return super()._unscale_pairs(optimizer)

    def update(self, new_scale=None):
        if new_scale is not None:
            raise ValueError("StaticGradScaler: the scale is fixed, update() takes no new_scale (use "
                             "mp.amp.GradScaler for a scale that changes)")
        super().update()

    def set_growth_factor(self, new_factor):
        raise ValueError("StaticGradScaler: the scale is fixed, its growth factor is 1 (use mp.amp.GradScaler)")

    def set_backoff_factor(self, new_factor):
        raise ValueError("StaticGradScaler: the scale is fixed, its backoff factor is 1 (use mp.amp.GradScaler)")

    def load_state_dict(self, state_dict):
        """Load what a StaticGradScaler saved (factors 1.0); a dynamic scaler's state is refused."""
        if self._enabled and isinstance(state_dict, Mapping) and state_dict:
            factors = (state_dict.get("growth_factor"), state_dict.get("backoff_factor"))
            if factors != (1.0, 1.0):
                raise ValueError(f"StaticGradScaler.load_state_dict: this state has growth_factor, backoff_factor "
                                 f"= {factors}, a dynamic scaler's; load it into mp.amp.GradScaler")
            # the base class checks the factors as a dynamic scaler's (> 1, < 1): give it valid ones
            state_dict = {**state_dict, "growth_factor": 2.0, "backoff_factor": 0.5}
        super().load_state_dict(state_dict)
        self._growth_factor = self._backoff_factor = 1.0
