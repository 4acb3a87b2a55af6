"""sgn, signbit, square, clamp_min/clamp_max, rsub, deg2rad/rad2deg, nan_to_num and atan/asinh/acosh/atanh
(mixprec/ops/pointwise.py) against torch: values, dtypes and gradients where they are decided by a rule
(complex sgn, nan_to_num's bounds per dtype, signed zeros); in-place variants; bad input."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


def _np(t):
    return t.detach().float().numpy() if str(t.dtype).endswith("bfloat16") else t.detach().numpy()


def test_sgn_of_complex_values_and_gradient_match_torch():
    torch = pytest.importorskip("torch")
    z = np.array([1 + 1j, -2j, 0j, 3 + 0j, -0.5 - 2j])
    g = np.array([1 + 2j, 1 + 1j, 2 - 1j, 0.5j, -1 + 0j])
    tz = torch.tensor(z, requires_grad=True)
    mz = mp.tensor(z, requires_grad=True)
    tout, mout = torch.sgn(tz), mp.sgn(mz)
    np.testing.assert_allclose(mout.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    (tg,) = torch.autograd.grad(tout, tz, torch.tensor(g))
    (mg,) = mp.autograd.grad(mout, mz, mp.tensor(g))
    np.testing.assert_allclose(mg.numpy(), tg.numpy(), rtol=1e-12, atol=1e-15)  # 0 at z = 0, as torch


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "bool"])
def test_signbit_and_sgn_match_torch(dtype):
    torch = pytest.importorskip("torch")
    values = np.array([1.0, -2.0, 0.0, -0.0, np.inf, -np.inf]) if dtype[0] in "fb" and dtype != "bool" \
        else np.array([3, 0, 1, 5])
    t = torch.tensor(values).to(getattr(torch, dtype))
    m = mp.tensor(values).to(getattr(mp, dtype))
    np.testing.assert_array_equal(mp.signbit(m).numpy(), torch.signbit(t).numpy())
    out = mp.sgn(m)
    assert out.dtype.name == str(torch.sgn(t).dtype).removeprefix("torch.")
    np.testing.assert_array_equal(_np(out), _np(torch.sgn(t)))


def test_square_dtypes_and_complex_gradient_match_torch():
    torch = pytest.importorskip("torch")
    assert mp.square(mp.tensor([True, False])).dtype == mp.int64  # torch's pow(x, 2) of bool
    assert mp.square(mp.tensor([3], dtype=mp.int8)).dtype == mp.int8
    z = np.array([1 + 2j, -0.5 + 1j])
    tz, mz = torch.tensor(z, requires_grad=True), mp.tensor(z, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.square(tz), tz, torch.tensor([1 + 1j, 2 + 0j]))
    (mg,) = mp.autograd.grad(mp.square(mz), mz, mp.tensor([1 + 1j, 2 + 0j]))
    np.testing.assert_allclose(mg.numpy(), tg.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_nan_to_num_defaults_are_the_dtypes_finite_extremes(dtype):
    torch = pytest.importorskip("torch")
    values = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0])
    t = torch.tensor(values).to(getattr(torch, dtype))
    m = mp.tensor(values).to(getattr(mp, dtype))
    for kwargs in ({}, {"nan": 2.0, "posinf": 7.0}, {"neginf": -3.0}):
        out = mp.nan_to_num(m, **kwargs)
        assert out.dtype == m.dtype
        np.testing.assert_array_equal(_np(out), _np(torch.nan_to_num(t, **kwargs)))


def test_nan_to_num_gradient_flows_only_where_finite():
    x = mp.tensor([np.nan, 1.0, np.inf, -2.0], requires_grad=True)
    (g,) = mp.autograd.grad(mp.nan_to_num(x).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 1.0, 0.0, 1.0])
    assert mp.nan_to_num(mp.tensor([1, 2])).dtype == mp.int64


def test_clamp_min_max_and_rsub_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    for name, args in (("clamp_min", (b,)), ("clamp_max", (b,)), ("rsub", (b,)), ("clamp_min", (0.1,))):
        tx, mx = torch.tensor(x, requires_grad=True), mp.tensor(x, requires_grad=True)
        targs = [torch.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a for a in args]
        margs = [mp.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a for a in args]
        kw = {"alpha": 3} if name == "rsub" else {}
        tout, mout = getattr(torch, name)(tx, *targs, **kw), getattr(mp, name)(mx, *margs, **kw)
        np.testing.assert_allclose(mout.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
        tin = [tx] + [a for a in targs if isinstance(a, torch.Tensor)]
        min_ = [mx] + [a for a in margs if isinstance(a, mp.Tensor)]
        for g, w in zip(mp.autograd.grad(mout.sum(), min_), torch.autograd.grad(tout.sum(), tin)):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["atan", "asinh", "acosh", "atanh", "deg2rad", "rad2deg"])
@pytest.mark.parametrize("dtype", ["float32", "complex64", "int64"])
def test_unary_math_matches_torch(name, dtype):
    torch = pytest.importorskip("torch")
    if dtype == "complex64" and name in ("deg2rad", "rad2deg"):
        pytest.skip("torch has no complex deg2rad")
    values = np.array([-3.0, -0.7, 0.0, 0.4, 1.0, 2.5, 7.0])
    if dtype == "complex64":
        values = values + 0.5j
    t = torch.tensor(values).to(getattr(torch, dtype))
    m = mp.tensor(values).to(getattr(mp, dtype))
    want, got = getattr(torch, name)(t), getattr(mp, name)(m)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name,args", [("sgn", ()), ("square", ()), ("clamp_min", (0.2,)), ("clamp_max", (0.2,)),
                                       ("deg2rad", ()), ("rad2deg", ()), ("nan_to_num", ()), ("atan", ()),
                                       ("asinh", ()), ("atanh", ()), ("acosh", ())])
def test_in_place_variants(name, args):
    x = mp.tensor([1.3, -0.4, 0.6]) if name != "acosh" else mp.tensor([1.3, 2.0, 4.0])
    want = getattr(x, name)(*args)
    y = x.clone()
    assert getattr(y, name + "_")(*args) is y
    np.testing.assert_array_equal(y.numpy(), want.numpy())


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.signbit(mp.tensor([1j])), RuntimeError, r"signbit: not implemented for complex"),
    (lambda: mp.nan_to_num(mp.tensor([1.0]), nan="zero"), TypeError, r"nan_to_num: nan must be a number"),
    (lambda: mp.atan(mp.tensor([1.0]), 2), TypeError, r"atan\(\) takes at most"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
