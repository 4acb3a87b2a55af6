"""autocast: torch.amp's cast policies, applied at dispatch.

Inside ``with mp.autocast("cpu"):`` every op call on a CPU tensor goes through
:func:`_autocast_hook` before it runs. The hook looks up the op's rule on that
device type (its policy from the reference tables, unless a user registration
or a scoped override says otherwise), asks :func:`resolve_dtypes` which dtype
each data input should have, and casts with ``Tensor.to`` — a real graph op, so
backward runs each op in its forward dtype and every leaf gets its gradient in
its own dtype. One pure function decides; the hook only carries it out, so the
CUDA table can be tested exhaustively on a machine without a GPU.

State is thread-local: ``registry.STATE.autocast`` ({device_type: dtype} of the
enabled regions, read by the dispatcher) plus this module's cast cache, the
cache switch, and the stack of overrides.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from collections import abc

import numpy as np

from .. import dtypes as _dt
from ..autograd import grad_mode as _gm
from ..ops import registry as _reg
from ..ops.registry import CastPolicy

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "clear_autocast_cache", "resolve_dtypes", "op_policy", "register_autocast", "override",
           "custom_fwd", "custom_bwd"]

DEVICE_TYPES = ("cuda", "cpu")
DEFAULT_DTYPES = {"cuda": _dt.float16, "cpu": _dt.bfloat16}
LOWER_DTYPES = (_dt.float16, _dt.bfloat16)
_ELIGIBLE = frozenset((_dt.float16, _dt.bfloat16, _dt.float32))  # float64 and non-floats are never cast


class _AmpState(threading.local):
    """This thread's autocast bookkeeping (class attributes are each new thread's defaults)."""
    cache_enabled = True
    enabled_depth = 0      # enabled regions entered and not yet left: the cache is dropped at 0
    cache = None           # {(id(weight), dtype): (weight, version, cast)}
    overrides = ()         # tuple of {op: rule} dicts per device type, innermost last
    tracing = 0            # active mp.amp.trace() contexts
    pending = None         # {depth: (op, info)} what the hook did for an op still running
    casting_for = None     # (op name, depth) while the hook is casting that op's inputs


_amp = _AmpState()
_REGISTERED: dict = {}     # (op, device_type) -> rule, from register_autocast


# ---------------------------------------------------------------- validation
def _check_device_type(device_type, who="autocast"):
    if isinstance(device_type, str) and device_type in DEVICE_TYPES:
        return device_type
    hint = ""
    if isinstance(device_type, str) and device_type.partition(":")[0] in DEVICE_TYPES:
        hint = f" (pass the device type {device_type.partition(':')[0]!r}, not a device)"
    raise ValueError(f"{who}: device_type must be 'cuda' or 'cpu', got {device_type!r}{hint}")


def _check_lower_dtype(dtype, who="autocast"):
    """float16 or bfloat16, given as an mp dtype, NumPy dtype-like or name."""
    try:
        d = _dt.as_dtype(dtype)
    except TypeError:
        d = None
    if d not in LOWER_DTYPES:
        raise ValueError(f"{who}: dtype must be float16 or bfloat16 (mp.float16, mp.bfloat16 or a NumPy "
                         f"dtype-like), got {dtype!r}")
    return d


def _as_rule(value, who):
    """A policy (CastPolicy or its name), None/'none' for no policy, or a fixed dtype to cast to."""
    if value is None or isinstance(value, CastPolicy):
        return value
    if isinstance(value, str) and value in _reg._POLICY_NAMES:
        return _reg.as_policy(value)
    try:
        d = _dt.as_dtype(value)
    except TypeError:
        d = None
    if d in _ELIGIBLE:
        return d
    raise ValueError(f"{who}: expected a cast policy ('lower_precision_fp', 'fp32', 'promote', 'banned', "
                     f"None) or a dtype to cast to (float16, bfloat16, float32), got {value!r}")


def _get_op(op):
    return op if isinstance(op, _reg.Op) else _reg.get(op)


# ---------------------------------------------------------------- the autocast region
class autocast(contextlib.ContextDecorator):
    """Run ops in mixed precision: each op on a tensor of ``device_type`` follows its cast policy.

    ``mp.autocast(device_type, dtype=None, enabled=True, cache_enabled=True)`` is
    a context manager and a decorator. dtype defaults to float16 on "cuda" and
    bfloat16 on "cpu". Regions nest and are thread-local; leaving one restores
    the outer state exactly, also when an exception leaves it. ``enabled=False``
    inside a region runs ops in their input types.

    Unlike torch, which warns and disables itself when asked for "cuda" without
    a GPU, ``autocast("cuda")`` always enters: it only records state, which
    matters only for tensors on a CUDA device.
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=True):
        self.device_type = _check_device_type(device_type)
        self.fast_dtype = DEFAULT_DTYPES[self.device_type] if dtype is None else _check_lower_dtype(dtype)
        for name, flag in (("enabled", enabled), ("cache_enabled", cache_enabled)):
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"autocast: {name} must be True or False, got {flag!r}")
        self.enabled = bool(enabled)
        self.cache_enabled = bool(cache_enabled)
        self._saved = []  # one entry per active use, so one object can be re-entered (recursion)

    def __enter__(self):
        state = _reg.STATE
        self._saved.append((state.autocast, _amp.cache_enabled))
        regions = dict(state.autocast or {})
        if self.enabled:
            regions[self.device_type] = self.fast_dtype
            _amp.enabled_depth += 1
        else:
            regions.pop(self.device_type, None)
        state.autocast = regions or None
        _amp.cache_enabled = self.cache_enabled
        return self

    def __exit__(self, *exc):
        _reg.STATE.autocast, _amp.cache_enabled = self._saved.pop()
        if self.enabled:
            _amp.enabled_depth -= 1
            if _amp.enabled_depth == 0:
                _amp.cache = None  # the outermost enabled region is over
        return False

    def __repr__(self):
        return (f"autocast({self.device_type!r}, dtype={self.fast_dtype.name}, enabled={self.enabled}, "
                f"cache_enabled={self.cache_enabled})")


def is_autocast_available(device_type) -> bool:
    """Whether autocast supports ``device_type`` ("cuda" and "cpu"; a GPU need not be present)."""
    return isinstance(device_type, str) and device_type in DEVICE_TYPES


def is_autocast_enabled(device_type="cuda") -> bool:
    """Whether an enabled autocast region for ``device_type`` is active in this thread."""
    _check_device_type(device_type, "is_autocast_enabled")
    return bool(_reg.STATE.autocast) and device_type in _reg.STATE.autocast


def get_autocast_dtype(device_type) -> np.dtype:
    """The lower-precision dtype of the active region on ``device_type`` (its default when none is)."""
    _check_device_type(device_type, "get_autocast_dtype")
    regions = _reg.STATE.autocast or {}
    return regions.get(device_type, DEFAULT_DTYPES[device_type])


def clear_autocast_cache() -> None:
    """Drop this thread's cached weight casts (leaving the outermost region does it too)."""
    _amp.cache = None


# ---------------------------------------------------------------- policies
def _rule(op, device_type):
    """The op's rule on device_type: innermost override, then register_autocast, then its table policy."""
    for layer in reversed(_amp.overrides):
        key = (op, device_type)
        if key in layer:
            return layer[key]
    rule = _REGISTERED.get((op, device_type), op) if _REGISTERED else op
    return op.policy[device_type] if rule is op else rule


def op_policy(name, device_type) -> CastPolicy | None:
    """The CastPolicy op ``name`` follows under autocast on ``device_type``, or None when it is not autocast.

    Includes scoped overrides and register_autocast. An op registered with a fixed
    cast dtype reports FP32 for float32 and LOWER_PRECISION_FP for float16/bfloat16.
    """
    rule = _rule(_get_op(name), _check_device_type(device_type, "op_policy"))
    if isinstance(rule, np.dtype):
        return CastPolicy.FP32 if rule == _dt.float32 else CastPolicy.LOWER_PRECISION_FP
    return rule


_BANNED_HINTS = {
    "binary_cross_entropy": (
        "binary_cross_entropy is unsafe to autocast on CUDA: its gradient can overflow float16 near 0 and 1. "
        "Many models apply a sigmoid right before it; combine the two with "
        "mp.nn.functional.binary_cross_entropy_with_logits (or nn.BCEWithLogitsLoss), which is safe to "
        "autocast. To keep binary_cross_entropy, run it under mp.autocast('cuda', enabled=False) on float32 "
        "inputs."),
}


def _apply_rule(op_name, device_type, rule, lower, dtypes):
    """The dtype each input is cast to (None entries are not tensors and stay None)."""
    if rule is None:
        return tuple(dtypes)
    if rule is CastPolicy.BANNED:
        raise RuntimeError(_BANNED_HINTS.get(op_name, f"{op_name} is banned inside an enabled autocast region "
                                                      f"on {device_type}; run it with autocast disabled"))
    if rule is CastPolicy.PROMOTE:
        floating = [d for d in dtypes if d in _ELIGIBLE]
        target = lower if floating and all(d == lower for d in floating) else _dt.float32
    elif rule is CastPolicy.FP32:
        target = _dt.float32
    elif rule is CastPolicy.LOWER_PRECISION_FP:
        target = lower
    else:  # a fixed dtype from register_autocast/override
        target = rule
    return tuple(target if d in _ELIGIBLE else d for d in dtypes)


def resolve_dtypes(op, device_type, autocast_dtype, input_dtypes) -> tuple:
    """The dtypes an op's data inputs are cast to by autocast — the decision, without running anything.

    op: an op name (or Op); device_type: "cuda" or "cpu"; autocast_dtype: the
    region's float16/bfloat16, or None for "autocast off"; input_dtypes: the
    dtype of each data input (None for an argument that is not a tensor).
    Returns one dtype (or None) per input. The op then runs on these with
    ordinary promotion (so a float64 input that was left alone still wins).
    Raises RuntimeError for a banned op, as the op itself would.
    """
    op = _get_op(op)
    device_type = _check_device_type(device_type, "resolve_dtypes")
    dtypes = tuple(None if d is None else _dt.as_dtype(d) for d in input_dtypes)
    if autocast_dtype is None:
        return dtypes
    lower = _check_lower_dtype(autocast_dtype, "resolve_dtypes")
    return _apply_rule(op.name, device_type, _rule(op, device_type), lower, dtypes)


def register_autocast(op_name, device_type, cast_inputs) -> None:
    """Give a user-registered op an autocast rule on ``device_type``.

    cast_inputs is, as in torch.library.register_autocast, the dtype its
    floating inputs (float16/bfloat16/float32; never float64) are cast to inside
    an enabled region — or a policy name/CastPolicy ("fp32",
    "lower_precision_fp", "promote", "banned"). A composite op then runs its
    inner ops with autocast off. Built-in ops keep the reference tables; use
    override() to experiment with them.
    """
    op = _get_op(op_name)
    device_type = _check_device_type(device_type, "register_autocast")
    if getattr(op.forward, "__module__", "").startswith("mixprec."):
        raise ValueError(f"register_autocast: {op.name!r} is a built-in op whose policy follows the reference "
                         "tables; use mp.amp.override({...}) for a scoped experiment")
    _REGISTERED[(op, device_type)] = _as_rule(cast_inputs, "register_autocast")


class override(contextlib.ContextDecorator):
    """Scoped policy changes for experiments: ``with mp.amp.override({"softmax": "lower_precision_fp"}):``.

    Values are policies ("lower_precision_fp", "fp32", "promote", "banned"), None
    for "not autocast", or a dtype to cast to. ``device_type`` limits the change
    to one device type (default: both). Thread-local; nests; restored on exit.
    """

    def __init__(self, policies, device_type=None):
        if not isinstance(policies, abc.Mapping):
            raise TypeError(f"override: expected a mapping {{op name: policy}}, got {type(policies).__name__}")
        types = DEVICE_TYPES if device_type is None else (_check_device_type(device_type, "override"),)
        self.layer = {(_get_op(name), t): _as_rule(value, "override")
                      for name, value in policies.items() for t in types}
        self._saved = []

    def __enter__(self):
        self._saved.append(_amp.overrides)
        _amp.overrides = _amp.overrides + (self.layer,)
        return self

    def __exit__(self, *exc):
        _amp.overrides = self._saved.pop()
        return False


# ---------------------------------------------------------------- the dispatch hook
def _data_positions(op, args):
    """(arg index, list index or None, tensor) for each tensor in a data position (op.promote)."""
    Tensor = _reg.Tensor
    found = []
    for i in op.promote:
        if i >= len(args):
            continue
        a = args[i]
        if isinstance(a, Tensor):
            found.append((i, None, a))
        elif isinstance(a, (list, tuple)):
            found.extend((i, j, x) for j, x in enumerate(a) if isinstance(x, Tensor))
    return found


def _cast(t, dtype, lower):
    """t.to(dtype), served from the region's cache for float32 leaf weights going to the lower dtype.

    The cache key includes the weight's version and the cast must still be
    differentiable, so an in-place update of the weight (or a graph already
    freed by backward) always gets a fresh cast.
    """
    if not (_amp.cache_enabled and dtype == lower and t.dtype == _dt.float32 and t.requires_grad
            and t.grad_fn is None and _gm.is_grad_enabled()):
        return t.to(dtype), False
    cache = _amp.cache
    if cache is None:
        cache = _amp.cache = {}
    key = (id(t), dtype)
    hit = cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._version and not hit[2].grad_fn.freed:
        return hit[2], True
    cast = t.to(dtype)
    cache[key] = (t, t._version, cast)
    return cast, False


def _autocast_hook(op, args, device, lower):
    """Apply op's rule on device.type to args; the same args object back when there is no rule."""
    rule = _rule(op, device.type)
    if rule is None:  # (calls with an explicit dtype= or out= never reach the hook)
        return args
    found = _data_positions(op, args)
    targets = _apply_rule(op.name, device.type, rule, lower, [t.dtype for _, _, t in found])
    new = list(args)
    hits = 0
    state = _reg.STATE
    state.depth += 1
    _amp.casting_for, outer = (op.name, state.depth), _amp.casting_for
    try:
        for (i, j, t), target in zip(found, targets):
            if t.dtype == target:
                continue
            cast, hit = _cast(t, target, lower)
            hits += hit
            if j is None:
                new[i] = cast
            else:
                if new[i] is args[i]:
                    new[i] = list(args[i])
                new[i][j] = cast
    finally:
        state.depth -= 1
        _amp.casting_for = outer
    if _amp.tracing:
        if _amp.pending is None:
            _amp.pending = {}
        _amp.pending[state.depth] = (op, {"policy": rule, "autocast_dtype": lower, "cache_hits": hits,
                                          "cast_dtypes": targets})
    return tuple(new)


_reg.AUTOCAST_HOOK = _autocast_hook


# ---------------------------------------------------------------- custom autograd Functions
def _cast_inputs(value, device_type, dtype):
    """torch.amp's _cast: floating (not float64) tensors on device_type go to dtype, through containers."""
    Tensor = _reg.Tensor
    if isinstance(value, Tensor):
        eligible = value.dtype in _ELIGIBLE and value.device.type == device_type
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, abc.Mapping):
        return {_cast_inputs(k, device_type, dtype): _cast_inputs(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, abc.Iterable):
        items = (_cast_inputs(v, device_type, dtype) for v in value)
        return type(value)(items) if isinstance(value, (list, tuple)) else items
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for the forward of an mp.autograd.Function (torch.amp.custom_fwd semantics).

    With cast_inputs=None, forward runs in the surrounding autocast state and
    custom_bwd later replays that state. With cast_inputs=dtype, inside an
    enabled region its floating tensor inputs (also in lists, tuples, dicts) are
    cast to dtype and forward runs with autocast disabled; outside one it runs
    as is.
    """
    device_type = _check_device_type(device_type, "custom_fwd")
    if cast_inputs is not None:
        try:
            cast_inputs = _dt.as_dtype(cast_inputs)
        except TypeError:
            cast_inputs = None
        if cast_inputs not in _ELIGIBLE:
            raise ValueError("custom_fwd: cast_inputs must be float16, bfloat16 or float32")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._autocast_dtype = get_autocast_dtype(device_type)
        enabled = is_autocast_enabled(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = enabled
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not enabled:
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(*_cast_inputs(args, device_type, cast_inputs),
                       **_cast_inputs(kwargs, device_type, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for the backward of an mp.autograd.Function: it runs in the autocast state
    (enabled or not, and the dtype) that its custom_fwd-decorated forward saw."""
    device_type = _check_device_type(device_type, "custom_bwd")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        try:
            used, dtype = ctx._fwd_used_autocast, ctx._autocast_dtype
        except AttributeError:
            raise RuntimeError("custom_bwd: the Function's forward must be decorated with "
                               "mp.amp.custom_fwd(device_type=...) too") from None
        with autocast(device_type, dtype=dtype, enabled=used):
            return bwd(*args, **kwargs)
    return decorate_bwd


from .trace import TraceRecord, trace  # noqa: E402  (trace reads this module's hook records)

__all__ += ["trace", "TraceRecord"]
