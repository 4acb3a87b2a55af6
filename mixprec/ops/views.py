"""How a view relates to its base, for autograd (the other half of ops/inplace.py's rules).

An op registered ``view=True`` whose output shares its input's memory gives the
output a :class:`ViewInfo`: its root base and how to make the view again from
it. After the base changes in place, the view re-derives its grad_fn (and
tangent) from the base, so autograd never differentiates a stale value.
"""
from __future__ import annotations


class _Replay:
    """Recompute a view from its base: the parent replay (if the view is a view of a view), then ``op``."""
    __slots__ = ("parent", "op", "rest", "kwargs")

    def __init__(self, parent, op, rest, kwargs):
        self.parent, self.op, self.rest, self.kwargs = parent, op, rest, kwargs

    def __call__(self, x):
        if self.parent is not None:
            x = self.parent(x)
        return self.op(x, *self.rest, **self.kwargs)


class ViewInfo:
    """How a view tensor relates to its root base: ``replay(base)`` makes the view again.

    ``state`` is the base's autograd identity (grad_fn, requires_grad, tangent)
    when the view's own was last derived from it; when the base has changed
    since (an in-place op rebased it), ``refresh`` derives the view's again.
    """
    __slots__ = ("base", "replay", "made_without_grad", "state")

    def __init__(self, base, replay, made_without_grad):
        self.base, self.replay, self.made_without_grad = base, replay, made_without_grad
        self.state = (base._grad_fn, base._requires_grad, base._fw)

    @classmethod
    def of(cls, source, op, rest, kwargs, made_without_grad):
        parent = source._view
        if parent is None:
            return cls(source, _Replay(None, op, rest, kwargs), made_without_grad)
        return cls(parent.base, _Replay(parent.replay, op, rest, kwargs), made_without_grad or parent.made_without_grad)

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
