"""hypot, copysign, fmax/fmin, logaddexp/logaddexp2, lerp, float_power, ldexp, heaviside, nextafter, frexp, gcd
and lcm (mixprec/ops/binary_math.py) against torch: values, result dtypes and gradients where a rule decides
them (ties and nans of fmax/fmin, copysign at zero, frexp's int32 exponent); in-place variants; bad input."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

NANS = (np.array([np.nan, 1.0, np.nan, 2.0, 3.0, -0.0]), np.array([2.0, np.nan, np.nan, 2.0, -1.0, 0.0]))


def _np(t):
    return t.detach().float().numpy() if str(t.dtype).endswith("bfloat16") else t.detach().numpy()


def _values_and_grads(name, arrays, torch, kwargs=None):
    kwargs = kwargs or {}
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ms = [mp.tensor(a, requires_grad=True) for a in arrays]
    tout, mout = getattr(torch, name)(*ts, **kwargs), getattr(mp, name)(*ms, **kwargs)
    np.testing.assert_allclose(mout.detach().numpy(), tout.detach().numpy(), rtol=1e-12, equal_nan=True)
    g = np.random.default_rng(0).standard_normal(tout.shape)
    for got, want in zip(mp.autograd.grad(mout, ms, mp.tensor(g)), torch.autograd.grad(tout, ts, torch.tensor(g))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_ties_and_nans_match_torch(name):
    _values_and_grads(name, NANS, pytest.importorskip("torch"))


def test_copysign_gradient_at_zero_and_signed_zeros_match_torch():
    torch = pytest.importorskip("torch")
    _values_and_grads("copysign", (np.array([0.0, -0.0, 2.0, -3.0, 1.0]), np.array([-1.0, 1.0, -0.0, 0.0, np.nan])),
                      torch)
    assert mp.copysign(mp.tensor([1, 2]), mp.tensor([-1, 1])).dtype == mp.float32  # integers give float32


@pytest.mark.parametrize("name", ["hypot", "logaddexp", "logaddexp2"])
def test_smooth_binary_ops_match_torch(name):
    rng = np.random.default_rng(1)
    _values_and_grads(name, (rng.standard_normal((3, 4)), rng.standard_normal(4)), pytest.importorskip("torch"))


def test_logaddexp_does_not_overflow():
    out = mp.logaddexp(mp.tensor([1000.0, -1000.0]), mp.tensor([1000.0, -1001.0]))
    np.testing.assert_allclose(out.numpy(), [1000 + np.log(2), -1000 + np.log1p(np.exp(-1))], rtol=1e-6)


def test_lerp_matches_torch_for_number_and_tensor_weights():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    a, b, w = rng.standard_normal((2, 3)), rng.standard_normal(3), rng.uniform(-0.5, 1.5, (2, 3))
    _values_and_grads("lerp", (a, b, w), torch)
    tout = torch.lerp(torch.tensor(a), torch.tensor(b), 0.75)
    np.testing.assert_allclose(mp.lerp(mp.tensor(a), mp.tensor(b), 0.75).numpy(), tout.numpy(), rtol=1e-12)


@pytest.mark.parametrize("base,exponent", [("int64", "int64"), ("float32", "float32"), ("float16", "int32"),
                                           ("complex64", "float32"), ("bool", "float64")])
def test_float_power_and_ldexp_result_dtypes_match_torch(base, exponent):
    torch = pytest.importorskip("torch")
    a, b = np.array([1, 2, 3]), np.array([2, 0, 1])
    ta, tb = torch.tensor(a).to(getattr(torch, base)), torch.tensor(b).to(getattr(torch, exponent))
    ma, mb = mp.tensor(a).to(getattr(mp, base)), mp.tensor(b).to(getattr(mp, exponent))
    for name in ("float_power", "ldexp"):
        want, got = getattr(torch, name)(ta, tb), getattr(mp, name)(ma, mb)
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), name
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    np.testing.assert_allclose(mp.float_power(2, mb).numpy(), torch.float_power(2, tb).numpy())
    assert mp.float_power(ma, 0.5).dtype == (mp.complex128 if base == "complex64" else mp.float64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_frexp_and_nextafter_match_torch(dtype):
    torch = pytest.importorskip("torch")
    values = np.array([0.0, -0.0, 1.0, -3.5, 1e-3, 1000.0, np.inf])
    t, m = torch.tensor(values).to(getattr(torch, dtype)), mp.tensor(values).to(getattr(mp, dtype))
    (tm, te), (mm, me) = torch.frexp(t), mp.frexp(m)
    assert mm.dtype == m.dtype and me.dtype == mp.int32
    finite = np.isfinite(values)  # (frexp of inf: the mantissa is inf, the exponent unspecified)
    np.testing.assert_array_equal(_np(mm), _np(tm))
    np.testing.assert_array_equal(me.numpy()[finite], te.numpy()[finite])
    towards = np.array([1.0, -1.0, 2.0, -4.0, 0.0, np.inf, 0.0])
    np.testing.assert_array_equal(_np(mp.nextafter(m, mp.tensor(towards).to(m.dtype))),
                                  _np(torch.nextafter(t, torch.tensor(towards).to(t.dtype))))


def test_frexp_gradient_and_tangent():
    x = mp.tensor([3.0, -0.3, 40.0], dtype=mp.float64, requires_grad=True)
    mantissa, exponent = mp.frexp(x)
    assert not exponent.requires_grad
    (g,) = mp.autograd.grad(mantissa.sum(), x)
    np.testing.assert_array_equal(g.numpy(), 2.0 ** -np.frexp(x.detach().numpy())[1])


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64"])
def test_gcd_lcm_heaviside_match_torch(dtype):
    torch = pytest.importorskip("torch")
    a, b = np.array([12, 18, 0, 7, 9]), np.array([8, 12, 5, 0, 3])
    if dtype != "uint8":
        a = a * np.array([1, -1, 1, 1, -1])
    ta, tb = torch.tensor(a).to(getattr(torch, dtype)), torch.tensor(b).to(getattr(torch, dtype))
    ma, mb = mp.tensor(a).to(getattr(mp, dtype)), mp.tensor(b).to(getattr(mp, dtype))
    for name in ("gcd", "lcm", "heaviside"):
        want, got = getattr(torch, name)(ta, tb), getattr(mp, name)(ma, mb)
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), name
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name,args", [("hypot", (0.5,)), ("copysign", (-1.0,)), ("lerp", (2.0, 0.3)),
                                       ("ldexp", (3.0,)), ("nextafter", (5.0,)), ("heaviside", (0.5,))])
def test_in_place_variants(name, args):
    x = mp.tensor([1.3, -0.4, 0.0])
    margs = [mp.tensor(a) for a in args[:1]] + list(args[1:])
    want = getattr(x, name)(*margs)
    y = x.clone()
    assert getattr(y, name + "_")(*margs) is y
    np.testing.assert_array_equal(y.numpy(), want.numpy())
    a = mp.tensor([6, 4])
    a.gcd_(mp.tensor([4, 6]))
    np.testing.assert_array_equal(a.numpy(), [2, 2])
    b = mp.tensor([2.0, 3.0], dtype=mp.float64)
    b.float_power_(2)
    np.testing.assert_array_equal(b.numpy(), [4.0, 9.0])


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.hypot(mp.tensor([1]), mp.tensor([2])), NotImplementedError, r"hypot: not implemented for int64"),
    (lambda: mp.gcd(mp.tensor([1.0]), mp.tensor([2.0])), NotImplementedError, r"gcd: not implemented for float32"),
    (lambda: mp.heaviside(mp.tensor([1.0]), mp.tensor([0.5], dtype=mp.float64)), TypeError,
     r"heaviside: .*same dtype"),
    (lambda: mp.heaviside(mp.tensor([1.0], requires_grad=True), mp.tensor([0.5])).sum().backward(), RuntimeError,
     r"heaviside: the derivative is not implemented"),
    (lambda: mp.frexp(mp.tensor([3])), NotImplementedError, r"frexp: not implemented for int64"),
    (lambda: mp.tensor([1.0]).float_power_(2), RuntimeError, r"float_power_: the base has dtype float32"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_ldexp_gradient_for_a_negative_integer_exponent_is_the_derivative():
    """Not torch's: its gradient in input for an integer exponent is 2**exponent in integer arithmetic (0 for
    exponent -2); mixprec's is the derivative of its forward, 0.25."""
    x = mp.tensor([1.0, 3.0], dtype=mp.float64, requires_grad=True)
    (g,) = mp.autograd.grad(mp.ldexp(x, mp.tensor([-2, 1])).sum(), x)
    np.testing.assert_array_equal(g.numpy(), [0.25, 2.0])
