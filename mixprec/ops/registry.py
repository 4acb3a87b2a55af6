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
import threading
import traceback

import numpy as _np

from .. import dtypes as _dt
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


# Thread-local dispatch state, read on every call. ``autocast`` is owned by
# mixprec.amp: a dict {device_type: dtype} of enabled regions, or None.
STATE = threading.local()
AUTOCAST_HOOK = None      # set by mixprec.amp: (op, args, device, dtype) -> args
OBSERVERS: list = []      # callables (op, args_in, args_run, out) for tracing

_REGISTRY: dict[str, "Op"] = {}
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
                 differentiable=True, composite=False, inplace=False, view=False, doc=None):
        self.name = name
        self.forward = forward
        self.backward = None
        self.policy = {"cuda": as_policy(cuda), "cpu": as_policy(cpu)}
        self.promote = promote
        self.same_dtype = same_dtype
        self.differentiable = differentiable
        self.composite = composite
        self.inplace = inplace
        self.view = view  # output shares memory (and so the version counter) with input 0
        code = forward.__code__
        self.arg_names = code.co_varnames[1:code.co_argcount]  # positional params after ctx
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
    def method(self, *args, **kwargs):
        return dispatch(op, (self, *args), kwargs)
    method.__name__ = name
    method.__doc__ = op.__doc__
    return method


def _rmethod(op, name):
    def method(self, other):
        return dispatch(op, (other, self), {})
    method.__name__ = name
    return method


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
def _flatten_tensors(args):
    """The Tensors among positional args, looking one level into lists and tuples."""
    found = []
    for a in args:
        if isinstance(a, Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(x for x in a if isinstance(x, Tensor))
    return found


def _common_device(op, tensors):
    dev = tensors[0].device
    for t in tensors[1:]:
        if t.device != dev:
            raise RuntimeError(f"{op.name}: expected all tensors on one device, "
                               f"got {dev} and {t.device}")
    return dev


def _to_arrays(args):
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a.data)
        elif isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):
            out.append(type(a)(x.data if isinstance(x, Tensor) else x for x in a))
        else:
            out.append(a)
    return out


def _promote(op, args):
    """Cast the data args (op.promote) to one dtype; scalars become scalars of that dtype."""
    dts = []
    scalars = []
    for i in op.promote:
        if i >= len(args):
            continue
        a = args[i]
        items = a if isinstance(a, (list, tuple)) else (a,)
        for x in items:
            if isinstance(x, Tensor):
                dts.append(x.dtype)
            elif isinstance(x, (int, float, bool)) and not isinstance(x, Tensor):
                scalars.append(x)
    if not dts:
        if not scalars:
            return args, None
        raise TypeError(f"{op.name}: expected at least one Tensor argument, got only Python scalars")
    target = dts[0]
    if op.same_dtype:
        for d in dts[1:]:
            if d != target:
                raise TypeError(f"{op.name}: expected all inputs to have the same dtype, got {target.name} "
                                f"and {d.name} (cast one with .to(dtype), or run under mp.autocast)")
    else:
        for d in dts[1:]:
            target = _dt.promote(target, d)
    for s in scalars:
        target = _dt.promote_with_scalar(target, s)
    args = list(args)
    for i in op.promote:
        if i >= len(args):
            continue
        a = args[i]
        if isinstance(a, (list, tuple)):
            args[i] = [_cast_or_scalar(x, target) for x in a]
        else:
            args[i] = _cast_or_scalar(a, target)
    return args, target


def _cast_or_scalar(x, dtype):
    if isinstance(x, Tensor):
        return x if x.dtype == dtype else x.to(dtype)
    if isinstance(x, (int, float, bool)):
        return dtype.type(x)
    return x


def dispatch(op, args, kwargs):
    if kwargs and op.arg_names:  # tensor-like params given by keyword join the positional args
        moved = [n for n in op.arg_names[len(args):] if n in kwargs]
        if moved:
            kwargs = dict(kwargs)
            args = tuple(args) + tuple(kwargs.pop(n) if n in kwargs else _default(op, n)
                                       for n in op.arg_names[len(args):op.arg_names.index(moved[-1]) + 1])
    tensors = _flatten_tensors(args)
    if not tensors:
        from ..tensor import tensor as _make_tensor
        args = tuple(_make_tensor(a) if i in op.promote and isinstance(a, (int, float, bool)) else a
                     for i, a in enumerate(args))
        tensors = _flatten_tensors(args)
        if not tensors:
            raise TypeError(f"{op.name}: expected a Tensor argument")
    device = _common_device(op, tensors)
    args_in = args
    autocast = getattr(STATE, "autocast", None)
    if autocast and device.type in autocast and not op.inplace and "out" not in kwargs \
            and kwargs.get("dtype") is None and AUTOCAST_HOOK is not None:
        args = AUTOCAST_HOOK(op, args, device, autocast[device.type])
        if args is not args_in:
            tensors = _flatten_tensors(args)
    if op.composite:
        out = op.forward(None, *args, **kwargs)
        if OBSERVERS:
            for obs in OBSERVERS:
                obs(op, args_in, args, out)
        return out
    args, _ = _promote(op, args)
    if op.promote:
        tensors = _flatten_tensors(args)
    needs_grad = op.differentiable and _gm.is_grad_enabled() and any(t.requires_grad for t in tensors)
    node = Node(op, args) if needs_grad else _Scratch()
    arrays = _to_arrays(args)
    with _on(device):
        data = op.forward(node, *arrays, **kwargs)
    if isinstance(data, _np.generic):  # NumPy reductions return scalars, not 0-d arrays
        data = _np.asarray(data)
    out = Tensor._wrap(data, device, vc=args[0]._vc if op.view else None)
    if needs_grad and _dt.is_floating(out.dtype):
        node.finish(out)
        if _gm.is_anomaly_enabled():
            node.trace = "".join(traceback.format_stack()[:-2])
    if OBSERVERS:
        for obs in OBSERVERS:
            obs(op, args_in, args, out)
    return out


class _Scratch:
    """The ctx forward gets when no graph is recorded: a place for notes nobody reads later."""


def _default(op, name):
    import inspect
    p = inspect.signature(op.forward).parameters[name]
    if p.default is inspect.Parameter.empty:
        raise TypeError(f"{op.name}: missing argument {name!r}")
    return p.default

