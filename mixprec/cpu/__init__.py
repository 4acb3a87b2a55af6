"""mp.cpu: torch.cpu's names for ported code (mp.cpu.amp)."""
from . import amp  # noqa: F401
