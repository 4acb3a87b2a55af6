"""Array backends: NumPy for "cpu", CuPy for "cuda".

This is the only module that imports CuPy. Everything else asks it for the
array module of a device (``xp``) and for the few primitives NumPy and CuPy
spell differently.
"""
from __future__ import annotations

import threading

import numpy as np

from .dtypes import LOW_PRECISION

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


def from_dlpack(obj):
    """Import a DLPack capsule producer as a NumPy or CuPy array, zero-copy."""
    dev_type = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else 1
    if int(dev_type) in (1, 3):  # kDLCPU, kDLCUDAHost
        return np.from_dlpack(obj)
    if _cupy is None:
        raise DeviceUnavailableError(f"cannot import a CUDA DLPack tensor: {cuda_unavailable_reason()}")
    return _cupy.from_dlpack(obj)


def manual_seed(seed: int):
    if _cupy is not None and is_cuda_available():
        _cupy.random.seed(seed)


def cupy_module():
    """CuPy itself, for the few modules (kernels) that need its raw API; None without it."""
    return _cupy
