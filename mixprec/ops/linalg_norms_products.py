"""Linear algebra (``mp.linalg``), part 3: norms, products and matrix functions, all composed of other ops.

    norms      vector_norm, linalg.norm (a vector or a matrix norm, by ord and dim)
    products   matrix_power, linalg.cross, vander (linalg.multi_dot: ops/matmul.py)
    matrices   linalg.diagonal, matrix_exp, logdet

Each is written with ops that have their own derivatives (norm, matrix_norm, matmul,
cross, cumprod, slogdet), so both modes of autograd come from those parts.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from .elementwise import where
from .linalg_lu_cholesky import _eye_like, _matrices, diagonal, linalg_inv, linalg_slogdet
from .linalg_qr_eig_svd import linalg_matrix_norm
from .math_ops import cross, norm
from .reduce import cumprod
from .registry import register
from .shape import cat
from ..creation import ones_like


# ---------------------------------------------------------------- norms
def _floating_or_complex(name, x, what="input"):
    if not (_dt.is_floating(x.dtype) or _dt.is_complex(x.dtype)):
        raise RuntimeError(f"{name}: expected a floating point or complex tensor as {what}, got {x.dtype.name}")


def _ord_number(name, ord):
    if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)):
        raise RuntimeError(f"{name}: ord must be a number (inf and -inf included), got {ord!r}")
    return float(ord)


@register("linalg_vector_norm", composite=True)
def linalg_vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ord-norm of x over ``dim`` (every element when None): sum(|x|^ord)^(1/ord), inf the max |x|,
    -inf the min, 0 the count of non-zeros. dtype= casts x to it first."""
    _floating_or_complex("linalg_vector_norm", x, "x")
    p = _ord_number("linalg_vector_norm", ord)
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        dim = None  # (an empty dim list reduces every dim, as torch's)
    return norm(x, p, dim, keepdim, dtype)


@register("linalg_norm", composite=True)
def linalg_norm(ctx, A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector or matrix norm: a matrix norm (matrix_norm's ord: 'fro', 'nuc', +-inf, +-1, +-2) when ``dim`` names
    two dims or A is 2-D with ord given; a vector norm (vector_norm's ord) for one dim, a 1-D A, or ord=None."""
    _floating_or_complex("linalg_norm", A, "A")
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    if dim is not None and len(dim) not in (1, 2):
        raise RuntimeError(f"linalg_norm: dim must be an int or a tuple of 1 or 2 ints, got {dim!r}")
    if dim is None and ord is not None and A.ndim not in (1, 2):
        raise RuntimeError(f"linalg_norm: with ord={ord!r} and dim=None, A must be 1-D or 2-D, got shape "
                           f"{tuple(A.shape)} (give dim)")
    matrix = (dim is not None and len(dim) == 2) or (dim is None and ord is not None and A.ndim == 2)
    if isinstance(ord, str) and not matrix:
        raise RuntimeError(f"linalg_norm: ord={ord!r} is a matrix norm, but a vector norm was asked for (dim={dim!r}, "
                           f"A of shape {tuple(A.shape)})")
    if not matrix:
        return linalg_vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord in (None, "fro"):  # the Frobenius norm is the vector 2-norm of the matrix (also in half precision)
        return linalg_vector_norm(A, 2, (-2, -1) if dim is None else tuple(dim), keepdim, dtype=dtype)
    if dtype is not None:
        A = A.to(dtype)
    return linalg_matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else tuple(dim), keepdim)


# ---------------------------------------------------------------- products
@register("linalg_matrix_power", aliases=("matrix_power",), methods=("matrix_power",), composite=True)
def linalg_matrix_power(ctx, A, n):
    """A @ A @ ... (n factors) for square A, by repeated squaring; n = 0 gives the identity, n < 0 the power of
    A's inverse."""
    _matrices("linalg_matrix_power", A, square=True, complex_ok=True)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"linalg_matrix_power: n must be an int, got {n!r}")
    n = int(n)
    if n == 0:
        # the sum over no elements of A (exactly 0, also beside an inf) keeps the identity on A's graph, as torch's
        return _eye_like(A).expand(*A.shape) + A[..., :0].sum(-1, keepdim=True)
    base = linalg_inv(A) if n < 0 else A
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


@register("linalg_cross", promote=(0, 1), composite=True)
def linalg_cross(ctx, input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim``; all other dims broadcast (also different numbers of dims)."""
    ndim = max(input.ndim, other.ndim)
    input = input.reshape((1,) * (ndim - input.ndim) + tuple(input.shape))
    other = other.reshape((1,) * (ndim - other.ndim) + tuple(other.shape))
    return cross(input, other, dim)


@register("linalg_vander", composite=True)
def linalg_vander(ctx, x, *, N=None):
    """The Vandermonde matrix of x (..., n): (..., n, N) with columns x^0, x^1, ..., x^(N-1) (N defaults to n).
    Integers count in int64; a 0-d x counts as one value (..., 1)."""
    if x.ndim == 0:
        x = x.reshape(1)
    if x.dtype == _dt.bool_:
        raise TypeError("linalg_vander: bool inputs are not supported; cast x to an integer or floating dtype")
    n = x.shape[-1] if N is None else N
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 1:
        raise RuntimeError(f"linalg_vander: N must be greater than 1, got {n!r}")
    if x.dtype.kind in "iu":
        x = x.to(_dt.int64)
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1)
    return cumprod(cat([ones_like(x).unsqueeze(-1), powers], -1), -1)


# ---------------------------------------------------------------- matrix functions
@register("linalg_diagonal", composite=True)
def linalg_diagonal(ctx, A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonal ``offset`` of the matrices in dims dim1/dim2 (torch.diagonal with matrix-last defaults)."""
    return diagonal(A, offset, dim1, dim2)


_TAYLOR_TERMS = 18  # ||X|| <= 1/2 after scaling: the first left out is below 2^-19 / 19!, under float64's eps


@register("matrix_exp", aliases=("linalg_matrix_exp",), methods=("matrix_exp",), composite=True)
def matrix_exp(ctx, A):
    """exp(A) = sum A^k / k! of square matrices, by scaling and squaring: exp(A) = exp(A / 2^s)^(2^s) with
    ||A / 2^s||_1 <= 1/2, where the Taylor series (summed by Horner's rule) is exact to the dtype's precision.

    s is read from the values (one host sync on a GPU); the derivative is the series', which is exp's own to the
    same precision. Each squaring doubles the relative rounding error, so the work runs one precision up (float32
    and complex64 in double precision, half precision in float32) and is rounded once at the end."""
    _matrices_any_float("matrix_exp", A)
    if A.numel() == 0:
        return A * 1
    xp = array_module(A._array)
    one_norm = float(xp.abs(A._array.astype(np.float64)).sum(-2).max())
    s = max(0, math.ceil(math.log2(one_norm / 0.5))) if one_norm > 0.5 and math.isfinite(one_norm) else 0
    x = A.to(_WIDER.get(A.dtype, _dt.float32 if A.dtype in _dt.LOW_PRECISION else A.dtype))
    x = x / 2.0 ** s if s else x
    eye = _eye_like(x).expand(*x.shape)
    e = eye
    for k in range(_TAYLOR_TERMS, 0, -1):
        e = eye + (x @ e) / k
    for _ in range(s):
        e = e @ e
    return e.to(A.dtype)


_WIDER = {_dt.float32: _dt.float64, _dt.complex64: _dt.complex128}


def _matrices_any_float(name, A):
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: expected a batch of square matrices (..., n, n), got shape {tuple(A.shape)}")
    _floating_or_complex(name, A, "A")


@register("logdet", methods=("logdet",), composite=True)
def logdet(ctx, A):
    """log(det(A)) of square matrices: NaN where the determinant is negative, -inf where it is zero."""
    _matrices("logdet", A, square=True)
    sign, logabs = linalg_slogdet(A)
    return where(sign < 0, float("nan"), logabs)
