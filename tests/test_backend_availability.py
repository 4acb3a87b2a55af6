"""mixprec.backend.availability: why "cuda" cannot be used, named in every error that asks for it."""
from __future__ import annotations

import types

import pytest

import mixprec as mp
from mixprec import backend
from mixprec.backend import devices


def _fake_cupy(get_count, driver=12090, runtime_version=12090):
    """A CuPy whose CUDA runtime reports ``driver`` (0: no driver installed) and get_count(), its libraries loaded."""
    runtime = types.SimpleNamespace(getDeviceCount=get_count, getDevice=lambda: 0,
                                    driverGetVersion=lambda: driver, runtimeGetVersion=lambda: runtime_version)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime, cublas=object(), curand=object()))


def test_cuda_without_cupy_names_the_reason(monkeypatch):
    monkeypatch.setattr(backend, "_cupy", None)
    monkeypatch.setattr(backend, "_CUPY_IMPORT_ERROR", ImportError("No module named 'cupy'"))
    monkeypatch.setattr(devices, "_cuda_devices", {})
    assert not mp.is_cuda_available() and mp.device_count() == 0
    for make in (lambda: devices.as_device("cuda"), lambda: mp.zeros(2, device="cuda:0"),
                 lambda: mp.ones(2).cuda(), lambda: mp.device("cuda").__enter__(), lambda: mp.set_default_device("cuda")):
        with pytest.raises(mp.DeviceUnavailableError, match=r"CuPy is not installed.*mixprec\[cuda12\]"):
            make()


@pytest.mark.parametrize("error,reason,driver", [
    ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version",
     r"driver is too old: it supports CUDA 11.8, this CuPy build needs CUDA 12.9", 11080),
    ("cudaErrorNoDevice: no CUDA-capable device is detected", "no usable CUDA device", 12090),
])
def test_cuda_runtime_failures_name_the_reason(monkeypatch, error, reason, driver):
    def get_count():
        raise RuntimeError(error)
    monkeypatch.setattr(backend, "_cupy", _fake_cupy(get_count, driver=driver))
    monkeypatch.setattr(devices, "_cuda_devices", {})
    assert not mp.is_cuda_available()
    with pytest.raises(mp.DeviceUnavailableError, match=reason) as info:
        mp.zeros(1, device="cuda")
    assert error in str(info.value)  # the underlying message is kept, not a raw traceback


def test_cupy_without_a_driver_says_so(monkeypatch):
    # CuPy installed on a machine with no NVIDIA driver: CUDA reports driver version 0, and
    # getDeviceCount fails with "insufficient driver", which must not be read as "too old"
    def get_count():
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    monkeypatch.setattr(backend, "_cupy", _fake_cupy(get_count, driver=0))
    monkeypatch.setattr(devices, "_cuda_devices", {})
    with pytest.raises(mp.DeviceUnavailableError, match="no NVIDIA driver is installed"):
        mp.zeros(1, device="cuda")


def test_zero_devices_and_index_out_of_range(monkeypatch):
    monkeypatch.setattr(backend, "_cupy", _fake_cupy(lambda: 0))
    monkeypatch.setattr(devices, "_cuda_devices", {})
    with pytest.raises(mp.DeviceUnavailableError, match="0 devices"):
        devices.as_device("cuda")
    monkeypatch.setattr(backend, "_cupy", _fake_cupy(lambda: 1))
    with pytest.raises(mp.DeviceUnavailableError, match=r"only 1 CUDA device"):
        devices.as_device("cuda:3")


def test_device_unavailable_error_is_a_runtime_error():
    assert issubclass(mp.DeviceUnavailableError, RuntimeError)
