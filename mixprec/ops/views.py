"""How a view relates to its base, for autograd (the other half of ops/inplace.py's rules).

An op registered ``view=True`` whose output shares its input's memory gives the
output a :class:`ViewInfo`: its root base and how to make the view again from
it. After the base changes in place, the view re-derives its grad_fn (and
tangent) from the base, so autograd never differentiates a stale value.
"""
from __future__ import annotations


class ViewInfo:
    """How a view tensor relates to its root base: ``replay(base)`` makes the view again (the parent view's
    replay, for a view of a view, then this view's op with its arguments).

    ``state`` is the base's autograd identity (grad_fn, requires_grad, tangent)
    when the view's own was last derived from it; when the base has changed
    since (an in-place op rebased it), ``refresh`` derives the view's again.
    """
    __slots__ = ("base", "parent", "op", "rest", "kwargs", "made_without_grad", "state")

    def __init__(self, source, op, rest, kwargs, made_without_grad):
        parent = source._view
        self.base = source if parent is None else parent.base
        self.parent, self.op, self.rest, self.kwargs = parent, op, rest, kwargs
        self.made_without_grad = made_without_grad or (parent is not None and parent.made_without_grad)
        base = self.base
        self.state = (base._grad_fn, base._requires_grad, base._fw)

    def replay(self, x):
        if self.parent is not None:
            x = self.parent.replay(x)
        return self.op(x, *self.rest, **self.kwargs)

    def refresh(self, view, force=False):
        base = self.base
        grad_fn, requires_grad, fw = self.state
        if not force and base._grad_fn is grad_fn and base._requires_grad == requires_grad and base._fw is fw:
            return
        from ..autograd.grad_mode import enable_grad
        self.state = (base._grad_fn, base._requires_grad, base._fw)
        with enable_grad():
            fresh = self.replay(base)
        view._grad_fn, view._requires_grad, view.output_nr, view._fw = (
            fresh._grad_fn, fresh._requires_grad, fresh.output_nr, fresh._fw)
