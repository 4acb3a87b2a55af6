"""mp.accelerator: torch.accelerator's device-agnostic calls, for code that runs on whatever accelerator
is there. mixprec's one accelerator is CUDA: these are mp.cuda's functions when a usable GPU exists.

Without one, as in torch: is_available() is False, device_count() 0, current_accelerator() None,
and the calls that need a device raise mp.DeviceUnavailableError (a RuntimeError, as torch's
"Cannot access accelerator device when none is available").
"""
from __future__ import annotations

from . import cuda
from .backend.availability import DeviceUnavailableError, cuda_unavailable_reason, is_cuda_available
from .backend.devices import Device

__all__ = ["is_available", "device_count", "current_accelerator", "current_device_index", "current_device_idx",
           "set_device_index", "set_device_idx", "device_index", "synchronize", "current_stream", "set_stream",
           "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "memory_stats", "get_memory_info"]


def _require(what):
    if not is_cuda_available():
        raise DeviceUnavailableError(f"mp.accelerator.{what}: no accelerator is available "
                                     f"({cuda_unavailable_reason()})")


def is_available() -> bool:
    return is_cuda_available()


def device_count() -> int:
    return cuda.device_count()


def current_accelerator(check_available: bool = False) -> Device | None:
    """mp.device("cuda") when a usable GPU exists, else None."""
    return Device("cuda") if is_cuda_available() else None


def current_device_index() -> int:
    _require("current_device_index")
    return cuda.current_device()


current_device_idx = current_device_index  # torch's older name


def set_device_index(device, /) -> None:
    _require("set_device_index")
    cuda.set_device(device)


set_device_idx = set_device_index


class device_index(cuda.device):
    """``with mp.accelerator.device_index(i):`` makes accelerator i current inside (None: no change)."""

    def __init__(self, device, /):
        if device is not None:
            _require("device_index")
        super().__init__(device)


def synchronize(device=None, /) -> None:
    _require("synchronize")
    cuda.synchronize(device)


def current_stream(device=None, /):
    _require("current_stream")
    return cuda.current_stream(device)


def set_stream(stream, /) -> None:
    _require("set_stream")
    cuda.set_stream(stream)


def empty_cache() -> None:
    _require("empty_cache")
    cuda.empty_cache()


def memory_allocated(device=None, /) -> int:
    _require("memory_allocated")
    return cuda.memory_allocated(device)


def max_memory_allocated(device=None, /) -> int:
    _require("max_memory_allocated")
    return cuda.max_memory_allocated(device)


def memory_reserved(device=None, /) -> int:
    _require("memory_reserved")
    return cuda.memory_reserved(device)


def max_memory_reserved(device=None, /) -> int:
    _require("max_memory_reserved")
    return cuda.max_memory_reserved(device)


def reset_peak_memory_stats(device=None, /) -> None:
    _require("reset_peak_memory_stats")
    cuda.reset_peak_memory_stats(device)


def memory_stats(device=None, /) -> dict:
    _require("memory_stats")
    return cuda.memory_stats(device)


def get_memory_info(device=None, /) -> tuple[int, int]:
    """(free, total) bytes of the accelerator (mp.cuda.mem_get_info)."""
    _require("get_memory_info")
    return cuda.mem_get_info(device)
