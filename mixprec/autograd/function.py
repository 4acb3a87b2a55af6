"""User-defined differentiable ops: subclass Function, write forward and backward (and jvp for forward mode).

    class Exp(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

        @staticmethod
        def jvp(ctx, tangent):           # forward mode; reads ctx.save_for_forward's tensors
            (y,) = ctx.saved_tensors
            return tangent * y

    y = Exp.apply(x)

forward runs without recording a graph (and without forward mode: its output's
tangent comes from ``jvp``). It may return one Tensor or a tuple of them;
backward then gets one gradient per output and returns one per forward
argument (None for arguments that are not tensors or need no gradient).
The ctx methods are torch's: save_for_backward, save_for_forward,
mark_dirty, mark_non_differentiable, set_materialize_grads, needs_input_grad.
The torch-2 style (``forward(*args)`` without ctx plus
``setup_context(ctx, inputs, output)``) works too.
"""
from __future__ import annotations

import functools
import weakref

from .._state import modes
from ..tensor import Tensor
from ..creation import zeros
from ..ops.dispatch import dispatch
from . import forward_ad, grad_mode, graph


class FunctionCtx:
    """The ``ctx`` of a custom Function call: what forward declares and notes (torch's ctx API). The node it
    leaves in the graph (its outputs' grad_fn) shows the same attributes, as torch's does."""

    def __init__(self):
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._to_save = ()
        self._for_forward = ()
        self._dirty = ()
        self._non_differentiable = ()
        self._in_jvp = False
        self._node = None      # a weak reference to the node, once recorded (the node holds this ctx)

    # ---- called in forward / setup_context ----
    def save_for_backward(self, *tensors):
        """Keep these tensors (inputs, outputs or None) for backward: read them back with ctx.saved_tensors."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save Tensors or None, got a {type(t).__name__} at "
                                f"position {i}; store other values as ctx attributes")
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        """Keep these tensors for jvp (which reads them with ctx.saved_tensors)."""
        self._for_forward = tensors

    def mark_dirty(self, *tensors):
        """Declare the inputs forward changed in place (forward must return them)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        """Declare outputs that get no gradient (they do not require grad; backward still receives a zero
        gradient for each, unless set_materialize_grads(False))."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool):
        """True (default): backward gets zeros for outputs without a gradient; False: None."""
        self.materialize_grads = bool(value)

    # ---- read in backward / jvp ----
    @property
    def saved_tensors(self) -> tuple:
        """The tensors saved for backward (in jvp: for forward), each checked for in-place changes and
        unpacked through saved_tensors_hooks on every access, as torch does."""
        if self._in_jvp:
            return tuple(self._for_forward)
        node = self._node() if self._node is not None else None
        if node is None:
            return tuple(self._to_save)
        return node.unpack_saved()


class FunctionOp:
    """A custom Function as an op: dispatch runs its call (forward on Tensors), the graph records it like any op,
    and backward calls its ``backward`` through :meth:`run_backward`."""

    user_backward = True   # the gradients its backward returns may be the user's own tensors
    custom = True          # (dispatch: forward runs on Tensors, here)
    # what observers read of a registered op: no autocast policy, no data positions, no dtype=/out= argument
    policy = {"cuda": None, "cpu": None}
    promote = dtype_out_positions = arg_names = ()
    inplace = composite = variadic_data = False

    def __init__(self, cls):
        self.cls, self.name = cls, cls.__name__

    def call(self, args, kwargs):
        """Forward without recording, then the node and the tangents (what Function.apply does, as torch's)."""
        cls = self.cls
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        with grad_mode.no_grad(), forward_ad._paused():
            if cls.setup_context is not Function.setup_context:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        several = isinstance(out, tuple)
        outs = list(out) if several else [out]
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                what = f"output {i} is" if several else "got"
                raise TypeError(f"{cls.__name__}.forward must return one Tensor or a tuple of Tensors; {what} a "
                                f"{type(o).__name__}")
        record = grad_mode.is_grad_enabled() and any(ctx.needs_input_grad)
        _check_dirty(cls, ctx, args, outs, record)
        dirty = {id(t) for t in ctx._dirty}
        non_diff = {id(t) for t in ctx._non_differentiable}
        for i, o in enumerate(outs):
            if id(o) not in dirty and (o._grad_fn is not None or any(o is a for a in args)):
                # an input returned as is: a new tensor for the output
                outs[i] = Tensor._wrap(o._array, vc=o._version_counter())
                if id(o) in non_diff:
                    non_diff.add(id(outs[i]))
        differentiable = [record and o.is_floating_point() and id(o) not in non_diff for o in outs]
        for o, d in zip(outs, differentiable):
            if not d and o._grad_fn is None:
                graph.make_leaf(o, o._requires_grad and id(o) not in non_diff)
        ctx._out_meta = [(o.shape, o.dtype, o.device) for o in outs]
        if record:
            node = graph.record(self, ctx, args, kwargs, outs, differentiable=differentiable, saves=ctx._to_save)
            ctx._node, ctx._to_save = weakref.ref(node), ()
        if modes().dual_level is not None and any(forward_ad.tangent_of(a) is not None
                                                for a in args if isinstance(a, Tensor)):
            _attach_tangents(cls, ctx, args, outs, non_diff)
        return tuple(outs) if several else outs[0]

    def run_backward(self, node, grads):
        """The Function's backward on the gradients of its outputs (zeros for missing ones, unless
        set_materialize_grads(False)); one gradient per forward argument."""
        ctx = node.ctx
        if ctx.materialize_grads:
            grads = [zeros(*shape, dtype=dtype, device=device) if g is None else g
                     for g, (shape, dtype, device) in zip(grads, ctx._out_meta)]
        result = self.cls.backward(ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(node._next_edges)
        if len(result) < n or any(g is not None for g in result[n:]):
            raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients (expected {n}, "
                               f"got {len(result)})")
        for i, g in enumerate(result[:n]):
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(f"function {node.name()} returned a {type(g).__name__} as gradient {i}; expected a "
                                "Tensor or None")
        return list(result[:n])

    def __call__(self, *args, **kwargs):  # (as a registered op is called: the inspector re-runs calls this way)
        return dispatch(self, args, kwargs)

    def __repr__(self):
        return f"<Function {self.name}>"


class Function:
    """Base class for custom differentiable ops (see the module docstring)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function subclasses must implement forward(ctx, ...)")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """torch-2 style: forward(*args) without ctx, and this saves what backward needs."""
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("Function subclasses must implement backward(ctx, *grad_outputs)")

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("you must implement the jvp function for a custom autograd.Function to use it "
                                  "with forward mode AD")

    @classmethod
    def apply(cls, *args, **kwargs):
        op = cls.__dict__.get("_mixprec_op")  # (the class's own, not a base class's; a name no user picks)
        if op is None:
            op = FunctionOp(cls)
            cls._mixprec_op = op  # (kept by the class: it goes when the class goes)
        return dispatch(op, args, kwargs)


def _check_dirty(cls, ctx, args, outs, record):
    for t in ctx._dirty:
        if not any(t is o for o in outs):
            raise RuntimeError(f"{cls.__name__}: a tensor marked dirty (changed in place) in forward was not "
                               "returned as an output; forward must return every dirty tensor")
        if record and t._requires_grad and t._grad_fn is None:
            raise RuntimeError(f"{cls.__name__}: a leaf tensor that requires grad has been used in an in-place "
                               "operation (mark_dirty)")
        t._bump_version()


def _attach_tangents(cls, ctx, args, outs, non_diff):
    if cls.jvp is Function.jvp:
        Function.jvp(ctx)
    tangents = [forward_ad._tangent_arg(a) if isinstance(a, Tensor) else None for a in args]
    ctx._in_jvp = True
    try:
        with forward_ad._paused():
            result = cls.jvp(ctx, *tangents)
    finally:
        ctx._in_jvp = False
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(outs):
        raise RuntimeError(f"{cls.__name__}.jvp returned {len(result)} tangents for {len(outs)} outputs")
    level = modes().dual_level
    for i, (o, t) in enumerate(zip(outs, result)):
        if t is None or id(o) in non_diff or not o.is_floating_point():
            continue
        if not isinstance(t, Tensor) or t.shape != o.shape:
            got = t.shape if isinstance(t, Tensor) else type(t).__name__
            raise RuntimeError(f"{cls.__name__}.jvp returned a tangent for output {i} of shape {got}, but the "
                               f"output has shape {o.shape}")
        graph.set_tangent(o, level, t.to(o.dtype) if t.dtype != o.dtype else t)


def once_differentiable(backward):
    """Decorator for a Function's backward that is not itself differentiable: it runs without recording,
    and differentiating its result (create_graph) is an error rather than a silently wrong gradient."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with grad_mode.no_grad():
            result = backward(ctx, *grads)
        if not grad_mode.is_grad_enabled():
            return result
        needs = [g for g in grads if isinstance(g, Tensor) and g._requires_grad]
        if not needs:
            return result
        several = isinstance(result, tuple)
        out = tuple(_DelayedError.apply(r, *needs) if isinstance(r, Tensor) else r
                    for r in (result if several else (result,)))
        return out if several else out[0]
    return wrapper


class _DelayedError(Function):
    """Marks a once_differentiable result: backward through it fails."""

    @staticmethod
    def forward(ctx, value, *dependencies):
        return value

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")
