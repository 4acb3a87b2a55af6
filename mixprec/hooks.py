"""RemovableHandle: what every register_*_hook returns (torch.utils.hooks.RemovableHandle's contract)."""
from __future__ import annotations

import itertools

__all__ = ["RemovableHandle"]


class RemovableHandle:
    """Removes the hook it was returned for: ``handle.remove()``, or leaving ``with handle:``.

    hooks_dict is the dict the hook lives in, under ``handle.id``; extra_dicts are
    dicts that hold options of that hook under the same id (removed with it).
    Removing twice does nothing.
    """
    _next_id = itertools.count()

    def __init__(self, hooks_dict: dict, *, extra_dicts=()):
        self.hooks_dict = hooks_dict
        self.extra_dicts = tuple(extra_dicts)
        self.id = next(RemovableHandle._next_id)

    def remove(self):
        for d in (self.hooks_dict, *self.extra_dicts):
            d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False
