"""torch's low-level autocast switches, for ported code: ``set_autocast_enabled``, ``set_autocast_dtype``,
``set_autocast_cache_enabled`` (mp.* and mp.amp.*, as torch.*'s).

They change this thread's autocast state outside any region, as torch's do; ``with mp.autocast(...)`` is the
way to write new code (a region restores what it found). The state they write is autocast's own, in
mixprec/ops/autocast.py (set_switches).
"""
from __future__ import annotations

from ..ops import autocast as _ac
from .autocast_mode import _check_device_type, _check_lower_dtype, _flag

__all__ = ["set_autocast_enabled", "set_autocast_dtype", "set_autocast_cache_enabled"]


def set_autocast_enabled(device_type, enabled) -> None:
    """torch's low-level switch: autocast on ``device_type`` on or off in this thread (prefer mp.autocast)."""
    who = "set_autocast_enabled"
    _ac.set_switches(_check_device_type(device_type, who), enabled=_flag(enabled, "enabled", who))


def set_autocast_dtype(device_type, dtype) -> None:
    """The lower dtype set_autocast_enabled(device_type, True) uses, in this thread (prefer mp.autocast)."""
    who = "set_autocast_dtype"
    _ac.set_switches(_check_device_type(device_type, who), dtype=_check_lower_dtype(dtype, who))


def set_autocast_cache_enabled(enabled) -> None:
    """Whether weight casts are cached, in this thread (prefer mp.autocast(cache_enabled=...))."""
    _ac.set_switches(cache=_flag(enabled, "enabled", "set_autocast_cache_enabled"))
