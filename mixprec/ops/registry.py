"""The op registry: the one place an op is defined, and the dispatcher every call goes through.

An op is a forward on raw arrays, a backward on Tensors (so it can itself be
differentiated), and a cast policy per device type. ``mp.<name>``, Tensor
methods and operators are all thin wrappers made here from that one definition.

Dispatch of ``op(*args, **kwargs)``:
 1. find the tensors among the positional args (also inside a list: cat/stack);
 2. check they share one device;
 3. autocast (when a region is enabled on that device type) casts the data args;
 4. promote the data args (``op.promote`` positions) to one dtype, turning
    Python scalars into scalars of that dtype;
 5. run forward on arrays, wrap the result, and record a graph node when
    grad mode is on and an input requires grad.
"""
from __future__ import annotations

import enum
import inspect
import threading
import traceback

import numpy as _np

from .. import dtypes as _dt
from ..backend import CPU
from ..backend import is_array as _is_array
from ..backend import on_device as _on
from ..autograd import grad_mode as _gm
from ..autograd.graph import Node


class CastPolicy(enum.Enum):
    """What autocast does with an op's floating inputs on a device type."""
    LOWER_PRECISION_FP = "lower_precision_fp"  # cast to the region's float16/bfloat16
    FP32 = "fp32"                              # cast to float32
    PROMOTE = "promote"                        # cast all to the widest floating input
    BANNED = "banned"                          # refuse to run inside an enabled region


_POLICY_NAMES = {"lower_precision_fp": CastPolicy.LOWER_PRECISION_FP, "lower": CastPolicy.LOWER_PRECISION_FP,
                 "fp16": CastPolicy.LOWER_PRECISION_FP, "fp32": CastPolicy.FP32,
                 "promote": CastPolicy.PROMOTE, "banned": CastPolicy.BANNED, "none": None, None: None}


def as_policy(p) -> CastPolicy | None:
    if isinstance(p, CastPolicy):
        return p
    try:
        return _POLICY_NAMES[p]
    except (KeyError, TypeError):
        raise ValueError(f"unknown cast policy {p!r}; expected one of "
                         "'lower_precision_fp', 'fp32', 'promote', 'banned' or None") from None


class _DispatchState(threading.local):
    """Thread-local dispatch state, read on every call. ``autocast`` is owned by
    mixprec.amp: a dict {device_type: dtype} of enabled regions, or None (the
    class attribute is each new thread's default). ``depth`` counts the composite
    ops (and autocast casts) now running, so a trace can show what ran inside what."""
    autocast = None
    depth = 0


STATE = _DispatchState()
AUTOCAST_HOOK = None      # set by mixprec.amp: (op, args, device, dtype) -> args; the same args
                          # object when the op has no policy there, new args when one was applied
OBSERVERS: list = []      # callables (op, args_in, args_run, out) for tracing

_REGISTRY: dict[str, "Op"] = {}
_CO_VARARGS = inspect.CO_VARARGS
Tensor = None             # bound by mixprec.tensor (it imports us)


class Op:
    """One registered op.

    forward(ctx, *args, **kwargs) receives arrays where the caller passed
    tensors and returns one array; backward(ctx, grad) returns one gradient
    (Tensor or None) per positional arg, a list for a list arg. A ``composite``
    op's forward receives Tensors and builds its result from other ops, so it
    needs no backward.
    """

    def __init__(self, name, forward, *, cuda=None, cpu=None, promote=(0,), same_dtype=False,
                 differentiable=True, composite=False, inplace=False, view=False, broadcast=False, doc=None):
        self.name = name
        self.forward = forward
        self.backward = None
        self.policy = {"cuda": as_policy(cuda), "cpu": as_policy(cpu)}
        self.promote = promote
        self.same_dtype = same_dtype
        self.differentiable = differentiable
        self.composite = composite
        self.inplace = inplace
        self.view = view  # output may share memory with input 0 (then also its version counter)
        self.broadcast = broadcast  # elementwise: the array args broadcast against each other
        if list(promote) != sorted(promote):
            raise ValueError(f"op {name!r}: promote positions must be in increasing order, got {promote}")
        code = forward.__code__
        self.arg_names = code.co_varnames[1:code.co_argcount]  # positional params after ctx
        self.max_args = None if code.co_flags & _CO_VARARGS else len(self.arg_names)
        defaults = forward.__defaults__ or ()
        self.defaults = dict(zip(self.arg_names[len(self.arg_names) - len(defaults):], defaults))
        # where a dtype= or out= argument lands among the positional args (autocast must respect them)
        self.dtype_out_positions = tuple(i for i, n in enumerate(self.arg_names) if n in ("dtype", "out"))
        self.__doc__ = doc or forward.__doc__

    def grad(self, fn):
        """Decorator: set this op's backward."""
        self.backward = fn
        return fn

    def __call__(self, *args, **kwargs):
        return dispatch(self, args, kwargs)

    def __repr__(self):
        return f"<op {self.name}>"


def register(name, *, methods=(), rmethods=(), functional=False, aliases=(), **options):
    """Decorator that registers ``forward`` as op ``name`` and makes its public entry points.

    methods: Tensor method names that call op(self, *args); rmethods: reflected
    operators that call op(other, self); functional: also mp.nn.functional.<name>.
    """
    def deco(forward):
        op = Op(name, forward, **options)
        _add(op)
        for alias in aliases:
            _add(op, alias)
        op.methods, op.rmethods, op.functional = tuple(methods), tuple(rmethods), functional
        if Tensor is not None:
            _bind_methods(op)
        return op
    return deco


def _add(op, name=None):
    name = name or op.name
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    _REGISTRY[name] = op


def _bind_methods(op):
    for m in op.methods:
        setattr(Tensor, m, _method(op, m))
    for m in op.rmethods:
        setattr(Tensor, m, _rmethod(op, m))


def _method(op, name):
    if name.startswith("__") and name != "__getitem__":  # an operator: other types get NotImplemented
        def method(self, *args):
            if args and not _is_operand(args[0]):
                return NotImplemented  # so Python raises its "unsupported operand type(s)" TypeError
            return dispatch(op, (self, *args), {})
    else:
        def method(self, *args, **kwargs):
            return dispatch(op, (self, *args), kwargs)
    method.__name__ = name
    method.__doc__ = op.__doc__
    return method


def _rmethod(op, name):
    def method(self, other):
        if not _is_operand(other):
            return NotImplemented
        return dispatch(op, (other, self), {})
    method.__name__ = name
    return method


def _is_operand(x):
    """What an operator accepts next to a Tensor: tensors, numbers, arrays (and nested lists of numbers)."""
    return isinstance(x, (Tensor, list, tuple) + _SCALARS) or _is_array(x)


def bind_tensor_class(cls):
    global Tensor
    Tensor = cls
    for op in set(_REGISTRY.values()):
        _bind_methods(op)


def get(name) -> Op:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r}; see mixprec.ops.names()") from None


def names() -> list[str]:
    """Every registered op name, aliases included, sorted."""
    return sorted(_REGISTRY)


def policy(name, device_type) -> CastPolicy | None:
    """The cast policy op ``name`` has on ``device_type`` ("cuda" or "cpu")."""
    if device_type not in ("cuda", "cpu"):
        raise ValueError(f"device_type must be 'cuda' or 'cpu', got {device_type!r}")
    return get(name).policy[device_type]


def public(op):
    """The mp.<name> function of an op."""
    def fn(*args, **kwargs):
        return dispatch(op, args, kwargs)
    fn.__name__ = op.name
    fn.__qualname__ = op.name
    fn.__doc__ = op.__doc__
    return fn


# ---------------------------------------------------------------- dispatch
# Python and NumPy scalars are "weak": they adopt the dtype of the tensors they meet.
_SCALARS = (int, float, _np.generic)  # np.generic: NumPy and ml_dtypes (bfloat16) scalars


def dispatch(op, args, kwargs):
    """Run one call of ``op`` (the steps are listed in the module docstring).

    This runs for every op call, so the common case (tensors of one dtype on one
    device) takes the shortest path; anything unusual is handled in helpers.
    """
    if kwargs and op.arg_names:
        args, kwargs = _keyword_args_to_positional(op, args, kwargs)
    if op.max_args is not None and len(args) > op.max_args:
        raise TypeError(f"{op.name}() takes at most {op.max_args} positional arguments "
                        f"({', '.join(op.arg_names)}) but {len(args)} were given")
    tensors, args = _find_tensors(op, args)
    if not tensors:
        tensors, args = _scalars_to_tensors(op, args)
    device = tensors[0].device
    if device is CPU:  # the common case, checked without building Device objects
        for t in tensors:
            if not isinstance(t.data, _np.ndarray):
                _check_same_device(op, device, t.device)
    else:
        for t in tensors:
            if t.device is not device:
                _check_same_device(op, device, t.device)
    args_in = args
    autocast = STATE.autocast
    if autocast and device.type in autocast and not op.inplace and AUTOCAST_HOOK is not None \
            and not explicit_dtype_or_out(op, args, kwargs):
        args = AUTOCAST_HOOK(op, args, device, autocast[device.type])
        if args is not args_in:
            tensors = _find_tensors(op, args)[0]
    if op.composite:
        out = _run_composite(op, args, kwargs, autocast_applied=args is not args_in)
        for obs in OBSERVERS:
            obs(op, args_in, args, out)
        return out
    if op.promote:
        args = _promote(op, args)
    needs_grad = False
    if op.differentiable and _gm.is_grad_enabled():
        for t in tensors:  # a cast made by promotion requires grad exactly when its source does
            if t.requires_grad:
                needs_grad = True
                break
    ctx = Node(op, args) if needs_grad else _Scratch()
    arrays = [a.data if isinstance(a, Tensor) else _arrays_in(a) for a in args]
    try:
        if device is CPU:
            data = op.forward(ctx, *arrays, **kwargs)
        else:
            with _on(device):
                data = op.forward(ctx, *arrays, **kwargs)
    except ValueError:
        if op.broadcast:
            _check_broadcast(op, arrays)
        raise
    if not isinstance(data, _np.ndarray) and isinstance(data, _np.generic):
        data = _np.asarray(data)  # NumPy reductions return scalars, not 0-d arrays
    out = Tensor._wrap(data, vc=args[0]._vc if op.view and _is_view_of(data, arrays[0]) else None)
    if needs_grad and data.dtype in _FLOATING:
        ctx.finish(out)
        if _gm.is_anomaly_enabled():
            ctx.trace = "".join(traceback.format_stack()[:-2])
    for obs in OBSERVERS:
        obs(op, args_in, args, out)
    return out


_FLOATING = frozenset(_dt.FLOATING)


def _run_composite(op, args, kwargs, autocast_applied):
    """Run a composite's forward one level deeper. When autocast applied the op's own
    policy, its inner ops run with autocast off: the policy is applied once, at the
    top, as torch excludes the autocast key inside an op on its lists."""
    saved = STATE.autocast
    STATE.depth += 1
    if autocast_applied:
        STATE.autocast = None
    try:
        return op.forward(None, *args, **kwargs)
    finally:
        STATE.depth -= 1
        STATE.autocast = saved


def _is_view_of(out, a):
    """Whether array ``out`` is a view into ``a``'s memory (NumPy and CuPy keep the owner in .base)."""
    base = out.base
    return base is not None and (base is a or (a.base is not None and base is a.base))


class _Scratch:
    """The ctx forward gets when no graph is recorded: a place for notes nobody reads later."""


def explicit_dtype_or_out(op, args, kwargs):
    """True when a call passed dtype= or out= (positionally or by keyword): such calls are not autocast."""
    if kwargs.get("dtype") is not None or kwargs.get("out") is not None:
        return True
    return any(i < len(args) and args[i] is not None for i in op.dtype_out_positions)


def tensors_in(args):
    """The Tensors among positional args, looking one level into lists and tuples (cat, stack)."""
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, Tensor))


def _find_tensors(op, args):
    """The Tensors among the positional args (also inside a list: cat, stack).

    A raw NumPy/CuPy array in a data position (``op.promote``) is wrapped as a
    Tensor first, so ``t + ndarray`` follows the same dtype and device rules as
    two tensors.
    """
    tensors = []
    wrapped = None
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            tensors.append(a)
        elif isinstance(a, (list, tuple)):
            tensors.extend(x for x in a if isinstance(x, Tensor))
        elif i in op.promote and _is_array(a):
            _dt.as_dtype(a.dtype)  # names an unsupported dtype
            if wrapped is None:
                wrapped = list(args)
            wrapped[i] = Tensor._wrap(a)
            tensors.append(wrapped[i])
    return tensors, (args if wrapped is None else tuple(wrapped))


def _scalars_to_tensors(op, args):
    """No tensor at all (``mp.exp(1.0)``): data-position scalars become tensors on the default device."""
    from ..tensor import tensor as _make_tensor
    args = tuple(_make_tensor(a) if i in op.promote and isinstance(a, _SCALARS) else a
                 for i, a in enumerate(args))
    tensors = _find_tensors(op, args)[0]
    if not tensors:
        raise TypeError(f"{op.name}: expected a Tensor argument")
    return tensors, args


def _check_same_device(op, device, other):
    if other != device:
        raise RuntimeError(f"{op.name}: expected all tensors on one device, got {device} and {other}")


def _keyword_args_to_positional(op, args, kwargs):
    """Data params (``op.promote``) and tensors given by keyword join the positional args.

    ``clamp(x, max=t)`` then reaches forward and backward with ``t`` in its
    position (defaults fill the gap); plain options such as ``dim=`` and an
    ``out=`` buffer stay keywords.
    """
    start = len(args)
    last = -1
    for k, n in enumerate(op.arg_names[start:], start):
        if n in kwargs and n != "out" and (k in op.promote or isinstance(kwargs[n], Tensor)):
            last = k
    if last < 0:
        return args, kwargs
    kwargs = dict(kwargs)
    extra = []
    for n in op.arg_names[start:last + 1]:
        if n in kwargs:
            extra.append(kwargs.pop(n))
        elif n in op.defaults:
            extra.append(op.defaults[n])
        else:
            raise TypeError(f"{op.name}: missing argument {n!r}")
    return tuple(args) + tuple(extra), kwargs


def _arrays_in(a):
    """A list/tuple arg with Tensors in it becomes the same container of arrays; anything else passes."""
    if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):
        return type(a)(x.data if isinstance(x, Tensor) else x for x in a)
    return a


def _promote(op, args):
    """Cast the data args (op.promote) to one dtype; scalars become scalars of that dtype.

    Fast path: every data arg is a Tensor (or None) of one dtype, nothing to do.
    """
    target = None
    n = len(args)
    for i in op.promote:
        if i >= n:
            break
        a = args[i]
        if isinstance(a, Tensor):
            d = a.data.dtype
            if target is None:
                target = d
            elif d is not target and d != target:
                return _promote_mixed(op, args)
        elif a is not None:
            return _promote_mixed(op, args)
    return args


def _promote_mixed(op, args):
    """_promote for mixed dtypes, scalars and lists: one target dtype by dtypes.result_type."""
    operands = []
    for i in op.promote:
        if i >= len(args):
            continue
        a = args[i]
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(x, (Tensor, _SCALARS)):
                operands.append(x)
            elif x is not None and not isinstance(x, (list, tuple)):
                raise TypeError(f"{op.name}: expected a Tensor or a number, got {type(x).__name__}")
    if not operands:
        return args
    if op.same_dtype:
        dts = {x.dtype for x in operands if isinstance(x, Tensor)}
        if len(dts) > 1:
            raise TypeError(f"{op.name}: expected all inputs to have the same dtype, got "
                            f"{' and '.join(sorted(d.name for d in dts))} (cast one with .to(dtype), "
                            "or run under mp.autocast)")
    target = _dt.result_type(*operands)
    args = list(args)
    for i in op.promote:
        if i >= len(args):
            continue
        a = args[i]
        if isinstance(a, (list, tuple)):
            args[i] = [_cast_or_scalar(x, target) for x in a]
        else:
            args[i] = _cast_or_scalar(a, target)
    return tuple(args)


def _cast_or_scalar(x, dtype):
    if isinstance(x, Tensor):
        return x if x.dtype == dtype else x.to(dtype)
    if isinstance(x, _SCALARS):
        return dtype.type(x)
    return x


def _check_broadcast(op, arrays):
    """Turn NumPy's/CuPy's broadcasting ValueError into one that names the op and the shapes."""
    shapes = [tuple(a.shape) for a in arrays if _is_array(a)]
    try:
        _np.broadcast_shapes(*shapes)
    except ValueError:
        listed = ", ".join(map(str, shapes[:-1])) + f" and {shapes[-1]}"
        raise RuntimeError(f"{op.name}: shapes {listed} cannot be broadcast together "
                           "(each dimension, counted from the right, must be equal or 1)") from None
