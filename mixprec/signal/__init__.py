"""``mp.signal``: torch.signal's functions (the window functions of ``mp.signal.windows``)."""
from . import windows  # noqa: F401

__all__ = ["windows"]
