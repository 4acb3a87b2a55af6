"""Cases for the ops of mixprec/ops/linalg_qr_eig_svd.py (mp.linalg, part 2: QR, eigenvalues, SVD).

As in linalg_lu_cholesky.py, the references are NumPy/SciPy float64 and the value of these
cases is the derivative checks. Eigen- and singular vectors enter only through
functions free of their sign (v * v, |u|, U Vh): their gauge.
"""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, rnd
from .linalg_lu_cholesky import sym, wellcond


def householder_ref(a, tau, full=False):
    """H_1 ... H_k (its first n columns unless full), H_i = I - tau_i v_i v_i^T from geqrf's packed vectors."""
    m, n = a.shape
    q = np.eye(m)
    for i in range(tau.shape[-1]):
        v = np.concatenate([np.zeros(i), [1.0], a[i + 1:, i]])
        q = q @ (np.eye(m) - tau[i] * np.outer(v, v))
    return q if full else q[:, :n]


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
    Case("svdvals", "linalg_svdvals", [rnd(3, 5)], lambda a: mp.linalg.svdvals(a), lambda a: np.linalg.svd(a)[1],
         lowp=False, rtol64=1e-10),
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
]
