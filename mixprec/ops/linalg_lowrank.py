"""Linear algebra, part 5: randomized low-rank factorizations (torch.svd_lowrank, torch.pca_lowrank).

Halko, Martinsson and Tropp's randomized range finder (2009, algorithms 4.4 and 5.1):
a Gaussian test matrix R (n x q) from mixprec's generator (``mp.manual_seed``), the
basis Q of A R refined by ``niter`` power iterations (each re-orthonormalised by QR),
then the exact SVD of the small Q^T A. The values depend on R only where q is below
A's rank; where q covers it, U diag(S) V^T reproduces A. All composites, so the
derivatives come from matmul, QR and the SVD.
"""
from __future__ import annotations

import numpy as np

from .linalg_lu_cholesky import _matrices
from .linalg_qr_eig_svd import linalg_qr, linalg_svd
from .registry import register
from .shape import broadcasts_to
from ..random import randn


def _minus(x, y):
    return x if y is None else x - y


def _approximate_basis(A, q, niter, M):
    """Q (..., m, q) with orthonormal columns whose span approximates the range of A - M."""
    r = randn(A.shape[-1], q, dtype=A.dtype, device=A.device)
    q_ = linalg_qr(_minus(A @ r, None if M is None else M @ r))[0]
    for _ in range(niter):
        q_ = linalg_qr(_minus(A.mT @ q_, None if M is None else M.mT @ q_))[0]
        q_ = linalg_qr(_minus(A @ q_, None if M is None else M @ q_))[0]
    return q_


def _check_counts(name, q, niter):
    for what, v in (("q", q), ("niter", niter)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name}: {what} must be a non-negative int, got {v!r}")


@register("svd_lowrank", promote=(0, 3), composite=True)
def svd_lowrank(ctx, A, q=6, niter=2, M=None):
    """(U, S, V) with A - M ~ U diag(S) V^T of rank q (M, broadcast to A's shape, defaults to zero), by the
    randomized range finder with niter power iterations."""
    name = "svd_lowrank"
    _matrices(name, A)
    q = 6 if q is None else q
    _check_counts(name, q, niter)
    if M is not None:
        _matrices(name, M, what="M")
        if not broadcasts_to(M.shape, A.shape):
            raise RuntimeError(f"{name}: M of shape {tuple(M.shape)} does not broadcast to A's {tuple(A.shape)}")
        M = M.expand(*A.shape)
    m, n = A.shape[-2:]
    wide = m < n
    if wide:  # work on the tall transpose: its basis has the fewer rows
        A, M = A.mT, (None if M is None else M.mT)
    basis = _approximate_basis(A, q, niter, M)
    u, s, vh = linalg_svd(_minus(basis.mT @ A, None if M is None else basis.mT @ M), False)
    u, v = basis @ u, vh.mT
    return (v, s, u) if wide else (u, s, v)


@register("pca_lowrank", composite=True)
def pca_lowrank(ctx, A, q=None, center=True, niter=2):
    """(U, S, V): svd_lowrank of A with each column's mean removed (center=True), q = min(6, m, n) by default;
    the columns of V are the principal directions, S^2 / (m - 1) their variances."""
    name = "pca_lowrank"
    _matrices(name, A)
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else q
    _check_counts(name, q, niter)
    if q > min(m, n):
        raise ValueError(f"{name}: q must be at most min(m, n) = {min(m, n)}, got {q}")
    if not center:
        return svd_lowrank(A, q, niter)
    return svd_lowrank(A, q, niter, A.mean(dim=-2, keepdim=True))
