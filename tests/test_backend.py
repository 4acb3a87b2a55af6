"""Devices and array backends: parsing, the 'no usable GPU' errors, default device, mixed devices, CuPy-free import."""
from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

import mixprec as mp
from mixprec import backend

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ parsing
def test_device_parsing():
    assert backend.as_device("cpu") is backend.CPU
    assert backend.as_device("cpu:0") is backend.CPU
    assert backend.as_device(mp.Device("cpu")) is backend.CPU
    d = mp.Device("cuda", 1)
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 1, "cuda:1", "device('cuda:1')")
    assert d == "cuda:1" and d == "cuda" and d != "cuda:0" and d != "cpu" and d != "nonsense"
    assert mp.Device("cpu") == "cpu" and mp.Device("cpu") == mp.Device("cpu")
    assert hash(mp.Device("cuda", 0)) == hash(mp.Device("cuda", 0))


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "cuda:-1", "cpu:1", "CUDA", "", "cuda:"])
def test_bad_device_strings(spec):
    with pytest.raises(ValueError, match="unknown device"):
        backend.as_device(spec)
    with pytest.raises(ValueError, match="unknown device"):
        mp.zeros(2, device=spec)


@pytest.mark.parametrize("spec", [0, None, 1.5, ["cpu"]])
def test_non_string_devices(spec):
    with pytest.raises(TypeError, match="device must be a string"):
        backend.as_device(spec)


def test_device_constructor_validates():
    with pytest.raises(ValueError, match="unknown device type"):
        mp.Device("tpu")
    with pytest.raises(ValueError, match="invalid device index"):
        mp.Device("cuda", -1)


# ------------------------------------------------------------------ no usable GPU
def _fake_cupy(get_count, driver=12090, runtime_version=12090):
    """A CuPy whose CUDA runtime reports ``driver`` (0: no driver installed) and get_count(), its libraries loaded."""
    runtime = types.SimpleNamespace(getDeviceCount=get_count, getDevice=lambda: 0,
                                    driverGetVersion=lambda: driver, runtimeGetVersion=lambda: runtime_version)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime, cublas=object(), curand=object()))


def test_cuda_without_cupy_names_the_reason(monkeypatch):
    monkeypatch.setattr(backend, "_cupy", None)
    monkeypatch.setattr(backend, "_CUPY_IMPORT_ERROR", ImportError("No module named 'cupy'"))
    monkeypatch.setattr(backend, "_cuda_devices", {})
    assert not mp.is_cuda_available() and mp.device_count() == 0
    for make in (lambda: backend.as_device("cuda"), lambda: mp.zeros(2, device="cuda:0"),
                 lambda: mp.ones(2).cuda(), lambda: mp.device("cuda"), lambda: mp.set_default_device("cuda")):
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
    monkeypatch.setattr(backend, "_cuda_devices", {})
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
    monkeypatch.setattr(backend, "_cuda_devices", {})
    with pytest.raises(mp.DeviceUnavailableError, match="no NVIDIA driver is installed"):
        mp.zeros(1, device="cuda")


def test_zero_devices_and_index_out_of_range(monkeypatch):
    monkeypatch.setattr(backend, "_cupy", _fake_cupy(lambda: 0))
    monkeypatch.setattr(backend, "_cuda_devices", {})
    with pytest.raises(mp.DeviceUnavailableError, match="0 devices"):
        backend.as_device("cuda")
    monkeypatch.setattr(backend, "_cupy", _fake_cupy(lambda: 1))
    with pytest.raises(mp.DeviceUnavailableError, match=r"only 1 CUDA device"):
        backend.as_device("cuda:3")


def test_device_unavailable_error_is_a_runtime_error():
    assert issubclass(mp.DeviceUnavailableError, RuntimeError)


# ------------------------------------------------------------------ default device
def test_device_context_and_default_device():
    assert mp.get_default_device() == "cpu"
    with mp.device("cpu") as d:
        assert d is backend.CPU and mp.zeros(1).device == "cpu"
    mp.set_default_device("cpu")
    assert mp.get_default_device() is backend.CPU
    with pytest.raises(ValueError):
        mp.device("tpu")


@pytest.mark.gpu
def test_device_context_on_cuda():
    with mp.device("cuda"):
        assert mp.zeros(2).device.type == "cuda"
        assert mp.randn(2).device.type == "cuda"
        assert mp.tensor([1.0]).device.type == "cuda"
    assert mp.zeros(2).device == "cpu"
    mp.set_default_device("cuda")
    try:
        assert mp.ones(1).device.type == "cuda"
    finally:
        mp.set_default_device("cpu")


@pytest.mark.gpu
def test_moving_between_devices_keeps_values_and_gradients():
    x = mp.tensor([1.0, 2.0], requires_grad=True)
    y = x.cuda()
    assert y.device.type == "cuda" and y.cpu().tolist() == [1.0, 2.0]
    (y * y).sum().backward()
    assert x.grad.device == "cpu" and x.grad.tolist() == [2.0, 4.0]


# ------------------------------------------------------------------ mixed devices
class _FakeGpuArray:
    """Stands in for a CuPy array: enough for the dispatcher to see a second device."""
    shape, ndim, size, dtype = (2,), 1, 2, np.dtype(np.float32)


def test_mixing_devices_names_both(monkeypatch):
    cuda0 = mp.Device("cuda", 0)
    monkeypatch.setattr(backend, "device_of_array", lambda a: cuda0)
    gpu = mp.Tensor._wrap(_FakeGpuArray())
    assert gpu.device == "cuda:0"
    with pytest.raises(RuntimeError, match=r"add: expected all tensors on one device, got cpu and cuda:0"):
        mp.ones(2) + gpu
    with pytest.raises(RuntimeError, match=r"mul: .* got cuda:0 and cpu"):
        gpu * mp.ones(2)
    with pytest.raises(RuntimeError, match=r"cat: .* got cpu and cuda:0"):
        mp.cat([mp.ones(2), gpu])


@pytest.mark.gpu
def test_mixing_real_devices_names_both():
    with pytest.raises(RuntimeError, match=r"add: .*got cpu and cuda:\d"):
        mp.ones(2) + mp.ones(2, device="cuda")


# ------------------------------------------------------------------ importing without a GPU stack
def _run(code, extra_path=None):
    env_path = str(ROOT) if extra_path is None else f"{extra_path}:{ROOT}"
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                           env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, timeout=60)


def test_import_without_cupy():
    res = _run("""
        import sys
        sys.modules["cupy"] = None  # makes `import cupy` raise ImportError
        import mixprec as mp
        assert not mp.is_cuda_available()
        x = mp.randn(3, 2, requires_grad=True)
        (x @ x.T).sum().backward()
        try:
            mp.zeros(1, device="cuda")
        except mp.DeviceUnavailableError as e:
            print("ERR", e)
    """)
    assert res.returncode == 0, res.stderr
    assert "ERR device 'cuda' is not available: CuPy is not installed" in res.stdout


def test_import_with_cupy_but_no_usable_gpu(tmp_path):
    """CuPy imports but the driver is unusable: mixprec imports and has no "cuda" device."""
    fake = tmp_path / "cupy"
    fake.mkdir()
    (fake / "__init__.py").write_text(textwrap.dedent("""
        class _Runtime:
            @staticmethod
            def getDeviceCount():
                raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
            @staticmethod
            def driverGetVersion():
                return 11080
            @staticmethod
            def runtimeGetVersion():
                return 12090
        class cuda:
            runtime = _Runtime
        class ndarray:
            pass
    """))
    res = _run("""
        import mixprec as mp
        assert not mp.is_cuda_available() and mp.device_count() == 0
        print(mp.ones(2).sum().item())
        try:
            mp.ones(1).cuda()
        except mp.DeviceUnavailableError as e:
            print("ERR", e)
    """, extra_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "2.0" in res.stdout and "driver is too old" in res.stdout


def test_cupy_without_its_cuda_libraries_is_no_usable_gpu_and_nothing_else_breaks(tmp_path):
    """CuPy from pip without [ctk]: a driver and a device, but cuRAND cannot be loaded. "cuda" is unavailable
    with that reason, and mp.manual_seed (which would seed CuPy's generator) still works."""
    fake = tmp_path / "cupy"
    fake.mkdir()
    (fake / "__init__.py").write_text(textwrap.dedent("""
        class _Runtime:
            getDeviceCount = staticmethod(lambda: 1)
            driverGetVersion = staticmethod(lambda: 13000)
            runtimeGetVersion = staticmethod(lambda: 13000)
        class _Cuda:
            runtime = _Runtime
            cublas = object()
            @property
            def curand(self):
                raise ImportError('Failure finding "libcurand.so.10"')
        cuda = _Cuda()
        class ndarray:
            pass
    """))
    res = _run("""
        import mixprec as mp
        mp.manual_seed(0)
        print(mp.is_cuda_available(), mp.backend.cuda_unavailable_reason())
        print(mp.randn(2).shape)
    """, extra_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "False CuPy cannot load its CUDA library libcurand" in res.stdout and "cupy-cuda13x[ctk]" in res.stdout
    assert "(2,)" in res.stdout


def test_cupy_is_imported_in_exactly_one_module():
    """backend.py imports CuPy for mixprec; the strict stand-in's _real.py reads the real package's facts."""
    pattern = re.compile(r"^\s*(import cupy|from cupy|import cupyx|from cupyx)", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "mixprec").rglob("*.py") if pattern.search(p.read_text())]
    assert sorted(offenders) == ["mixprec/backend.py", "mixprec/strict_cupy/_real.py"]


# ------------------------------------------------------------------ array helpers
def test_array_module_and_to_device_on_cpu():
    a = np.ones(3)
    assert backend.array_module(a) is np and backend.xp_of(backend.CPU) is np
    assert backend.to_device(a, backend.CPU) is a
    assert backend.device_of_array(a) is backend.CPU
    assert backend.is_array(a) and not backend.is_array([1.0])


def test_scatter_add_sums_repeated_indices_in_place():
    t = np.zeros(3)
    backend.scatter_add(t, np.array([0, 2, 0, 0]), np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(t, [8, 0, 2])


def test_scatter_add_in_half_precision_rounds_once():
    """2048 + 1 + 1 in float16 one add at a time stays 2048 (ties to even); rounding once gives 2050."""
    t = np.array([2048.0], dtype=np.float16)
    backend.scatter_add(t, np.array([0, 0]), np.array([1.0, 1.0], dtype=np.float16))
    assert t[0] == 2050.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_erf_matches_math_erf(dtype, monkeypatch):
    x = np.linspace(-3, 3, 25).astype(dtype)
    expected = np.array([math.erf(v) for v in x.astype(np.float64)])
    tol = {np.float64: 1e-15, np.float32: 1e-7, np.float16: 1e-3}[dtype]
    out = backend.erf(x)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=tol)
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # no SciPy: the stdlib fallback
    out = backend.erf(x)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=tol)
