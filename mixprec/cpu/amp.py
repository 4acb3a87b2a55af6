"""torch.cpu.amp's names, with the device type fixed to "cpu": autocast and GradScaler.
New code can use mp.autocast("cpu") and mp.amp directly."""
from .. import amp as _amp

__all__ = ["autocast", "GradScaler"]


class autocast(_amp.autocast):
    """``mp.cpu.amp.autocast(enabled=True, dtype=mp.bfloat16, cache_enabled=True)`` = mp.autocast("cpu", ...)."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """mp.amp.GradScaler with device="cpu"; the other arguments are the same."""

    def __init__(self, *args, **kwargs):
        super().__init__("cpu", *args, **kwargs)
