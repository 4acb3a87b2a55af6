"""Array backends: NumPy for "cpu", CuPy for "cuda".

This is the only module that imports CuPy. Everything else asks it for the
array module of a device (``xp``) and for the few primitives NumPy and CuPy
spell differently.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from .dtypes import LOW_PRECISION
from .dtypes import bfloat16 as BFLOAT16

try:  # CuPy is optional: mixprec runs on NumPy alone.
    import cupy as _cupy
    _CUPY_IMPORT_ERROR = None
except Exception as exc:  # ImportError, or a broken CUDA install raising at import
    _cupy = None
    _CUPY_IMPORT_ERROR = exc


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
    """Why "cuda" cannot be used, or None when it can."""
    if _cupy is None:
        return (f"CuPy is not installed or failed to import ({_CUPY_IMPORT_ERROR!r}); "
                "install mixprec[cuda12] or mixprec[cuda13]")
    try:
        n = _cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, driver too old, ...
        msg = str(exc)
        if "insufficient" in msg.lower() or "driver version" in msg.lower():
            return f"the NVIDIA driver is too old for this CuPy build ({msg})"
        return f"no usable CUDA device ({msg})"
    if n == 0:
        return "no CUDA device is visible (CUDA reports 0 devices)"
    return None


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
    """Copy an array to ``dev`` (no copy when it is already there)."""
    if dev.type == "cpu":
        return _cupy.asnumpy(a) if is_cupy_array(a) else a
    with _cupy.cuda.Device(dev.index):
        return _cupy.asarray(a)


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
        import cupyx
        cupyx.scatter_add(target, index, values)


def erf(a):
    """Elementwise error function, accurate to float64."""
    if is_cupy_array(a):
        import cupyx.scipy.special
        return cupyx.scipy.special.erf(a)
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
