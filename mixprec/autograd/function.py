"""User-defined differentiable ops: subclass Function, write forward and backward."""
from __future__ import annotations

from . import grad_mode
from .graph import Node


class FunctionCtx(Node):
    """The ``ctx`` of a custom Function: save tensors in forward, read them in backward."""

    user_backward = True

    def save_for_backward(self, *tensors):
        self.to_save = tensors
        self.saved_versions = tuple(t._version if t is not None else None for t in tensors)

    @property
    def saved_tensors(self):
        self._check_alive()
        saved = getattr(self, "to_save", ())
        for t, v in zip(saved, self.saved_versions if saved else ()):
            if t is not None and t._version != v:
                raise RuntimeError(f"a tensor saved by {self.name} for backward was modified in place "
                                   f"(version {t._version}, expected {v})")
        return saved

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = {id(t) for t in tensors}


class _FunctionOp:
    """Adapts a Function subclass to what the engine expects of an op."""

    tangent = None  # forward mode through a custom Function is not supported yet

    def __init__(self, cls):
        self.cls = cls
        self.name = cls.__name__

    def backward(self, ctx, grad):
        grads = self.cls.backward(ctx, grad)
        return grads if isinstance(grads, tuple) else (grads,)


class Function:
    """Base class for custom ops.

    Write ``forward(ctx, *args)`` (runs without recording a graph, on Tensors) and
    ``backward(ctx, grad_output)`` returning one gradient (or None) per forward
    arg; call it with ``MyFn.apply(*args)``.
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function subclasses must implement forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("Function subclasses must implement backward(ctx, grad_output)")

    @classmethod
    def apply(cls, *args, **kwargs):
        from ..tensor import Tensor
        op = cls.__dict__.get("_op") or _FunctionOp(cls)
        cls._op = op
        ctx = FunctionCtx(op, args)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with grad_mode.no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not isinstance(out, Tensor):
            raise TypeError(f"{cls.__name__}.forward must return one Tensor, got {type(out).__name__}")
        if grad_mode.is_grad_enabled() and any(ctx.needs_input_grad) and out.is_floating_point \
                and id(out) not in getattr(ctx, "non_differentiable", ()):
            if out.grad_fn is not None or any(out is a for a in args):
                out = Tensor._wrap(out.data, vc=out._vc)
            ctx.finish(out)
            if grad_mode.is_anomaly_enabled():
                import traceback
                ctx.trace = "".join(traceback.format_stack()[:-1])
        return out
