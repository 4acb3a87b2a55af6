"""``mp.autograd.graph.allow_mutation_on_saved_tensors()``: saved tensors may be changed in place.

Normally a tensor saved for backward and then changed in place makes backward fail
(the version check in graph.SavedTensor). Inside this block, backward instead uses the
value the op saw::

    with mp.autograd.graph.allow_mutation_on_saved_tensors():
        b = a.clone()
        out = (b ** 2).sum()    # pow saves b
        b.sin_()                # changes b in place
        out.backward()          # a.grad is 2 * a: the b that pow saw

It is a pair of saved_tensors_hooks. Forward and backward must both run inside the
same block: when the block ends, what it saved is dropped, and a backward that needs
it raises AssertionError (torch's type). One block at a time in the process, as in
torch: opening one inside another is a RuntimeError.

Not copied from torch: torch copies a saved tensor only when an in-place write is about
to reach its memory (a dispatch mode sees every write before it runs). mixprec's writes
have no such single point before they land (in-place ops, optimizer steps and direct
``._array`` writes each bump the version counter afterwards), so the copy is made when
the tensor is saved. Cost: one copy of every tensor saved inside the block, in time and
memory, whether or not it is changed later (a tensor saved twice at the same version is
copied once). The gradients are torch's; where torch's write detection misses a write (it
matches the written tensor's data pointer, so a write through a view at another offset
escapes it and backward reads the new values), the copy here still holds the saved value.
"""
from __future__ import annotations

import contextlib
import weakref

from ..backend import devices
from ..tensor import Tensor
from .graph import saved_tensors_hooks

__all__ = ["allow_mutation_on_saved_tensors"]

_OPEN = None  # the block now open, if any (one per process, as torch's flag)

_ENDED = ("mp.autograd.graph.allow_mutation_on_saved_tensors: backward needs a tensor saved inside a block that has "
          "ended; run forward and backward inside the same block")


class _Copy:
    """What a saved tensor is packed as: the copy of its value (None once the block ended)."""
    __slots__ = ("value", "source", "__weakref__")

    def __init__(self, value, source):
        self.value, self.source = value, weakref.ref(source)


class _AllowMutationOnSavedContext:  # (torch's name)
    """What the block yields: the copies of the tensors saved in it, dropped when it ends."""

    def __init__(self):
        # (id, version) of a saved tensor -> its copy, while a graph still holds that copy
        self._copies = weakref.WeakValueDictionary()

    def _pack(self, t):
        key = (id(t), t._version)
        copy = self._copies.get(key)
        if copy is None or copy.source() is not t:  # (an id is reused only once its tensor is gone)
            with devices.on_device(t.device):
                copy = self._copies[key] = _Copy(Tensor._wrap(t._array.copy()), t)
        return copy

    @staticmethod
    def _unpack(copy):
        if copy.value is None:
            raise AssertionError(_ENDED)
        return copy.value

    def _clear(self):
        for copy in list(self._copies.values()):
            copy.value = None
        self._copies.clear()


@contextlib.contextmanager
def allow_mutation_on_saved_tensors():
    """Inside the block, a tensor saved for backward may be changed in place afterwards: backward uses the
    value it had when it was saved (torch.autograd.graph.allow_mutation_on_saved_tensors). Yields the
    block's state (the copies, dropped when it ends); the module docstring (mixprec/autograd/allow_mutation.py)
    has the rules and the cost."""
    global _OPEN
    if _OPEN is not None:
        raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested: mp.autograd.graph."
                           "allow_mutation_on_saved_tensors is already open (one block at a time)")
    ctx = _OPEN = _AllowMutationOnSavedContext()
    try:
        with saved_tensors_hooks(ctx._pack, ctx._unpack):
            yield ctx
    finally:
        ctx._clear()
        _OPEN = None
