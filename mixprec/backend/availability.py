"""Whether CUDA can be used, and when it cannot, why: no CuPy, no driver, a driver too old, no device,
or CuPy without its CUDA libraries."""
from __future__ import annotations

from .. import backend


class DeviceUnavailableError(RuntimeError):
    """Raised when a "cuda" device is asked for and none can be used."""


def cuda_unavailable_reason() -> str | None:
    """Why "cuda" cannot be used (no CuPy, no driver, a driver too old, no device), or None when it can."""
    cupy = backend._cupy
    if cupy is None:
        return (f"CuPy is not installed or failed to import ({backend._CUPY_IMPORT_ERROR!r}); "
                "install mixprec[cuda12] or mixprec[cuda13]")
    runtime = cupy.cuda.runtime
    try:
        driver = runtime.driverGetVersion()  # 0 when no NVIDIA driver is installed
    except Exception as exc:
        return f"the NVIDIA driver could not be queried ({exc})"
    if driver == 0:
        return "no NVIDIA driver is installed (CUDA reports driver version 0); CuPy is present but needs one"
    try:
        needed = runtime.runtimeGetVersion()
    except Exception:  # only read to explain a failure below
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
            getattr(cupy.cuda, library)
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
    return backend._cupy


def is_cuda_available() -> bool:
    return cuda_unavailable_reason() is None


def device_count() -> int:
    return backend._cupy.cuda.runtime.getDeviceCount() if is_cuda_available() else 0
