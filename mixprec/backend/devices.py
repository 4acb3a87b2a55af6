"""Devices: ``Device``, parsing "cpu", "cuda" and "cuda:N", the default device, and copies between devices."""
from __future__ import annotations

import numpy as np

from .. import backend
from .._state import PER_THREAD
from . import device_checks
from .availability import DeviceUnavailableError, cuda_unavailable_reason
from .bfloat16 import require_dtype_support


class Device:
    """A place arrays live, torch.device's twin (``mp.device is mp.Device``): ``mp.device("cpu")``,
    ``mp.device("cuda")``, ``mp.device("cuda", 1)``, ``mp.device("cuda:1")`` or ``mp.device(other_device)``.

    Making one checks its spelling only, so it works without a GPU, as torch's does;
    using a CUDA one (allocating, entering it) needs one. Compares equal to its string
    form: ``t.device == "cpu"``, ``t.device == "cuda:0"`` (a bare "cuda" string matches
    any CUDA device); two Devices are equal when type and index are (``device("cuda")``,
    whose index is None, is not ``device("cuda:0")``, as in torch). ``with mp.device("cuda"):``
    makes creation functions allocate there.
    """

    __slots__ = ("type", "index")

    def __init__(self, type: str, index: int | None = None):
        if isinstance(type, Device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, str) and ":" in type and index is None:
            type, index = parse(type)
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
                type_, index = parse(other)
            except (TypeError, ValueError):
                return False
            return self.type == type_ and (index is None or index == self.index)
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __enter__(self):
        dev = as_device(self)  # a CUDA device is checked for a usable GPU here
        cuda_ctx = backend._cupy.cuda.Device(dev.index) if dev.type == "cuda" else None
        if cuda_ctx is not None:
            cuda_ctx.__enter__()
        state = PER_THREAD.devices
        state.entered = state.entered + ((get_default_device(), cuda_ctx),)
        state.default = dev
        return dev

    def __exit__(self, *exc):
        state = PER_THREAD.devices
        (prev, cuda_ctx), state.entered = state.entered[-1], state.entered[:-1]
        if cuda_ctx is not None:
            cuda_ctx.__exit__(*exc)
        state.default = prev
        return False


def parse(spec: str):
    """Split "cpu", "cuda" or "cuda:N" into (type, index); syntax only, no GPU check."""
    name, colon, idx = spec.partition(":")
    if name == "cpu" and (not colon or idx == "0"):
        return "cpu", None
    if name != "cuda" or (colon and not idx.isdigit()):
        raise ValueError(f"unknown device {spec!r}; expected 'cpu', 'cuda' or 'cuda:N'")
    return "cuda", int(idx) if colon else None


CPU = Device("cpu")
_cuda_devices: dict[int, Device] = {}


def as_device(spec) -> Device:
    """Parse "cpu", "cuda", "cuda:1" or a Device; "cuda" checks a GPU is usable."""
    if isinstance(spec, Device):  # canonicalise (and check) a Device built by hand
        return CPU if spec.type == "cpu" else as_device(str(spec))
    if not isinstance(spec, str):
        raise TypeError(f"device must be a string like 'cpu' or 'cuda:0' or a Device, got {spec!r}")
    type_, index = parse(spec)
    if type_ == "cpu":
        return CPU
    if index is None or index not in _cuda_devices:
        reason = cuda_unavailable_reason()
        if reason is not None:
            raise DeviceUnavailableError(f"device {spec!r} is not available: {reason}")
        runtime = backend._cupy.cuda.runtime
        if index is None:
            index = runtime.getDevice()
        n = runtime.getDeviceCount()
        if index >= n:
            raise DeviceUnavailableError(f"device {spec!r} is not available: only {n} CUDA device(s)")
        _cuda_devices.setdefault(index, Device("cuda", index))
    return _cuda_devices[index]


def device_of_array(a) -> Device:
    """The device an array lives on: a CuPy array's GPU, the CPU for NumPy arrays and scalars."""
    if isinstance(a, (np.ndarray, np.generic)) or not backend.is_cupy_array(a):
        return CPU
    return _cuda_devices.get(a.device.id) or as_device(f"cuda:{a.device.id}")


# ---- default device (per thread, like the grad mode: PER_THREAD.devices.default, which this module writes) ----
def get_default_device() -> Device:
    return PER_THREAD.devices.default or CPU  # (each thread starts on the CPU)


def set_default_device(spec) -> None:
    PER_THREAD.devices.default = as_device(spec)


device = Device  # torch.device is both the type and the context manager: so is mp.device


def on_device(dev: Device):
    """A context manager that makes ``dev`` CuPy's current device (no-op on cpu)."""
    if dev.type == "cuda":
        return backend._cupy.cuda.Device(dev.index)
    return _NULL_CONTEXT


class _NullContext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NULL_CONTEXT = _NullContext()


# ---- copies ----
def to_device(a, dev: Device):
    """Copy an array to ``dev`` (no copy when it is already there).

    A copy to the host waits for the GPU, so it also reports what the GPU's
    checks found (``device_checks.asnumpy``).
    """
    if dev.type == "cpu":
        return device_checks.asnumpy(a) if backend.is_cupy_array(a) else a
    require_dtype_support(a.dtype, dev)
    cupy = backend._cupy
    with cupy.cuda.Device(dev.index):
        return cupy.asarray(a)


def to_host(a, pinned: bool = False):
    """A host (NumPy) copy of a device array; ``pinned`` puts it in page-locked memory
    (cupyx.empty_pinned), from which the copy back to the device can be asynchronous."""
    if not backend.is_cupy_array(a):
        return a
    if not pinned:
        return to_device(a, CPU)
    cupy = backend._cupy
    with cupy.cuda.Device(a.device.id):
        out = backend._cupyx.empty_pinned(a.shape, dtype=a.dtype)
        cupy.ascontiguousarray(a).get(out=out)
    device_checks.raise_device_errors(a.device.id)
    return out
