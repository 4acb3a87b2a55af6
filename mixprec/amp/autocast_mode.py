"""mp.autocast and the rest of autocast's user-facing API.

``with mp.autocast("cpu"):`` switches autocast on for ops on CPU tensors in this
thread; the dispatcher then casts each op's inputs by the op's cast policy. The
rule itself, and all the state it reads, live in mixprec/ops/autocast.py (the
step of dispatch it is); this module validates what users pass and turns it into
that state. :func:`resolve_dtypes` is the same rule as a pure function, so the
CUDA table can be tested exhaustively on a machine without a GPU.
"""
from __future__ import annotations

import contextlib
import functools
import warnings
from collections import abc

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from ..backend import availability, is_array
from ..ops import autocast as _ac
from ..ops import registry as _reg
from ..ops.autocast import DEFAULT_DTYPES, DEVICE_TYPES, LOWER_DTYPES, CastPolicy  # noqa: F401

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "is_autocast_cache_enabled", "clear_autocast_cache", "resolve_dtypes", "op_policy", "register_autocast",
           "override", "custom_fwd", "custom_bwd"]


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


def _flag(value, name, who="autocast"):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{who}: {name} must be True or False, got {value!r}")
    return bool(value)


def _as_rule(value, who):
    """A policy (CastPolicy or its name), None/'none' for no policy, or a fixed dtype to cast to."""
    if value is None or isinstance(value, CastPolicy):
        return value
    if isinstance(value, str):
        try:
            return _ac.as_policy(value)
        except ValueError:
            pass
    try:
        d = _dt.as_dtype(value)
    except TypeError:
        d = None
    if d in _ac.ELIGIBLE:
        return d
    raise ValueError(f"{who}: expected a cast policy ('lower_precision_fp', 'fp32', 'promote', 'banned', "
                     f"None) or a dtype to cast to (float16, bfloat16, float32), got {value!r}")


def _get_op(op):
    return op if isinstance(op, _reg.Op) else _reg.get(op)


# ---------------------------------------------------------------- the autocast region
class autocast(contextlib.ContextDecorator):
    """Run ops in mixed precision: each op on a tensor of ``device_type`` follows its cast policy.

    >>> import mixprec as mp
    >>> x, w = mp.randn(4, 8), mp.randn(8, 3, requires_grad=True)
    >>> with mp.autocast("cpu", dtype=mp.bfloat16):
    ...     y = x @ w                           # matmul: lower precision
    ...     loss = y.float().logsumexp(1).sum()  # logsumexp: float32 (its policy)
    >>> y.dtype, loss.dtype
    (dtype(bfloat16), dtype('float32'))
    >>> loss.backward(); w.grad.dtype           # the leaf's gradient in its own dtype
    dtype('float32')

    ``mp.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)`` is
    a context manager and a decorator. dtype defaults to float16 on "cuda" and
    bfloat16 on "cpu". Regions nest and are thread-local — also when one object
    (a decorated function) is entered from several threads or recursively —, and
    leaving one restores the outer state exactly, also when an exception leaves
    it. ``enabled=False`` inside a region runs ops in their input types.
    cache_enabled=None takes the surrounding region's setting. As torch does,
    ``autocast("cuda")`` without a usable GPU warns and disables itself.
    """

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device_type = _check_device_type(device_type)
        self.fast_dtype = DEFAULT_DTYPES[self.device_type] if dtype is None else _check_lower_dtype(dtype)
        cache_enabled = _ac.cache_enabled() if cache_enabled is None else cache_enabled
        self.enabled, self.cache_enabled = _flag(enabled, "enabled"), _flag(cache_enabled, "cache_enabled")
        if self.enabled and self.device_type == "cuda" and not availability.is_cuda_available():
            warnings.warn(f"autocast: CUDA is not available ({availability.cuda_unavailable_reason()}); disabling "
                          "autocast, so this region runs ops in their input types", UserWarning, stacklevel=2)
            self.enabled = False

    def __enter__(self):
        _ac.enter_region(self.device_type, self.fast_dtype, self.enabled, self.cache_enabled, self)
        return self

    def __exit__(self, *exc):
        _ac.exit_region(self)
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
    return device_type in (_ac.active_regions() or ())


def get_autocast_dtype(device_type) -> np.dtype:
    """The lower-precision dtype of the active region on ``device_type`` (else as set, else its default)."""
    default = _ac.set_dtype(_check_device_type(device_type, "get_autocast_dtype"))
    return (_ac.active_regions() or {}).get(device_type, default)


def is_autocast_cache_enabled() -> bool:
    """Whether the innermost region (in this thread) caches weight casts (its cache_enabled)."""
    return _ac.cache_enabled()


def clear_autocast_cache() -> None:
    """Drop this thread's cached weight casts (leaving the outermost region does it too)."""
    _ac.clear_cache()


# ---------------------------------------------------------------- policies
def op_policy(name, device_type) -> CastPolicy | None:
    """The CastPolicy op ``name`` follows under autocast on ``device_type``, or None when it is not autocast.

    Includes scoped overrides and register_autocast. An op registered with a fixed
    cast dtype reports FP32 for float32 and LOWER_PRECISION_FP for float16/bfloat16.
    """
    rule = _ac.rule_for(_get_op(name), _check_device_type(device_type, "op_policy"))
    if isinstance(rule, np.dtype):
        return CastPolicy.FP32 if rule == _dt.float32 else CastPolicy.LOWER_PRECISION_FP
    return rule


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
    return _ac.target_dtypes(op.name, device_type, _ac.rule_for(op, device_type), lower, dtypes)


def register_autocast(op_name, device_type, cast_inputs) -> None:
    """Give an op (yours, mp.library's or a built-in) an autocast rule on ``device_type``.

    cast_inputs is, as in torch.library.register_autocast, the dtype its
    floating inputs (float16/bfloat16/float32; never float64) are cast to inside
    an enabled region — or a policy name/CastPolicy ("fp32",
    "lower_precision_fp", "promote", "banned"). A composite op then runs its
    inner ops with autocast off. For a built-in op the rule replaces its entry in
    mixprec/ops/policies.py for good; override() changes it for a block.
    """
    op = _get_op(op_name)
    device_type = _check_device_type(device_type, "register_autocast")
    _ac.REGISTERED[(op, device_type)] = _as_rule(cast_inputs, "register_autocast")


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

    def __enter__(self):
        _ac.push_overrides(self.layer)
        return self

    def __exit__(self, *exc):
        _ac.pop_overrides(self.layer)
        return False


# ---------------------------------------------------------------- custom autograd Functions
def _cast_inputs(value, device_type, dtype):
    """torch.amp's _cast: floating (not float64) tensors on device_type go to dtype, through containers."""
    if isinstance(value, Tensor):
        eligible = value.dtype in _ac.ELIGIBLE and value.device.type == device_type
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes)) or is_array(value):  # raw NumPy/CuPy arrays pass as they are
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
        if cast_inputs not in _ac.ELIGIBLE:
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


from .trace import TraceRecord, trace  # noqa: E402  (mp.amp.trace shows what this module's rule did)

__all__ += ["trace", "TraceRecord"]
