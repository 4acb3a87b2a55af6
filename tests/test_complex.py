"""Complex tensors: dtypes and promotion, and the autograd convention, against torch.

torch's convention: the gradient of a real loss L with respect to z = x + iy is
dL/dx + i dL/dy. It holds when every op conjugates its partial derivative in
backward, a complex gradient reaching a real input keeps its real part, and a
complex tangent of a real output likewise; these tests check each of those
rules and a few compositions against torch.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import mixprec as mp
from mixprec.autograd import forward_ad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
DTYPES = [mp.bool_, mp.int32, mp.int64, mp.float16, mp.bfloat16, mp.float32, mp.float64, mp.complex64, mp.complex128]


def _torch_dtype(d):
    return getattr(torch, "bool" if d == mp.bool_ else d.name)


@pytest.mark.parametrize("a,b", [p for p in itertools.product(DTYPES, DTYPES)
                                 if mp.complex64 in p or mp.complex128 in p])
def test_promotion_with_complex_matches_torch(a, b):
    want = torch.promote_types(_torch_dtype(a), _torch_dtype(b))
    assert mp.dtypes.promote(a, b).name == str(want).replace("torch.", "")
    x, y = mp.ones(2, dtype=a), mp.ones(2, dtype=b)
    assert (x + y).dtype == mp.dtypes.promote(a, b)


@pytest.mark.parametrize("dtype,want", [(mp.float32, mp.complex64), (mp.float64, mp.complex128),
                                        (mp.int64, mp.complex64), (mp.complex128, mp.complex128)])
def test_a_complex_python_scalar_is_weak_like_a_float(dtype, want):
    x = mp.ones(2, dtype=dtype)
    assert (x - 1j).dtype == want and (2j * x).dtype == want
    assert str((torch.ones(2, dtype=_torch_dtype(dtype)) - 1j).dtype) == f"torch.{want.name}"


def test_complex_tensors_are_made_like_torchs():
    assert mp.tensor([1 + 2j]).dtype == mp.complex64  # a Python complex is complex64, as float is float32
    assert mp.tensor(np.array([1j])).dtype == mp.complex128  # an array keeps its dtype
    assert mp.zeros(2, dtype="cdouble").dtype == mp.complex128 and mp.ones(1).to("complex64").dtype == mp.complex64
    z = mp.tensor([1 + 2j, -3j], requires_grad=True)
    assert z.requires_grad and z.is_complex() and not z.is_floating_point()
    assert z.real.tolist() == [1.0, 0.0] and z.imag.tolist() == [2.0, -3.0]
    x = mp.ones(2)
    assert x.real is x and not x.is_complex()
    with pytest.raises(RuntimeError, match="floating-point and complex tensors can require gradients"):
        mp.ones(2, dtype=mp.int64).requires_grad_()


def test_autocast_never_casts_complex():
    z = mp.tensor([1 + 1j, 2 - 1j], dtype=mp.complex64)
    with mp.autocast("cpu"):
        assert mp.fft.fft(z).dtype == mp.complex64  # a float32-policy op
        assert (z @ z).dtype == mp.complex64        # a lower-precision-policy op


# ----------------------------------------------------------------- the gradient convention
def _both(f, *arrays):
    """f's gradients in mixprec and torch for complex or real float64 arrays, loss = f(...)."""
    xs = [mp.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    f(mp, *xs).backward()
    f(torch, *ts).backward()
    return [x.grad.numpy() for x in xs], [t.grad.resolve_conj().numpy() for t in ts]


Z = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)
W = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)
R = RNG.standard_normal(4)
LOSSES = [
    ("abs2", lambda m, z: (z.abs() ** 2).sum(), [Z]),
    ("mul-real", lambda m, z, w: (z * w).real.sum(), [Z, W]),
    ("div-imag", lambda m, z, w: (z / w).imag.sum(), [Z, W]),
    ("exp-abs", lambda m, z: (z.exp() * 2).abs().sum(), [Z]),
    ("conj-angle", lambda m, z, w: (z.conj() * w).angle().sum(), [Z, W]),
    ("sub-scalar", lambda m, z: ((z - 1j) * (3 - 2j)).abs().sum(), [Z]),
    ("real-to-complex", lambda m, x, z: (x * z).abs().sum(), [R, Z]),
    ("polar", lambda m, r, t: (m.polar(r, t) * (1 + 2j)).real.sum(), [np.abs(R) + 0.5, R]),
    ("view_as", lambda m, z: (m.view_as_complex(m.view_as_real(z) * 2) ** 2).imag.sum(), [Z]),
    ("matmul", lambda m, a, b: (a.reshape(2, 2) @ b.reshape(2, 2)).abs().sum(), [Z, W]),
    ("dot-mv", lambda m, a, b: (m.mv(a.reshape(2, 2), b[:2]).sum() + m.dot(a, b)).abs(), [Z, W]),
    ("sum-mean", lambda m, z: (z.sum() * z.mean()).real, [Z]),
    ("vecdot", lambda m, a, b: m.linalg.vecdot(a, b).abs(), [Z, W]),
    ("solve", lambda m, a, b: m.linalg.solve(a.reshape(2, 2) + 3, b[:2]).abs().sum(), [Z, W]),
    ("inv", lambda m, a: m.linalg.inv(a.reshape(2, 2) + 3).real.sum(), [Z]),
]


@pytest.mark.parametrize("f,arrays", [pytest.param(f, a, id=i) for i, f, a in LOSSES])
def test_gradients_follow_torchs_convention(f, arrays):
    got, want = _both(f, *arrays)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_gradient_is_the_steepest_ascent_direction():
    """d/dt L(z + t v) = Re(<grad, v>): the gradient is dL/dx + i dL/dy (checked by finite differences)."""
    z = mp.tensor(Z, requires_grad=True)
    loss = lambda t: ((t * t.conj()).real * (t + 2).abs()).sum()  # noqa: E731
    loss(z).backward()
    v = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)
    eps = 1e-6
    numeric = (loss(mp.tensor(Z + eps * v)).item() - loss(mp.tensor(Z - eps * v)).item()) / (2 * eps)
    assert numeric == pytest.approx(float(np.real(np.vdot(z.grad.numpy(), v))), rel=1e-6)


def test_a_real_input_gets_a_real_gradient_and_a_real_output_a_real_tangent():
    x = mp.tensor(R, requires_grad=True)
    (x * (1 + 2j)).imag.sum().backward()
    assert x.grad.dtype == mp.float64 and np.allclose(x.grad.numpy(), 2.0)
    with forward_ad.dual_level():
        z = forward_ad.make_dual(mp.tensor(Z), mp.tensor(W))
        out = z.abs()
        tangent = forward_ad.unpack_dual(out).tangent
    assert tangent.dtype == mp.float64
    np.testing.assert_allclose(tangent.numpy(), np.real(np.conj(Z) * W) / np.abs(Z))


def test_where_gives_no_gradient_to_the_branch_not_taken_even_a_nan_one():
    x = mp.tensor([1.0, 2.0], dtype=mp.float64, requires_grad=True)
    y = mp.tensor([3.0, 4.0], dtype=mp.float64, requires_grad=True)
    out = mp.where(mp.tensor([True, False]), x, y)
    out.backward(mp.tensor([float("nan"), 1.0], dtype=mp.float64))
    assert np.isnan(x.grad.numpy()[0]) and x.grad.numpy()[1] == 0 and y.grad.numpy().tolist() == [0.0, 1.0]


ERRORS = [
    ("imag-real", lambda: mp.imag(mp.ones(2)), TypeError, "imag: is not defined for real tensors"),
    ("view_as_real-real", lambda: mp.view_as_real(mp.ones(2)), TypeError, "expected a complex tensor"),
    ("view_as_complex-shape", lambda: mp.view_as_complex(mp.ones(2, 3)), RuntimeError, "last dimension of size 2"),
    ("view_as_complex-half", lambda: mp.view_as_complex(mp.ones(2, 2, dtype=mp.float16)), TypeError,
     "no complex32"),
    ("complex-ints", lambda: mp.complex(mp.ones(2, dtype=mp.int64), mp.ones(2, dtype=mp.int64)), TypeError,
     "float32 or float64 parts"),
    ("complex-mixed", lambda: mp.complex(mp.ones(2), mp.ones(2, dtype=mp.float64)), TypeError, "same dtype"),
    ("polar-half", lambda: mp.polar(mp.ones(2, dtype=mp.bfloat16), mp.ones(2, dtype=mp.bfloat16)), TypeError,
     "mp.autocast"),
    ("unsupported-complex", lambda: mp.zeros(2, dtype=np.clongdouble), TypeError, "unsupported dtype"),
]


@pytest.mark.parametrize("fn,exc,match", [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_complex_ops_under_cpu_autocast_follow_the_float32_list():
    a = mp.tensor(RNG.standard_normal((3, 2)), dtype=mp.bfloat16)
    with mp.autocast("cpu"):
        assert mp.view_as_complex(a).dtype == mp.complex64
        assert mp.polar(a[:, 0], a[:, 1]).dtype == mp.complex64


def test_gradcheck_asks_for_real_views_of_complex_values():
    x = mp.ones(3, dtype=mp.float64, requires_grad=True)
    with pytest.raises(TypeError, match="view_as_real"):
        mp.autograd.gradcheck(lambda t: t * 1j, [x])
    with pytest.raises(TypeError, match="mp.complex"):
        mp.autograd.gradcheck(lambda z: z.abs(), [mp.tensor([1j], requires_grad=True)])
    assert mp.autograd.gradcheck(lambda t: mp.view_as_real((t * (1 + 2j)).exp()), [x])


def test_complex_tensors_round_trip_through_checkpoints(tmp_path):
    z = mp.tensor(Z, requires_grad=True)
    mp.save({"z": z}, tmp_path / "z.mp")
    back = mp.load(tmp_path / "z.mp")["z"]
    assert back.dtype == mp.complex128 and back.requires_grad
    np.testing.assert_array_equal(back.numpy(), Z)


def test_complex_values_are_built_part_by_part_like_torchs():
    """re + im * 1j would make inf * 1j = nan + inf j: complex, view_as_complex and polar write each part."""
    inf = float("inf")
    re, im = mp.tensor([1.0, inf, -2.0]), mp.tensor([inf, 2.0, -inf])
    want = torch.complex(torch.tensor(re.numpy()), torch.tensor(im.numpy())).numpy()
    np.testing.assert_array_equal(mp.complex(re, im).numpy(), want)
    np.testing.assert_array_equal(mp.view_as_complex(mp.stack([re, im], -1)).numpy(), want)
    r, t = mp.tensor([2.0, 0.5]), mp.tensor([0.5, -3.0])
    np.testing.assert_allclose(mp.polar(r, t).numpy(), torch.polar(torch.tensor(r.numpy()), torch.tensor(t.numpy())))
    assert repr(mp.tensor([1j])) == "tensor([0.+1.j])"  # complex64 is the default complex dtype, as in torch
