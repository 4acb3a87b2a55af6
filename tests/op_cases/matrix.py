"""Cases for the ops of mixprec/ops/matrix.py (mp.linalg).

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
    return x @ x.mT + mp.eye(x.shape[-1], dtype=x.dtype)


def sym(x):
    return x + np.swapaxes(x, -1, -2)


def householder_ref(a, tau, full=False):
    """H_1 ... H_k (its first n columns unless full), H_i = I - tau_i v_i v_i^T from geqrf's packed vectors."""
    m, n = a.shape
    q = np.eye(m)
    for i in range(tau.shape[-1]):
        v = np.concatenate([np.zeros(i), [1.0], a[i + 1:, i]])
        q = q @ (np.eye(m) - tau[i] * np.outer(v, v))
    return q if full else q[:, :n]


def diagonal_scatter_ref(a, s):
    out = a.copy()
    out[np.arange(len(s)), np.arange(len(s))] = s
    return out


def with_long(result):
    """An op's outputs with its int32 one (pivots, info) as int64, the dtype the case drivers compare."""
    return tuple(t.long() if t.dtype == mp.int32 else t for t in result)


def lu_ref(a):
    lu, piv = sla.lu_factor(a)
    return lu, (piv + 1).astype(np.int64)


PIVOTS = np.array([3, 3, 3, 4], dtype=np.int32)  # row swaps of a 4 x 4 LU (1-based, as LAPACK)


def lu_solve_ref(b, lu):
    return sla.lu_solve((lu, PIVOTS - 1), b)


def vec_of_eigh(a):
    w, v = np.linalg.eigh(sym(a))
    return w, v * v


def svd_gauge_free(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return s, u @ vh, np.abs(u)


def lstsq_ref(a, b):
    x = np.linalg.lstsq(a, b, rcond=None)[0]
    return x, ((a @ x - b) ** 2).sum(0)


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
    Case("inv_ex", "linalg_inv_ex", [wellcond(2, 3, 3)], lambda a: with_long(mp.linalg.inv_ex(a)),
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
    Case("lu_factor", "linalg_lu_factor", [rnd(4, 4)], lambda a: with_long(mp.linalg.lu_factor(a)), lu_ref,
         lowp=False, rtol64=1e-10),
    Case("lu_solve", "lu_solve", [rnd(4, 2), wellcond(4, 4)],
         lambda b, lu: mp.lu_solve(b, lu, mp.tensor(PIVOTS)), lu_solve_ref, lowp=False, rtol64=1e-10),
    Case("linalg.lu_solve-adjoint-right", "linalg_lu_solve", [wellcond(4, 4), rnd(3, 4)],
         lambda lu, b: mp.linalg.lu_solve(lu, mp.tensor(PIVOTS), b, left=False, adjoint=True),
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
         lambda x: with_long(mp.linalg.cholesky_ex(mspd(x), upper=True)),
         lambda x: (np.linalg.cholesky(spd(x)).T, np.zeros((), dtype=np.int64)), lowp=False, rtol64=1e-10),
    Case("cholesky_inverse", "cholesky_inverse", [rnd(2, 3, 3)], lambda x: mp.cholesky_inverse(x.tril() + 3),
         lambda x: (lambda low: np.linalg.inv(low @ np.swapaxes(low, -1, -2)))(np.tril(np.tril(x) + 3)),
         lowp=False, rtol64=1e-10),
    Case("cholesky_solve-upper", "cholesky_solve", [rnd(3, 2), rnd(3, 3)],
         lambda b, x: mp.cholesky_solve(b, x.triu() + 3, upper=True),
         lambda b, x: sla.cho_solve((np.triu(x) + 3 * np.triu(np.ones((3, 3))), False), b), lowp=False,
         rtol64=1e-10),
    # ---- QR
    Case("qr-tall", "linalg_qr", [rnd(2, 4, 3)], mp.linalg.qr, lambda a: tuple(np.linalg.qr(a)), lowp=False,
         rtol64=1e-10),
    Case("qr-wide", "linalg_qr", [rnd(3, 5)], lambda a: mp.linalg.qr(a, "complete"),
         lambda a: tuple(np.linalg.qr(a, "complete")), lowp=False, rtol64=1e-10),
    Case("qr-torch", "qr", [rnd(3, 3)], lambda a: mp.qr(a, some=False), lambda a: tuple(np.linalg.qr(a)),
         lowp=False, rtol64=1e-10),
    Case("geqrf", "geqrf", [rnd(4, 3)], mp.geqrf,
         lambda a: (lambda h, tau: (h.T, tau))(*np.linalg.qr(a, mode="raw")), grad=False, lowp=False, rtol64=1e-10),
    Case("householder_product", "linalg_householder_product", [rnd(4, 3), rnd(2)], mp.linalg.householder_product,
         householder_ref, lowp=False),
    Case("orgqr", "linalg_householder_product", [rnd(3, 3), rnd(3)], mp.orgqr, householder_ref, lowp=False),
    Case("ormqr-left-transposed", "ormqr", [rnd(4, 3), rnd(3), rnd(4, 2)],
         lambda a, t, c: mp.ormqr(a, t, c, transpose=True), lambda a, t, c: householder_ref(a, t, True).T @ c,
         lowp=False),
    Case("ormqr-right", "ormqr", [rnd(4, 2), rnd(2), rnd(3, 4)], lambda a, t, c: a.ormqr(t, c, False),
         lambda a, t, c: c @ householder_ref(a, t, True), lowp=False),
    # ---- eigenvalues (eigenvectors only through v * v and |v|: free of their sign/phase)
    Case("eigh", "linalg_eigh", [rnd(2, 3, 3)], lambda a: (lambda w, v: (w, v * v))(*mp.linalg.eigh(a + a.mT)),
         vec_of_eigh, lowp=False, rtol64=1e-9),
    Case("eigvalsh-upper", "linalg_eigvalsh", [rnd(4, 4)], lambda a: mp.linalg.eigvalsh(a + a.mT, "U"),
         lambda a: np.linalg.eigvalsh(sym(a), "U"), lowp=False, rtol64=1e-10),
    Case("eig", "linalg_eig", [rnd(3, 3)],
         lambda a: (lambda w, v: (mp.view_as_real(w), v.abs()))(*mp.linalg.eig(a)),
         lambda a: (lambda w, v: (np.stack([w.real, w.imag], -1), np.abs(v)))(*np.linalg.eig(a)), lowp=False,
         rtol64=1e-9),
    Case("eigvals", "linalg_eigvals", [rnd(2, 3, 3)], lambda a: mp.view_as_real(mp.linalg.eigvals(a)),
         lambda a: (lambda w: np.stack([w.real, w.imag], -1))(np.linalg.eigvals(a)), lowp=False, rtol64=1e-9),
    # ---- SVD (singular vectors only through U Vh and |U|)
    Case("svd-tall", "linalg_svd", [rnd(4, 3)],
         lambda a: (lambda u, s, vh: (s, u @ vh, u.abs()))(*mp.linalg.svd(a, full_matrices=False)),
         svd_gauge_free, lowp=False, rtol64=1e-9),
    Case("svd-wide-batched", "linalg_svd", [rnd(2, 3, 4)],
         lambda a: (lambda u, s, vh: (s, u @ vh, u.abs()))(*mp.linalg.svd(a, False)),
         lambda a: tuple(np.stack(x) for x in zip(*[svd_gauge_free(m) for m in a])), lowp=False, rtol64=1e-9),
    Case("svdvals", "linalg_svdvals", [rnd(3, 5)], mp.linalg.svdvals, lambda a: np.linalg.svd(a)[1], lowp=False,
         rtol64=1e-10),
    Case("svd-torch", "svd", [rnd(4, 3)], lambda a: (lambda u, s, v: (s, u @ v.mT))(*mp.svd(a)),
         lambda a: svd_gauge_free(a)[:2], lowp=False, rtol64=1e-9),
    Case("pinv", "linalg_pinv", [rnd(2, 4, 3)], mp.linalg.pinv, np.linalg.pinv, lowp=False, rtol64=1e-9),
    Case("pinverse-wide", "pinverse", [rnd(3, 5)], mp.pinverse, np.linalg.pinv, lowp=False, rtol64=1e-9),
    Case("matrix_rank", "linalg_matrix_rank", [const(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]]))],
         mp.linalg.matrix_rank, np.linalg.matrix_rank, grad=False, lowp=False),
    Case("lstsq", "linalg_lstsq", [rnd(5, 3), rnd(5, 2)],
         lambda a, b: mp.linalg.lstsq(a, b, driver="gelsd")[:2], lstsq_ref, lowp=False, rtol64=1e-9),
    Case("matrix_norm", "linalg_matrix_norm", [rnd(2, 3, 4)],
         lambda a: [mp.linalg.matrix_norm(a, o) for o in ("fro", "nuc", 1, float("inf"), 2)],
         lambda a: [np.linalg.norm(a, o, axis=(-2, -1)) for o in ("fro", "nuc", 1, np.inf, 2)], lowp=False,
         rtol64=1e-10),
    Case("cond", "linalg_cond", [wellcond(2, 3, 3)], lambda a: (mp.linalg.cond(a), mp.linalg.cond(a, "fro")),
         lambda a: (np.linalg.cond(a), np.linalg.cond(a, "fro")), lowp=False, rtol64=1e-9),
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
