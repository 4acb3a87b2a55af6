"""Whether this thread is capturing a CUDA graph (mp.cuda.graph): work that cannot be recorded in a graph
asks here."""
from __future__ import annotations

import threading


class _CaptureState(threading.local):
    active = False


_capture = _CaptureState()


def is_capturing() -> bool:
    """True between CUDAGraph.capture_begin and capture_end in this thread."""
    return _capture.active


def set_capturing(active: bool) -> None:
    _capture.active = active
