"""The stand-in's ``cupy.cuda``: one device, ordered streams, events, graph capture, memory pools, cuRAND.

Work runs when it is issued, so streams and events only keep order: a
``synchronize`` is counted (it would make the host wait) and returns. A
stream capture records instead of running (_state.py); the ``Graph`` it ends
with replays the records. The device reports itself as a compute capability
9.0 part with 80 GiB, so capability checks take the paths a current GPU takes.
"""
from __future__ import annotations

import ctypes
import types

import numpy as np

from . import _array, _state
from ._real import real
from ._state import CAPTURE, COUNTS, CURRENT, Capture, CaptureError

DEVICE_COUNT = 1
TOTAL_MEMORY = 80 * 2 ** 30
_PROPERTIES = {"name": b"strict CuPy stand-in (CPU)", "major": 9, "minor": 0, "totalGlobalMem": TOTAL_MEMORY,
               "multiProcessorCount": 132, "l2CacheSize": 50 * 2 ** 20, "integrated": 0, "warpSize": 32}


class CUDARuntimeError(RuntimeError):
    pass


def _check_device(index: int) -> int:
    index = int(index)
    if not 0 <= index < DEVICE_COUNT:
        raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
    return index


class Device:
    """``cupy.cuda.Device``: a context manager making a device current (there is one: 0)."""

    def __init__(self, device=None):
        self.id = CURRENT.device if device is None else _check_device(device)
        self._previous = []

    def use(self):
        CURRENT.device = self.id

    def __enter__(self):
        self._previous.append(CURRENT.device)
        CURRENT.device = self.id
        return self

    def __exit__(self, *exc):
        CURRENT.device = self._previous.pop()
        return False

    def synchronize(self):
        _sync("Device.synchronize()")

    @property
    def compute_capability(self) -> str:
        return f"{_PROPERTIES['major']}{_PROPERTIES['minor']}"

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("Device", self.id))

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


def _sync(what: str) -> None:
    if _state.capturing_here() is not None:
        raise CaptureError(f"{what} while the current stream captures: cudaErrorStreamCaptureUnsupported")
    COUNTS.syncs += 1


class Stream:
    """``cupy.cuda.Stream``: work on it runs in issue order; ``use``/``with`` make it current."""
    null: "Stream"
    _next_ptr = 0x1000

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        if null:
            self.ptr = 0
        else:
            Stream._next_ptr += 0x10
            self.ptr = Stream._next_ptr
        self.device_id = CURRENT.device
        self.non_blocking, self.priority = non_blocking, priority or 0
        self._previous = []

    def use(self):
        CURRENT.stream = None if self.ptr == 0 else self
        return self

    def __enter__(self):
        self._previous.append(CURRENT.stream)
        self.use()
        return self

    def __exit__(self, *exc):
        CURRENT.stream = self._previous.pop()
        return False

    @property
    def done(self) -> bool:
        return True

    def synchronize(self):
        _sync("Stream.synchronize()")

    def wait_event(self, event):
        pass

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def is_capturing(self) -> bool:
        cap = CAPTURE.current
        if cap is not None and self.ptr == 0 and cap.mode != real.cuda.runtime.streamCaptureModeRelaxed:
            raise CUDARuntimeError("cudaErrorStreamCaptureImplicit: operation would make the legacy stream "
                                   "depend on a capturing blocking stream")
        return cap is not None and cap.stream is self

    def begin_capture(self, mode=None):
        if self.ptr == 0:
            raise RuntimeError("cannot capture on the default (null) stream")
        if CAPTURE.current is not None:
            raise CUDARuntimeError("cudaErrorIllegalState: a stream is already capturing")
        CAPTURE.current = Capture(self, real.cuda.runtime.streamCaptureModeRelaxed if mode is None else mode)

    def end_capture(self):
        cap = CAPTURE.current
        if cap is None or cap.stream is not self:
            raise CUDARuntimeError("cudaErrorIllegalState: this stream is not capturing")
        CAPTURE.current = None
        return Graph(cap.records, cap.keep)

    def launch_host_func(self, callback, arg):
        callback(arg)

    def __eq__(self, other):
        return isinstance(other, Stream) and other.ptr == self.ptr

    def __hash__(self):
        return hash(("Stream", self.ptr))


Stream.null = Stream(null=True)


class ExternalStream(Stream):
    def __init__(self, ptr, device_id=-1):
        super().__init__()
        self.ptr = ptr


def get_current_stream(device_id=-1) -> Stream:
    return CURRENT.stream if CURRENT.stream is not None else Stream.null


class Graph:
    """A captured graph: ``launch`` replays the recorded work, in order, on the memory it was captured with."""

    def __init__(self, records, keep):
        self._records, self._keep = list(records), keep

    def launch(self, stream=None):
        if _state.capturing_here() is not None:
            raise CaptureError("launching a graph inside a capture is not supported by the stand-in")
        COUNTS.launches += 1
        for record in self._records:
            record()

    def upload(self, stream=None):
        pass


class Event:
    """``cupy.cuda.Event``: records are ordered no-ops; elapsed time is host time between records."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.block, self.disable_timing = block, disable_timing
        self._time = None
        self.ptr = id(self)

    def record(self, stream=None):
        import time
        self._time = time.perf_counter()

    @property
    def done(self) -> bool:
        return True

    def synchronize(self):
        _sync("Event.synchronize()")


def get_elapsed_time(start_event: Event, end_event: Event) -> float:
    if start_event.disable_timing or end_event.disable_timing:
        raise CUDARuntimeError("cudaErrorInvalidResourceHandle: an event was created with disable_timing")
    if start_event._time is None or end_event._time is None:
        raise CUDARuntimeError("cudaErrorInvalidResourceHandle: an event was not recorded")
    return (end_event._time - start_event._time) * 1000.0


# ---- memory ----------------------------------------------------------------------------------------------
class MemoryHook:
    """``cupy.cuda.MemoryHook``: entered, it sees each allocation (malloc_postprocess)."""
    name = "MemoryHook"

    def __enter__(self):
        _array.HOOKS.append(self)
        return self

    def __exit__(self, *exc):
        _array.HOOKS.remove(self)
        return False

    def malloc_preprocess(self, **kwargs):
        pass

    def malloc_postprocess(self, **kwargs):
        pass


class _AllocatorContext:
    def __init__(self, allocator):
        self.allocator = allocator
        self.previous = None

    def __enter__(self):
        self.previous = CURRENT.allocator
        CURRENT.allocator = self.allocator
        return self

    def __exit__(self, *exc):
        CURRENT.allocator = self.previous
        return False


def using_allocator(allocator=None):
    return _AllocatorContext(allocator)


def set_allocator(allocator=None):
    CURRENT.allocator = allocator


def get_allocator():
    return CURRENT.allocator or _array.DEFAULT_POOL.malloc


# ---- runtime ------------------------------------------------------------------------------------------------
def _make_runtime():
    rt = types.SimpleNamespace()
    for name in dir(real.cuda.runtime):  # the constants (capture modes, memcpy kinds...) are the real ones
        value = getattr(real.cuda.runtime, name)
        if not name.startswith("_") and isinstance(value, int):
            setattr(rt, name, value)
    rt.CUDARuntimeError = CUDARuntimeError
    rt.is_hip = False
    rt.getDeviceCount = lambda: DEVICE_COUNT
    rt.getDevice = lambda: CURRENT.device
    rt.setDevice = lambda index: setattr(CURRENT, "device", _check_device(index))
    rt.getDeviceProperties = lambda index: dict(_PROPERTIES) if _check_device(index) == 0 else None
    rt.runtimeGetVersion = lambda: real.cuda.runtime.runtimeGetVersion() \
        if _safe(real.cuda.runtime.runtimeGetVersion) else 13000
    rt.driverGetVersion = lambda: 13000
    rt.memGetInfo = lambda: (TOTAL_MEMORY - _array.DEFAULT_POOL.total_bytes(), TOTAL_MEMORY)
    rt.deviceSynchronize = lambda: _sync("deviceSynchronize()")
    rt.streamIsCapturing = lambda ptr: CAPTURE.current is not None and CAPTURE.current.stream.ptr == ptr
    return rt


def _safe(fn) -> bool:
    try:
        fn()
        return True
    except Exception:
        return False


runtime = _make_runtime()


class _Nvtx:
    """NVTX marks and ranges: nothing to show them to here; a pop without a push is an error, as in a profile."""
    available = True

    def __init__(self):
        self.depth = 0

    def RangePush(self, message, id_color=-1):
        self.depth += 1

    def RangePop(self):
        if self.depth == 0:
            raise RuntimeError("nvtx RangePop without a RangePush")
        self.depth -= 1

    def Mark(self, message, id_color=-1):
        pass

    def MarkC(self, message, id_color=-1):
        pass

    RangePushC = RangePush


nvtx = _Nvtx()

# cuRAND's generator types (cuRAND's own enum values; the stand-in cannot import the cuRAND library itself).
curand = types.SimpleNamespace(CURAND_RNG_PSEUDO_DEFAULT=100, CURAND_RNG_PSEUDO_XORWOW=101,
                               CURAND_RNG_PSEUDO_MRG32K3A=121, CURAND_RNG_PSEUDO_MTGP32=141,
                               CURAND_RNG_PSEUDO_PHILOX4_32_10=161, CURAND_RNG_PSEUDO_MT19937=142)


class RandomState:
    """``cupy.random.RandomState``: NumPy's Philox behind cuRAND's interface. Draws are deterministic for a
    seed but not cuRAND's numbers (a GPU's masks differ from the CPU's anyway); drawing is a cuRAND call, which
    CuPy refuses during a capture."""
    _default = None

    def __init__(self, seed=None, method=None):
        self.method = method
        self.seed(seed)

    @classmethod
    def default(cls) -> "RandomState":
        if cls._default is None:
            cls._default = RandomState()
        return cls._default

    def seed(self, seed=None):
        self._gen = np.random.Generator(np.random.Philox(None if seed is None else int(seed) % 2 ** 64))

    def _draw(self, fn):
        _state.library_call("cuRAND")
        return _array.new(_array.compute(fn))

    def random_sample(self, size=None, dtype=float):
        return self._draw(lambda: self._gen.random(size, dtype=np.dtype(dtype)))

    def rand(self, *size, dtype=float):
        return self.random_sample(size, dtype)

    def uniform(self, low=0.0, high=1.0, size=None, dtype=float):
        return self._draw(lambda: self._gen.uniform(low, high, size).astype(dtype))

    def standard_normal(self, size=None, dtype=float):
        return self._draw(lambda: self._gen.standard_normal(size, dtype=np.dtype(dtype)))

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=float):
        return self._draw(lambda: self._gen.normal(loc, scale, size).astype(dtype))

    def randn(self, *size, dtype=float):
        return self.standard_normal(size, dtype)

    def randint(self, low, high=None, size=None, dtype=int):
        return self._draw(lambda: self._gen.integers(low, high, size, dtype=dtype))


# ---- cuBLAS: the GEMMs mixprec calls on libcublas directly, on raw pointers -----------------------------------
_CUDA_DTYPES = {0: np.dtype(np.float32), 1: np.dtype(np.float64), 2: np.dtype(np.float16),
                14: np.dtype("bfloat16")}  # cudaDataType: CUDA_R_32F, _64F, _16F, _16BF


def _column_major(pointer, dtype, rows, cols, ld, stride, count):
    """(a (count, rows, cols) view of column-major matrices at a device pointer, the memory it lies in)."""
    item = dtype.itemsize
    extent = ((count - 1) * stride + (cols - 1) * ld + rows) * item if rows and cols else item
    root, _ = _array.memory_at(pointer, extent)
    raw = np.ctypeslib.as_array((ctypes.c_uint8 * extent).from_address(pointer)).view(dtype)
    return np.lib.stride_tricks.as_strided(raw, (count, rows, cols), (stride * item, item, ld * item)), root


def _gemm(transa, transb, m, n, k, alpha, A, Atype, lda, stride_a, B, Btype, ldb, stride_b, beta, C, Ctype, ldc,
          stride_c, count, compute_type):
    """C = alpha op(A) op(B) + beta C, column-major, accumulated in the compute type and rounded once; recorded
    while the current stream captures (cuBLAS supports capture; only CuPy's binding refuses it)."""
    if Atype != Btype or Atype not in _CUDA_DTYPES or Ctype not in _CUDA_DTYPES:
        raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED: this type combination")
    wide = np.float64 if compute_type in (70, 71) else np.float32  # CUBLAS_COMPUTE_64F(_PEDANTIC)
    scalar = ctypes.c_double if wide is np.float64 else ctypes.c_float
    a_val, b_val = scalar.from_address(alpha).value, scalar.from_address(beta).value
    a_rows, a_cols = (m, k) if transa == 0 else (k, m)
    b_rows, b_cols = (k, n) if transb == 0 else (n, k)
    a, a_memory = _column_major(A, _CUDA_DTYPES[Atype], a_rows, a_cols, lda, stride_a, count)
    b, b_memory = _column_major(B, _CUDA_DTYPES[Btype], b_rows, b_cols, ldb, stride_b, count)
    c, c_memory = _column_major(C, _CUDA_DTYPES[Ctype], m, n, ldc, stride_c, count)

    def run(memory=(a_memory, b_memory, c_memory)):  # the record holds the memory it reads and writes
        with np.errstate(all="ignore"):  # a GPU's inf and NaN are silent
            op_a = a.astype(wide) if transa == 0 else np.swapaxes(a, -1, -2).astype(wide)
            op_b = b.astype(wide) if transb == 0 else np.swapaxes(b, -1, -2).astype(wide)
            result = wide(a_val) * (op_a @ op_b)
            if b_val != 0:  # beta = 0: C is not read (it may hold NaN)
                result = result + wide(b_val) * c.astype(wide)
            c[...] = result.astype(c.dtype)
    _array.mutate(run)


class LibCublas:
    """libcublas itself, as mixprec's ctypes calls see it (mixprec.backend.cuda_libraries): no capture check
    of CuPy's."""

    def check(self, function, *args):
        if function in ("cublasSetStream_v2", "cublasSetMathMode"):  # (the twin always sums in the compute type)
            return
        if function == "cublasGetMathMode":
            args[1]._obj.value = 0  # CUBLAS_DEFAULT_MATH (args[1]: ctypes.byref of a c_int)
            return
        if function == "cublasGemmEx":
            (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc, compute,
             algo) = args
            _gemm(transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1,
                  compute)
        elif function == "cublasGemmStridedBatchedEx":
            (handle, transa, transb, m, n, k, alpha, A, Atype, lda, stride_a, B, Btype, ldb, stride_b, beta, C, Ctype,
             ldc, stride_c, count, compute, algo) = args
            _gemm(transa, transb, m, n, k, alpha, A, Atype, lda, stride_a, B, Btype, ldb, stride_b, beta, C, Ctype,
                  ldc, stride_c, count, compute)
        else:
            raise AttributeError(f"the strict CuPy stand-in's libcublas has no {function}")


# CuPy's cuBLAS binding (cupy.cuda.cublas): it loads, but mixprec calls libcublas itself (ops/gemm.py), so the
# stand-in plays none of the binding's functions.
cublas = types.SimpleNamespace()


def make_module():
    cuda = types.ModuleType("strict_cupy.cuda")
    cuda.Device, cuda.Stream, cuda.ExternalStream, cuda.Event, cuda.Graph = Device, Stream, ExternalStream, Event, Graph
    cuda.get_current_stream, cuda.get_elapsed_time = get_current_stream, get_elapsed_time
    cuda.MemoryPool, cuda.MemoryPointer, cuda.MemoryHook = _array.MemoryPool, _array.MemoryPointer, MemoryHook
    cuda.PinnedMemoryPool = _array.MemoryPool
    cuda.using_allocator, cuda.set_allocator, cuda.get_allocator = using_allocator, set_allocator, get_allocator
    cuda.runtime, cuda.nvtx, cuda.curand = runtime, nvtx, curand
    cuda.is_available = lambda: True
    cuda.CUDARuntimeError = CUDARuntimeError
    cuda.cublas = cublas
    cuda.device = types.SimpleNamespace(Device=Device, get_device_id=lambda: CURRENT.device,
                                        get_cublas_handle=lambda: 0x5eed)
    return cuda
