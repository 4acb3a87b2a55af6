"""floor, ceil, trunc, round (with decimals) and frac (mixprec/ops/rounding.py) against torch: values and dtypes
for every dtype torch rounds, ties, signed zeros and non-finite values; the zero gradient; in-place variants;
bad input."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

VALUES = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -0.0, 0.0, 1.7, -1.7, 1e6 + 0.5, np.inf, -np.inf, np.nan])
INTS = np.array([-7, 0, 3, 100])


def _pair(torch, values, dtype):
    t = torch.tensor(values).to(getattr(torch, dtype))
    return t, mp.tensor(values).to(getattr(mp, dtype))


def _same(got, want, torch):
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    w = want.float().numpy() if want.dtype == torch.bfloat16 else want.numpy()
    g = got.float().numpy() if got.dtype == mp.bfloat16 else got.numpy()
    np.testing.assert_array_equal(g, w)
    number = ~np.isnan(w)  # (-0.0 stays -0.0; a nan's sign bit is not compared)
    np.testing.assert_array_equal(np.signbit(g[number]), np.signbit(w[number]))


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "frac"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_floating_rounding_matches_torch(name, dtype):
    torch = pytest.importorskip("torch")
    t, m = _pair(torch, VALUES, dtype)
    _same(getattr(mp, name)(m), getattr(torch, name)(t), torch)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64"])
def test_integer_input_is_returned_as_a_copy(name, dtype):
    torch = pytest.importorskip("torch")
    values = np.abs(INTS) if dtype == "uint8" else INTS
    t, m = _pair(torch, values, dtype)
    out = getattr(m, name)()
    _same(out, getattr(torch, name)(t), torch)
    out[0] = 1
    assert m[0].item() != 1 or values[0] == 1  # a copy, not the input's memory


@pytest.mark.parametrize("decimals", [-3, -1, 0, 1, 2, 4])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float64"])
def test_round_decimals_matches_torch(decimals, dtype):
    torch = pytest.importorskip("torch")
    values = np.random.default_rng(decimals + 5).standard_normal(200) * 10.0 ** np.arange(-3, 5).repeat(25)
    t, m = _pair(torch, values, dtype)
    _same(mp.round(m, decimals=decimals), torch.round(t, decimals=decimals), torch)


def test_gradient_is_zero_even_where_the_incoming_gradient_is_not_finite():
    torch = pytest.importorskip("torch")
    for name in ("floor", "ceil", "trunc", "round"):
        x = mp.tensor([0.3, 1.5, -2.0], requires_grad=True)
        g = mp.tensor([np.nan, np.inf, 1.0])
        (grad,) = mp.autograd.grad(getattr(mp, name)(x), x, g)
        tx = torch.tensor([0.3, 1.5, -2.0], requires_grad=True)
        (want,) = torch.autograd.grad(getattr(torch, name)(tx), tx, torch.tensor([np.nan, np.inf, 1.0]))
        np.testing.assert_array_equal(grad.numpy(), want.numpy())
    x = mp.tensor([0.3, -1.5], requires_grad=True)
    (grad,) = mp.autograd.grad(mp.frac(x).sum(), x)  # frac: x - trunc(x) moves with x
    np.testing.assert_array_equal(grad.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "frac"])
def test_in_place_variants(name):
    x = mp.tensor([0.3, -1.7, 2.5])
    want = getattr(mp, name)(x)
    y = x.clone()
    assert getattr(y, name + "_")() is y
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    a = mp.tensor([0.3, -1.7, 2.5], requires_grad=True)
    b = a * 2
    getattr(b, name + "_")()  # a non-leaf changes in place under autograd
    (grad,) = mp.autograd.grad(b.sum(), a)
    np.testing.assert_array_equal(grad.numpy(), [2.0] * 3 if name == "frac" else [0.0] * 3)


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.floor(mp.tensor([True])), NotImplementedError, r"floor: not implemented for bool"),
    (lambda: mp.round(mp.tensor([1 + 1j])), NotImplementedError, r"round: not implemented for complex"),
    (lambda: mp.frac(mp.tensor([1, 2])), NotImplementedError, r"frac: not implemented for int64"),
    (lambda: mp.round(mp.tensor([1.5]), decimals=1.5), TypeError, r"round: decimals must be an int"),
    (lambda: mp.round(mp.tensor([15]), decimals=-1), NotImplementedError, r"round: decimals= .* integer"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
