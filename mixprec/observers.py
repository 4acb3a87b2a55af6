"""Observers: tools that watch op calls (mp.amp.trace, mp.profiler, the numerics inspector mp.amp.inspect).

:func:`observe` lets an observer see every op call dispatch makes in this thread and, for
observers that ask (``sees_backward``), every backward pass and each graph node's backward in
it, from the autograd engine. When none is active they cost one attribute read per op call and
one check per backward pass and node. The observers of a thread and the calls now running are
this thread's ``modes().observers`` and ``modes().calls`` (mixprec/_state.py); only this module
writes them.
"""
from __future__ import annotations

import contextlib

from ._state import modes


class Call:
    """One call as observers see it: an op call, one graph node's backward, or a whole backward pass.

    kind: "op" (a dispatched op call), "backward" (the autograd engine running one
    node's backward: op is the node's op, node the Node, args the gradients of its
    outputs, out the gradients it returned, one per input edge: node._next_edges) or "backward pass" (a
    whole backward()/autograd.grad call: op is None, args is (outputs, grad_outputs)).
    op, args (as the caller passed them, after binding), kwargs, device; parent: the
    Call running when this one started (a composite, the op autocast was casting for,
    a node's backward) and depth: how many calls enclose it; casting: True while
    autocast casts this call's inputs (so the casts' parent tells whom they were for);
    autocast: the autocast Decision applied, or None; run_args: the args forward ran
    on (after autocast and promotion); out: the result; error: the exception the call
    raised, or None. Observers may keep their own notes in the call's __dict__.
    """
    __slots__ = ("op", "args", "kwargs", "device", "parent", "depth", "casting", "autocast", "run_args", "out",
                 "kind", "node", "error", "__dict__")

    def __init__(self, op, args, kwargs, device, parent, depth, kind="op", node=None):
        self.op, self.args, self.kwargs, self.device = op, args, kwargs, device
        self.parent, self.depth = parent, depth
        self.kind, self.node = kind, node
        self.casting = False
        self.autocast = self.run_args = self.out = self.error = None

    @property
    def name(self) -> str:
        """What tools call it: the op's name, "<op> backward" for a node's backward, or "backward pass"."""
        if self.kind == "op":
            return self.op.name
        return f"{self.op.name} backward" if self.kind == "backward" else "backward pass"


@contextlib.contextmanager
def observe(observer):
    """Let ``observer`` see every op call this thread makes inside the block: observer.enter(call) before
    the call runs and observer.exit(call) after it ended (returned, or raised: then call.error is set).

    An observer with ``sees_backward = True`` also sees the autograd engine's calls: each backward
    pass and each graph node's backward in it (Call.kind "backward pass" / "backward"); the others
    see only op calls, the ops a backward runs included.
    """
    m = modes()  # (m.observers: objects with enter(call) and exit(call); m.calls: the Calls now running)
    if m.calls is None:
        m.calls = []
    m.observers = m.observers + (observer,)
    try:
        yield observer
    finally:
        m.observers = tuple(o for o in m.observers if o is not observer)


@contextlib.contextmanager
def unobserved():
    """No observer sees the calls made inside: a tool's own work (the numerics inspector's float32 shadow)."""
    m = modes()
    saved, m.observers = m.observers, ()
    try:
        yield
    finally:
        m.observers = saved


def observing() -> bool:
    """Whether an observer is watching this thread's op calls."""
    return bool(modes().observers)


def current_call():
    """The innermost op call now running in this thread (None outside ops, or when nobody observes)."""
    calls = modes().calls
    return calls[-1] if calls else None


def run_observed(call, run, observers):
    """``run()`` as ``call``: the observers see it begin and end, and calls made inside have it as parent."""
    calls = modes().calls
    for o in observers:
        o.enter(call)
    calls.append(call)
    try:
        call.out = run()
    except BaseException as exc:
        call.error = exc
        raise
    finally:
        calls.pop()
        for o in observers:
            o.exit(call)
    return call.out


def watching_backward() -> bool:
    """Whether an observer of this thread asked to see the autograd engine's calls (sees_backward)."""
    observers = modes().observers
    return bool(observers) and any(getattr(o, "sees_backward", False) for o in observers)


def observed_backward(kind, op, args, device, run, node=None):
    """The autograd engine's hook (called while watching_backward()): run a backward pass (kind
    "backward pass") or one node's backward (kind "backward") as a Call its observers see."""
    m = modes()
    observers = tuple(o for o in m.observers if getattr(o, "sees_backward", False))
    if not observers:
        return run()
    parent = m.calls[-1] if m.calls else None
    return run_observed(Call(op, args, {}, device, parent, len(m.calls), kind, node), run, observers)
