"""ops/gemm.py: the fused products round once on every device, and cuBLAS gets every layout right."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F

from conftest import DEVICES

HALF = [mp.float16, mp.bfloat16]


def _t(values, dtype, device):
    return mp.tensor(np.asarray(values, dtype=np.float64), dtype=dtype, device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_the_addend_joins_before_the_one_rounding(device):
    """1 + 2^-11 + 2^-13 rounds up to 1 + 2^-10 in float16; adding -2^-12 first gives 1 + 3 * 2^-13, which
    rounds to 1. A product rounded before the addend joins (two roundings) gives 1 + 2^-10 instead."""
    a = _t([[1.0, 2.0 ** -11, 2.0 ** -13]], mp.float16, device)
    b = _t([[1.0], [1.0], [1.0]], mp.float16, device)
    c = _t([[-(2.0 ** -12)]], mp.float16, device)
    assert mp.addmm(c, a, b).item() == 1.0
    assert F.linear(a, b.T, c.reshape(1)).item() == 1.0
    assert mp.baddbmm(c[None], a[None], b[None]).item() == 1.0
    assert mp.addmv(c.reshape(1), a, b.reshape(3)).item() == 1.0
    # alpha and beta join in float32 too: 2 * (1 + 2^-11 + 2^-13) - 2 * 2^-12 = 2 + 3 * 2^-12 -> 2
    assert mp.addmm(c, a, b, beta=2, alpha=2).item() == 2.0


def _reference(alpha, a, b, beta, c):
    """float64 arithmetic on the (rounded) half inputs."""
    wide = [x.float().cpu().numpy().astype(np.float64) for x in (a, b)]
    out = alpha * (wide[0] @ wide[1])
    if beta != 0:
        out = out + beta * c.float().cpu().numpy().astype(np.float64)
    return out


def _assert_rounded_once(got, want, dtype):
    """Within half an ulp of the float64 value, plus float32 accumulation's error."""
    eps = 2.0 ** -10 if dtype == mp.float16 else 2.0 ** -7
    got = got.float().cpu().numpy().astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0.5 * eps + 1e-5, atol=1e-5 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALF, ids=lambda d: d.name)
def test_layouts_batches_and_vectors(device, dtype):
    rng = np.random.default_rng(0)

    def t(*shape):
        return _t(rng.standard_normal(shape), dtype, device)
    x, w, bias = t(2, 5, 7), t(3, 7), t(3)
    _assert_rounded_once(F.linear(x, w, bias), _reference(1, x, w.T, 1, bias), dtype)  # weight.T: transposed
    m1, m2, c = t(6, 4), t(4, 5), t(6, 5)
    _assert_rounded_once(mp.addmm(c, m1[:, ::1], m2, alpha=0.5, beta=-1.5), _reference(0.5, m1, m2, -1.5, c), dtype)
    wide = t(6, 8)
    strided = wide[:, ::2]  # neither row- nor column-major: copied for cuBLAS
    _assert_rounded_once(mp.addmm(c, strided, m2), _reference(1, strided, m2, 1, c), dtype)
    b1, b2, bc = t(3, 4, 2), t(3, 2, 5), t(1, 5)
    _assert_rounded_once(mp.baddbmm(bc, b1, b2), _reference(1, b1, b2, 1, bc), dtype)
    mat, vec, vc = t(4, 3), t(3), t(4)
    _assert_rounded_once(mp.addmv(vc, mat, vec), _reference(1, mat, vec, 1, vc), dtype)
    broadcast = t(2, 1, 3, 4) @ t(5, 4, 2)  # batch dims broadcast (bfloat16 takes cuBLAS here too)
    assert broadcast.shape == (2, 5, 3, 2) and broadcast.dtype == dtype


@pytest.mark.parametrize("device", DEVICES)
def test_beta_zero_ignores_the_addend_even_nan_and_an_empty_sum_is_beta_c(device):
    a, b = _t(np.ones((2, 3)), mp.float16, device), _t(np.ones((3, 2)), mp.float16, device)
    nan = _t(np.full((2, 2), np.nan), mp.float16, device)
    assert (mp.addmm(nan, a, b, beta=0).numpy() == 3).all()
    empty_a, empty_b = _t(np.ones((2, 0)), mp.float16, device), _t(np.ones((0, 2)), mp.float16, device)
    c = _t([[1.5, -2.0], [0.25, 4.0]], mp.float16, device)
    np.testing.assert_array_equal(mp.addmm(c, empty_a, empty_b, beta=2).numpy(), 2 * c.numpy())



@pytest.mark.parametrize("device", DEVICES)
def test_reversed_batches_and_empty_sums_in_float64(device):
    rng = np.random.default_rng(1)
    x, w = _t(rng.standard_normal((3, 2, 4)), mp.float16, device), _t(rng.standard_normal((4, 5)), mp.float16, device)
    flipped = mp.flip(x, (0,))  # a batch stride below zero: copied for cuBLAS
    _assert_rounded_once(flipped @ w, _reference(1, flipped, w, 0, None), mp.float16)
    _assert_rounded_once(mp.bmm(flipped, w.expand(3, 4, 5)), _reference(1, flipped, w, 0, None), mp.float16)
    c = mp.tensor([[1 + 2.0 ** -40]], dtype=mp.float64, device=device)
    empty = mp.zeros(1, 0, dtype=mp.float64, device=device)
    assert mp.addmm(c, empty, empty.T, beta=3).item() == 3 * (1 + 2.0 ** -40)  # beta * c in float64
