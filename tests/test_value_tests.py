"""isposinf, isneginf, isreal, isclose, allclose and equal (mixprec/ops/value_tests.py) against torch, for
every dtype and the tolerance arguments; bad input."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

FLOATS = np.array([1.0, 1.001, np.nan, np.inf, -np.inf, 0.0, 1e-9, 100.0])
OTHERS = np.array([1.0, 1.0, np.nan, np.inf, np.inf, -0.0, 0.0, 101.0])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64", "uint8", "int8",
                                   "int64", "bool"])
@pytest.mark.parametrize("kwargs", [{}, {"rtol": 0.02}, {"atol": 2}, {"equal_nan": True}, {"rtol": 0, "atol": 0}])
def test_isclose_and_allclose_match_torch(dtype, kwargs):
    torch = pytest.importorskip("torch")
    a, b = (FLOATS, OTHERS) if dtype[0] in "fbc" and dtype != "bool" else (np.array([1, 3, 0, 5, 200]),
                                                                         np.array([3, 1, 0, 6, 190]))
    ta, tb = (torch.tensor(x).to(getattr(torch, dtype)) for x in (a, b))
    ma, mb = (mp.tensor(x).to(getattr(mp, dtype)) for x in (a, b))
    np.testing.assert_array_equal(mp.isclose(ma, mb, **kwargs).numpy(), torch.isclose(ta, tb, **kwargs).numpy())
    got = mp.allclose(ma[:2], mb[:2], **kwargs)
    assert type(got) is bool and got == torch.allclose(ta[:2], tb[:2], **kwargs)


def test_equal_is_a_python_bool_of_shape_and_values():
    torch = pytest.importorskip("torch")
    pairs = [([1.0, 2.0], [1.0, 2.0]), ([1.0, 2.0], [1.0, 2.5]), ([1.0], [1.0, 1.0]), ([np.nan], [np.nan])]
    for a, b in pairs:
        got = mp.equal(mp.tensor(a), mp.tensor(b))
        assert type(got) is bool and got == torch.equal(torch.tensor(a), torch.tensor(b))
    assert mp.tensor([1, 2]).equal(mp.tensor([1.0, 2.0]))  # values compare after promotion, as torch


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int32", "bool", "complex64"])
def test_isposinf_isneginf_isreal_match_torch(dtype):
    torch = pytest.importorskip("torch")
    values = FLOATS if dtype[0] in "fbc" and dtype != "bool" else np.array([0, 1, 1])
    t, m = torch.tensor(values).to(getattr(torch, dtype)), mp.tensor(values).to(getattr(mp, dtype))
    np.testing.assert_array_equal(mp.isreal(m).numpy(), torch.isreal(t).numpy())
    if dtype != "complex64":
        np.testing.assert_array_equal(m.isposinf().numpy(), torch.isposinf(t).numpy())
        np.testing.assert_array_equal(mp.isneginf(m).numpy(), torch.isneginf(t).numpy())
    assert mp.isreal(mp.complex(mp.tensor([1.0, 2.0]), mp.tensor([0.0, 1.0]))).tolist() == [True, False]


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.isclose(mp.ones(2), mp.ones(2, dtype=mp.float64)), TypeError, r"isclose: .*same dtype"),
    (lambda: mp.isclose(mp.ones(2), mp.ones(2), rtol=-1), RuntimeError, r"isclose: rtol must be greater"),
    (lambda: mp.isclose(mp.ones(2), mp.ones(2), atol="a"), TypeError, r"isclose: atol must be a number"),
    (lambda: mp.isposinf(mp.tensor([1j])), RuntimeError, r"isposinf: does not support complex"),
    (lambda: mp.equal(mp.ones(2), [1.0, 1.0]), TypeError, r"equal: other must be a Tensor"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
