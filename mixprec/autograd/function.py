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
import traceback

from .._modes import modes
from ..tensor import Tensor
from . import forward_ad, grad_mode
from .graph import Node, SavedTensor, gradient_edge


class FunctionCtx(Node):
    """The ``ctx`` of a custom Function call, and its node in the backward graph."""

    user_backward = True  # the gradients it returns may be the user's own tensors

    def __init__(self, cls):
        super().__init__()
        self._cls = cls
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._to_save = ()
        self._for_forward = ()
        self._saved = None
        self._dirty = ()
        self._non_differentiable = ()
        self._in_jvp = False

    def name(self) -> str:
        return f"{self._cls.__name__}Backward"

    def _label(self):
        return self._cls.__name__

    def _saved_label(self, index, is_output):
        return f"saved tensor {index} (position {index} of save_for_backward)"

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
        if self._saved is None:
            return tuple(self._to_save)
        self._check_alive()
        return tuple(None if s is None else s.unpack(self, i) for i, s in enumerate(self._saved))

    # ---- the graph ----
    def _finish(self, args, outs, differentiable):
        edges, metas = [], []
        for a in args:
            if isinstance(a, Tensor) and a._requires_grad:
                edges.append(gradient_edge(a))
                metas.append((a.data.shape, a.data.dtype))
            else:
                edges.append(None)
                metas.append(None)
        self._next_edges, self._metas = edges, metas
        self._n_outputs = len(outs)
        self._out_meta = [(o.shape, o.dtype, o.device) for o in outs]
        for i, o in enumerate(outs):
            if differentiable[i]:
                o._grad_fn, o._requires_grad, o.output_nr = self, True, i
        output_ids = {id(o) for o in outs}
        self._saved = [None if t is None else SavedTensor(t, is_output=id(t) in output_ids) for t in self._to_save]
        self._to_save = ()

    def _apply(self, grads):
        from ..tensor import zeros
        if self.materialize_grads:
            grads = [zeros(*shape, dtype=dtype, device=device) if g is None else g
                     for g, (shape, dtype, device) in zip(grads, self._out_meta)]
        result = self._cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self._next_edges)
        if len(result) < n or any(g is not None for g in result[n:]):
            raise RuntimeError(f"function {self.name()} returned an incorrect number of gradients (expected {n}, "
                               f"got {len(result)})")
        for i, g in enumerate(result[:n]):
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(f"function {self.name()} returned a {type(g).__name__} as gradient {i}; expected a "
                                "Tensor or None")
        return list(result[:n])

    def _release(self):
        self.freed = True
        self._saved = None


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
        ctx = FunctionCtx(cls)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        setup_style = cls.setup_context is not Function.setup_context
        with grad_mode.no_grad(), forward_ad._paused():
            if setup_style:
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
                outs[i] = Tensor._wrap(o.data, vc=o._version_counter())
                if id(o) in non_diff:
                    non_diff.add(id(outs[i]))
        differentiable = [record and o.is_floating_point() and id(o) not in non_diff for o in outs]
        for o, d in zip(outs, differentiable):
            if not d:
                o._requires_grad = o._requires_grad and o._grad_fn is None and id(o) not in non_diff
        if record:
            ctx._finish(args, outs, differentiable)
            if grad_mode.is_anomaly_enabled():
                ctx.trace = "".join(traceback.format_stack()[:-1])
        if modes().dual_level is not None and any(forward_ad.tangent_of(a) is not None
                                                for a in args if isinstance(a, Tensor)):
            _attach_tangents(cls, ctx, args, outs, non_diff)
        return tuple(outs) if several else outs[0]


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
        o._fw = (level, t.to(o.dtype) if t.dtype != o.dtype else t)


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
