"""mixprec.backend, the array switch: importing with and without a GPU stack, the one module that imports
CuPy, and the primitives NumPy and CuPy spell differently."""
from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mixprec import backend
from mixprec.backend import devices

ROOT = Path(__file__).resolve().parents[1]


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
        print(mp.is_cuda_available(), mp.backend.availability.cuda_unavailable_reason())
        print(mp.randn(2).shape)
    """, extra_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "False CuPy cannot load its CUDA library libcurand" in res.stdout and "cupy-cuda13x[ctk]" in res.stdout
    assert "(2,)" in res.stdout


def test_cupy_is_imported_in_exactly_one_module():
    """mixprec.backend imports CuPy for mixprec; the strict stand-in's _real.py reads the real package's facts."""
    pattern = re.compile(r"^\s*(import cupy|from cupy|import cupyx|from cupyx)", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "mixprec").rglob("*.py") if pattern.search(p.read_text())]
    assert sorted(offenders) == ["mixprec/backend/__init__.py", "mixprec/strict_cupy/_real.py"]


# ------------------------------------------------------------------ array helpers
def test_array_module_and_to_device_on_cpu():
    a = np.ones(3)
    assert backend.array_module(a) is np and backend.xp_of(devices.CPU) is np
    assert devices.to_device(a, devices.CPU) is a
    assert devices.device_of_array(a) is devices.CPU
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
