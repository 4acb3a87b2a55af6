"""Forward-mode AD as users see it (mp.autograd.forward_ad): levels, duals, errors, autocast, in-place
changes, views and custom Functions; torch (CPU, float64) as the oracle where it defines the behaviour.

Every op's tangent rule itself is checked by tests/test_ops.py (against finite differences and reverse mode).
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
from mixprec.autograd import forward_ad as fwad

EPS_BF16 = 2.0 ** -7


def f64(values, **kw):
    return mp.tensor(values, dtype=mp.float64, **kw)


# ------------------------------------------------------------------ levels and duals
def test_dual_roundtrip_and_level_lifetime():
    x, v = f64([1.0, 2.0]), f64([0.5, -1.0])
    with fwad.dual_level() as level:
        assert level == 0
        d = fwad.make_dual(x, v)
        primal, tangent = fwad.unpack_dual(d)
        assert primal.tolist() == [1.0, 2.0] and tangent is v
        assert fwad.unpack_dual(primal).tangent is None  # the primal is a plain view
        y = (d * d).sum()
        assert fwad.unpack_dual(y).tangent.item() == pytest.approx(2 * (1.0 * 0.5 + 2.0 * -1.0))
        assert isinstance(fwad.unpack_dual(y), fwad.UnpackedDualTensor)
    assert fwad.unpack_dual(d).tangent is None  # leaving the level forgets every tangent
    fwad.enter_dual_level()
    try:
        assert fwad.unpack_dual(fwad.make_dual(x, v)).tangent is v
    finally:
        fwad.exit_dual_level()


def test_forward_mode_ignores_grad_mode_and_leaves_ints_alone(torch):
    for lib, ad in ((mp, fwad), (torch, torch.autograd.forward_ad)):
        with ad.dual_level(), lib.no_grad():
            d = ad.make_dual(lib.tensor([1.0, -2.0], dtype=lib.float64), lib.tensor([1.0, 1.0], dtype=lib.float64))
            assert ad.unpack_dual(d.exp()).tangent is not None
            assert ad.unpack_dual(d.argmax()).tangent is None


@pytest.mark.parametrize("case", ["nested", "outside", "shape", "int"])
def test_errors_match_torch(case, torch):
    def attempt(lib, ad):
        x = lib.ones(3, dtype=lib.float64)
        if case == "outside":
            return ad.make_dual(x, x)
        with ad.dual_level():
            if case == "nested":
                with ad.dual_level():
                    pass
            if case == "shape":
                ad.make_dual(x, lib.ones(2, dtype=lib.float64))
            if case == "int":
                ad.make_dual(lib.ones(3, dtype=lib.int64), x)
    with pytest.raises(Exception) as theirs:
        attempt(torch, torch.autograd.forward_ad)
    with pytest.raises(type(theirs.value), match={"nested": "nested", "outside": "no dual level",
                                                  "shape": r"tangent has shape \(2,\)", "int": "floating"}[case]):
        attempt(mp, fwad)


def test_a_tangent_must_have_its_primals_dtype():
    """torch keeps a float64 tangent on a float32 primal; mixprec refuses it (tangents follow the primal)."""
    with fwad.dual_level():
        with pytest.raises(ValueError, match="tangent has dtype float64, but the primal has dtype float32"):
            fwad.make_dual(mp.ones(2), mp.ones(2, dtype=mp.float64))
        with pytest.raises(RuntimeError, match="level 3 is not the active"):
            fwad.make_dual(mp.ones(2), mp.ones(2), level=3)
    with pytest.raises(RuntimeError, match="no dual level"):
        fwad.exit_dual_level()


# ------------------------------------------------------------------ autocast
def test_tangents_follow_the_primal_dtype_under_autocast(torch):
    """A float32 dual cast to bfloat16 for a matmul has a bfloat16 tangent (as in torch), equal to the float64
    J v of the rounded values within bfloat16 accuracy; a float32-policy op gives a float32 tangent."""
    rng = np.random.default_rng(0)
    x, v, w = (rng.standard_normal(s).astype(np.float32) for s in [(3, 16), (3, 16), (16, 2)])
    with fwad.dual_level():
        d = fwad.make_dual(mp.tensor(x), mp.tensor(v))
        with mp.autocast("cpu", dtype=mp.bfloat16):
            y = d @ mp.tensor(w)
            z = y.prod(dim=1)  # prod: float32 under CPU autocast
        _, ty = fwad.unpack_dual(y)
        pz, tz = fwad.unpack_dual(z)
    assert ty.dtype == mp.bfloat16 and tz.dtype == mp.float32 and pz.dtype == mp.float32
    rounded = [mp.tensor(a).to(mp.bfloat16).numpy().astype(np.float64) for a in (x, v, w)]
    exact = rounded[1] @ rounded[2]
    scale = np.abs(rounded[1]) @ np.abs(rounded[2])
    assert np.all(np.abs(ty.numpy().astype(np.float64) - exact) <= 2 * EPS_BF16 * scale + 1e-6)
    with torch.autograd.forward_ad.dual_level():
        td = torch.autograd.forward_ad.make_dual(torch.tensor(x), torch.tensor(v))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ty_torch = torch.autograd.forward_ad.unpack_dual(td @ torch.tensor(w)).tangent
    assert ty_torch.dtype == torch.bfloat16  # the same dtype as torch gives


# ------------------------------------------------------------------ in place and views
def test_inplace_changes_update_tangents(torch):
    def run(lib, ad):
        with ad.dual_level():
            d = ad.make_dual(lib.tensor([1.0, 2.0], dtype=lib.float64), lib.tensor([3.0, -1.0], dtype=lib.float64))
            b = d.clone()
            b.mul_(d)                      # b = d * d: tangent 2 d t
            base = lib.zeros(3, dtype=lib.float64)
            base[1:].copy_(b)              # through a view: the base gets the tangent in that region
            return ad.unpack_dual(b).tangent.numpy().copy(), ad.unpack_dual(base).tangent.numpy().copy()
    for got, want in zip(run(mp, fwad), run(torch, torch.autograd.forward_ad)):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ custom Functions
class Exp(mp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        ctx.save_for_forward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y

    @staticmethod
    def jvp(ctx, t):
        (y,) = ctx.saved_tensors   # in jvp: what save_for_forward kept
        return t * y


class SinCos(mp.autograd.Function):
    """Two outputs; the second input is a number (its tangent slot is None)."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_forward(x)
        ctx.scale = scale
        return x.sin() * scale, x.cos()

    @staticmethod
    def jvp(ctx, t, _):
        (x,) = ctx.saved_tensors
        return t * x.cos() * ctx.scale, -t * x.sin()


def test_function_jvp():
    x, v = f64([0.3, -1.2]), f64([1.0, 2.0])
    with fwad.dual_level():
        d = fwad.make_dual(x, v)
        t = fwad.unpack_dual(Exp.apply(d)).tangent
        s, c = SinCos.apply(d, 2.0)
        ts, tc = fwad.unpack_dual(s).tangent, fwad.unpack_dual(c).tangent
    np.testing.assert_allclose(t.numpy(), v.numpy() * np.exp(x.numpy()))
    np.testing.assert_allclose(ts.numpy(), 2 * v.numpy() * np.cos(x.numpy()))
    np.testing.assert_allclose(tc.numpy(), -v.numpy() * np.sin(x.numpy()))
    assert mp.autograd.gradcheck(Exp.apply, (f64([0.3, -1.2], requires_grad=True),), check_forward_ad=True)


def test_function_without_jvp_refuses_forward_mode(torch):
    class NoJvp(mp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    with fwad.dual_level():
        d = fwad.make_dual(f64([1.0]), f64([1.0]))
        with pytest.raises(NotImplementedError, match="must implement the jvp function"):
            NoJvp.apply(d)
        assert NoJvp.apply(f64([1.0])).tolist() == [2.0]  # without a tangent jvp is not needed


def test_custom_fwd_function_runs_its_jvp_under_autocast():
    class Scale(mp.autograd.Function):
        @staticmethod
        @mp.amp.custom_fwd(device_type="cpu", cast_inputs=mp.float32)
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def jvp(ctx, t):
            return t * 3
    with fwad.dual_level():
        d = fwad.make_dual(mp.ones(2, dtype=mp.bfloat16), mp.ones(2, dtype=mp.bfloat16))
        with mp.autocast("cpu"):
            y = Scale.apply(d)
        assert y.dtype == mp.float32 and fwad.unpack_dual(y).tangent.dtype == mp.float32
        assert fwad.unpack_dual(y).tangent.tolist() == [3.0, 3.0]
