"""mixprec/creation.py against torch: index tensors, logspace, strided and permuted memory, Tensor.new_*, resize_."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("args", [(3, 4), (4, 3, 1), (3, 3, -1), (0, 2), (5, 2, -10)])
def test_triangle_indices_match_torch(args):
    np.testing.assert_array_equal(mp.triu_indices(*args).numpy(), torch.triu_indices(*args).numpy())
    np.testing.assert_array_equal(mp.tril_indices(*args).numpy(), torch.tril_indices(*args).numpy())
    assert mp.triu_indices(*args).dtype == mp.int64


def test_unravel_index_matches_torch_also_out_of_range():
    idx = np.array([[0, 5, -1], [7, 11, 30]])
    got = mp.unravel_index(mp.tensor(idx), (3, 4))
    want = torch.unravel_index(torch.tensor(idx), (3, 4))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    with pytest.raises(TypeError, match="unravel_index: indices must be an integer tensor"):
        mp.unravel_index(mp.tensor([1.0]), (2,))


@pytest.mark.parametrize("args, kw", [((0, 2, 5), {}), ((mp.tensor(-1.0), 1, 3), {"base": 2.0}),
                                      ((0, 3, 4), {"dtype": mp.int64}), ((1, 0, 1), {})])
def test_logspace_matches_torch(args, kw):
    targs = [torch.tensor(a.item()) if isinstance(a, mp.Tensor) else a for a in args]
    tkw = {k: (torch.int64 if v is mp.int64 else v) for k, v in kw.items()}
    got, want = mp.logspace(*args, **kw), torch.logspace(*targs, **tkw)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_strided_and_permuted_memory_match_torch():
    assert mp.empty_strided((2, 3), (1, 2)).stride() == torch.empty_strided((2, 3), (1, 2)).stride()
    assert mp.empty_permuted((2, 3, 4), (2, 0, 1)).stride() == torch.empty_permuted((2, 3, 4), (2, 0, 1)).stride()
    x = mp.zeros(2, dtype=mp.float64)
    y = x.new_empty_strided((3, 2), (1, 3))
    assert (y.shape, y.stride(), y.dtype) == ((3, 2), (1, 3), mp.float64)
    with pytest.raises(RuntimeError, match="empty_permuted: physical_layout"):
        mp.empty_permuted((2, 3), (0, 0))


def test_new_tensors_take_dtype_and_device_from_self():
    x = mp.zeros(2, dtype=mp.int32)
    for t, want in [(x.new_zeros(2, 3), np.zeros((2, 3))), (x.new_ones((2,)), np.ones(2)),
                    (x.new_full((2,), 2.5), torch.zeros(2, dtype=torch.int32).new_full((2,), 2.5).numpy())]:
        assert t.dtype == mp.int32
        np.testing.assert_array_equal(t.numpy(), want)
    assert x.new_empty(3, dtype=mp.float16).dtype == mp.float16
    assert x.new_zeros(2, dtype=mp.float32, requires_grad=True).requires_grad
    assert mp.scalar_tensor(3).dtype == mp.float32 and mp.scalar_tensor(3).shape == ()


def test_resize_keeps_leading_values_and_refuses_what_torch_cannot_track():
    x = mp.arange(6.0)
    v = x._version
    assert x.resize_(2, 2) is x and x.shape == (2, 2) and x._version == v + 1
    np.testing.assert_array_equal(x.numpy(), [[0, 1], [2, 3]])
    x.resize_(3, 3)
    np.testing.assert_array_equal(x.numpy().reshape(-1)[:4], [0, 1, 2, 3])
    x.resize_as_(mp.zeros(4))
    assert x.shape == (4,)
    with pytest.raises(RuntimeError, match="resize_: cannot resize a tensor that requires grad"):
        mp.zeros(2, requires_grad=True).resize_(3)
    with pytest.raises(RuntimeError, match="resize_: cannot resize a view"):
        mp.zeros(4)[1:].resize_(2)
