"""Linear algebra (``mp.linalg``), part 4: the LU family's other faces, and LDL^T.

    LU     linalg.lu (P, L, U), linalg.lu_factor_ex, and on top torch.lu, lu_unpack, linalg.solve_ex
    LDL^T  linalg.ldl_factor_ex (Bunch-Kaufman, as LAPACK's sytf2), and on top ldl_factor, ldl_solve

The LU ops share one factorization (ops/linalg_lu_cholesky.py's _lu) and one pair of
derivative rules (lu_vjp, lu_jvp there), for square, tall and wide matrices alike.
LDL^T has no derivative, as in torch.
"""
from __future__ import annotations

import numpy as np

from ..backend import array_module
from ..backend.devices import CPU, device_of_array, to_device
from .linalg_lu_cholesky import (LinAlgError, _batch_shape, _first_failure, _lu, _lu_parts, _matrices,
                                 _permutation_matrix, _same_dtype, _is_vector_rhs, linalg_lu_solve, linalg_solve,
                                 lu_factor_grad, lu_factor_tangent, lu_jvp, lu_vjp)
from .registry import register
from ..tensor import Tensor
from ..creation import zeros


def _no_pivoting(name, pivot):
    if not pivot:
        raise RuntimeError(f"{name}: LU without pivoting is not implemented (nor is it in torch on the CPU)")


# ---------------------------------------------------------------- LU
@register("linalg_lu", saves=("output",))
def linalg_lu(ctx, A, *, pivot=True):
    """(P, L, U) with A = P L U: P a permutation, L (m x k) unit lower triangular, U (k x n) upper triangular,
    k = min(m, n). A singular matrix is factored too (U then has a zero on its diagonal)."""
    _matrices("linalg_lu", A)
    _no_pivoting("linalg_lu", pivot)
    lu, piv, _ = _lu(A)
    m, n = A.shape[-2:]
    k = min(m, n)
    xp = array_module(A)
    p = _permutation_matrix(Tensor._wrap(piv), m, A)._array
    lower = xp.tril(lu[..., :, :k], -1) + xp.eye(m, k, dtype=A.dtype)
    return p, lower, xp.triu(lu[..., :k, :])


@linalg_lu.grad
def _(ctx, gp, gl, gu):
    p, lower, upper = ctx.outputs
    return lu_vjp(p, lower, upper, gl, gu),


@linalg_lu.jvp
def _(ctx, ta, *_):
    p, lower, upper = ctx.outputs
    return (None,) + lu_jvp(p, lower, upper, ta)


@register("linalg_lu_factor_ex", saves=("A", "output"))
def linalg_lu_factor_ex(ctx, A, *, pivot=True, check_errors=False):
    """(LU, pivots, info): lu_factor's packed factors, and info per matrix: 0, or k > 0 when U[k-1, k-1] is zero
    (the matrix is singular; its factors are still returned). check_errors=True raises LinAlgError then."""
    _matrices("linalg_lu_factor_ex", A)
    _no_pivoting("linalg_lu_factor_ex", pivot)
    lu, piv, info = _lu(A)
    if check_errors and bool(info.any()):
        where_, k = _first_failure(A, info)
        raise LinAlgError(f"linalg_lu_factor_ex: U[{k - 1}, {k - 1}]{where_} is zero, so the matrix is singular")
    return lu, piv, info


linalg_lu_factor_ex.grad(lu_factor_grad)
linalg_lu_factor_ex.jvp(lu_factor_tangent)


@register("lu", methods=("lu",), composite=True)
def lu(ctx, A, pivot=True, get_infos=False):
    """torch.lu: (LU, pivots), or (LU, pivots, infos) with get_infos=True; lu_factor_ex's results."""
    _matrices("lu", A)
    _no_pivoting("lu", pivot)
    lu_, piv, info = linalg_lu_factor_ex(A)
    return (lu_, piv, info) if get_infos else (lu_, piv)


@register("lu_unpack", promote=(0,), composite=True)
def lu_unpack(ctx, LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's packed (LU, pivots); the parts not asked for come back empty."""
    _matrices("lu_unpack", LU_data, what="LU_data")
    want = tuple(LU_data.shape[:-2]) + (min(LU_data.shape[-2:]),)
    if not isinstance(LU_pivots, Tensor) or LU_pivots.dtype.kind not in "iu" or tuple(LU_pivots.shape) != want:
        got = (f"{LU_pivots.dtype.name} of shape {tuple(LU_pivots.shape)}" if isinstance(LU_pivots, Tensor)
               else type(LU_pivots).__name__)
        raise RuntimeError(f"lu_unpack: LU_pivots must be an integer tensor of shape {want}, got {got}")
    empty = zeros(0, dtype=LU_data.dtype, device=LU_data.device)
    m = LU_data.shape[-2]
    p = _permutation_matrix(LU_pivots, m, LU_data) if unpack_pivots else empty
    if not unpack_data:
        return p, empty, empty
    lower, upper = _lu_parts(LU_data)
    return p, lower, upper


@register("linalg_solve_ex", promote=(0, 1), composite=True)
def linalg_solve_ex(ctx, A, B, *, left=True, check_errors=False):
    """(X, info): linalg.solve's X with A X = B (X A = B for left=False), and lu_factor_ex's info. A singular A
    gives the inf/NaN its LU gives, and info > 0 (check_errors=True raises LinAlgError instead)."""
    _matrices("linalg_solve_ex", A, square=True)
    _same_dtype("linalg_solve_ex", A=A, B=B)
    lu_, piv, info = linalg_lu_factor_ex(A.detach())
    if not bool(info.any()):
        return linalg_solve(A, B, left=left), info
    if check_errors:
        where_, k = _first_failure(A._array, info._array)
        raise LinAlgError(f"linalg_solve_ex: the input matrix{where_} is singular (U[{k - 1}, {k - 1}] of its LU "
                          "factorization is zero)")
    vector = _is_vector_rhs(A, B)
    b = B.unsqueeze(-1) if vector else B
    if not left:
        b = b.mT
    lu_, piv, _ = linalg_lu_factor_ex(A)
    batch = np.broadcast_shapes(tuple(A.shape[:-2]), tuple(b.shape[:-2]))
    x = linalg_lu_solve(lu_.expand(*batch, *lu_.shape[-2:]), piv.expand(*batch, piv.shape[-1]),
                        b.expand(*batch, *b.shape[-2:]), adjoint=not left)
    x = x if left else x.mT
    return (x.squeeze(-1) if vector else x), info


# ---------------------------------------------------------------- LDL^T
_BUNCH_KAUFMAN_ALPHA = (1 + 17 ** 0.5) / 8  # the pivot threshold that bounds element growth


def _ldl_one(a):
    """Bunch-Kaufman LDL^T of one symmetric matrix from its lower triangle, as LAPACK's sytf2 (uplo 'L'):
    (LD with the upper triangle zeroed, 1-based pivots, info). A positive pivot k is a 1 x 1 block whose row and
    column were swapped with k; a 2 x 2 block stores -k in both of its entries. Written per column with NumPy
    vector steps."""
    a = np.tril(a).astype(a.dtype, copy=True)
    n = a.shape[0]
    piv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        step = 1
        absakk = abs(a[k, k])
        imax = k + 1 + int(np.argmax(np.abs(a[k + 1:, k]))) if k + 1 < n else k
        colmax = abs(a[imax, k]) if k + 1 < n else 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1
            kp = k
        else:
            if absakk >= _BUNCH_KAUFMAN_ALPHA * colmax:
                kp = k
            else:
                rowmax = np.abs(a[imax, k:imax]).max()
                if imax + 1 < n:
                    rowmax = max(rowmax, np.abs(a[imax + 1:, imax]).max())
                if absakk >= _BUNCH_KAUFMAN_ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax]) >= _BUNCH_KAUFMAN_ALPHA * rowmax:
                    kp = imax
                else:
                    kp, step = imax, 2
            kk = k + step - 1
            if kp != kk:  # swap rows and columns kk and kp of the trailing lower triangle
                a[kp + 1:, kk], a[kp + 1:, kp] = a[kp + 1:, kp].copy(), a[kp + 1:, kk].copy()
                a[kk + 1:kp, kk], a[kp, kk + 1:kp] = a[kp, kk + 1:kp].copy(), a[kk + 1:kp, kk].copy()
                a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
                if step == 2:
                    a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
            if step == 1:
                x = a[k + 1:, k].copy()
                a[k + 1:, k + 1:] -= np.tril(np.outer(x, x)) / a[k, k]
                a[k + 1:, k] = x / a[k, k]
            elif k + 2 < n:
                d21 = a[k + 1, k]
                d11, d22 = a[k + 1, k + 1] / d21, a[k, k] / d21
                t = 1 / (d11 * d22 - 1)
                d21 = t / d21
                wk = d21 * (d11 * a[k + 2:, k] - a[k + 2:, k + 1])
                wkp1 = d21 * (d22 * a[k + 2:, k + 1] - a[k + 2:, k])
                a[k + 2:, k + 2:] -= np.tril(np.outer(a[k + 2:, k], wk) + np.outer(a[k + 2:, k + 1], wkp1))
                a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1
        if step == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += step
    return a, piv, info


def _hermitian_flag(name, hermitian):
    if not isinstance(hermitian, bool):
        raise TypeError(f"{name}: hermitian must be a bool, got {hermitian!r}")


@register("linalg_ldl_factor_ex", differentiable=False)
def linalg_ldl_factor_ex(ctx, A, *, hermitian=False, check_errors=False):
    """(LD, pivots, info): the Bunch-Kaufman factorization A = L D L^T of symmetric A (its lower triangle is read),
    packed as LAPACK's sytrf: L's multipliers below the diagonal, D's 1 x 1 and 2 x 2 blocks on and next to it,
    pivots as sytrf's. info is 0, or k > 0 when D[k-1, k-1] is exactly zero (D is singular). Runs on the host (a
    column at a time), for CuPy arrays too; no derivative, as in torch."""
    name = "linalg_ldl_factor_ex"
    _matrices(name, A, square=True)
    _hermitian_flag(name, hermitian)
    host = to_device(A, CPU)
    flat = host.reshape((int(np.prod(host.shape[:-2])),) + host.shape[-2:])
    parts = [_ldl_one(m) for m in flat]
    ld = np.stack([p[0] for p in parts]).reshape(host.shape) if parts else np.zeros(host.shape, A.dtype)
    piv = np.stack([p[1] for p in parts]).reshape(host.shape[:-1]) if parts else \
        np.zeros(host.shape[:-1], np.int32)
    info = np.array([p[2] for p in parts], dtype=np.int32).reshape(host.shape[:-2])
    if check_errors and info.any():
        where_, k = _first_failure(host, info)
        raise LinAlgError(f"{name}: D[{k - 1}, {k - 1}]{where_} is zero, so the matrix is singular")
    dev = device_of_array(A)
    return to_device(ld, dev), to_device(piv, dev), to_device(info, dev)


@register("linalg_ldl_factor", composite=True)
def linalg_ldl_factor(ctx, A, *, hermitian=False):
    """(LD, pivots) of linalg_ldl_factor_ex; a singular D raises LinAlgError."""
    ld, piv, _ = linalg_ldl_factor_ex(A, hermitian=hermitian, check_errors=True)
    return ld, piv


def _ldl_solve_one(a, piv, b):
    """X with A X = B from one matrix's (LD, pivots), as LAPACK's sytrs (uplo 'L'): L D Y = P B, then L^T X = Y."""
    n = a.shape[0]
    b = b.copy()
    k = 0
    while k < n:  # L D Y = B, with the row swaps applied as they come
        if piv[k] > 0:
            kp = piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= np.outer(a[k + 1:, k], b[k])
            b[k] /= a[k, k]
            k += 1
        else:
            kp = -piv[k] - 1
            b[[k + 1, kp]] = b[[kp, k + 1]]
            b[k + 2:] -= np.outer(a[k + 2:, k], b[k]) + np.outer(a[k + 2:, k + 1], b[k + 1])
            d21 = a[k + 1, k]
            d11, d22 = a[k, k] / d21, a[k + 1, k + 1] / d21
            denom = d11 * d22 - 1
            b1, b2 = b[k] / d21, b[k + 1] / d21
            b[k], b[k + 1] = (d22 * b1 - b2) / denom, (d11 * b2 - b1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T X = Y, undoing the swaps in reverse
        if piv[k] > 0:
            b[k] -= a[k + 1:, k] @ b[k + 1:]
            kp = piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            b[k] -= a[k + 1:, k] @ b[k + 1:]
            b[k - 1] -= a[k + 1:, k - 1] @ b[k + 1:]
            kp = -piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


@register("linalg_ldl_solve", promote=(0, 2), same_dtype=True, differentiable=False)
def linalg_ldl_solve(ctx, LD, pivots, B, *, hermitian=False):
    """X with A X = B from A's ldl_factor (LD, pivots); batch dimensions broadcast. Runs on the host, as
    ldl_factor_ex; no derivative, as in torch."""
    name = "linalg_ldl_solve"
    _matrices(name, LD, what="LD", square=True)
    _matrices(name, B, what="B")
    _hermitian_flag(name, hermitian)
    if pivots.dtype.kind not in "iu" or tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"{name}: pivots must be an integer tensor of shape {tuple(LD.shape[:-1])}, got "
                           f"{pivots.dtype.name} of shape {tuple(pivots.shape)}")
    if B.shape[-2] != LD.shape[-1]:
        raise RuntimeError(f"{name}: B {tuple(B.shape)} must have {LD.shape[-1]} rows, as LD {tuple(LD.shape)}")
    batch = _batch_shape(name, LD.shape[:-2], B.shape[:-2])
    ld, piv, b = (np.broadcast_to(to_device(x, CPU), batch + x.shape[-s:])
                  for x, s in ((LD, 2), (pivots, 1), (B, 2)))
    count = int(np.prod(batch))
    flat = zip(ld.reshape((count,) + ld.shape[-2:]), piv.reshape((count,) + piv.shape[-1:]),
               b.reshape((count,) + b.shape[-2:]))
    x = np.stack([_ldl_solve_one(*m) for m in flat]) if count else np.zeros((0,) + b.shape[-2:], B.dtype)
    return to_device(x.reshape(batch + b.shape[-2:]).astype(B.dtype, copy=False), device_of_array(B))
