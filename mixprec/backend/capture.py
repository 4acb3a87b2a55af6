"""Whether this thread is capturing a CUDA graph (mp.cuda.graph): work that cannot be recorded in a graph
asks here."""
from __future__ import annotations

from .._state import PER_THREAD  # (this thread's capture flag is PER_THREAD.capture.active: this module writes it)


def is_capturing() -> bool:
    """True between CUDAGraph.capture_begin and capture_end in this thread."""
    return PER_THREAD.capture.active


def set_capturing(active: bool) -> None:
    PER_THREAD.capture.active = active
