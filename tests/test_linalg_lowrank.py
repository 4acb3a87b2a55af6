"""svd_lowrank and pca_lowrank against torch: what does not depend on the random draw (S, the reconstruction, and
their gradients on inputs of rank q), mp.manual_seed reproducibility, and bad arguments."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
A, B, C = RNG.standard_normal((6, 3)), RNG.standard_normal((5, 3)), RNG.standard_normal((1, 5))


def gauge_free(u, s, v):
    return s, (u * s.unsqueeze(-2)) @ v.mT


CALLS = [
    ("svd_lowrank", lambda lib, a, b, c: lib.svd_lowrank(a @ b.mT, q=3)),
    ("svd_lowrank-M", lambda lib, a, b, c: lib.svd_lowrank(a @ b.mT + c, q=3, niter=1, M=c)),
    ("svd_lowrank-wide", lambda lib, a, b, c: lib.svd_lowrank(b @ a.mT, q=3)),
    ("pca_lowrank-uncentered", lambda lib, a, b, c: lib.pca_lowrank(a @ b.mT, q=3, center=False)),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=i) for i, c in CALLS])
def test_values_and_gradients_free_of_the_random_draw_match_torch(call):
    mt = [mp.tensor(x, requires_grad=True) for x in (A, B, C)]
    tt = [torch.tensor(x, requires_grad=True) for x in (A, B, C)]
    got, want = gauge_free(*call(mp, *mt)), gauge_free(*call(torch, *tt))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-9, atol=1e-10)
    cot = [RNG.standard_normal(tuple(w.shape)) for w in want]
    mg = mp.autograd.grad(list(got), mt[:2], [mp.tensor(c) for c in cot])
    tg = torch.autograd.grad(list(want), tt[:2], [torch.tensor(c) for c in cot])
    for g, w in zip(mg, tg):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-7, atol=1e-8)


def test_pca_lowrank_centers_the_columns():
    x = RNG.standard_normal((8, 4)) + 5.0
    u, s, v = mp.pca_lowrank(mp.tensor(x), q=4)
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(x - x.mean(0), compute_uv=False), rtol=1e-10)


def test_the_random_draw_follows_manual_seed():
    x = mp.tensor(RNG.standard_normal((10, 8)))
    mp.manual_seed(3)
    first = mp.svd_lowrank(x, q=2, niter=0)
    mp.manual_seed(3)
    again = mp.svd_lowrank(x, q=2, niter=0)
    for f, a in zip(first, again):
        np.testing.assert_array_equal(f.numpy(), a.numpy())


BAD = [
    (lambda: mp.svd_lowrank(mp.randn(3)), RuntimeError, "at least 2 dimensions"),
    (lambda: mp.svd_lowrank(mp.randn(3, 3), q=-1), ValueError, "q must be a non-negative int"),
    (lambda: mp.pca_lowrank(mp.randn(3, 4), q=5), ValueError, "at most min"),
    (lambda: mp.pca_lowrank(mp.randn(3, 4), niter=1.5), ValueError, "niter"),
]


@pytest.mark.parametrize("call,exc,match", BAD)
def test_bad_arguments_raise_clear_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
