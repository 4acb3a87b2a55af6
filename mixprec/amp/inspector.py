"""mp.amp.inspect(): where, and why, lower precision hurts a model.

    with mp.amp.inspect(model, scaler=scaler) as insp:
        with mp.autocast("cuda"):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
    report = insp.report()
    print(report)                      # ops ranked by harm, gradients, suggestions
    report.plot("inspect.png")

The inspector is a dispatch observer (mixprec.observers.observe). For each op
called at the level of the inspected code (the ops a model's forward calls; not
the inner ops of a composite) it runs, unseen by any observer and with autocast
off:

- the *shadow*: the same op in float32 on the float32 shadows of its inputs. A
  shadow is made the first time a tensor is met (a float32 copy of its value) and
  every op's shadow output is the shadow of its output, so the shadow follows the
  float32 path through the whole graph: comparing an op's result with its shadow
  shows the error of the model *so far*;
- the *local* run: the op in float32 on float32 copies of the inputs it was
  actually given, when it ran in float16/bfloat16. Comparing with it shows the
  error the op adds itself — which op is to blame.

Random ops draw the same numbers in all three runs (the generator's state is
replayed) and the user's random stream is left where the real op left it. A
backward pass inside the block is watched too: the gradient reaching each
low-precision op output and each parameter's low-precision cast (or the
parameter itself, when it is float16/bfloat16) is measured, and the float32
shadow graph is differentiated from the same seed to give the reference those
gradients are compared with (numerics.gradient_stats).

Inside mp.amp.fp8_autocast each FP8 cast is measured as it happens (the inspector
is a watcher of mixprec.amp.fp8.watch): the values it saturated and flushed to zero,
its scale's headroom and delayed scaling's amax history (numerics.fp8_stats), for the
report's FP8 section. The shadow and local runs skip the casts (the float32 path is
unquantized), so they neither record amaxes nor count as casts.

What the inspector changes: nothing the user owns. Shadows are copies; the real
ops, their results, gradients and the random stream are exactly those of a run
without it. It costs time (three runs of each op, statistics on the host) and
memory (a float32 copy of every activation kept until the block ends).
"""
from __future__ import annotations

import numbers
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as _dt
from .. import random as _random
from ..backend import devices
from .._text import policy_text, rule_text, short
from ..autograd import grad, grad_mode as _gm
from ..ops import autocast as _ac
from .. import observers as _observers
from ..ops import dispatch as _dispatch
from ..tensor import Tensor
from . import numerics
from .fp8 import scaling as fp8_scaling, watch as fp8_watch
from .fp8.autocast import ROLES
from .fp8.recipes import DelayedScaling, MXFP8BlockScaling
from .report import FP8Record, InspectReport, OpRecord, ParamGradient
from ..nn import Module

_LOW = frozenset(_dt.LOW_PRECISION)
_FLOAT = frozenset(_dt.FLOATING)


def _host(t):
    return t.numpy()


def _f32_copy(t: Tensor) -> Tensor:
    """A float32 copy of a floating tensor's value (float64 stays float64), detached, on its device;
    other tensors as they are."""
    data = t._array
    if data.dtype not in _FLOAT:
        return t
    return Tensor._wrap(data.astype(np.float64 if data.dtype == np.float64 else np.float32, copy=True))


def _f32_dtype(a):
    """A float16/bfloat16 dtype argument (to(dtype), sum(dtype=)) becomes float32; anything else stays."""
    return _dt.float32 if isinstance(a, np.dtype) and a in _LOW else a


def _map_args(args, fn):
    """args with every Tensor (also inside a list or tuple) replaced by fn(tensor), lower dtypes by float32."""
    def one(a):
        if isinstance(a, Tensor):
            return fn(a)
        if isinstance(a, (list, tuple)):
            return type(a)(one(x) for x in a)
        return _f32_dtype(a)
    return tuple(one(a) for a in args)


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


def _ran_low(call) -> bool:
    """Whether the call computed in float16/bfloat16 (an input as run, or its output)."""
    return any(t.dtype in _LOW for t in _dispatch.tensors_in(call.run_args)) or \
        any(isinstance(o, Tensor) and o.dtype in _LOW for o in _outputs(call.out))


def _why(call) -> str:
    """Why the op ran in the dtypes it did: autocast's rule and where it came from, or why none applied."""
    d, device = call.autocast, call.device.type
    if d is not None:
        target = sorted({short(x) for x in d.dtypes if x in _FLOAT}) or ["-"]
        return f"{rule_text(d.rule)} on {device} ({d.source}) -> {'/'.join(target)}"
    regions = _ac.active_regions()
    if not regions or device not in regions:
        return "autocast off: runs in its inputs' dtypes"
    if call.op.inplace:
        return "in-place: never autocast"
    if _dispatch.explicit_dtype_or_out(call.op, call.args, call.kwargs):
        return "explicit dtype=/out=: not autocast"
    floats = [t.dtype for t in _dispatch.tensors_in(call.run_args) if t.dtype in _FLOAT]
    return f"no {device} policy: runs in its inputs' dtype ({short(floats[0]) if floats else '-'})"


@dataclass
class _Param:
    """A leaf that requires grad, met in the forward: its name and its float32 shadow."""
    name: str
    ref: weakref.ref
    shadow: Tensor


@dataclass
class _Pass:
    """What one backward pass delivered: gradients per op record and per parameter (host float32)."""
    call: object
    op_grads: dict = field(default_factory=dict)       # record index -> (dtype, array)
    cast_grads: dict = field(default_factory=dict)     # id(param) -> (dtype, array): at its low-precision casts
    leaf_grads: dict = field(default_factory=dict)     # id(param) -> (dtype, array): at the parameter itself


def _add(store, key, dtype, array):
    prev = store.get(key)
    store[key] = (dtype, array if prev is None else prev[1] + array)


class _Shadow:
    """The dispatch observer: shadow and local runs per op, gradients per backward pass."""

    sees_backward = True  # (backward passes and graph nodes are calls it records too)

    def __init__(self, names, scale_of, exponents, base_depth, module_names=None):
        self.names, self.scale_of, self.exponents, self.base = names, scale_of, exponents, base_depth
        self.module_names = dict(module_names or {})  # id(module) -> its name in the model
        self.fp8 = []           # FP8Record, in cast order
        self.thread = threading.get_ident()
        self.shadows = {}       # id(tensor) -> (weakref, version, shadow)
        self.records = []       # OpRecord, in call order
        self.shadow_outs = {}   # record index -> shadow output tensor (for the reference backward)
        self.by_output = {}     # (id(node), output_nr) -> (node, record index)
        self.cast_of = {}       # id(cast node) -> (node, id(param))
        self.params = {}        # id(param) -> _Param
        self.param_grads = []   # ParamGradient, per pass
        self.scales = []        # the loss scale of each backward pass
        self.pass_state = None

    # ---- shadows ----
    def shadow_of(self, t: Tensor):
        entry = self.shadows.get(id(t))
        if entry is not None and entry[0]() is t and entry[1] == t._version:
            return entry[2]
        if t.dtype not in _FLOAT:
            return t  # integer and bool tensors (targets, indices) are their own shadow
        s = _f32_copy(t)  # first met (an input, a parameter), or changed in place behind the shadow's back
        if t.requires_grad:
            s.requires_grad_(True)
            if t.grad_fn is None:
                self.params[id(t)] = _Param(self.names.get(id(t)) or f"tensor{list(t.shape)}#{len(self.params) + 1}",
                                            weakref.ref(t), s)
        self.store(t, s)
        return s

    def store(self, t, s):
        key = id(t)
        self.shadows[key] = (weakref.ref(t, lambda _, k=key: self.shadows.pop(k, None)), t._version, s)

    def run(self, op, args, kwargs, grad, rng):
        """op on the given (shadow or float32) args, unseen, autocast off; (result, None) or (None, error)."""
        try:
            with _observers.unobserved(), _ac.suspended(), fp8_watch.unquantized(), \
                    (_gm.enable_grad() if grad else _gm.no_grad()):
                if rng is not None:
                    _random.set_rng_state(rng)
                return op(*args, **kwargs), None
        except Exception as exc:  # the user's run must never fail because its shadow did
            return None, f"{type(exc).__name__}: {exc}"

    # ---- the observer ----
    def enter(self, call):
        if call.kind == "op":
            if call.depth == self.base:
                self.before_op(call)
        elif call.kind == "backward pass" and self.pass_state is None:
            self.pass_state = _Pass(call)

    def exit(self, call):
        if call.kind == "op":
            note = call.__dict__.pop("inspect", None)
            if call.error is not None:
                return
            if note is not None:
                self.after_op(call, note)
            elif call.parent is not None and call.parent.casting and call.parent.depth == self.base:
                self.after_cast(call)
        elif call.kind == "backward":
            if self.pass_state is not None and call.error is None:
                self.after_node(call)
        elif self.pass_state is not None and call is self.pass_state.call:
            state, self.pass_state = self.pass_state, None
            if call.error is None:
                self.after_pass(call, state)

    def before_op(self, call):
        """Before the op runs: its inputs' shadows (an in-place op's first input copied, as the op is
        about to change it) and the random generator's state."""
        note = {"rng": _random.get_rng_state(), "fp8": len(self.fp8)}
        with _observers.unobserved(), _ac.suspended():
            note["shadow"] = _map_args(call.args, self.shadow_of)
            if call.op.inplace and isinstance(call.args[0], Tensor):  # the op will change its first input
                note["shadow"] = (note["shadow"][0].clone(),) + note["shadow"][1:]
                note["local"] = _map_args(call.args, _f32_copy)
        note["params"] = tuple(dict.fromkeys(self.params[id(t)].name for t in _dispatch.tensors_in(call.args)
                                             if id(t) in self.params and self.params[id(t)].ref() is t))
        call.__dict__["inspect"] = note

    def after_op(self, call, note):
        op, outs = call.op, _outputs(call.out)
        index = len(self.records) + 1
        record = OpRecord(index=index, name=op.name, device_type=call.device.type,
                          policy=policy_text(call.autocast.rule, call.autocast.lower) if call.autocast else "-",
                          why=_why(call), input_dtypes=tuple(t.dtype for t in _dispatch.tensors_in(call.args)),
                          run_dtypes=tuple(t.dtype for t in _dispatch.tensors_in(call.run_args)),
                          output_dtype=next((o.dtype for o in outs if isinstance(o, Tensor)), None),
                          params=note["params"])
        self.records.append(record)
        if call.kwargs.get("out") is not None:
            record.note = "out=: not shadowed (its shadow restarts from its value)"
            return
        after = _random.get_rng_state()
        replay = note["rng"] if after != note["rng"] else None  # a random op: replay its draws
        grad = any(isinstance(o, Tensor) and o.requires_grad for o in outs)
        kwargs = {k: _f32_dtype(v) for k, v in call.kwargs.items()}
        shadow, error = self.run(op, note["shadow"], kwargs, grad, replay)
        local = None
        casts = self.fp8[note["fp8"]:]  # FP8 casts made inside this op: measured in the FP8 section instead
        for c in casts:
            c.op = record.label
        if casts:
            record.note = f"FP8 casts #{casts[0].index}-#{casts[-1].index}: see the FP8 section"
        if error is None and _ran_low(call) and not casts:
            with _observers.unobserved():
                # copies, never the user's tensors: a composite such as batch_norm(training=True) writes
                # into some of its arguments (the running statistics)
                local_args = note.get("local") or _map_args(call.args, _f32_copy)
            local, error = self.run(op, local_args, kwargs, False, replay)
        if replay is not None:
            _random.set_rng_state(after)
        if error is not None:
            record.note = f"float32 shadow failed ({error}); its shadow restarts from its value"
            return
        for o, s in zip(outs, _outputs(shadow)):
            if isinstance(o, Tensor) and isinstance(s, Tensor):
                self.store(o, s)
        first = next((k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.dtype in _FLOAT), None)
        if first is None:
            return
        out, s = outs[first], _outputs(shadow)[first]
        run_u = numerics.unit_roundoff(record.run_dtypes + (out.dtype,))
        inputs_amax = numerics.finite_amax(_host(t) for t in _dispatch.tensors_in(note["shadow"])
                                           if t.dtype in _FLOAT)
        record.stats = numerics.forward_stats(_host(out), _host(s), None if local is None else
                                              _host(_outputs(local)[first]), out.dtype, run_u, inputs_amax)
        if out.grad_fn is not None and out.dtype in _LOW:
            self.by_output[(id(out.grad_fn), out.output_nr)] = (out.grad_fn, index)
            if s.requires_grad:
                self.shadow_outs[index] = s

    def after_cast(self, call):
        """An autocast cast of a parameter: its gradient is the parameter's gradient in the lower dtype."""
        source, out = call.args[0], call.out
        if isinstance(out, Tensor) and out.grad_fn is not None and out.dtype in _LOW:
            with _observers.unobserved():
                self.shadow_of(source)  # registers the parameter
            if id(source) in self.params:
                self.cast_of[id(out.grad_fn)] = (out.grad_fn, id(source))

    def after_node(self, call):
        node, state = call.node, self.pass_state
        for i, g in enumerate(call.args):
            if g is None:
                continue
            hit = self.by_output.get((id(node), i))
            if hit is not None and hit[0] is node:
                _add(state.op_grads, hit[1], g.dtype, _host(g).astype(np.float32))
        cast = self.cast_of.get(id(node))
        if cast is not None and cast[0] is node and call.args and call.args[0] is not None:
            _add(state.cast_grads, cast[1], call.args[0].dtype, _host(call.args[0]).astype(np.float32))
        for edge, g in zip(node._next_edges, call.out or ()):  # (node, nr) per input, aligned with the grads
            leaf = getattr(edge[0], "variable", None) if edge is not None else None  # an AccumulateGrad's leaf
            if leaf is not None and g is not None and id(leaf) in self.params:
                _add(state.leaf_grads, id(leaf), leaf.dtype, _host(g).astype(np.float32))

    def after_pass(self, call, state):
        """Measure the pass's low-precision gradients against the float32 shadow graph's."""
        scale = self.scale_of()
        self.scales.append(scale)
        wanted = {("op", i): self.shadow_outs[i] for i in state.op_grads if i in self.shadow_outs}
        for pid, p in self.params.items():
            if (pid in state.cast_grads or pid in state.leaf_grads) and p.shadow.requires_grad:
                wanted[("param", pid)] = p.shadow
        refs = self.reference(call.args, wanted)
        for i, (dtype, g) in state.op_grads.items():
            if dtype in _LOW:
                self.records[i - 1].gradient = numerics.gradient_stats(g, dtype, scale, refs.get(("op", i)),
                                                                       self.exponents)
        for pid, p in self.params.items():
            dtype, g = state.cast_grads.get(pid) or state.leaf_grads.get(pid) or (None, None)
            if dtype in _LOW:
                stats = numerics.gradient_stats(g, dtype, scale, refs.get(("param", pid)), self.exponents)
                self.param_grads.append(ParamGradient(p.name, tuple(g.shape), len(self.scales), stats))

    def fp8_cast(self, cast):
        """A watcher of mixprec.amp.fp8.watch: measure one FP8 cast of this thread (on the host)."""
        if threading.get_ident() != self.thread:
            return
        module = cast.module
        # (a functional GEMM's cast names its op, a str: "matmul", "conv2d")
        name = module if isinstance(module, str) else self.module_names.get(id(module))
        if name is None:
            name = self.module_names[id(module)] = f"{type(module).__name__}#{len(self.module_names) + 1}"
        record = FP8Record(index=len(self.fp8) + 1, module=name or type(module).__name__, role=cast.role,
                           recipe=cast.recipe, stats=None, columnwise=cast.columnwise,
                           backward=self.pass_state is not None)
        self.fp8.append(record)
        try:
            blocked = isinstance(cast.recipe, MXFP8BlockScaling)
            record.stats = numerics.fp8_stats(
                devices.to_host(cast.source), devices.to_host(cast.scale), devices.to_host(cast.data), cast.fp8,
                blocked=blocked, mx_flush=None if blocked else lambda x: fp8_scaling.quantize_mxfp8(
                    np.ascontiguousarray(x.reshape(-1, x.shape[-1])), cast.fp8).data)
            history = getattr(module, "fp8_amax_history", None)
            if isinstance(cast.recipe, DelayedScaling) and history is not None:
                row = devices.to_host(history._array[ROLES.index(cast.role)])
                record.history = numerics.amax_history(row, record.stats.amax, cast.recipe.amax_compute_algo,
                                                       cast.recipe.margin)
        except Exception as exc:  # the user's run must never fail because measuring it did
            record.note = f"not measured ({type(exc).__name__}: {exc})"

    def reference(self, pass_args, wanted):
        """The float32 gradients of ``wanted`` shadows, from the shadows of the pass's outputs and its seeds
        ({} when an output has no float32 shadow: the gradients are then their own reference)."""
        outputs, seeds = pass_args
        roots = []
        for o in outputs:
            entry = self.shadows.get(id(o))
            if entry is None or entry[0]() is not o or not entry[2].requires_grad:
                return {}
            roots.append(entry[2])
        if not wanted:
            return {}
        keys = list(wanted)
        try:
            with _observers.unobserved(), _ac.suspended(), fp8_watch.unquantized():
                got = grad(roots, [wanted[k] for k in keys], grad_outputs=[_f32_copy(s) for s in seeds],
                           retain_graph=True, allow_unused=True)
        except Exception:  # a shadow graph that cannot be differentiated: no reference
            return {}
        return {k: _host(g) for k, g in zip(keys, got) if g is not None}


class inspect:
    """Measure what float16/bfloat16 does to a forward (and backward) pass: see the module docstring.

    >>> import mixprec as mp
    >>> mp.manual_seed(0)
    >>> model = mp.nn.Linear(8, 4)
    >>> x = mp.randn(16, 8) * 1e5                       # inputs that push the outputs past 65504
    >>> with mp.amp.inspect(model) as inspector:
    ...     with mp.autocast("cpu", dtype=mp.float16):
    ...         out = model(x)
    >>> report = inspector.report()                     # print(report) shows the whole table
    >>> report.flagged
    [('#1 linear', ['makes inf/NaN'])]
    >>> print(report.suggestions[0])
    #1 linear (weight, bias): 9 of its values overflow float16 (largest |x| 1.5e+05 > 65504). Run it in float32 with mp.amp.override({"linear": "fp32"}), or autocast with dtype=mp.bfloat16 (float32's range, max 3.4e38)

    model: an mp.nn.Module, to name parameters ("0.weight") in the report; scaler: the
    GradScaler whose scale the backward ran at (its get_scale() is read at each backward
    pass), or the loss scale as a number (default 1: no scaling); scale_exponents: the loss
    scales 2^k at which gradient underflow is predicted (default 0..24).
    """

    def __init__(self, model=None, scaler=None, *, scale_exponents=numerics.DEFAULT_SCALE_EXPONENTS):
        if model is not None and not isinstance(model, Module):
            raise TypeError(f"inspect: model must be an mp.nn.Module (to name its parameters) or None, "
                            f"got {type(model).__name__}")
        self.names = {} if model is None else {id(p): n for n, p in model.named_parameters()}
        self.module_names = {} if model is None else {id(m): n for n, m in model.named_modules()}
        if scaler is None:
            self._scale_of = lambda: 1.0
        elif isinstance(scaler, numbers.Real) and not isinstance(scaler, bool):
            if not np.isfinite(scaler) or scaler <= 0:
                raise ValueError(f"inspect: a loss scale must be a finite number > 0, got {scaler!r}")
            self._scale_of = lambda: float(scaler)
        elif callable(getattr(scaler, "get_scale", None)):
            self._scale_of = scaler.get_scale
        else:
            raise TypeError(f"inspect: scaler must be a GradScaler, a positive number or None, "
                            f"got {type(scaler).__name__}")
        exps = tuple(scale_exponents)
        if not exps or not all(isinstance(k, int) and not isinstance(k, bool) for k in exps) \
                or list(exps) != sorted(set(exps)):
            raise ValueError(f"inspect: scale_exponents must be increasing ints (loss scales 2^k), got {exps!r}")
        self.scale_exponents = exps
        self._observer = self._observing = None
        self._report = None

    def __enter__(self):
        if self._observing is not None:
            raise RuntimeError("inspect: this inspector is already active")
        current = _observers.current_call()
        self._observer = _Shadow(self.names, self._scale_of, self.scale_exponents,
                                 0 if current is None else current.depth + 1, self.module_names)
        self._observing = _observers.observe(self._observer)
        self._observing.__enter__()
        self._watching = fp8_watch.watching(self._observer.fp8_cast)
        self._watching.__enter__()
        self._report = None
        return self

    def __exit__(self, *exc):
        self._watching.__exit__(*exc)
        self._observing.__exit__(*exc)
        self._observing = None
        obs = self._observer
        obs.shadows.clear()
        obs.shadow_outs.clear()
        obs.by_output.clear()
        obs.cast_of.clear()
        obs.params.clear()
        return False

    def report(self) -> InspectReport:
        """What the inspected block did, ranked by harm (see mixprec/amp/report.py)."""
        if self._observer is None:
            raise RuntimeError("inspect: nothing inspected yet; run the model inside `with mp.amp.inspect(...)`")
        if self._observing is not None:
            raise RuntimeError("inspect: the report is ready when the `with mp.amp.inspect(...)` block has ended")
        obs = self._observer
        if self._report is None:
            self._report = InspectReport(obs.records, obs.param_grads, obs.scales, self.scale_exponents, obs.fp8)
        return self._report
