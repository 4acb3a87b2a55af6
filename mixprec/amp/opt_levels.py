"""apex-style optimisation levels: ``model, optimizer = mp.amp.initialize(model, optimizer, opt_level)``.

NVIDIA apex named four recipes for mixed-precision training; users know them
by name. ``initialize`` configures a float32 model and its optimizer (or lists of
them) for one of them, as apex's does; the training loop is then the same at every level::

    model, opt = mp.amp.initialize(model, opt, opt_level="O2")
    for x, y in data:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)     # the model's outputs come back float32
        with mp.amp.scale_loss(loss, opt) as scaled:
            scaled.backward()
        opt.step()                              # skipped when a gradient is inf/NaN

    O0  float32 everything: the accuracy baseline.
    O1  float32 weights; the forward runs under mp.autocast (each op's cast policy).
    O2  the model cast to float16 except normalisation layers (their parameters and
        math stay float32); float32 master copies of the float16 weights are what the
        optimizer steps; the model's weights are refreshed from them after each step.
    O3  everything float16, no masters: the speed baseline.

How the levels are put together, without replacing any method of the user's objects:
the input and output casts (and O1's autocast region) are forward hooks on the model
(nn.Module.register_forward_pre_hook / register_forward_hook); normalisation layers
kept in float32 get the same hooks; O2's float32 master weights are
mixprec.amp.master_weights.MasterWeights, which plugs into the optimizer's one
extension point (mp.optim.Optimizer.set_step_extension) and the model's state-dict
hooks. See docs/opt-levels.md. The loss scalers initialize makes (``_LOSS_SCALERS``)
are used through mixprec/amp/apex.py: ``scale_loss``, ``loss_scaler``, ``state_dict``.
"""
from __future__ import annotations

import math
import numbers
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..backend import devices
from .. import dtypes as _dt
from ..tensor import Tensor
from ._layout import check_scale
from .autocast_mode import autocast
from .grad_scaler import GradScaler, StaticGradScaler
from .master_weights import MasterWeights, master_params
from ..nn import Module, Parameter
from ..optim import Optimizer
from ..nn.layers import _BatchNorm, LayerNorm

__all__ = ["initialize", "StaticGradScaler", "master_params"]

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


def initialize(models, optimizers=None, opt_level="O1", *, dtype=_dt.float16, keep_norm_fp32=None,
               master_weights=None, loss_scale=None, num_losses=1, min_loss_scale=None,
               max_loss_scale=_DEFAULT_MAX_LOSS_SCALE):
    """Configure float32 models and their optimizers for opt_level; returns (models, optimizers), as apex does.

    >>> import mixprec as mp
    >>> model = mp.nn.Sequential(mp.nn.Linear(4, 8), mp.nn.LayerNorm(8), mp.nn.Linear(8, 2))
    >>> opt = mp.optim.SGD(model.parameters(), lr=0.1)
    >>> model, opt = mp.amp.initialize(model, opt, opt_level="O2")
    >>> [p.dtype.name for p in model.parameters()]       # O2: float16 weights, float32 norms
    ['float16', 'float16', 'float32', 'float32', 'float16', 'float16']

    models: an mp.nn.Module with float32 parameters, already on its device, or a list of them
      (returned as a list, as in apex).
    optimizers: an mp.optim.Optimizer over (some of) the models' parameters, not yet stepped, or a
      list of them (returned as a list); None (a model for inference): only the models are returned.
    opt_level: "O0", "O1", "O2" or "O3" (the letter O). Defaults per level:

        level  weights            forward                keep_norm_fp32  master_weights  loss_scale
        O0     float32            float32                -               False           1.0 (static)
        O1     float32            mp.autocast(dtype)     -               False           "dynamic"
        O2     dtype, norms fp32  dtype                  True            True            "dynamic"
        O3     dtype              dtype                  False           False           1.0 (static)

    dtype: float16 (default) or bfloat16 (float32's range: its default loss_scale is 1.0 at every level).
    keep_norm_fp32, master_weights: override the level's default (O2/O3 only).
    loss_scale: "dynamic" (a GradScaler bounded by min_loss_scale/max_loss_scale) or a number (a
      StaticGradScaler). Every scaler skips the optimizer step when a gradient is inf or NaN.
    num_losses: how many loss scalers to make (apex's, by loss_id): mp.amp.scale_loss(loss, opt,
      loss_id) uses them; mp.amp.loss_scaler(loss_id) is the scaler itself.

    The model and optimizer are changed in place and returned; the model's forward returns
    floating outputs in float32. docs/opt-levels.md has the details and the errors.
    """
    model_list = _as_list(models, Module, "model", "an mp.nn.Module")
    optimizer_list = [] if optimizers is None else _as_list(optimizers, Optimizer, "optimizer",
                                                            "an mp.optim.Optimizer")
    if isinstance(num_losses, bool) or not isinstance(num_losses, numbers.Integral) or num_losses < 1:
        raise ValueError(f"initialize: num_losses must be an integer >= 1 (one loss scaler per loss), got "
                         f"{num_losses!r}")
    props = _properties(opt_level, dtype, keep_norm_fp32, master_weights, loss_scale, min_loss_scale,
                        max_loss_scale)
    for objects, what in ((model_list, "model"), (optimizer_list, "optimizer")):
        for obj in objects:
            done = _INITIALIZED.get(obj)
            if done is not None:
                raise RuntimeError(f"initialize: this {what} was already initialized at {done}; build a "
                                   "fresh float32 model and optimizer to choose another level")
    device = _check_float32(model_list, optimizer_list)
    if props.cast_model and any(opt.state for opt in optimizer_list):
        raise ValueError("initialize: an optimizer already has state (it has stepped); call initialize before "
                         "the first step, so its state is created in the right precision")
    taken = [opt.step_extension for opt in optimizer_list if opt.step_extension is not None]
    if props.master_weights and taken:
        raise ValueError(f"initialize: master weights need the optimizer's step extension, but it already has one "
                         f"({type(taken[0]).__name__})")

    scalers = [_make_scaler(props, device.type) for _ in range(int(num_losses))]
    if props.cast_model:
        pairs = _cast_models(model_list, optimizer_list, props)
        for optimizer in optimizer_list if props.master_weights else ():
            MasterWeights(model_list, optimizer, pairs[id(optimizer)])
        for model in model_list:
            _Casting(inputs=props.dtype).attach(model)
    elif props.autocast:
        for model in model_list:
            _Casting(region=lambda: autocast(device.type, dtype=props.dtype)).attach(model)
    for obj in model_list + optimizer_list:
        _INITIALIZED[obj] = props.opt_level
    _LOSS_SCALERS[:] = scalers
    models = model_list if isinstance(models, (list, tuple)) else models
    return models if optimizers is None else (models, optimizer_list if isinstance(optimizers, (list, tuple))
                                              else optimizers)


_INITIALIZED = weakref.WeakKeyDictionary()  # model or optimizer -> the level initialize gave it
_LOSS_SCALERS: list = []  # the loss scalers of the last initialize (apex's amp state): amp/apex.py reads them


def _as_list(value, cls, what, expected, caller="initialize"):
    """One object or a non-empty list/tuple of them, as a list."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise ValueError(f"{caller}: the {what} list is empty; pass {expected} or a list of them")
    for item in items:
        if not isinstance(item, cls):
            raise TypeError(f"{caller}: {what} must be {expected} (or a list of them), got {type(item).__name__}")
    return items


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
    lo = None if min_loss_scale is None else check_scale(min_loss_scale, "initialize: min_loss_scale")
    hi = None if max_loss_scale is None else check_scale(max_loss_scale, "initialize: max_loss_scale")
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
    try:
        return check_scale(x, "loss_scale")
    except ValueError:
        raise ValueError(f"initialize: loss_scale must be 'dynamic' or a finite number > 0 that fits float32, "
                         f"got {x!r}") from None


def _check_float32(models, optimizers):
    """initialize casts the models itself: they must come in float32, on one device. Returns that device."""
    named = {id(p): name for model in models for name, p in model.named_parameters()}
    found = set()
    for model in models:
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            found.add(t.device)
            if _dt.is_floating(t.dtype) and t.dtype != _dt.float32:
                raise ValueError(f"initialize expects a float32 model (it casts the model itself), but {name!r} is "
                                 f"{t.dtype.name}; build the model in float32 and do not call .half() on it")
    for group in (group for optimizer in optimizers for group in optimizer.param_groups):
        for p in group["params"]:
            found.add(p.device)
            if p.dtype != _dt.float32:
                where = repr(named[id(p)]) if id(p) in named else "a tensor that is not the model's"
                raise ValueError(f"initialize expects the optimizer's parameters in float32, but {where} is "
                                 f"{p.dtype.name}")
    if len(found) > 1:
        raise ValueError(f"initialize: the model and optimizer tensors are on several devices "
                         f"({', '.join(sorted(map(str, found)))}); move the model to one device first")
    return found.pop() if found else devices.CPU


def _make_scaler(props, device_type):
    if props.loss_scale == "dynamic":
        lo, hi = props.min_loss_scale, props.max_loss_scale
        init = min(max(_DYNAMIC_INIT_SCALE, lo or 0.0), hi or math.inf)
        return GradScaler(device_type, init_scale=init, min_scale=lo, max_scale=hi)
    return StaticGradScaler(device_type, scale=props.loss_scale)


# ---------------------------------------------------------------- casting the model (O2, O3)
def _cast_models(models, optimizers, props):
    """Cast every module's own floating parameters and buffers to props.dtype (norm layers stay float32
    when keep_norm_fp32, and compute in float32). Returns, by id(optimizer), [(model param, float32
    master)] for the cast parameters that optimizer steps, the masters holding the original float32
    values (O2)."""
    stepped_by = {id(p): id(opt) for opt in optimizers for g in opt.param_groups for p in g["params"]}
    keep = (LayerNorm, _BatchNorm) if props.keep_norm_fp32 else ()
    pairs, seen = {id(opt): [] for opt in optimizers}, set()
    for module in {id(m): m for model in models for m in model.modules()}.values():  # a shared module once
        if isinstance(module, keep):
            _Casting(inputs=_dt.float32, outputs=None).attach(module)
            continue
        for p in module._parameters.values():
            if p is None or id(p) in seen:
                continue
            seen.add(id(p))
            with devices.on_device(p.device):
                if props.master_weights and id(p) in stepped_by:
                    pairs[stepped_by[id(p)]].append((p, Parameter(p._array.copy(), requires_grad=p.requires_grad)))
                p._array = p._array.astype(props.dtype)
                if p.grad is not None:
                    p.grad = Tensor._wrap(p.grad._array.astype(props.dtype))
            p._bump_version()
        for name, b in module._buffers.items():
            if b is not None and _dt.is_floating(b.dtype):
                with devices.on_device(b.device):
                    module._buffers[name] = Tensor._wrap(b._array.astype(props.dtype))
    return pairs


class _Casting:
    """A module's forward hooks: cast its floating inputs to `inputs` (None: as they come), run forward
    inside a fresh `region()` (O1's autocast; None: no region), and hand floating outputs back in
    `outputs` (None: in the dtype the floating inputs came in, when they share one)."""

    def __init__(self, inputs=None, outputs=_dt.float32, region=None):
        self.inputs, self.outputs, self.region = inputs, outputs, region
        self._calls = []  # (input dtype, entered region) per forward in progress

    def attach(self, module):
        module.register_forward_pre_hook(self.before, with_kwargs=True)
        module.register_forward_hook(self.after, with_kwargs=True, always_call=True)

    def before(self, module, args, kwargs):
        dtypes = set() if self.outputs else {t.dtype for t in _tensors((args, kwargs)) if _dt.is_floating(t.dtype)}
        region = None if self.region is None else self.region()
        self._calls.append((dtypes.pop() if len(dtypes) == 1 else None, region))
        if region is not None:
            region.__enter__()
        if self.inputs is None:
            return None
        return _map_tensors(args, self._cast_to(self.inputs)), _map_tensors(kwargs, self._cast_to(self.inputs))

    def after(self, module, args, kwargs, output):
        if not self._calls:  # an earlier pre-hook raised before ours ran
            return None
        input_dtype, region = self._calls.pop()
        if region is not None:
            region.__exit__(None, None, None)
        target = self.outputs or input_dtype
        return None if target is None else _map_tensors(output, self._cast_to(target))

    @staticmethod
    def _cast_to(dtype):
        return lambda t: t.to(dtype) if _dt.is_floating(t.dtype) else t


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
