"""The op registry: the one place an op is defined.

An op is a forward on raw arrays, a backward (VJP) and a tangent rule (JVP) on
Tensors — one definition, side by side::

    @register("mul", methods=("mul", "__mul__"), rmethods=("__rmul__",), promote=(0, 1))
    def mul(ctx, input, other):
        return input * other

    @mul.grad                      # reverse mode: one gradient per input
    def _(ctx, g):
        a, b = ctx.inputs
        return g * b, g * a

    @mul.jvp                       # forward mode: the output's tangent from the inputs' tangents
    def _(ctx, ta, tb):
        a, b = ctx.inputs
        return ta * b + a * tb

``mp.mul``, ``Tensor.mul``, ``a * b`` and ``mp.nn.functional.<name>`` (with
``functional=True``) all come from that definition; its autocast policy per device
type is its name's entry in the table of mixprec/ops/policies.py (``mp.ops.policy("mm",
"cuda")``). Every call goes through :func:`mixprec.ops.dispatch.dispatch`.
"""
from __future__ import annotations

import inspect
import sys

from ..autograd.graph import flatten_grads
from ..tensor import Tensor
from ..backend import is_array
from .autocast import CastPolicy, as_policy  # noqa: F401  (re-exported: mp.ops.CastPolicy)
from .dispatch import SCALARS, dispatch, linear_tangent
from .policies import policies_of

_REGISTRY: dict[str, "Op"] = {}


class Op:
    """One registered op (see the module docstring for how one is written).

    forward(ctx, *args, **kwargs) receives arrays where the caller passed Tensors
    (also inside a list argument) and returns an array, or a tuple of arrays for an
    op with several outputs. backward(ctx, *grads) returns one gradient (a Tensor or
    None) per positional argument — a list for a list argument; it gets one grad per
    output (None for an output that received none). tangent(ctx, *tangents) returns
    the output's tangent (a tuple for several outputs); it gets one tangent per
    positional argument: a zero tensor for a floating input without one, None for
    anything else.

    Options: ``promote`` the data positions (promoted to one dtype; what autocast
    casts; for a ``forward(ctx, *matrices)`` the position of ``*matrices`` means
    every variadic argument); ``same_dtype`` refuse mixed dtypes there instead;
    ``differentiable``; ``composite`` (forward receives Tensors and builds its result from other ops, so
    both modes of autograd come from them); ``linear`` (the op is linear in its
    floating inputs, so its tangent is the op applied to their tangents);
    ``inplace``; ``view`` (the output may share input 0's memory, then also its
    version counter); ``broadcast`` (elementwise: shape errors name every shape);
    ``bools=False`` refuse bool data inputs before promotion would hide them (torch's ``-``);
    ``exact_scalars`` refuse an int the data's integer dtype cannot hold (others wrap it around, as torch).

    ``saves`` names what backward reads: forward arguments by name and
    ``"output"`` (every output) or ``"output1"`` (one of several). Only those are
    kept in the graph (and pass through saved_tensors_hooks); backward sees
    anything else as a NotSaved stand-in that fails when used, and only an
    in-place change of a saved tensor makes backward fail. Default: nothing for
    a ``linear`` op, every tensor argument for the others.
    """

    custom = False          # a custom autograd.Function's op (autograd/function.py) says True: forward on Tensors
    user_backward = False   # ... and its gradients may be the user's own tensors

    def __init__(self, name, forward, *, promote=(0,), same_dtype=False,
                 differentiable=True, composite=False, linear=False, inplace=False, view=False, broadcast=False,
                 bools=True, exact_scalars=False, saves=None, doc=None):
        if list(promote) != sorted(promote):
            raise ValueError(f"op {name!r}: promote positions must be in increasing order, got {promote}")
        self.name = name
        self.forward = forward
        self.backward = None
        self.tangent = linear_tangent if linear else None
        self.policy = {device: as_policy(p) for device, p in policies_of(name).items()}  # policies.py's entry
        self.promote = tuple(promote)
        self.same_dtype = same_dtype
        self.differentiable = differentiable
        self.composite = composite
        self.inplace = inplace
        self.view = view
        self.broadcast = broadcast
        self.bools, self.exact_scalars = bools, exact_scalars
        code = forward.__code__
        self.arg_names = code.co_varnames[1:code.co_argcount]  # positional params after ctx
        varargs = bool(code.co_flags & inspect.CO_VARARGS)
        self.max_args = sys.maxsize if varargs else len(self.arg_names)  # (an int either way: one check per call)
        # promote naming the *args position (the one after the named params) makes every variadic arg data
        self.variadic_data = varargs and len(self.arg_names) in self.promote
        self.data_names = frozenset(self.arg_names[i] for i in self.promote if i < len(self.arg_names))
        defaults = forward.__defaults__ or ()
        self.defaults = dict(zip(self.arg_names[len(self.arg_names) - len(defaults):], defaults))
        # where a dtype= or out= argument lands among the positional args (autocast must respect them)
        self.dtype_out_positions = tuple(i for i, n in enumerate(self.arg_names) if n in ("dtype", "out"))
        self.takes_out = "out" in self.arg_names or "out" in code.co_varnames[:code.co_argcount
                                                                                + code.co_kwonlyargcount]
        self.saved_positions, self.saved_outputs = self._saves(saves, linear)
        self.methods = self.rmethods = ()
        self.functional = False
        self.__doc__ = doc or forward.__doc__

    def _saves(self, saves, linear):
        """(input positions, outputs) backward reads: outputs is True (all), a set of indices, or empty."""
        code = self.forward.__code__
        variadic = code.co_varnames[code.co_argcount + code.co_kwonlyargcount] \
            if code.co_flags & inspect.CO_VARARGS else None
        n = len(self.arg_names)
        if saves is None:  # default: nothing for a linear op, every argument (also *args) otherwise
            return _positions(() if linear else range(n), n if variadic and not linear else None), frozenset()
        if isinstance(saves, str):
            saves = (saves,)
        positions, outputs, rest = set(), set(), None
        for s in saves:
            if s == variadic and s is not None:
                rest = s  # every argument the *args parameter takes
            elif s in self.arg_names:
                positions.add(self.arg_names.index(s))
            elif s == "output":
                outputs = True
            elif s.startswith("output") and s[6:].isdigit() and outputs is not True:
                outputs.add(int(s[6:]))
            else:
                raise ValueError(f"op {self.name!r}: saves={saves!r} names {s!r}, which is neither an argument of "
                                 f"its forward ({', '.join(self.arg_names)}) nor 'output'/'output<i>'")
        return _positions(positions, n if rest else None), (outputs if outputs is True else frozenset(outputs))

    def grad(self, fn):
        """Decorator: set this op's backward (its vector-Jacobian product)."""
        self._check_unset("backward", self.backward)
        self.backward = fn
        return fn

    def jvp(self, fn):
        """Decorator: set this op's tangent rule (its Jacobian-vector product, for forward-mode AD)."""
        self._check_unset("tangent rule", self.tangent)
        self.tangent = fn
        return fn

    def _check_unset(self, what, rule):
        if rule is not None:
            raise ValueError(f"op {self.name!r} already has a {what} ({getattr(rule, '__qualname__', rule)}); "
                             "each rule is registered once")

    def run_backward(self, node, grads):
        """Call backward on ``node``'s saved tensors; one gradient per input slot (autograd/graph.py)."""
        result = self.backward(node.rule_ctx(), *grads)
        if type(result) is not tuple and not isinstance(result, (tuple, list)):
            result = (result,)
        return flatten_grads(result, node._layout)

    def partials(self, fn):
        """Decorator for elementwise ops: both rules from the partial derivatives.

        fn(ctx) returns d out / d input for each positional input (a Tensor that
        broadcasts against the output, or None for an input that gets no
        gradient). Backward multiplies the output's gradient by each partial
        (by its conjugate, for complex values: torch's convention, see
        docs/core.md); the tangent is the sum of each input's tangent times its
        partial.
        """
        def backward(ctx, g):
            return tuple(None if p is None else g * _conj(p) for p in fn(ctx))

        def tangent(ctx, *tangents):
            total = None
            for t, p in zip(tangents, fn(ctx)):
                if t is not None and p is not None:
                    total = t * p if total is None else total + t * p
            return total
        self.grad(backward)
        self.jvp(tangent)
        return fn

    def __call__(self, *args, **kwargs):
        return dispatch(self, args, kwargs)

    def __repr__(self):
        return f"<op {self.name}>"


def _conj(p):
    """The complex conjugate of a partial derivative (a Tensor or a number); real ones as they are."""
    if isinstance(p, Tensor):
        return p.conj() if p._array.dtype.kind == "c" else p
    if isinstance(p, complex) or getattr(getattr(p, "dtype", None), "kind", "") == "c":
        return p.conjugate()
    return p


def _positions(named, from_index):
    """The positions an op saves: a frozenset of them (an ``in`` test costs nothing: the graph asks it for every
    argument of every recorded call), or, for an op that saves its *args, a _Positions."""
    return frozenset(named) if from_index is None else _Positions(named, from_index)


class _Positions:
    """The positional arguments an op saves: some named ones, and all from ``from_index`` on (its *args)."""
    __slots__ = ("named", "from_index")

    def __init__(self, named, from_index):
        self.named = frozenset(named)
        self.from_index = from_index

    def __contains__(self, i):
        return i in self.named or (self.from_index is not None and i >= self.from_index)


def register(name, *, methods=(), rmethods=(), functional=False, aliases=(), **options):
    """Decorator that registers ``forward`` as op ``name`` and makes its public entry points.

    methods: Tensor method names that call op(self, *args); rmethods: reflected
    operators that call op(other, self); functional: also mp.nn.functional.<name>.
    """
    if "cuda" in options or "cpu" in options:
        raise TypeError(f"register({name!r}): an op's cast policy is not an argument: a built-in op's is its entry "
                        "in mixprec/ops/policies.py; give your own op one with mp.amp.register_autocast")

    def deco(forward):
        op = Op(name, forward, **options)
        for n in (name, *aliases):
            if n in _REGISTRY:
                raise ValueError(f"op {n!r} is already registered")
            _REGISTRY[n] = op
        op.methods, op.rmethods, op.functional = tuple(methods), tuple(rmethods), functional
        for m in op.methods:
            setattr(Tensor, m, _method(op, m))
        for m in op.rmethods:
            setattr(Tensor, m, _method(op, m, reflected=True))
        return op
    return deco


def unregister(name):
    """Remove a (user) op and its aliases from the registry; its Tensor methods stay bound."""
    op = _REGISTRY.pop(name)
    for n in [n for n, o in _REGISTRY.items() if o is op]:
        del _REGISTRY[n]
    return op


_UNARY_OPERATORS = frozenset({"__neg__", "__pos__", "__abs__", "__invert__"})


def _method(op, name, reflected=False):
    # Operators take a fixed number of arguments (no *args to pack: they run on every ``a + b``); a binary one
    # returns NotImplemented for other types, so Python tries the other side and then raises its
    # "unsupported operand type(s)" TypeError. A reflected one (``__radd__``) calls op(other, self).
    if reflected:
        def method(self, other):
            if type(other) is not Tensor and not is_operand(other):
                return NotImplemented
            return dispatch(op, (other, self), {})
    elif name in _UNARY_OPERATORS:
        def method(self):
            return dispatch(op, (self,), {})
    elif name.startswith("__") and name != "__getitem__":
        def method(self, other):
            if type(other) is not Tensor and not is_operand(other):  # (a Tensor: asked first)
                return NotImplemented
            return dispatch(op, (self, other), {})
    else:
        def method(self, *args, **kwargs):
            return dispatch(op, (self, *args), kwargs)
    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"  # (what Python's argument-count errors name)
    method.__doc__ = op.__doc__
    return method


_OPERAND_TYPES = (Tensor,) + SCALARS


def is_operand(x):
    """What an operator accepts next to a Tensor: tensors, numbers and arrays (a list is refused, as torch)."""
    return isinstance(x, _OPERAND_TYPES) or is_array(x)


def get(name) -> Op:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no op named {name!r}; see mixprec.ops.names()") from None


def names() -> list[str]:
    """Every registered op name, aliases included, sorted."""
    return sorted(_REGISTRY)


def ops() -> list[Op]:
    """Every registered op once (aliases not repeated), by name."""
    return sorted(set(_REGISTRY.values()), key=lambda op: op.name)


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
