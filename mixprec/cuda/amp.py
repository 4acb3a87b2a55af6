"""torch.cuda.amp's names, with the device type fixed to "cuda": autocast, custom_fwd,
custom_bwd and GradScaler. New code can use mp.autocast("cuda") and mp.amp directly."""
from .. import amp as _amp

__all__ = ["autocast", "custom_fwd", "custom_bwd", "GradScaler"]


class autocast(_amp.autocast):
    """``mp.cuda.amp.autocast(enabled=True, dtype=mp.float16, cache_enabled=True)`` = mp.autocast("cuda", ...)."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """mp.amp.custom_fwd with device_type="cuda"."""
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """mp.amp.custom_bwd with device_type="cuda"."""
    return _amp.custom_bwd(bwd, device_type="cuda")


class GradScaler(_amp.GradScaler):
    """mp.amp.GradScaler with device="cuda"; the other arguments are the same."""

    def __init__(self, *args, **kwargs):
        super().__init__("cuda", *args, **kwargs)
