"""Cases for the ops of mixprec/ops/linalg_lowrank.py (svd_lowrank, pca_lowrank).

The inputs are of rank q exactly (a @ b^T with q columns each), where the randomized range finder captures the
whole range whatever its random draw: S and the reconstruction U diag(S) V^T are then deterministic, and free of
the singular vectors' sign, so they compare with NumPy's SVD and their derivatives can be checked.
"""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, rnd


def reconstructed(usv):
    u, s, v = usv
    return s, (u * s.unsqueeze(-2)) @ v.mT


def svd_ref(x, q):
    s = np.linalg.svd(x, compute_uv=False)[..., :q]
    return s, x


def centered(x):
    return x - x.mean(-2, keepdims=True)


CASES = [
    Case("svd_lowrank-tall", "svd_lowrank", [rnd(6, 2), rnd(4, 2)],
         lambda a, b: reconstructed(mp.svd_lowrank(a @ b.mT, q=2)), lambda a, b: svd_ref(a @ b.T, 2), lowp=False,
         rtol64=1e-9),
    Case("svd_lowrank-wide-M", "svd_lowrank", [rnd(2, 3, 2), rnd(2, 5, 2), rnd(2, 1, 5)],
         lambda a, b, c: reconstructed(mp.svd_lowrank(a @ b.mT + c, q=2, niter=1, M=c)),
         lambda a, b, c: (np.linalg.svd(a @ np.swapaxes(b, -1, -2), compute_uv=False)[..., :2],
                          a @ np.swapaxes(b, -1, -2)), lowp=False, rtol64=1e-9),
    Case("pca_lowrank", "pca_lowrank", [rnd(7, 2), rnd(4, 2)],
         lambda a, b: reconstructed(mp.pca_lowrank(a @ b.mT, q=3)),
         lambda a, b: svd_ref(centered(a @ b.T), 3), lowp=False, rtol64=1e-9, grad=False),
    Case("pca_lowrank-uncentered", "pca_lowrank", [rnd(5, 2), rnd(4, 2)],
         lambda a, b: reconstructed(mp.pca_lowrank(a @ b.mT, q=2, center=False)),
         lambda a, b: svd_ref(a @ b.T, 2), lowp=False, rtol64=1e-9),
]
