"""DLPack: zero-copy exchange with NumPy, PyTorch (when installed) and CuPy (marked gpu)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp

NUMPY_DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES + [ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_numpy_to_mixprec_is_zero_copy(dtype):
    a = np.zeros(4, dtype=dtype)
    t = mp.from_dlpack(a)
    assert t.dtype == np.dtype(dtype) and t.shape == (4,) and t.device == "cpu"
    a[1] = 1
    assert bool(t[1].item())  # a write to the array shows in the tensor
    t._array[2] = 1
    assert bool(a[2])  # and the other way round


@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_mixprec_to_numpy_is_zero_copy(dtype):
    t = mp.zeros(3, dtype=dtype)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(dtype)
    a[0] = 1
    assert bool(t[0].item())
    t[1] = 1
    assert bool(a[1])


def test_round_trip_keeps_strides_and_values():
    t = mp.arange(12.0).reshape(3, 4).T  # a non-contiguous view
    back = mp.from_dlpack(np.from_dlpack(t))
    assert back.shape == (4, 3) and back.tolist() == t.tolist()
    assert np.shares_memory(back._array, t._array)


def test_from_dlpack_of_a_tensor_detaches_and_shares():
    x = mp.ones(2, requires_grad=True)
    y = mp.from_dlpack(x)
    assert not y.requires_grad and np.shares_memory(y._array, x._array)


def test_export_of_a_tensor_requiring_grad_is_refused():
    x = mp.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"requires grad.*detach\(\)"):
        np.from_dlpack(x)
    assert np.from_dlpack(x.detach()).tolist() == [1.0, 1.0]


def test_from_dlpack_rejects_non_producers():
    with pytest.raises(TypeError, match="__dlpack__"):
        mp.from_dlpack([1.0, 2.0])


# ------------------------------------------------------------------ PyTorch
TORCH_DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64", "bool"]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_round_trip_is_zero_copy(name):
    torch = pytest.importorskip("torch")
    tt = torch.zeros(2, 3, dtype=getattr(torch, name))
    m = mp.from_dlpack(tt)
    assert m.dtype == mp.dtypes.as_dtype(name) and m.shape == (2, 3)
    tt[0, 1] = 1
    assert bool(m[0, 1].item())
    m[1, 2] = 1
    assert bool(tt[1, 2].item())

    back = torch.from_dlpack(mp.zeros(2, 2, dtype=name))
    assert back.dtype == getattr(torch, name)
    src = mp.zeros(4, dtype=name)
    view = torch.from_dlpack(src)
    view[3] = 1
    assert bool(src[3].item())
    src[0] = 1
    assert bool(view[0].item())


def test_torch_non_contiguous_and_values():
    torch = pytest.importorskip("torch")
    tt = torch.arange(12, dtype=torch.float32).reshape(3, 4).T
    m = mp.from_dlpack(tt)
    np.testing.assert_array_equal(m.numpy(), tt.numpy())
    back = torch.from_dlpack(mp.arange(6.0).bfloat16().reshape(2, 3).T)
    assert back.float().tolist() == [[0, 3], [1, 4], [2, 5]]


def test_torch_unsupported_dtype_is_named():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="unsupported dtype.*uint16"):
        mp.from_dlpack(torch.zeros(2, dtype=torch.uint16))


# ------------------------------------------------------------------ CuPy
@pytest.mark.gpu
@pytest.mark.parametrize("name", ["float16", "float32", "int64"])
def test_cupy_round_trip_is_zero_copy(name):
    cp = mp.backend.cupy_module()
    c = cp.zeros(4, dtype=name)
    t = mp.from_dlpack(c)
    assert t.device.type == "cuda" and t.dtype == np.dtype(name)
    c[1] = 1
    assert bool(t[1].item())
    back = cp.from_dlpack(mp.zeros(3, dtype=name, device="cuda"))
    assert back.dtype == np.dtype(name)
    src = mp.zeros(3, dtype=name, device="cuda")
    view = cp.from_dlpack(src)
    view[2] = 1
    assert bool(src[2].item())
