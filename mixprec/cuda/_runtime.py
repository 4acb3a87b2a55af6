"""Devices, streams and events: torch.cuda's runtime names over CuPy's.

Everything here is a thin, checked layer on ``cupy.cuda``: a Stream wraps a
``cupy.cuda.Stream``, an Event a ``cupy.cuda.Event``. Every CuPy kernel is
launched on CuPy's current stream, so ``with mp.cuda.stream(s):`` is all it
takes for mixprec's ops to run on ``s``. Without a usable GPU each function
raises DeviceUnavailableError saying why (no CuPy, no driver, no device).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import backend as _be
from ..backend import availability, device_checks, devices
from ..backend.bfloat16 import cuda_bfloat16_unsupported_reason


def _cupy(what: str):
    return availability.require_cuda(f"mp.cuda.{what}")


def device_index(device, what: str) -> int:
    """The CUDA device index meant by None (the current one), an int, "cuda", "cuda:N" or a Device."""
    cp = _cupy(what)
    if device is None:
        return cp.cuda.runtime.getDevice()
    if isinstance(device, bool) or not isinstance(device, (int, str, devices.Device)):
        raise TypeError(f"mp.cuda.{what}: device must be None, an int, 'cuda', 'cuda:N' or a Device, "
                        f"got {device!r}")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"mp.cuda.{what}: device index must be >= 0, got {device}")
        device = f"cuda:{device}"
    dev = devices.as_device(device)
    if dev.type != "cuda":
        raise ValueError(f"mp.cuda.{what}: expected a CUDA device, got {str(dev)!r}")
    return dev.index


# ---------------------------------------------------------------- devices
def current_device() -> int:
    """The index of the device that "cuda" means in this thread."""
    return _cupy("current_device").cuda.runtime.getDevice()


def set_device(device) -> None:
    """Make ``device`` the one "cuda" means (mp's default device for new tensors stays as it is)."""
    index = device_index(device, "set_device")
    _be.cupy_module().cuda.Device(index).use()


class device:
    """``with mp.cuda.device(1):`` makes cuda:1 the current CUDA device inside; None changes nothing."""

    def __init__(self, device):
        self.index = None if device is None else device_index(device, "device")

    def __enter__(self):
        if self.index is not None:
            self._cupy_device = _be.cupy_module().cuda.Device(self.index)
            self._cupy_device.__enter__()
        return self

    def __exit__(self, *exc):
        if self.index is not None:
            self._cupy_device.__exit__(*exc)
        return False


@dataclass(frozen=True)
class DeviceProperties:
    """What torch.cuda.get_device_properties reports (same attribute names)."""
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    L2_cache_size: int
    is_integrated: bool


def get_device_properties(device=None, _what="get_device_properties") -> DeviceProperties:
    index = device_index(device, _what)
    p = _be.cupy_module().cuda.runtime.getDeviceProperties(index)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return DeviceProperties(name=name, major=int(p["major"]), minor=int(p["minor"]),
                            total_memory=int(p["totalGlobalMem"]), multi_processor_count=int(p["multiProcessorCount"]),
                            L2_cache_size=int(p.get("l2CacheSize", 0)), is_integrated=bool(p.get("integrated", 0)))


def get_device_name(device=None) -> str:
    return get_device_properties(device, "get_device_name").name


def get_device_capability(device=None) -> tuple[int, int]:
    """(major, minor) compute capability, e.g. (9, 0) on an H100."""
    props = get_device_properties(device, "get_device_capability")
    return props.major, props.minor


def synchronize(device=None) -> None:
    """Wait until the device has finished all its work; then report what the GPU's own checks found."""
    index = device_index(device, "synchronize")
    _be.cupy_module().cuda.Device(index).synchronize()
    device_checks.raise_device_errors(index)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether bfloat16 tensors can live on the current GPU.

    Needs CuPy >= 14 and NumPy >= 2.1.2 (mixprec.backend.bfloat16.cuda_bfloat16_unsupported_reason
    says what is missing). Native bfloat16 arithmetic needs compute
    capability 8.0 (Ampere); with including_emulation=True older GPUs count,
    since CUDA's bfloat16 header emulates it there.
    """
    _cupy("is_bf16_supported")
    if cuda_bfloat16_unsupported_reason() is not None:
        return False
    return including_emulation or get_device_capability()[0] >= 8


# ---------------------------------------------------------------- streams
class Stream:
    """A CUDA stream: a queue whose work runs in order, concurrently with other streams' work.

    ``Stream(device=None, priority=0)`` makes a new stream (lower priority
    numbers run first). ``with mp.cuda.stream(s):`` sends mixprec's kernels to it.
    """

    def __init__(self, device=None, priority: int = 0):
        index = device_index(device, "Stream")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"mp.cuda.Stream: priority must be an int, got {priority!r}")
        cp = _be.cupy_module()
        with cp.cuda.Device(index):
            extra = {"priority": priority} if priority else {}  # the keyword only when asked for
            self._init(cp.cuda.Stream(non_blocking=False, **extra), index)

    def _init(self, cupy_stream, index):
        self.cupy_stream, self.device_index = cupy_stream, index

    @classmethod
    def from_cupy(cls, cupy_stream, device=None) -> "Stream":
        """Wrap an existing cupy.cuda.Stream (the null stream included)."""
        index = device_index(device, "Stream.from_cupy")
        s = object.__new__(cls)
        s._init(cupy_stream, index)
        return s

    @property
    def device(self) -> devices.Device:
        return devices.as_device(f"cuda:{self.device_index}")

    @property
    def cuda_stream(self) -> int:
        """The raw cudaStream_t handle (0 for the legacy default stream)."""
        return self.cupy_stream.ptr

    def query(self) -> bool:
        """True once all work queued so far has finished."""
        return self.cupy_stream.done

    def synchronize(self) -> None:
        self.cupy_stream.synchronize()
        device_checks.raise_device_errors(self.device_index)

    def wait_event(self, event: "Event") -> None:
        """Work queued on this stream from now on starts after ``event`` has happened (the host does not wait)."""
        if not isinstance(event, Event):
            raise TypeError(f"Stream.wait_event expects an mp.cuda.Event, got {type(event).__name__}")
        self.cupy_stream.wait_event(event.cupy_event)

    def wait_stream(self, stream: "Stream") -> None:
        """Work queued on this stream from now on starts after all work queued on ``stream`` so far."""
        if not isinstance(stream, Stream):
            raise TypeError(f"Stream.wait_stream expects an mp.cuda.Stream, got {type(stream).__name__}")
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.cuda_stream, self.device_index) == \
            (other.cuda_stream, other.device_index)

    def __hash__(self):
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self):
        return f"<mp.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"


def current_stream(device=None) -> Stream:
    """The stream mixprec's kernels go to now on ``device`` (the legacy default stream unless changed)."""
    index = device_index(device, "current_stream")
    return Stream.from_cupy(_be.cupy_module().cuda.get_current_stream(index), index)


def default_stream(device=None) -> Stream:
    """The device's legacy default ("null") stream."""
    index = device_index(device, "default_stream")
    return Stream.from_cupy(_be.cupy_module().cuda.Stream.null, index)


class stream:
    """``with mp.cuda.stream(s):`` runs the kernels of everything inside on ``s`` (and on its device).

    ``stream(None)`` changes nothing, as in torch.
    """

    def __init__(self, s: Stream | None):
        if s is not None and not isinstance(s, Stream):
            raise TypeError(f"mp.cuda.stream expects an mp.cuda.Stream or None, got {type(s).__name__}")
        self.stream = s

    def __enter__(self):
        if self.stream is not None:
            self._device = _be.cupy_module().cuda.Device(self.stream.device_index)
            self._device.__enter__()
            self.stream.cupy_stream.__enter__()
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream.cupy_stream.__exit__(*exc)
            self._device.__exit__(*exc)
        return False


StreamContext = stream  # torch.cuda.StreamContext: the class mp.cuda.stream(s) makes


class ExternalStream(Stream):
    """A stream made elsewhere (another library), given by its raw cudaStream_t handle, used as a Stream;
    mixprec neither owns nor destroys it."""

    def __init__(self, stream_ptr: int, device=None):
        if isinstance(stream_ptr, bool) or not isinstance(stream_ptr, int) or stream_ptr < 0:
            raise TypeError(f"mp.cuda.ExternalStream: stream_ptr must be a cudaStream_t handle (an int >= 0), got "
                            f"{stream_ptr!r}")
        index = device_index(device, "ExternalStream")
        self._init(_be.cupy_module().cuda.ExternalStream(stream_ptr, index), index)


def set_stream(s: Stream) -> None:
    """Make ``s`` the current stream of its device (prefer ``with mp.cuda.stream(s):``); None changes nothing."""
    if s is None:
        return
    _cupy("set_stream")
    if not isinstance(s, Stream):
        raise TypeError(f"mp.cuda.set_stream expects an mp.cuda.Stream or None, got {type(s).__name__}")
    with _be.cupy_module().cuda.Device(s.device_index):
        s.cupy_stream.use()


def is_current_stream_capturing() -> bool:
    """Whether a CUDA graph capture is running on this thread's current stream."""
    cp = _cupy("is_current_stream_capturing")
    return bool(cp.cuda.get_current_stream().is_capturing())


# ---------------------------------------------------------------- events
class Event:
    """A marker in a stream: record it, then wait for it or time the work between two of them.

    ``Event(enable_timing=False, blocking=False, interprocess=False)`` as in torch:
    timing must be asked for (it costs a little); blocking makes synchronize()
    sleep instead of spin.
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        cp = _cupy("Event")
        self.enable_timing = bool(enable_timing)
        self.cupy_event = cp.cuda.Event(block=bool(blocking), disable_timing=not enable_timing,
                                        interprocess=bool(interprocess))
        self.device_index = cp.cuda.runtime.getDevice()
        self._recorded = False

    def record(self, stream: Stream | None = None) -> None:
        """Mark this point of ``stream`` (the current stream by default)."""
        stream = current_stream() if stream is None else stream
        if not isinstance(stream, Stream):
            raise TypeError(f"Event.record expects an mp.cuda.Stream or None, got {type(stream).__name__}")
        self.cupy_event.record(stream.cupy_stream)
        self._recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        """Make ``stream`` (the current one by default) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        """True once the recorded work has happened (True for a never-recorded event, as CUDA says)."""
        return self.cupy_event.done

    def synchronize(self) -> None:
        """Wait on the host until the event has happened."""
        self.cupy_event.synchronize()
        device_checks.raise_device_errors(self.device_index)

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, both with enable_timing=True)."""
        if not isinstance(end_event, Event):
            raise TypeError(f"Event.elapsed_time expects an mp.cuda.Event, got {type(end_event).__name__}")
        for e, which in ((self, "start"), (end_event, "end")):
            if not e.enable_timing:
                raise RuntimeError(f"Event.elapsed_time: the {which} event was created without enable_timing=True")
            if not e._recorded:
                raise RuntimeError(f"Event.elapsed_time: the {which} event has not been recorded")
        if not end_event.query():
            raise RuntimeError("Event.elapsed_time: the end event has not happened yet; call "
                               "end_event.synchronize() first")
        return float(_be.cupy_module().cuda.get_elapsed_time(self.cupy_event, end_event.cupy_event))

    def __repr__(self):
        return f"<mp.cuda.Event device=cuda:{self.device_index} timing={self.enable_timing}>"
