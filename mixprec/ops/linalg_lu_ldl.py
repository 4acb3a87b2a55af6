"""Linear algebra (``mp.linalg``), part 4: the LU family's other faces, and LDL^T.

    LU     linalg.lu (P, L, U), linalg.lu_factor_ex, and on top torch.lu, lu_unpack, linalg.solve_ex
    LDL^T  linalg.ldl_factor_ex (Bunch-Kaufman, as LAPACK's sytf2), and on top ldl_factor, ldl_solve

The LU ops share one factorization (ops/linalg_lu_cholesky.py's _lu) and one pair of
derivative rules (lu_vjp, lu_jvp there), for square, tall and wide matrices alike.
LDL^T has no derivative, as in torch.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from .linalg_lu_cholesky import (LinAlgError, _eye_like, _first_failure, _lu, _lu_parts, _matrices, _no_derivative,
                                 _permutation_matrix, _same_dtype, _is_vector_rhs, linalg_lu_solve, linalg_solve,
                                 lu_factor_grad, lu_factor_tangent, lu_jvp, lu_vjp, tril, triu)
from .registry import register
from ..tensor import Tensor, zeros


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
    if not isinstance(LU_pivots, Tensor) or LU_pivots.dtype.kind not in "iu" or \
            tuple(LU_pivots.shape) != tuple(LU_data.shape[:-2]) + (min(LU_data.shape[-2:]),):
        raise RuntimeError(f"lu_unpack: LU_pivots must be an integer tensor of shape "
                           f"{tuple(LU_data.shape[:-2]) + (min(LU_data.shape[-2:]),)}, got "
                           f"{getattr(LU_pivots, 'dtype', type(LU_pivots)).__str__()} of shape "
                           f"{tuple(getattr(LU_pivots, 'shape', ()))}")
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
