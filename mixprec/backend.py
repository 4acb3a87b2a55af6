"""Array backends: NumPy for "cpu", CuPy for "cuda".

This is the only module that imports CuPy. Everything else asks it for the
array module of a device (``xp``) and for the few primitives NumPy and CuPy
spell differently.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading

import numpy as np

from .dtypes import LOW_PRECISION
from .dtypes import bfloat16 as BFLOAT16


def _import_cupy():
    """(cupy, cupyx, the stand-in or None, the import error): CuPy is optional, mixprec runs on NumPy alone.
    MIXPREC_CUPY=strict takes mixprec.strict_cupy instead, the strict stand-in that runs the CUDA path on the
    CPU under CuPy's rules."""
    choice = os.environ.get("MIXPREC_CUPY", "")
    if choice == "strict":  # (a stand-in that cannot load is an error, not "no GPU")
        from . import strict_cupy
        return strict_cupy.cupy, strict_cupy.cupyx, strict_cupy, None
    if choice:
        raise ValueError(f"MIXPREC_CUPY={choice!r}: the one value it takes is 'strict' (unset: the real CuPy)")
    try:
        import cupy
        try:
            import cupyx  # (ships with CuPy; missing only from a partial install)
        except ImportError:
            cupyx = None
        return cupy, cupyx, None, None
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return None, None, None, exc


_cupy, _cupyx, _standin, _CUPY_IMPORT_ERROR = _import_cupy()


class DeviceUnavailableError(RuntimeError):
    """Raised when a "cuda" device is asked for and none can be used."""


class Device:
    """A place arrays live: ``Device("cpu")`` or ``Device("cuda", 0)``.

    Compares equal to its string form: ``t.device == "cpu"``, ``t.device == "cuda:0"``
    (a bare "cuda" matches any CUDA device).
    """

    __slots__ = ("type", "index")

    def __init__(self, type: str, index: int | None = None):
        if type not in ("cpu", "cuda"):
            raise ValueError(f"unknown device type {type!r}; expected 'cpu' or 'cuda'")
        if index is not None and (not isinstance(index, int) or index < 0 or type == "cpu" and index != 0):
            raise ValueError(f"invalid device index {index!r} for {type!r}")
        self.type = type
        self.index = None if type == "cpu" else index

    def __repr__(self):
        return f"device('{self}')"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if other is self:  # (one object per device: CPU, and each cuda:i made once)
            return True
        if isinstance(other, str):
            try:
                type_, index = _parse(other)
            except (TypeError, ValueError):
                return False
            return self.type == type_ and (index is None or index == self.index)
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


def _parse(spec: str):
    """Split "cpu", "cuda" or "cuda:N" into (type, index); syntax only, no GPU check."""
    name, colon, idx = spec.partition(":")
    if name == "cpu" and (not colon or idx == "0"):
        return "cpu", None
    if name != "cuda" or (colon and not idx.isdigit()):
        raise ValueError(f"unknown device {spec!r}; expected 'cpu', 'cuda' or 'cuda:N'")
    return "cuda", int(idx) if colon else None


CPU = Device("cpu")
_cuda_devices: dict[int, Device] = {}


def cuda_unavailable_reason() -> str | None:
    """Why "cuda" cannot be used (no CuPy, no driver, a driver too old, no device), or None when it can."""
    if _cupy is None:
        return (f"CuPy is not installed or failed to import ({_CUPY_IMPORT_ERROR!r}); "
                "install mixprec[cuda12] or mixprec[cuda13]")
    runtime = _cupy.cuda.runtime
    try:
        driver = runtime.driverGetVersion()  # 0 when no NVIDIA driver is installed
    except Exception as exc:
        return f"the NVIDIA driver could not be queried ({exc})"
    if driver == 0:
        return "no NVIDIA driver is installed (CUDA reports driver version 0); CuPy is present but needs one"
    try:
        needed = runtime.runtimeGetVersion()
    except Exception:  # only used to explain a failure below
        needed = 0
    try:
        n = runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: driver too old, no device, ...
        if driver < needed:
            return (f"the NVIDIA driver is too old: it supports CUDA {cuda_version_text(driver)}, this CuPy build "
                    f"needs CUDA {cuda_version_text(needed)} ({exc})")
        return f"no usable CUDA device ({exc})"
    if n == 0:
        return "no CUDA device is visible (CUDA reports 0 devices)"
    for library in ("cublas", "curand"):  # CuPy loads these on first use; without them no step can run
        try:
            getattr(_cupy.cuda, library)
        except Exception as exc:
            return (f"CuPy cannot load its CUDA library lib{library} ({exc}); install CuPy with its CUDA libraries: "
                    "pip install \"mixprec[cuda13]\" (or [cuda12]), which asks for cupy-cuda13x[ctk]")
    return None


def cuda_version_text(code: int) -> str:
    """CUDA's integer version (12090) as text ("12.9")."""
    return f"{code // 1000}.{code % 1000 // 10}"


def require_cuda(what: str):
    """CuPy, when a GPU can be used; otherwise DeviceUnavailableError naming ``what`` and why."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        raise DeviceUnavailableError(f"{what} needs a CUDA GPU, but {reason}")
    return _cupy


def is_cuda_available() -> bool:
    return cuda_unavailable_reason() is None


def device_count() -> int:
    return _cupy.cuda.runtime.getDeviceCount() if is_cuda_available() else 0


def as_device(spec) -> Device:
    """Parse "cpu", "cuda", "cuda:1" or a Device; "cuda" checks a GPU is usable."""
    if isinstance(spec, Device):  # canonicalise (and check) a Device built by hand
        return CPU if spec.type == "cpu" else as_device(str(spec))
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string like 'cpu' or 'cuda:0' or a Device, got {spec!r}")
    type_, index = _parse(spec)
    if type_ == "cpu":
        return CPU
    if index is None or index not in _cuda_devices:
        reason = cuda_unavailable_reason()
        if reason is not None:
            raise DeviceUnavailableError(f"device {spec!r} is not available: {reason}")
        if index is None:
            index = _cupy.cuda.runtime.getDevice()
        n = _cupy.cuda.runtime.getDeviceCount()
        if index >= n:
            raise DeviceUnavailableError(f"device {spec!r} is not available: only {n} CUDA device(s)")
        _cuda_devices.setdefault(index, Device("cuda", index))
    return _cuda_devices[index]


# ---- default device (thread-local, like the grad mode) ----
class _DefaultDevice(threading.local):
    device = CPU  # each thread starts on the CPU


_local = _DefaultDevice()


def get_default_device() -> Device:
    return _local.device


def set_default_device(spec) -> None:
    _local.device = as_device(spec)


class device:
    """``with mp.device("cuda"):`` makes creation functions allocate there."""

    def __init__(self, spec):
        self.device = as_device(spec)

    def __enter__(self):
        self._prev = get_default_device()
        _local.device = self.device
        if self.device.type == "cuda":
            self._cuda_ctx = _cupy.cuda.Device(self.device.index)
            self._cuda_ctx.__enter__()
        return self.device

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            self._cuda_ctx.__exit__(*exc)
        _local.device = self._prev
        return False


# ---- arrays ----
def xp_of(dev: Device):
    """The array module (numpy or cupy) for a device."""
    return np if dev.type == "cpu" else _cupy


def is_array(obj) -> bool:
    return isinstance(obj, np.ndarray) or (_cupy is not None and isinstance(obj, _cupy.ndarray))


def array_module(a):
    """numpy or cupy, whichever owns array ``a``."""
    return np if isinstance(a, np.ndarray) else _cupy


def is_cupy_array(obj) -> bool:
    return _cupy is not None and isinstance(obj, _cupy.ndarray)


def device_of_array(a) -> Device:
    if isinstance(a, np.ndarray):
        return CPU
    return _cuda_devices.get(a.device.id) or as_device(f"cuda:{a.device.id}")


def to_device(a, dev: Device):
    """Copy an array to ``dev`` (no copy when it is already there).

    A copy to the host waits for the GPU, so it is also where checks that the
    GPU made without waiting (``check``) report what they found: when some are
    pending, the array and their flags come over in one transfer (through a
    contiguous device copy of the array), so the host waits once.
    """
    if dev.type == "cpu":
        if is_cupy_array(a):
            index = a.device.id
            if index not in _check_pending or is_capturing():
                return _cupy.asnumpy(a)
            # one transfer for both, so the host waits once: the array, and what the GPU's checks found
            with _cupy.cuda.Device(index):
                both = _cupy.concatenate([_cupy.ascontiguousarray(a).reshape(-1).view(np.uint8),
                                          _check_flags[index].view(np.uint8)])
            host = _cupy.asnumpy(both)
            _check_pending.discard(index)
            _report_device_errors(index, host[a.nbytes:].view(np.int32))
            return host[:a.nbytes].view(a.dtype).reshape(a.shape)
        return a
    require_dtype_support(a.dtype, dev)
    with _cupy.cuda.Device(dev.index):
        return _cupy.asarray(a)


def to_host(a, pinned: bool = False):
    """A host (NumPy) copy of a device array; ``pinned`` puts it in page-locked memory
    (cupyx.empty_pinned), from which the copy back to the device can be asynchronous."""
    if not is_cupy_array(a):
        return a
    if not pinned:
        return to_device(a, CPU)
    with _cupy.cuda.Device(a.device.id):
        out = _cupyx.empty_pinned(a.shape, dtype=a.dtype)
        _cupy.ascontiguousarray(a).get(out=out)
    raise_device_errors(a.device.id)
    return out


# ---- what the installed CuPy can hold ----
_CUPY_FOR_BFLOAT16, _NUMPY_FOR_BFLOAT16 = (14, 0, 0), (2, 1, 2)


def version_tuple(text: str) -> tuple:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits or 0))
    return tuple(parts + [0] * (3 - len(parts)))


def cuda_bfloat16_unsupported_reason(cupy_version=None, numpy_version=None) -> str | None:
    """Why bfloat16 arrays cannot live on the GPU with these versions, or None when they can.

    CuPy learned bfloat16 (through ml_dtypes) in 14.0, and it needs NumPy
    2.1.2 or newer for it; CuPy 13 raises "Unsupported dtype bfloat16".
    """
    cupy_version = cupy_version or (_cupy.__version__ if _cupy is not None else "0")
    numpy_version = numpy_version or np.__version__
    if version_tuple(cupy_version) >= _CUPY_FOR_BFLOAT16 and version_tuple(numpy_version) >= _NUMPY_FOR_BFLOAT16:
        return None
    return (f"bfloat16 on CUDA needs CuPy >= 14.0 and NumPy >= 2.1.2, this environment has CuPy {cupy_version} "
            f"and NumPy {numpy_version} (pip install 'cupy-cuda12x>=14' 'numpy>=2.1.2', or use float16)")


def require_dtype_support(dtype, dev: Device) -> None:
    """A clear TypeError, before CuPy's own, when ``dtype`` cannot live on ``dev``."""
    if dtype == BFLOAT16 and dev.type == "cuda":
        reason = cuda_bfloat16_unsupported_reason()
        if reason is not None:
            raise TypeError(reason)


# ---- stream capture (mp.cuda.graph): work that cannot be recorded in a graph asks here ----
class _CaptureState(threading.local):
    active = False


_capture = _CaptureState()


def is_capturing() -> bool:
    """True between CUDAGraph.capture_begin and capture_end in this thread."""
    return _capture.active


def set_capturing(active: bool) -> None:
    _capture.active = active


# ---- checks the GPU makes without the host waiting (torch's device-side asserts) ----
_CHECK_SLOTS = 32  # distinct messages tracked per device; the last slot gathers any beyond
_check_flags: dict[int, object] = {}  # device index -> int32 flags on that device, one per message
_check_messages: dict[tuple, int] = {}  # (exception type, message) -> slot
_check_pending: set[int] = set()  # devices with flags set since they were last read


def device_check_flags(index: int):
    """The device's flag array, made on first use (and before a graph capture, so none is made inside one)."""
    flags = _check_flags.get(index)
    if flags is None:
        with _cupy.cuda.Device(index):
            flags = _check_flags[index] = _cupy.zeros(_CHECK_SLOTS, dtype=np.int32)
    return flags


def check(bad, error: type, message: str, culprit=None) -> None:
    """Raise ``error(message)`` if any element of the bool array ``bad`` is True.

    On the CPU the check happens now, and ``culprit()`` (if given) names the
    offending values. On a GPU, reading ``bad`` would make the host wait for
    the GPU at every call; instead the GPU sets a flag (no wait), and the
    error is raised at the next point that waits anyway: mp.cuda.synchronize,
    Stream/Event.synchronize, or a copy to the host. torch's device-side
    asserts are reported the same way, late.
    """
    if isinstance(bad, np.ndarray):
        if bad.size and bad.any():
            raise error(message if culprit is None else f"{message}; got {culprit()}")
        return
    if bad.size == 0:
        return
    index = bad.device.id
    slot = _check_messages.setdefault((error, message), min(len(_check_messages), _CHECK_SLOTS - 1))
    flag = device_check_flags(index)[slot:slot + 1]
    _cupy.bitwise_or(flag, bad.any(), out=flag)
    _check_pending.add(index)


def raise_device_errors(index: int | None = None) -> None:
    """Raise what ``check`` found on a device (all devices when index is None); call only where the host waits."""
    for dev in [index] if index is not None else list(_check_pending):
        if dev not in _check_pending or is_capturing():
            continue
        _check_pending.discard(dev)
        _report_device_errors(dev, _cupy.asnumpy(_check_flags[dev]))


def _report_device_errors(dev: int, found) -> None:
    """Raise what the flags read back from device ``dev`` (found, on the host) say ``check`` found; clear them."""
    if not found.any():
        return
    _check_flags[dev].fill(0)
    failed = [(err, msg) for (err, msg), slot in _check_messages.items() if found[slot]]
    error = failed[0][0]
    listed = "; ".join(msg for _, msg in failed)
    raise error(f"{listed} (found on cuda:{dev} by an earlier call, reported here where the host waits "
                "for the GPU)")


def discard_device_errors() -> None:
    """Forget what ``check`` found that was never reported (tests start each test from clean flags with it)."""
    for dev in list(_check_pending):
        _check_pending.discard(dev)
        _check_flags[dev].fill(0)


def on_device(dev: Device):
    """A context manager that makes ``dev`` CuPy's current device (no-op on cpu)."""
    if dev.type == "cuda":
        return _cupy.cuda.Device(dev.index)
    return _NULL_CONTEXT


class _NullContext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NULL_CONTEXT = _NullContext()


def scatter_add(target, index, values):
    """target[index] += values, summing repeated indices (in place).

    float16/bfloat16 targets accumulate in float32 and round once, like the
    reductions: adding many small values one rounding at a time in half
    precision would lose them (and CuPy has no bfloat16 atomic add).
    """
    if target.dtype in LOW_PRECISION:
        wide = target.astype(np.float32)
        scatter_add(wide, index, values.astype(np.float32) if hasattr(values, "astype") else values)
        target[...] = wide.astype(target.dtype)
    elif isinstance(target, np.ndarray):
        np.add.at(target, index, values)
    else:
        _cupyx.scatter_add(target, index, values)


def where(condition, a, b):
    """``a`` where condition holds, else ``b``, keeping their dtype exactly.

    CuPy's where has no bfloat16 loop: it would return float32. Selecting
    never changes a value, so bfloat16 operands are selected as their 16-bit
    patterns (a free view), on NumPy and CuPy alike.
    """
    xp = array_module(condition)
    dtype = getattr(a, "dtype", None)
    if dtype != BFLOAT16 or getattr(b, "dtype", None) != BFLOAT16:
        return xp.where(condition, a, b)
    return xp.where(condition, _bits16(a), _bits16(b)).view(BFLOAT16)


def _bits16(v):
    """A bfloat16 array's uint16 view, or a bfloat16 scalar's bits as a NumPy uint16 scalar."""
    if is_array(v):
        return v.view(np.uint16)
    return np.uint16(np.asarray(v, dtype=BFLOAT16).view(np.uint16).item())


def open_grid(xp, shape):
    """``xp.indices(shape, sparse=True)``: one arange per axis, shaped to broadcast against the others.

    CuPy's ``indices`` has no ``sparse`` argument, so this builds the grid from aranges.
    """
    ndim = len(shape)
    return tuple(xp.arange(n).reshape((1,) * axis + (n,) + (1,) * (ndim - axis - 1)) for axis, n in enumerate(shape))


def uniform_on_device(shape, dev: Device, seed: int):
    """float32 samples in [0, 1) made on the GPU by cuRAND's Philox generator, started from ``seed``.

    For dropout: drawing a mask on the host and copying it over would make the
    host wait for the GPU at every call. mixprec's one generator (on the host)
    supplies ``seed``, so its state still determines every draw. A graph
    replays the same seed at every replay, so capturing a random draw is refused.
    """
    if is_capturing():
        raise RuntimeError("a random draw (dropout) cannot be captured in a CUDA graph: mixprec's generator lives "
                           "on the host, so every replay would reuse one mask; capture the model in eval mode or "
                           "without dropout")
    with _cupy.cuda.Device(dev.index):
        state = _philox.get(dev.index)
        if state is None:
            state = _philox[dev.index] = _cupy.random.RandomState(
                seed, method=_cupy.cuda.curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
        else:
            state.seed(seed)  # host-side: sets the generator's seed and offset, launches nothing
        return state.random_sample(shape, dtype=np.float32)


_philox: dict[int, object] = {}


def linalg_errors(xp):
    """A context in which a failed factorization (singular, not positive-definite) raises
    numpy.linalg.LinAlgError on CuPy as it always does on NumPy: CuPy checks cuSOLVER's info
    (a device sync, as torch's checked linalg ops do) only inside cupyx.errstate(linalg="raise")."""
    if xp is np:
        return contextlib.nullcontext()
    return _cupyx.errstate(linalg="raise")


def erf(a):
    """Elementwise error function, accurate to float64."""
    if is_cupy_array(a):
        return _cupyx.scipy.special.erf(a)
    try:
        from scipy.special import erf as _erf
    except ImportError:  # no SciPy: the exact but slower stdlib routine
        import math
        _erf = np.vectorize(math.erf, otypes=[np.float64])
    return _erf(a.astype(np.float64) if a.dtype != np.float32 else a).astype(a.dtype, copy=False)


# ---- DLPack ----
# NumPy's DLPack refuses ml_dtypes' bfloat16 in both directions (it knows only
# int/uint/float/complex codes). A bfloat16 array is a run of 16-bit words, so on
# the CPU mixprec exchanges its uint16 view and rewrites the dtype code inside
# the DLPack capsule between kDLUInt and kDLBfloat: still zero-copy.
_KDL_CPU, _KDL_CUDA_HOST = 1, 3
_KDL_UINT, _KDL_BFLOAT = 1, 4


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensorHead(ctypes.Structure):
    """The leading fields of DLPack's DLTensor, up to its dtype."""
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _capsule_dtype(capsule) -> _DLDataType:
    """The (writable) dtype field of the DLTensor inside a DLPack capsule."""
    name = _capsule_name(capsule)
    # DLManagedTensor starts with the DLTensor; DLManagedTensorVersioned puts
    # version (8 bytes), manager_ctx, deleter and flags (8 each) before it.
    offset = {b"dltensor": 0, b"dltensor_versioned": 32}[name]
    return _DLTensorHead.from_address(_capsule_pointer(capsule, name) + offset).dtype


class _CapsuleOwner:
    """Hands an already made capsule to a consumer's from_dlpack."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def to_dlpack(a, *args, **kwargs):
    """A DLPack capsule for array ``a`` (what Tensor.__dlpack__ returns)."""
    if isinstance(a, np.ndarray) and a.dtype == BFLOAT16:
        capsule = a.view(np.uint16).__dlpack__(*args, **kwargs)  # keeps the view (and so ``a``) alive
        _capsule_dtype(capsule).code = _KDL_BFLOAT
        return capsule
    return a.__dlpack__(*args, **kwargs)


def from_dlpack(obj):
    """Import a DLPack producer as a NumPy or CuPy array, zero-copy."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack expects an object with __dlpack__ (an array or tensor), "
                        f"got {type(obj).__name__}")
    dev_type, dev_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (_KDL_CPU, 0)
    if isinstance(obj, np.ndarray):
        return obj.view()  # NumPy itself cannot export bfloat16; a view is the zero-copy import
    if int(dev_type) in (_KDL_CPU, _KDL_CUDA_HOST):
        try:  # a versioned capsule: NumPy makes legacy ones read-only
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0
            capsule = obj.__dlpack__()
        dtype = _capsule_dtype(capsule)
        if dtype.code == _KDL_BFLOAT and dtype.bits == 16:
            dtype.code = _KDL_UINT
            return np.from_dlpack(_CapsuleOwner(capsule, (dev_type, dev_id))).view(BFLOAT16)
        return np.from_dlpack(_CapsuleOwner(capsule, (dev_type, dev_id)))
    if _cupy is None:
        raise DeviceUnavailableError(f"cannot import a CUDA DLPack tensor: {cuda_unavailable_reason()}")
    return _cupy.from_dlpack(obj)


def manual_seed(seed: int):
    if _cupy is not None and is_cuda_available():
        _cupy.random.seed(seed)


def cupy_module():
    """CuPy itself, for the few modules (kernels) that need its raw API; None without it."""
    return _cupy


def strict_standin():
    """mixprec.strict_cupy when MIXPREC_CUPY=strict made it this process's CuPy, else None."""
    return _standin


# ---- CUDA libraries called directly ----
_CUBLAS_STATUS = {1: "NOT_INITIALIZED", 3: "ALLOC_FAILED", 7: "INVALID_VALUE", 8: "ARCH_MISMATCH",
                  11: "MAPPING_ERROR", 13: "EXECUTION_FAILED", 14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED"}


class CudaLibrary:
    """A CUDA library's C functions called through ctypes, each declared by its argument types."""

    def __init__(self, name: str, cdll, signatures: dict):
        self.name, self._cdll, self._signatures, self._functions = name, cdll, signatures, {}

    def check(self, function: str, *args) -> None:
        """Call ``function``; a status other than 0 raises RuntimeError naming it."""
        fn = self._functions.get(function)
        if fn is None:
            fn = self._functions[function] = getattr(self._cdll, function)
            fn.argtypes, fn.restype = self._signatures[function], ctypes.c_int
        status = fn(*args)
        if status != 0:
            raise RuntimeError(f"{function} failed: CUBLAS_STATUS_{_CUBLAS_STATUS.get(status, status)}")


_libraries: dict = {}


def cuda_library(name: str, signatures: dict):
    """The CUDA library ``name`` ("cublas") as ctypes calls it: the copy CuPy loaded (its handles work with
    it), or the strict stand-in's twin under MIXPREC_CUPY=strict. For calls CuPy does not offer, or refuses
    inside a CUDA-graph capture."""
    if _standin is not None:
        return _standin.library(name)
    lib = _libraries.get(name)
    if lib is None:
        lib = _libraries[name] = CudaLibrary(name, ctypes.CDLL(_library_path(name)), signatures)
    return lib


def _library_path(name: str) -> str:
    """Where lib<name> is: the copy CuPy loaded (its handles belong to that copy). CuPy 14 loads its libraries
    through the CUDA path finder, which remembers them; else the copy this process has mapped; else the
    system's library path."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        return load_nvidia_dynamic_lib(name).abs_path
    except Exception:  # no path finder (an older CuPy), or it found nothing: look at what is mapped
        pass
    prefix = f"lib{name}.so"
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if os.path.basename(path).startswith(prefix):
                    return path
    except OSError:
        pass
    found = ctypes.util.find_library(name)
    if found is None:
        raise DeviceUnavailableError(f"the CUDA library lib{name} was not found (install CuPy with its CUDA "
                                     "libraries: mixprec[cuda12] or mixprec[cuda13])")
    return found
