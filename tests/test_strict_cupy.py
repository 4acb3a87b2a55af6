"""mixprec.strict_cupy refuses what CuPy refuses, counts what the host waits for, and records captures.

These tests drive the stand-in directly (no MIXPREC_CUPY needed); they need the real CuPy package, which the
stand-in reads its facts from (it imports without a GPU). Marked ``standin``: CI runs them in its stand-in pass.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("cupy")
pytestmark = pytest.mark.standin

from mixprec import strict_cupy  # noqa: E402
from mixprec.strict_cupy import CaptureError  # noqa: E402

cp, cpx = strict_cupy.cupy, strict_cupy.cupyx
BF16 = np.dtype(ml_dtypes.bfloat16)


def test_host_memory_is_refused_as_an_operand_and_never_converted_implicitly():
    a = cp.arange(3, dtype=np.float32)
    with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
        a + np.ones(3, np.float32)
    with pytest.raises(TypeError, match="Unsupported type"):
        cp.maximum(np.ones(3), a)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Unsupported type"):
        np.add(np.ones(3, np.float32), a)  # NumPy hands the call to CuPy's ufunc, which refuses
    assert (a + np.float32(1)).dtype == np.float32  # NumPy scalars are fine, as in CuPy


def test_names_and_keywords_come_from_the_real_package():
    with pytest.raises(AttributeError, match="no attribute 'frobnicate'"):
        cp.frobnicate
    with pytest.raises(TypeError, match="unexpected keyword argument 'sparse'"):
        cp.indices((2, 3), sparse=True)  # NumPy's indices takes sparse=; CuPy's does not
    with pytest.raises(AttributeError, match="has no attribute 'tofu'"):
        cp.zeros(2).tofu()


def test_dtype_loops_come_from_the_real_kernels():
    b = cp.ones((2, 3), dtype=BF16)
    assert (b + b).dtype == BF16 and cp.exp(b).dtype == BF16  # kernels with a bfloat16 loop
    assert cp.where(b > 0, b, b).dtype == np.float32  # CuPy's where has none: float32, as on a GPU
    assert cp.tril(b).dtype == np.float32 and cp.clip(b, 0, 1).dtype == np.float32
    h = cp.ones(3, dtype=np.float16)
    assert (h * 2.5).dtype == np.float16 and (h * np.float64(2.5)).dtype == np.float64  # weak and strong scalars
    assert (cp.ones(3, dtype=np.int32) + 2.5).dtype == np.float64
    with pytest.raises(TypeError, match="boolean subtract"):
        cp.ones(2, dtype=bool) - cp.ones(2, dtype=bool)


def test_reductions_give_device_scalars_and_reading_one_is_counted():
    a = cp.arange(4, dtype=np.float32)
    with strict_cupy.counting() as seen:
        total = a.sum()
        assert isinstance(total, cp.ndarray) and total.shape == ()
        assert isinstance(a[1], cp.ndarray)
    assert seen.host_reads == 0 and seen.launches >= 1
    with strict_cupy.counting() as seen:
        assert float(total) == 6.0 and a.get().tolist() == [0, 1, 2, 3] and bool(a[1]) and a.item(2) == 2.0
    assert seen.host_reads == 4
    index = cp.arange(2)
    with strict_cupy.counting() as seen:
        cp.asarray(np.ones(2))  # host data to the device
        a[index] = 5.0          # a device index: no copy
        a[[2, 3]] = 5.0         # a host list as the index: CuPy copies it to the device
    assert seen.uploads == 2


def test_out_of_range_device_indices_wrap_as_in_cupy():
    a = cp.arange(4)
    np.testing.assert_array_equal(a[cp.asarray([5, -6])].get(), [1, 2])
    with pytest.raises(IndexError):
        a[7]  # a Python int is checked on the host


def test_a_capture_records_instead_of_running_and_refuses_host_waits():
    x = cp.full(3, 2.0, dtype=np.float32)
    out = cp.zeros(3, dtype=np.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        y = x * 3            # recorded: y holds garbage until the graph runs
        out[...] = y + 1     # recorded, not run
        with pytest.raises(CaptureError, match="reads device memory on the host"):
            float(y[0])
        with pytest.raises(CaptureError, match="synchronous"):
            cp.asarray(np.ones(2))
        with pytest.raises(NotImplementedError, match="cuBLAS API during stream capture"):
            x @ x
        graph = stream.end_capture()
    assert np.isnan(y.get()).all() and (out.get() == 0).all()
    graph.launch()
    np.testing.assert_array_equal(out.get(), [7, 7, 7])
    x[...] = 1.0
    graph.launch()  # a replay reads the memory as it is now
    np.testing.assert_array_equal(out.get(), [4, 4, 4])


def test_the_pool_reuses_freed_blocks_and_counts_bytes():
    pool = cp.get_default_memory_pool()
    used = pool.used_bytes()
    a = cp.empty(1000, dtype=np.float32)  # 4000 bytes: one 4096-byte block
    address = a.data.ptr
    assert pool.used_bytes() == used + 4096
    del a
    assert pool.used_bytes() == used and pool.total_bytes() >= used + 4096
    b = cp.empty(1000, dtype=np.float32)
    assert b.data.ptr == address  # the freed block came back


def test_raw_modules_run_the_kernel_source_built_for_the_host():
    module = cp.RawModule(code='extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }',
                          name_expressions=["twice"])
    x = cp.arange(4, dtype=np.float32)
    module.get_function("twice")((1,), (4,), (x,))
    np.testing.assert_array_equal(x.get(), [0, 2, 4, 6])
    with pytest.raises(TypeError, match="size-1 NumPy arrays"):
        module.get_function("twice")((1,), (4,), (np.ones(4, np.float32),))


def test_the_cublas_twin_multiplies_column_major_and_rounds_once():
    import ctypes
    a = cp.asarray(np.arange(6, dtype=np.float16).reshape(2, 3))
    b = cp.asarray(np.arange(12, dtype=np.float16).reshape(3, 4))
    c = cp.ones((2, 4), dtype=np.float16)
    scalars = np.array([2.0, 1.0], np.float32)
    # row-major c = 2 * a @ b + c is column-major c^T = 2 * b^T a^T + c^T: b first
    strict_cupy.library("cublas").check("cublasGemmEx", 0, 0, 0, 4, 2, 3, scalars.ctypes.data, b.data.ptr, 2, 4,
                                        a.data.ptr, 2, 3, scalars.ctypes.data + 4, c.data.ptr, 2, 4, 68, 99)
    want = 2 * (np.arange(6).reshape(2, 3) @ np.arange(12).reshape(3, 4)) + 1
    np.testing.assert_array_equal(c.get().astype(np.float64), want)
    assert ctypes.sizeof(ctypes.c_float) == 4


def test_cupyx_zeta_is_hurwitz_zeta_with_cupy_loops():
    import scipy.special
    x, q = cp.asarray(np.array([2.0, 3.5], np.float32)), cp.asarray(np.array([0.5, 2.0], np.float32))
    out = cpx.scipy.special.zeta(x, q)
    assert out.dtype == np.float32  # CuPy's ff->f loop
    np.testing.assert_allclose(out.get(), scipy.special.zeta([2.0, 3.5], [0.5, 2.0]), rtol=1e-6)
    with pytest.raises(TypeError, match="Wrong number of arguments"):
        cpx.scipy.special.zeta(x)  # a two-input ufunc on CuPy, where SciPy's q is optional
