"""torch.cuda.amp's names, with the device type fixed to "cuda": autocast, custom_fwd,
custom_bwd and GradScaler. All are deprecated, as in torch 2.13: each warns (FutureWarning)
and points at its replacement, mp.amp.autocast("cuda", ...), mp.amp.GradScaler("cuda", ...),
mp.amp.custom_fwd/custom_bwd(..., device_type="cuda")."""
import warnings

from .. import amp as _amp

__all__ = ["autocast", "custom_fwd", "custom_bwd", "GradScaler"]


def deprecated(old, new, stacklevel=3):
    """Warn that ``old`` (a name under mp.<device>.amp) is deprecated in favour of ``new``, as torch does."""
    warnings.warn(f"`mp.{old}(args...)` is deprecated. Please use `mp.{new}` instead.", FutureWarning,
                  stacklevel=stacklevel)


class autocast(_amp.autocast):
    """``mp.cuda.amp.autocast(enabled=True, dtype=mp.float16, cache_enabled=True)`` = mp.autocast("cuda", ...)."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        deprecated("cuda.amp.autocast", "amp.autocast('cuda', args...)")
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """mp.amp.custom_fwd with device_type="cuda"."""
    deprecated("cuda.amp.custom_fwd", "amp.custom_fwd(args..., device_type='cuda')")
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """mp.amp.custom_bwd with device_type="cuda"."""
    deprecated("cuda.amp.custom_bwd", "amp.custom_bwd(args..., device_type='cuda')")
    return _amp.custom_bwd(bwd, device_type="cuda")


class GradScaler(_amp.GradScaler):
    """mp.amp.GradScaler with device="cuda"; the other arguments are the same."""

    def __init__(self, *args, **kwargs):
        deprecated("cuda.amp.GradScaler", "amp.GradScaler('cuda', args...)")
        super().__init__("cuda", *args, **kwargs)
