"""The dtype conversion methods, conj_physical and resolve_conj/resolve_neg (mixprec/ops/conversions.py)."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

METHODS = {"byte": "uint8", "char": "int8", "short": "int16", "cfloat": "complex64", "cdouble": "complex128"}


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "bool"])
def test_conversion_methods_match_torch(method, dtype):
    torch = pytest.importorskip("torch")
    values = np.array([0, 1, 7, 100])
    t, m = torch.tensor(values).to(getattr(torch, dtype)), mp.tensor(values).to(getattr(mp, dtype))
    got, want = getattr(m, method)(), getattr(t, method)()
    assert got.dtype == getattr(mp, METHODS[method]) and str(want.dtype) == f"torch.{METHODS[method]}"
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_complex_conversion_is_differentiable():
    x = mp.tensor([1.0, -2.0], dtype=mp.float64, requires_grad=True)
    (g,) = mp.autograd.grad((x.cdouble() * (1 + 2j)).real.sum(), x)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0])


def test_chalf_is_refused_clearly():
    with pytest.raises(TypeError, match=r"chalf: mixprec has no complex32 dtype"):
        mp.ones(2).chalf()


def test_conj_physical_copies_and_conjugates():
    z = mp.complex(mp.tensor([1.0, 2.0]), mp.tensor([3.0, -4.0]))
    out = z.conj_physical()
    np.testing.assert_array_equal(out.numpy(), np.array([1 - 3j, 2 + 4j], dtype=np.complex64))
    x = mp.tensor([1.0, 2.0])
    y = mp.conj_physical(x)
    y[0] = 5.0
    assert x[0].item() == 1.0  # new memory, also for a real tensor
    w = z.clone()
    assert w.conj_physical_() is w
    np.testing.assert_array_equal(w.numpy(), out.numpy())


def test_resolve_conj_and_resolve_neg_return_the_tensor_itself():
    x = mp.tensor([1.0, 2.0])
    assert mp.resolve_conj(x) is x and x.resolve_neg() is x
    assert not x.is_conj() and not x.is_neg()
