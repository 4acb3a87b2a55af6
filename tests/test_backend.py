"""mixprec.backend, the array switch: importing with and without a GPU stack, the one module that imports
CuPy, and the primitives NumPy and CuPy spell differently (each checked against a stand-in that has CuPy's
signature or dtype loops, through the ops that use it)."""
from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mixprec as mp
from mixprec import backend
from mixprec.backend import devices
from mixprec.ops import elementwise, shape

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
def test_erf_matches_math_erf(dtype):
    x = np.linspace(-3, 3, 25).astype(dtype)
    expected = np.array([math.erf(v) for v in x.astype(np.float64)])
    tol = {np.float64: 1e-15, np.float32: 1e-7, np.float16: 1e-3}[dtype]
    out = backend.erf(x)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=tol)


# ------------------------------------------------------------------ open_grid: CuPy's indices has no sparse=
class _CupyIndices:
    """NumPy, except that ``indices`` has CuPy's signature (dimensions, dtype) and no ``sparse``."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def indices(dimensions, dtype=int):
        return np.indices(dimensions, dtype=dtype)


def test_open_grid_matches_numpys_sparse_indices():
    for dims in [(3,), (2, 4), (2, 1, 3), ()]:
        got = backend.open_grid(_CupyIndices(), dims)
        want = np.indices(dims, sparse=True)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert g.shape == w.shape


def test_scatter_add_and_gather_backward_use_no_sparse_indices(monkeypatch):
    monkeypatch.setattr(shape, "array_module", lambda a: _CupyIndices())
    x = mp.zeros(3, 4)
    index = mp.tensor([[0, 2, 2, 1], [1, 0, 2, 2]])
    src = mp.arange(8, dtype=mp.float32).reshape(2, 4)
    out = x.scatter_add(0, index, src)
    want = np.zeros((3, 4), np.float32)
    np.add.at(want, (index.numpy(), np.arange(4)[None, :]), src.numpy())
    np.testing.assert_array_equal(out.numpy(), want)
    # gather's backward is a scatter_add: it must take the same path
    w = mp.randn(3, 4, requires_grad=True)
    w.gather(1, mp.tensor([[0, 0], [3, 1], [2, 2]])).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[2, 0, 0, 0], [0, 1, 0, 1], [0, 0, 2, 0]])


# ------------------------------------------------------------------ where: CuPy's has no bfloat16 loop
class _CupyWhere:
    """NumPy, except that ``where`` follows CuPy's loop table: no bfloat16 loop, so bfloat16 comes back float32."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def where(condition, a, b):
        def lift(v):
            return np.asarray(v).astype(np.float32) if np.asarray(v).dtype == mp.bfloat16 else v
        return np.where(condition, lift(a), lift(b))


def test_where_keeps_bfloat16_exactly_on_a_cupy_like_backend(monkeypatch):
    fake = _CupyWhere()
    monkeypatch.setattr(backend, "array_module", lambda a: fake)
    monkeypatch.setattr(elementwise, "array_module", lambda a: fake)
    a = mp.tensor([1.0, -2.5, 3.0e38, 7.0], dtype=mp.bfloat16)
    b = mp.tensor([0.1, 0.2, -0.3, float("nan")], dtype=mp.bfloat16)
    c = mp.tensor([True, False, True, False])
    for out, want in [(mp.where(c, a, b), np.where(c.numpy(), a.numpy(), b.numpy())),
                      (mp.where(c, a, 0.5), np.where(c.numpy(), a.numpy(), np.asarray(0.5, mp.bfloat16))),
                      (mp.where(c, -1.0, b), np.where(c.numpy(), np.asarray(-1.0, mp.bfloat16), b.numpy()))]:
        assert out.dtype == mp.bfloat16
        np.testing.assert_array_equal(out.numpy().view(np.uint16), want.view(np.uint16))  # bit for bit


@pytest.mark.gpu
def test_gather_backward_and_bfloat16_where_run_on_cupy():
    w = mp.randn(4, 6, device="cuda", requires_grad=True)
    idx = mp.tensor([[0, 5], [1, 1], [2, 3], [4, 0]], device="cuda")
    w.gather(1, idx).sum().backward()  # scatter_add backward (open_grid)
    want = np.zeros((4, 6))
    np.add.at(want, (np.arange(4)[:, None], idx.numpy()), 1)
    np.testing.assert_array_equal(w.grad.numpy(), want)
    if mp.cuda.is_bf16_supported():
        c = mp.tensor([True, False], device="cuda")
        out = mp.where(c, mp.tensor([1.5, 2.5], dtype=mp.bfloat16, device="cuda"), 0.25)
        assert out.dtype == mp.bfloat16 and out.tolist() == [1.5, 0.25]


def test_numpy_scalars_are_host_values_whether_or_not_cupy_is_installed():
    # 0-d arithmetic gives NumPy scalars, not arrays: they are the CPU's, never taken for CuPy arrays
    assert backend.array_module(np.float32(1.0)) is np and backend.array_module(np.ones(1)) is np
    assert devices.device_of_array(np.int64(3)) is devices.CPU
    assert mp.polar(mp.tensor(2.0), mp.tensor(0.0)).tolist() == 2 + 0j
    assert mp.nn.functional.embedding(mp.tensor(1), mp.arange(6.0).reshape(3, 2)).tolist() == [2.0, 3.0]
    assert mp.nn.functional.dropout(mp.tensor(1.5), 0.5, training=False).item() == 1.5
    with pytest.raises(IndexError, match="embedding"):
        mp.nn.functional.embedding(mp.tensor(5), mp.ones(3, 2))


def test_special_functions_come_from_scipy_for_host_arrays():
    import scipy.special
    from mixprec.backend import special
    assert special.module_of(np.ones(2), 1.0) is scipy.special
    x = np.array([0.5, 2.0])
    np.testing.assert_array_equal(special.call("gammaln", x), scipy.special.gammaln(x))
