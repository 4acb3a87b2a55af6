"""mp.cuda: torch.cuda's names for ported code (is_available, device_count, and mp.cuda.amp)."""
from ..backend import device_count, is_cuda_available as is_available  # noqa: F401
from . import amp  # noqa: F401
