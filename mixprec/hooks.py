"""The handle every ``register_*hook`` returns (torch.utils.hooks.RemovableHandle)."""
from __future__ import annotations

import itertools

_ids = itertools.count()


class RemovableHandle:
    """``handle.remove()`` takes the hook out of the dict it was registered in (again: no-op).

    Hooks live in dicts keyed by the handle's id, so they run in registration
    order and removing one never disturbs the others. Also a context manager:
    ``with x.register_hook(fn): ...`` removes the hook on exit.
    """

    def __init__(self, hooks: dict):
        self.id = next(_ids)
        self._hooks = hooks

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def add_hook(hooks: dict | None, fn, what: str):
    """Register ``fn`` in ``hooks`` (a dict, created when None); returns (hooks, handle)."""
    if not callable(fn):
        raise TypeError(f"{what}: expected a callable hook, got {type(fn).__name__}")
    hooks = {} if hooks is None else hooks
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return hooks, handle
