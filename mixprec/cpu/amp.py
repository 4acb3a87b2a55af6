"""torch.cpu.amp's names, with the device type fixed to "cpu": autocast and GradScaler.
Both are deprecated, as in torch 2.13: each warns (FutureWarning) and points at
mp.amp.autocast("cpu", ...) or mp.amp.GradScaler("cpu", ...)."""
from .. import amp as _amp
from ..cuda.amp import deprecated

__all__ = ["autocast", "GradScaler"]


class autocast(_amp.autocast):
    """``mp.cpu.amp.autocast(enabled=True, dtype=mp.bfloat16, cache_enabled=True)`` = mp.autocast("cpu", ...)."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        deprecated("cpu.amp.autocast", "amp.autocast('cpu', args...)")
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """mp.amp.GradScaler with device="cpu"; the other arguments are the same."""

    def __init__(self, *args, **kwargs):
        deprecated("cpu.amp.GradScaler", "amp.GradScaler('cpu', args...)")
        super().__init__("cpu", *args, **kwargs)
