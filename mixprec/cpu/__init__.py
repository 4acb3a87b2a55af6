"""mp.cpu: torch.cpu's names, so device-generic code runs with device "cpu": is_available,
device_count, current_device, synchronize, Stream, Event, current_stream, stream/StreamContext,
and mp.cpu.amp (torch.cpu.amp's deprecated aliases).

NumPy runs each op to completion before it returns, so the CPU has one implicit stream and
nothing to wait for: Stream, Event and synchronize exist for the code that calls them, as
torch's CPU versions do, and do nothing.
"""
from . import amp  # noqa: F401

__all__ = ["is_available", "device_count", "current_device", "synchronize", "Stream", "Event", "current_stream",
           "stream", "StreamContext", "amp"]


def is_available() -> bool:
    """The CPU is always there."""
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device=None) -> None:
    """Nothing to wait for: every CPU op has finished when it returns."""
    if device is not None and str(device) not in ("cpu", "cpu:0"):
        raise ValueError(f"mp.cpu.synchronize: expected the device 'cpu' or None, got {device!r}")


class Stream:
    """The CPU's one implicit stream (torch.cpu.Stream): work on it is already done."""

    def __init__(self, priority: int = -1):
        self.priority = priority

    def wait_stream(self, stream) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def record_event(self, event=None):
        return Event() if event is None else event


class Event:
    """torch.cpu.Event: recorded, it has already happened."""

    def record(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True

    def wait(self, stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass


_STREAM = Stream()


def current_stream(device=None) -> Stream:
    return _STREAM


class StreamContext:
    """``with mp.cpu.stream(s):`` — the CPU has one stream, so this changes nothing."""

    def __init__(self, stream):
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"mp.cpu.stream expects an mp.cpu.Stream or None, got {type(stream).__name__}")
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)
