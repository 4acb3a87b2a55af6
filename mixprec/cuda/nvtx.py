"""NVTX ranges and marks (torch.cuda.nvtx's names) over ``cupy.cuda.nvtx``, for Nsight Systems timelines."""
from __future__ import annotations

import contextlib

from ..backend import availability


def _nvtx(what: str):
    cp = availability.require_cuda(f"mp.cuda.nvtx.{what}")
    nvtx = cp.cuda.nvtx
    if not getattr(nvtx, "available", True):
        raise availability.DeviceUnavailableError(f"mp.cuda.nvtx.{what}: CuPy {cp.__version__} was built without NVTX")
    return nvtx


def _message(msg, what) -> str:
    if not isinstance(msg, str):
        raise TypeError(f"mp.cuda.nvtx.{what}: the message must be a str, got {type(msg).__name__}")
    return msg


def range_push(msg: str) -> None:
    """Open a nested range named ``msg`` on this thread's timeline."""
    _nvtx("range_push").RangePush(_message(msg, "range_push"))


def range_pop() -> None:
    """Close the innermost range opened by range_push."""
    _nvtx("range_pop").RangePop()


def mark(msg: str) -> None:
    """An instant event named ``msg``."""
    _nvtx("mark").Mark(_message(msg, "mark"))


@contextlib.contextmanager
def range(msg: str, *args, **kwargs):  # noqa: A001  (torch.cuda.nvtx.range)
    """``with mp.cuda.nvtx.range("forward"):`` a range around a block; msg may hold str.format fields."""
    nvtx = _nvtx("range")
    nvtx.RangePush(_message(msg, "range").format(*args, **kwargs))
    try:
        yield
    finally:
        nvtx.RangePop()
