"""Cases for the ops of mixprec/ops/linalg_lu_cholesky.py (mp.linalg, part 1; part 2 is linalg_qr_eig_svd.py).

References are NumPy/SciPy float64 (LAPACK), so the forward checks are loose
by design; what these cases buy is the derivative checks: every rule against
finite differences, forward mode against reverse mode, in float64. Inputs are
kept well conditioned: random matrices plus a multiple of the identity, SPD
matrices as X X^T + I, eigen/singular vectors only through sign-invariant
functions (their gauge). Most of these ops refuse half precision, as torch's
do (tests/test_linalg.py checks the errors), so lowp is off for them.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

import mixprec as mp

from .case import Case, const, rnd, uni


def wellcond(*shape):
    """Random square matrices with their diagonal pushed away from singularity."""
    n = shape[-1]
    return lambda rng: rng.standard_normal(shape) + n * np.eye(n)


def spd(x):
    return x @ np.swapaxes(x, -1, -2) + np.eye(x.shape[-1])


def mspd(x):
    return x @ x.mT + mp.eye(x.shape[-1], dtype=x.dtype, device=x.device)


def sym(x):
    return x + np.swapaxes(x, -1, -2)


def diagonal_scatter_ref(a, s):
    out = a.copy()
    out[np.arange(len(s)), np.arange(len(s))] = s
    return out


def with_long(result, lib):
    """An op's outputs with its int32 one (pivots, info) as int64, the dtype the case drivers compare (lib: the
    library the case runs under, mixprec or torch as the fault campaign rebinds ``mp``)."""
    return tuple(t.long() if t.dtype == lib.int32 else t for t in result)


def lu_ref(a):
    lu, piv = sla.lu_factor(a)
    return lu, (piv + 1).astype(np.int64)


PIVOTS = np.array([3, 3, 3, 4], dtype=np.int32)  # row swaps of a 4 x 4 LU (1-based, as LAPACK)


def lu_solve_ref(b, lu):
    return sla.lu_solve((lu, PIVOTS - 1), b)


CASES = [
    # ---- triangles and diagonals (pure data movement: exact in half precision too)
    Case("tril", "tril", [rnd(2, 3, 4)], lambda a: mp.tril(a, -1), lambda a: np.tril(a, -1)),
    Case("triu", "triu", [rnd(4, 3)], lambda a: a.triu(1), lambda a: np.triu(a, 1)),
    Case("diagonal", "diagonal", [rnd(2, 3, 4)], lambda a: a.diagonal(1, -2, -1),
         lambda a: np.diagonal(a, 1, -2, -1)),
    Case("diagonal-dims", "diagonal", [rnd(3, 2, 4)], lambda a: mp.diagonal(a, -1, 2, 0),
         lambda a: np.diagonal(a, -1, 2, 0)),
    Case("diagonal_scatter", "diagonal_scatter", [rnd(3, 4), rnd(3)], mp.diagonal_scatter, diagonal_scatter_ref),
    Case("diag_embed", "diag_embed", [rnd(2, 3)], lambda a: mp.diag_embed(a, 1),
         lambda a: np.stack([np.diag(r, 1) for r in a])),
    # ---- LU: inverses, solves, determinants
    Case("inv", "linalg_inv", [wellcond(2, 3, 3)], mp.linalg.inv, np.linalg.inv, lowp=False, second_order=True,
         rtol64=1e-10),
    Case("inverse", "linalg_inv", [wellcond(3, 3)], lambda a: a.inverse(), np.linalg.inv, lowp=False,
         rtol64=1e-10),
    Case("inv_ex", "linalg_inv_ex", [wellcond(2, 3, 3)], lambda a: with_long(mp.linalg.inv_ex(a), mp),
         lambda a: (np.linalg.inv(a), np.zeros(2, dtype=np.int64)), lowp=False, rtol64=1e-10),
    Case("solve", "linalg_solve", [wellcond(2, 3, 3), rnd(2, 3, 2)], mp.linalg.solve, np.linalg.solve,
         lowp=False, second_order=True, rtol64=1e-10),
    Case("solve-batched-vectors", "linalg_solve", [wellcond(2, 3, 3), rnd(2, 3)], mp.linalg.solve,
         lambda a, b: np.linalg.solve(a, b[..., None])[..., 0], lowp=False, rtol64=1e-10),
    Case("solve-right", "linalg_solve", [wellcond(3, 3), rnd(2, 3)], lambda a, b: mp.linalg.solve(a, b, left=False),
         lambda a, b: np.linalg.solve(a.T, b.T).T, lowp=False, rtol64=1e-10),
    Case("solve_triangular", "linalg_solve_triangular", [wellcond(2, 3, 3), rnd(2, 3, 2)],
         lambda a, b: mp.linalg.solve_triangular(a, b, upper=True),
         lambda a, b: np.stack([sla.solve_triangular(x, y) for x, y in zip(a, b)]), lowp=False, rtol64=1e-10),
    Case("solve_triangular-right-unit", "linalg_solve_triangular", [rnd(3, 3), rnd(2, 3)],
         lambda a, b: mp.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True),
         lambda a, b: sla.solve_triangular(a.T, b.T, lower=False, unit_diagonal=True).T, lowp=False, rtol64=1e-10),
    Case("triangular_solve", "triangular_solve", [rnd(3, 2), wellcond(3, 3)],
         lambda b, a: mp.triangular_solve(b, a, upper=False, transpose=True),
         lambda b, a: (sla.solve_triangular(a, b, lower=True, trans=1), a), lowp=False, rtol64=1e-10),
    Case("lu_factor", "linalg_lu_factor", [rnd(4, 4)], lambda a: with_long(mp.linalg.lu_factor(a), mp), lu_ref,
         lowp=False, rtol64=1e-10),
    Case("lu_factor-wide", "linalg_lu_factor", [rnd(2, 3, 5)], lambda a: with_long(mp.linalg.lu_factor(a), mp),
         lambda a: tuple(np.stack(x) for x in zip(*[lu_ref(m) for m in a])), lowp=False, rtol64=1e-10),
    Case("lu_solve", "lu_solve", [rnd(4, 2), wellcond(4, 4)],
         lambda b, lu: mp.lu_solve(b, lu, mp.tensor(PIVOTS, device=b.device)), lu_solve_ref, lowp=False,
         rtol64=1e-10),
    Case("linalg.lu_solve-adjoint-right", "linalg_lu_solve", [wellcond(4, 4), rnd(3, 4)],
         lambda lu, b: mp.linalg.lu_solve(lu, mp.tensor(PIVOTS, device=lu.device), b, left=False, adjoint=True),
         lambda lu, b: lu_solve_ref(b.T, lu).T, lowp=False, rtol64=1e-10),
    Case("det", "linalg_det", [rnd(2, 3, 3)], mp.linalg.det, np.linalg.det, lowp=False, second_order=True,
         rtol64=1e-10),
    Case("det-singular", "linalg_det", [const(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, -1.0, 2.0]]))],
         mp.det, np.linalg.det, lowp=False),
    Case("slogdet", "linalg_slogdet", [rnd(2, 3, 3)], mp.linalg.slogdet,
         lambda a: tuple(np.linalg.slogdet(a)), lowp=False, rtol64=1e-10),
    # ---- Cholesky
    Case("cholesky", "linalg_cholesky", [rnd(2, 3, 3)], lambda x: mp.linalg.cholesky(mspd(x)),
         lambda x: np.linalg.cholesky(spd(x)), lowp=False, second_order=True, rtol64=1e-10),
    Case("cholesky-upper", "linalg_cholesky", [rnd(3, 3)], lambda x: mp.cholesky(mspd(x), True),
         lambda x: np.linalg.cholesky(spd(x)).T, lowp=False, rtol64=1e-10),
    Case("cholesky_ex", "linalg_cholesky_ex", [rnd(3, 3)],
         lambda x: with_long(mp.linalg.cholesky_ex(mspd(x), upper=True), mp),
         lambda x: (np.linalg.cholesky(spd(x)).T, np.zeros((), dtype=np.int64)), lowp=False, rtol64=1e-10),
    Case("cholesky_inverse", "cholesky_inverse", [rnd(2, 3, 3)], lambda x: mp.cholesky_inverse(x.tril() + 3),
         lambda x: (lambda low: np.linalg.inv(low @ np.swapaxes(low, -1, -2)))(np.tril(np.tril(x) + 3)),
         lowp=False, rtol64=1e-10),
    Case("cholesky_solve-upper", "cholesky_solve", [rnd(3, 2), rnd(3, 3)],
         lambda b, x: mp.cholesky_solve(b, x.triu() + 3, upper=True),
         lambda b, x: sla.cho_solve((np.triu(x) + 3 * np.triu(np.ones((3, 3))), False), b), lowp=False,
         rtol64=1e-10),
    Case("tensorinv", "linalg_tensorinv", [wellcond(6, 6)], lambda a: mp.linalg.tensorinv(a.reshape(2, 3, 6), 2),
         lambda a: np.linalg.tensorinv(a.reshape(2, 3, 6), 2), lowp=False, rtol64=1e-10),
    Case("tensorsolve", "linalg_tensorsolve", [wellcond(6, 6), rnd(2, 3)],
         lambda a, b: mp.linalg.tensorsolve(a.reshape(2, 3, 6), b),
         lambda a, b: np.linalg.tensorsolve(a.reshape(2, 3, 6), b), lowp=False, rtol64=1e-10),
    # ---- vecdot (bfloat16 under CPU autocast) and trace: both fine in half precision
    Case("vecdot", "linalg_vecdot", [rnd(2, 5), rnd(5)], mp.linalg.vecdot, lambda x, y: (x * y).sum(-1)),
    Case("vecdot-dim", "linalg_vecdot", [rnd(4, 3), rnd(4, 1)], lambda x, y: mp.linalg.vecdot(x, y, dim=0),
         lambda x, y: (x * y).sum(0)),
    Case("trace", "trace", [rnd(3, 4)], lambda a: a.trace(), np.trace),
    Case("trace-fn", "trace", [uni(3, 3, lo=0.0, hi=1.0)], mp.trace, np.trace),
]
