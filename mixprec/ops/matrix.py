"""Linear algebra beyond products (``mp.linalg``): factorizations and what is built on them.

Primitives call NumPy's (LAPACK) or CuPy's (cuSOLVER) routine for the
factorization and give its derivative by the standard matrix-calculus
formulas (torch uses the same ones, so gradients agree with torch's):

    LU          lu_factor, inv, inv_ex, solve, solve_triangular, det, slogdet
    Cholesky    cholesky, cholesky_ex
    QR          qr, geqrf (no derivative, as in torch)
    eigen       eigh, eig (complex results)
    SVD         svd, pinv, matrix_rank

Everything else (triangular_solve, cholesky_solve, cholesky_inverse, lu_solve,
householder_product/orgqr, ormqr, eigvals(h), svdvals, lstsq, cond,
matrix_norm, tensorinv, tensorsolve, pinverse, diag_embed) is composed of
those, so both modes of autograd come for free.

Batches: every matrix argument may be (..., m, n). Dtypes: float32 and float64
(inv and solve also complex). float16/bfloat16 are refused as torch refuses
them; on the CPU the ops of torch's autocast float32 list run under
``mp.autocast("cpu")`` in float32. Failures (a singular matrix, one that is not
positive-definite) raise :class:`LinAlgError` naming the op and the batch
element, on NumPy and on CuPy alike.

Gauge: eigenvectors and singular vectors are only defined up to sign (a phase,
for complex ones). Their gradients are correct for losses that do not depend on
that choice (torch's docs make the same caveat), and become large when two
eigenvalues or singular values nearly coincide.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import CPU, array_module, device_of_array, linalg_errors, to_device
from .elementwise import where
from .registry import get, register
from .shape import dim_index


class LinAlgError(RuntimeError):
    """A matrix an op cannot handle: singular, not positive-definite, or no convergence (torch.linalg.LinAlgError)."""


# ---------------------------------------------------------------- checks and shared machinery
def _check_dtype(name, a, what="A", complex_ok=False):
    if a.dtype in _dt.LOW_PRECISION:
        hint = (", or run under mp.autocast('cpu'), whose float32 policy for this op does it"
                if get(name).policy["cpu"] is not None else "")
        raise TypeError(f"{name}: {a.dtype.name} inputs are not supported (torch refuses them too); cast {what} to "
                        f"float32{hint}")
    if a.dtype.kind in "biu":
        raise TypeError(f"{name}: expected a floating point tensor as {what}, got {a.dtype.name}")
    if _dt.is_complex(a.dtype) and not complex_ok:
        raise TypeError(f"{name}: complex inputs are not supported here; expected float32 or float64 {what}")


def _matrices(name, a, what="A", square=False, complex_ok=False):
    """Check a (..., m, n) batch of matrices (square ones with ``square``)."""
    if a.ndim < 2:
        raise RuntimeError(f"{name}: {what} must have at least 2 dimensions (..., m, n), got shape {tuple(a.shape)}")
    if square and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{name}: {what} must be batches of square matrices, but they are {a.shape[-2]} by "
                           f"{a.shape[-1]} matrices")
    _check_dtype(name, a, what, complex_ok)


def _batch_shape(name, *shapes):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise RuntimeError(f"{name}: the batch dimensions {' and '.join(map(str, shapes))} do not broadcast") \
            from None


def _run(name, fn, a, explain):
    """fn() under linalg_errors; on failure a LinAlgError whose text explain(a) gives."""
    xp = array_module(a)
    try:
        with linalg_errors(xp):
            return fn()
    except np.linalg.LinAlgError:
        raise LinAlgError(f"{name}: {explain(a)}") from None


def _first_failure(info):
    """'' for one matrix, else ' (batch element i)' for the first failed matrix of a batch."""
    info = to_device(info, CPU).reshape(-1)
    i = int(np.flatnonzero(info)[0]) if info.any() else 0
    return i, int(info[i])


def _singular(a):
    """Why a batch of matrices could not be inverted, in torch's words (from our own LU's pivots)."""
    info = _lu(a)[2]
    i, k = _first_failure(info)
    where_ = f" (batch element {i})" if a.ndim > 2 else ""
    return (f"the diagonal element {k} of its LU factorization is zero: the input matrix{where_} is singular "
            "and cannot be inverted")


def _not_positive_definite(a):
    info = _cholesky_partial(a)[1]
    i, k = _first_failure(info)
    where_ = f" (batch element {i})" if a.ndim > 2 else ""
    return (f"the factorization could not be completed because the input{where_} is not positive-definite (the "
            f"leading minor of order {k} is not positive-definite)")


def _flat(a):
    """a (..., m, n) as (B, m, n), and how to restore the batch shape."""
    return a.reshape((-1,) + a.shape[-2:]), a.shape[:-2]


def _lu(a):
    """Batched LU with partial pivoting, as LAPACK's getrf: (LU packed, pivots (1-based int32), info int32).

    Neither NumPy nor CuPy exposes getrf, so it is written out: one elimination
    step per column, vectorized over the batch. info is 0, or the 1-based index
    of the first exactly zero pivot (the matrix is singular).
    """
    xp = array_module(a)
    lu, batch = _flat(a.astype(a.dtype, copy=True))
    b, m, n = lu.shape
    k = min(m, n)
    piv = xp.zeros((b, k), dtype=np.int32)
    info = xp.zeros(b, dtype=np.int32)
    rows = xp.arange(b)
    for j in range(k):
        p = j + xp.argmax(xp.abs(lu[:, j:, j]), axis=1)  # the first largest, as LAPACK's idamax
        piv[:, j] = p + 1
        row_j, row_p = lu[rows, j, :].copy(), lu[rows, p, :].copy()
        lu[rows, j, :], lu[rows, p, :] = row_p, row_j
        pivot = lu[:, j, j]
        zero = pivot == 0
        info = xp.where((info == 0) & zero, j + 1, info).astype(np.int32)
        if j + 1 < m:
            col = lu[:, j + 1:, j] / xp.where(zero, 1, pivot)[:, None]  # (a zero pivot's column is zero already)
            lu[:, j + 1:, j] = col
            lu[:, j + 1:, j + 1:] -= col[:, :, None] * lu[:, j:j + 1, j + 1:]
    return lu.reshape(batch + (m, n)), piv.reshape(batch + (k,)), info.reshape(batch)


def _cholesky_partial(a):
    """Column-by-column Cholesky of the lower triangle, as LAPACK's potf2 leaves it: (L, info).

    Used when the fast routine failed, to say where and to return what torch's
    cholesky_ex returns: the columns factored before the failing one, that
    column's non-positive pivot in place, the rest of the lower triangle as it was.
    """
    xp = array_module(a)
    low, batch = _flat(xp.tril(a))
    low = low.copy()
    b, n, _ = low.shape
    info = xp.zeros(b, dtype=np.int32)
    for j in range(n):
        ok = info == 0
        d = low[:, j, j] - (low[:, j, :j] * low[:, j, :j]).sum(-1)
        fails = ok & ~(d > 0)
        info = xp.where(fails, j + 1, info).astype(np.int32)
        good = ok & ~fails
        root = xp.sqrt(xp.where(good, d, 1))
        low[:, j, j] = xp.where(good, root, xp.where(fails, d, low[:, j, j]))
        col = low[:, j + 1:, j] - (low[:, j + 1:, :j] @ low[:, j, :j, None])[..., 0]
        low[:, j + 1:, j] = xp.where(good[:, None], col / root[:, None], low[:, j + 1:, j])
    return low.reshape(batch + (n, n)), info.reshape(batch)


def _h(t):
    """The conjugate transpose of a batch of matrices (the plain transpose for real ones)."""
    return t.mT.conj() if _dt.is_complex(t.dtype) else t.mT


def _eye_like(t, n=None, m=None, dtype=None):
    from ..tensor import eye
    n = t.shape[-1] if n is None else n
    return eye(n, m, dtype=dtype or t.dtype, device=t.device)


def _zeros_if_none(g, like):
    from ..tensor import zeros_like
    return zeros_like(like) if g is None else g


def _no_derivative(name, why):
    """Rules for an op without a derivative: both raise, naming the op (as torch does at backward time)."""
    def rule(ctx, *_):
        raise NotImplementedError(f"the derivative of {name} is not implemented{why}")
    return rule


# ---------------------------------------------------------------- triangles and diagonals
def _triangle(name, keep):
    def forward(ctx, input, diagonal=0):
        if input.ndim < 2:
            raise RuntimeError(f"{name}: expected a tensor with at least 2 dimensions, got shape {tuple(input.shape)}")
        ctx.k = diagonal
        return keep(array_module(input), input, diagonal)
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = f"The {'lower' if name == 'tril' else 'upper'} triangle of the last two dims " \
                      "(on and below/above diagonal k), zeros elsewhere."
    op = register(name, methods=(name,), linear=True)(forward)
    op.grad(lambda ctx, g: (op(g, ctx.k),))
    return op


tril = _triangle("tril", lambda xp, a, k: xp.tril(a, k))
triu = _triangle("triu", lambda xp, a, k: xp.triu(a, k))


def _diagonal_index(name, shape, offset, dim1, dim2):
    """(dim1, dim2, rows, cols): where the diagonal ``offset`` of dims dim1/dim2 lies."""
    nd = len(shape)
    d1, d2 = dim_index(dim1, nd, name), dim_index(dim2, nd, name)
    if d1 == d2:
        raise RuntimeError(f"{name}: dim1 and dim2 cannot be the same dim ({dim1}, {dim2})")
    n1, n2 = shape[d1], shape[d2]
    size = max(0, min(n1 + min(offset, 0), n2 - max(offset, 0)))
    start1, start2 = max(-offset, 0), max(offset, 0)
    return d1, d2, np.arange(start1, start1 + size), np.arange(start2, start2 + size)


def _diagonal_view(xp, a, d1, d2):
    """a with dims d1, d2 moved last (a view, so writes land in a)."""
    return xp.moveaxis(a, (d1, d2), (-2, -1))


@register("diagonal", methods=("diagonal",), linear=True)
def diagonal(ctx, input, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` of dims dim1/dim2, as the last dim of the result (a copy)."""
    xp = array_module(input)
    d1, d2, r, c = _diagonal_index("diagonal", input.shape, offset, dim1, dim2)
    ctx.in_shape = input.shape
    return _diagonal_view(xp, input, d1, d2)[..., xp.asarray(r), xp.asarray(c)]


@diagonal.grad
def _(ctx, g):
    from ..tensor import zeros
    base = zeros(*ctx.in_shape, dtype=g.dtype, device=g.device)
    return diagonal_scatter(base, g, *ctx.args[1:], **ctx.kwargs),


@register("diagonal_scatter", methods=("diagonal_scatter",), promote=(0, 1), linear=True)
def diagonal_scatter(ctx, input, src, offset=0, dim1=0, dim2=1):
    """A copy of input with its diagonal ``offset`` of dims dim1/dim2 replaced by src (shaped like diagonal())."""
    xp = array_module(input)
    d1, d2, r, c = _diagonal_index("diagonal_scatter", input.shape, offset, dim1, dim2)
    want = tuple(n for i, n in enumerate(input.shape) if i not in (d1, d2)) + (len(r),)
    if tuple(src.shape) != want:
        raise RuntimeError(f"diagonal_scatter: src must have the shape of the diagonal, {want}, got "
                           f"{tuple(src.shape)}")
    out = input.copy()
    _diagonal_view(xp, out, d1, d2)[..., xp.asarray(r), xp.asarray(c)] = src
    return out


@diagonal_scatter.grad
def _(ctx, g):
    from ..tensor import zeros_like
    rest = ctx.args[2:]
    kept = diagonal(g, *rest, **ctx.kwargs)
    return diagonal_scatter(g, zeros_like(kept), *rest, **ctx.kwargs), kept


@register("diag_embed", methods=("diag_embed",), composite=True)
def diag_embed(ctx, input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1/dim2 of the result) whose diagonal ``offset`` holds the last dim of input."""
    from ..tensor import zeros
    nd = input.ndim + 1
    d1, d2 = dim_index(dim1, nd, "diag_embed"), dim_index(dim2, nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diag_embed: dim1 and dim2 cannot be the same dim ({dim1}, {dim2})")
    n = input.shape[-1] + abs(offset)
    rest = iter(input.shape[:-1])
    shape = [n if i in (d1, d2) else next(rest) for i in range(nd)]
    return diagonal_scatter(zeros(*shape, dtype=input.dtype, device=input.device), input, offset, d1, d2)


# ---------------------------------------------------------------- LU: inverses, solves, determinants
def _inv_grad(ctx, g, *_):
    y = ctx.outputs[0]
    return -(_h(y) @ g @ _h(y)),


def _inv_tangent(ctx, t, *_):
    y = ctx.outputs[0]
    out = -(y @ t @ y)
    return out if len(ctx.out_refs) == 1 else (out, None)


@register("linalg_inv", methods=("inverse",), aliases=("inverse",), cpu="fp32")
def linalg_inv(ctx, A):
    """The inverse of each square matrix; a singular one raises LinAlgError."""
    _matrices("linalg_inv", A, square=True, complex_ok=True)
    xp = array_module(A)
    return _run("linalg_inv", lambda: xp.linalg.inv(A), A, _singular)


linalg_inv.grad(_inv_grad)
linalg_inv.jvp(_inv_tangent)


@register("linalg_inv_ex", cpu="fp32")
def linalg_inv_ex(ctx, A, *, check_errors=False):
    """(inverse, info): info is 0, or k > 0 when the k-th pivot is zero (that matrix's inverse is NaN here)."""
    _matrices("linalg_inv_ex", A, square=True, complex_ok=True)
    xp = array_module(A)
    info = _lu(A)[2]
    if not bool(info.any()):
        return xp.linalg.inv(A), info
    if check_errors:
        raise LinAlgError(f"linalg_inv_ex: {_singular(A)}")
    ok = (info == 0)[..., None, None]
    safe = xp.where(ok, A, xp.eye(A.shape[-1], dtype=A.dtype))
    return xp.where(ok, xp.linalg.inv(safe), xp.nan), info


linalg_inv_ex.grad(_inv_grad)
linalg_inv_ex.jvp(_inv_tangent)


def _is_vector_rhs(A, B):
    """torch's rule: B is a (batch of) vector(s) when it is 1-D, or has A's batch shape plus one dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


@register("linalg_solve", promote=(0, 1), same_dtype=True, cpu="fp32")
def linalg_solve(ctx, A, B, *, left=True):
    """X with A X = B (X A = B for left=False); batches broadcast, B may be a vector."""
    _matrices("linalg_solve", A, square=True, complex_ok=True)
    xp = array_module(A)
    ctx.vector = vector = _is_vector_rhs(A, B)
    b = B[..., None] if vector else B
    if b.ndim < 2:
        raise RuntimeError(f"linalg_solve: B must be a vector or a batch of matrices, got shape {tuple(B.shape)}")
    if not left:
        A, b = xp.swapaxes(A, -1, -2), xp.swapaxes(b, -1, -2)
    n = A.shape[-1]
    if b.shape[-2] != n:
        raise RuntimeError(f"linalg_solve: A of shape {tuple(A.shape)} and B of shape {tuple(B.shape)} do not fit "
                           f"(B needs {n} {'rows' if left else 'columns'})")
    batch = _batch_shape("linalg_solve", A.shape[:-2], b.shape[:-2])
    a_, b_ = xp.broadcast_to(A, batch + A.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:])
    x = _run("linalg_solve", lambda: xp.linalg.solve(a_, b_), a_, _singular)
    if not left:
        x = xp.swapaxes(x, -1, -2)
    return x[..., 0] if vector else x


@linalg_solve.grad
def _(ctx, g):
    A = ctx.inputs[0]
    left = ctx.kwargs.get("left", True)
    x = ctx.output
    if ctx.vector:
        g, x = g.unsqueeze(-1), x.unsqueeze(-1)
    gb = linalg_solve(_h(A), g, left=left)
    ga = -(gb @ _h(x)) if left else -(_h(x) @ gb)
    return ga, (gb.squeeze(-1) if ctx.vector else gb)


@linalg_solve.jvp
def _(ctx, ta, tb, *_):
    """d(A^-1 B) = A^-1 (dB - dA X); for X A = B, (dB - X dA) A^-1."""
    A = ctx.inputs[0]
    left = ctx.kwargs.get("left", True)
    x = ctx.output
    if ctx.vector:
        x, tb = x.unsqueeze(-1), tb.unsqueeze(-1)
    out = linalg_solve(A, tb - (ta @ x if left else x @ ta), left=left)
    return out.squeeze(-1) if ctx.vector else out


def _masked_triangle(xp, a, upper, unitriangular):
    t = xp.triu(a) if upper else xp.tril(a)
    if unitriangular:
        n = a.shape[-1]
        t = t * (1 - xp.eye(n, dtype=a.dtype)) + xp.eye(n, dtype=a.dtype)
    return t


def _substitute(t, b, upper):
    """Forward/back substitution for T X = B, vectorized over the batch: what a zero pivot gives is inf/NaN, as in
    LAPACK's trsm (used only when the fast solve refuses a singular triangle)."""
    xp = array_module(t)
    n = t.shape[-1]
    x = xp.zeros_like(b)
    for i in (reversed(range(n)) if upper else range(n)):
        rest = (t[..., i:i + 1, i + 1:] @ x[..., i + 1:, :]) if upper else (t[..., i:i + 1, :i] @ x[..., :i, :])
        x[..., i:i + 1, :] = (b[..., i:i + 1, :] - rest) / t[..., i:i + 1, i:i + 1]
    return x


@register("linalg_solve_triangular", promote=(0, 1), same_dtype=True)
def linalg_solve_triangular(ctx, A, B, *, upper, left=True, unitriangular=False):
    """X with T X = B (X T = B for left=False), T the upper or lower triangle of A (unit diagonal if asked)."""
    _matrices("linalg_solve_triangular", A, square=True)
    _matrices("linalg_solve_triangular", B, what="B")
    xp = array_module(A)
    t = _masked_triangle(xp, A, upper, unitriangular)
    b = B if left else xp.swapaxes(B, -1, -2)
    if not left:
        t, upper_ = xp.swapaxes(t, -1, -2), not upper
    else:
        upper_ = upper
    if b.shape[-2] != t.shape[-1]:
        raise RuntimeError(f"linalg_solve_triangular: A of shape {tuple(A.shape)} and B of shape {tuple(B.shape)} "
                           f"do not fit")
    batch = _batch_shape("linalg_solve_triangular", t.shape[:-2], b.shape[:-2])
    t, b = xp.broadcast_to(t, batch + t.shape[-2:]), xp.broadcast_to(b, batch + b.shape[-2:])
    try:
        with linalg_errors(xp):
            x = xp.linalg.solve(t, b)
    except np.linalg.LinAlgError:
        x = _substitute(t, b, upper_)
    return x if left else xp.swapaxes(x, -1, -2)


def _triangle_of(t, kw):
    t = triu(t) if kw["upper"] else tril(t)
    return t - diag_embed(diagonal(t, 0, -2, -1)) if kw.get("unitriangular", False) else t


@linalg_solve_triangular.grad
def _(ctx, g):
    A = ctx.inputs[0]
    kw = ctx.kwargs
    left = kw.get("left", True)
    x = ctx.output
    gb = linalg_solve_triangular(A.mT, g, upper=not kw["upper"], left=left,
                                 unitriangular=kw.get("unitriangular", False))
    ga = -(gb @ x.mT) if left else -(x.mT @ gb)
    return _triangle_of(ga, kw), gb


@linalg_solve_triangular.jvp
def _(ctx, ta, tb, *_):
    A = ctx.inputs[0]
    kw = ctx.kwargs
    left = kw.get("left", True)
    x = ctx.output
    dt = _triangle_of(ta, kw)
    return linalg_solve_triangular(A, tb - (dt @ x if left else x @ dt), **kw)


@register("triangular_solve", methods=("triangular_solve",), promote=(0, 1), cpu="fp32", composite=True)
def triangular_solve(ctx, b, A, upper=True, transpose=False, unitriangular=False):
    """(solution, cloned_coefficient): solves op(T) X = b with T a triangle of A, op the transpose if asked."""
    _matrices("triangular_solve", A, square=True)
    a = A.mT if transpose else A
    x = linalg_solve_triangular(a, b, upper=upper != transpose, unitriangular=unitriangular)
    return x, A.clone()


@register("linalg_lu_factor")
def linalg_lu_factor(ctx, A, *, pivot=True):
    """(LU, pivots): A = P L U packed as LAPACK's getrf (unit L below the diagonal, U on and above; 1-based
    int32 row swaps). A singular matrix raises LinAlgError (it could not be used by lu_solve)."""
    _matrices("linalg_lu_factor", A)
    if not pivot:
        raise RuntimeError("linalg_lu_factor: LU without pivoting is not implemented (nor is it in torch on the CPU)")
    lu, piv, info = _lu(A)
    if bool(info.any()):
        i, k = _first_failure(info)
        where_ = f" of batch element {i}" if A.ndim > 2 else ""
        raise LinAlgError(f"linalg_lu_factor: U[{k - 1}, {k - 1}]{where_} is zero, so the matrix is singular and "
                          "lu_solve could not use it")
    return lu, piv


def _permutation_matrix(pivots, m, like):
    """P (..., m, m) with A = P L U, from LAPACK's 1-based row swaps (a constant: no gradient)."""
    from ..tensor import Tensor
    xp = array_module(pivots.data)
    piv = pivots.data.reshape(-1, pivots.shape[-1]).astype(np.int64) - 1
    b, k = piv.shape
    perm = xp.broadcast_to(xp.arange(m), (b, m)).copy()
    rows = xp.arange(b)
    for j in range(k):
        pj, pp = perm[:, j].copy(), perm[rows, piv[:, j]].copy()
        perm[:, j], perm[rows, piv[:, j]] = pp, pj
    p = xp.zeros((b, m, m), dtype=like.dtype)
    p[rows[:, None], perm, xp.arange(m)[None, :]] = 1  # row i of L U is row perm[i] of A
    return Tensor._wrap(p.reshape(tuple(pivots.shape[:-1]) + (m, m)))


def _lu_parts(LU):
    m, n = LU.shape[-2:]
    k = min(m, n)
    lower = tril(LU[..., :, :k], -1) + _eye_like(LU, m, k)
    upper = triu(LU[..., :k, :])
    return lower, upper


@linalg_lu_factor.grad
def _(ctx, g_lu, g_piv=None):
    """With P fixed, L^-1 P^T dA U^-1 = L^-1 dL + dU U^-1 splits into its strict lower and upper parts."""
    A = ctx.inputs[0]
    if A.shape[-1] != A.shape[-2]:
        raise NotImplementedError("linalg_lu_factor: the derivative is only implemented for square matrices")
    lower, upper = _lu_parts(ctx.outputs[0])
    m = tril(lower.mT @ g_lu, -1) + triu(g_lu @ upper.mT)
    y = linalg_solve_triangular(lower.mT, m, upper=True, unitriangular=True)
    z = linalg_solve_triangular(upper.mT, y, upper=False, left=False)
    return _permutation_matrix(ctx.outputs[1], A.shape[-1], A) @ z,


@linalg_lu_factor.jvp
def _(ctx, ta, *_):
    A = ctx.inputs[0]
    if A.shape[-1] != A.shape[-2]:
        raise NotImplementedError("linalg_lu_factor: forward-mode AD is only implemented for square matrices")
    lower, upper = _lu_parts(ctx.outputs[0])
    p = _permutation_matrix(ctx.outputs[1], A.shape[-1], A)
    c = linalg_solve_triangular(lower, p.mT @ ta, upper=False, unitriangular=True)
    c = linalg_solve_triangular(upper, c, upper=True, left=False)
    return lower @ tril(c, -1) + triu(c) @ upper, None


@register("lu_solve", methods=("lu_solve",), promote=(0, 1), cpu="fp32", composite=True)
def lu_solve(ctx, b, LU_data, LU_pivots):
    """X with A X = b, from A's (LU, pivots) of lu_factor (torch.lu_solve's argument order)."""
    _matrices("lu_solve", LU_data, what="LU_data", square=True)
    return linalg_lu_solve(LU_data, LU_pivots, b)


@register("linalg_lu_solve", promote=(0, 2), composite=True)
def linalg_lu_solve(ctx, LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (X A = B for left=False; A^T for adjoint=True), from A's lu_factor."""
    _matrices("linalg_lu_solve", LU, what="LU", square=True)
    if pivots.dtype.kind not in "iu" or tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise RuntimeError(f"linalg_lu_solve: pivots must be an integer tensor of shape {tuple(LU.shape[:-1])}, "
                           f"got {pivots.dtype.name} of shape {tuple(pivots.shape)}")
    p = _permutation_matrix(pivots, LU.shape[-1], LU)
    if not left:  # X A = B is A^T X^T = B^T (and X A^T = B is A X^T = B^T)
        B, adjoint = B.mT, not adjoint
    if not adjoint:  # A X = B:  L U X = P^T B
        y = linalg_solve_triangular(LU, p.mT @ B, upper=False, unitriangular=True)
        x = linalg_solve_triangular(LU, y, upper=True)
    else:            # A^T X = B:  U^T L^T P^T X = B
        y = linalg_solve_triangular(LU.mT, B, upper=False)
        x = p @ linalg_solve_triangular(LU.mT, y, upper=True, unitriangular=True)
    return x if left else x.mT


def _cofactor(A):
    """det(A) A^-T, the derivative of det, also where A is singular (from the SVD: prod of the other s_i)."""
    d = linalg_det(A)
    if not bool((d == 0).any()):
        return linalg_inv(A).mT * d.unsqueeze(-1).unsqueeze(-1)
    u, s, vh = linalg_svd(A)
    n = s.shape[-1]
    others = where(_eye_like(s, n, dtype=_dt.bool_), 1.0, s.unsqueeze(-2)).prod(-1)  # prod_{j != i} s_j
    sign = (linalg_det(u) * linalg_det(vh)).unsqueeze(-1).unsqueeze(-1)
    return (u * others.unsqueeze(-2)) @ vh * sign


@register("linalg_det", methods=("det",), aliases=("det",))
def linalg_det(ctx, A):
    """The determinant of each square matrix."""
    _matrices("linalg_det", A, square=True)
    return array_module(A).linalg.det(A)


@linalg_det.grad
def _(ctx, g):
    return g.unsqueeze(-1).unsqueeze(-1) * _cofactor(ctx.inputs[0]),


@linalg_det.jvp
def _(ctx, ta, *_):
    return (_cofactor(ctx.inputs[0]) * ta).sum((-2, -1))


@register("linalg_slogdet", methods=("slogdet",), aliases=("slogdet",))
def linalg_slogdet(ctx, A):
    """(sign, log|det|) of each square matrix: the determinant without overflow."""
    _matrices("linalg_slogdet", A, square=True)
    sign, logabs = array_module(A).linalg.slogdet(A)
    return sign.astype(A.dtype, copy=False), logabs.astype(A.dtype, copy=False)


@linalg_slogdet.grad
def _(ctx, g_sign, g_logabs):
    if g_logabs is None:
        return None,
    return g_logabs.unsqueeze(-1).unsqueeze(-1) * linalg_inv(ctx.inputs[0]).mT,


@linalg_slogdet.jvp
def _(ctx, ta, *_):
    A = ctx.inputs[0]
    return ctx.outputs[0] * 0, (linalg_inv(A).mT * ta).sum((-2, -1))


# ---------------------------------------------------------------- Cholesky
def _phi(m):
    """The lower triangle with half the diagonal: the map with L^-1 dL = phi(L^-1 dA L^-T)."""
    return tril(m, -1) + diag_embed(diagonal(m, 0, -2, -1) * 0.5)


def _cholesky_forward(name, A, upper, fail):
    _matrices(name, A, square=True)
    xp = array_module(A)
    try:
        with linalg_errors(xp):
            low = xp.linalg.cholesky(A)
        info = xp.zeros(A.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        if fail:
            raise LinAlgError(f"{name}: {_not_positive_definite(A)}") from None
        low, info = _cholesky_partial(A)
    return (xp.swapaxes(low, -1, -2) if upper else low), info


def _cholesky_grad(ctx, g, *_):
    """gA = L^-T phi(L^T gL) L^-1, made symmetric (A is symmetric, and only its lower triangle was read)."""
    upper = ctx.kwargs.get("upper", ctx.args[1] if len(ctx.args) > 1 else False)
    low = ctx.outputs[0].mT if upper else ctx.outputs[0]
    g = g.mT if upper else g
    inner = _phi(low.mT @ g)
    ga = linalg_solve_triangular(low.mT, inner, upper=True)
    ga = linalg_solve_triangular(low, ga, upper=False, left=False)
    return (ga + ga.mT) * 0.5,


def _cholesky_tangent(ctx, ta, *_):
    """dL = L phi(L^-1 dA L^-T)."""
    upper = ctx.kwargs.get("upper", ctx.args[1] if len(ctx.args) > 1 else False)
    low = ctx.outputs[0].mT if upper else ctx.outputs[0]
    s = linalg_solve_triangular(low, ta, upper=False)
    s = linalg_solve_triangular(low.mT, s, upper=True, left=False)
    dl = low @ _phi(s)
    dl = dl.mT if upper else dl
    return dl if len(ctx.out_refs) == 1 else (dl, None)


@register("linalg_cholesky", methods=("cholesky",), aliases=("cholesky",), cpu="fp32")
def linalg_cholesky(ctx, A, upper=False):
    """L (lower) with A = L L^T for symmetric positive-definite A (U = L^T with A = U^T U for upper=True).
    Only the lower triangle of A is read."""
    return _cholesky_forward("linalg_cholesky", A, upper, fail=True)[0]


@register("linalg_cholesky_ex", cpu="fp32")
def linalg_cholesky_ex(ctx, A, *, upper=False, check_errors=False):
    """(L, info): info is 0, or the order of the first leading minor that is not positive-definite."""
    return _cholesky_forward("linalg_cholesky_ex", A, upper, fail=check_errors)


for _op in (linalg_cholesky, linalg_cholesky_ex):
    _op.grad(_cholesky_grad)
    _op.jvp(_cholesky_tangent)


@register("cholesky_inverse", methods=("cholesky_inverse",), cpu="fp32", composite=True)
def cholesky_inverse(ctx, L, upper=False):
    """The inverse of A = L L^T (A = U^T U for upper=True), from its Cholesky factor."""
    _matrices("cholesky_inverse", L, square=True)
    inv = linalg_solve_triangular(L, _eye_like(L), upper=upper)
    return inv.mT @ inv if not upper else inv @ inv.mT


@register("cholesky_solve", methods=("cholesky_solve",), promote=(0, 1), cpu="fp32", composite=True)
def cholesky_solve(ctx, B, L, upper=False):
    """X with A X = B, for A = L L^T (A = U^T U for upper=True) given by its Cholesky factor."""
    _matrices("cholesky_solve", L, what="L", square=True)
    first, second = (L.mT, L) if upper else (L, L.mT)
    y = linalg_solve_triangular(first, B, upper=False)
    return linalg_solve_triangular(second, y, upper=True)


# ---------------------------------------------------------------- QR
@register("linalg_qr", cpu="fp32")
def linalg_qr(ctx, A, mode="reduced"):
    """(Q, R) with A = Q R, Q with orthonormal columns, R upper triangular. mode: "reduced" (Q is m x k),
    "complete" (Q is m x m) or "r" (R only; Q comes back empty)."""
    _matrices("linalg_qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg_qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    xp = array_module(A)
    if mode == "r":
        return xp.zeros(0, dtype=A.dtype), xp.linalg.qr(A, mode="r")
    q, r = xp.linalg.qr(A, mode=mode)
    return q, r


def _qr_rules_apply(ctx):
    mode = ctx.kwargs.get("mode", ctx.args[1] if len(ctx.args) > 1 else "reduced")
    m, n = ctx.inputs[0].shape[-2:]
    if mode == "r":
        raise NotImplementedError("the derivative of linalg_qr depends on Q, which is not computed when mode='r'; "
                                  "use mode='reduced'")
    if mode == "complete" and m > n:
        raise NotImplementedError("linalg_qr is not differentiable when mode='complete' and nrows > ncols")


def _qr_square_grad(q, r, gq, gr):
    """The gradient for A = Q R with m >= n: (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q."""
    mm = r @ gr.mT - gq.mT @ q
    low = tril(mm, -1)
    sym = low + low.mT + diag_embed(diagonal(mm, 0, -2, -1))
    return linalg_solve_triangular(r.mT, gq + q @ sym, upper=False, left=False)


@linalg_qr.grad
def _(ctx, gq, gr):
    _qr_rules_apply(ctx)
    A = ctx.inputs[0]
    q, r = ctx.outputs
    gq, gr = _zeros_if_none(gq, q), _zeros_if_none(gr, r)
    m, n = A.shape[-2:]
    if m >= n:
        return _qr_square_grad(q, r, gq, gr),
    from .shape import cat
    y, gr1, gr2 = A[..., m:], gr[..., :m], gr[..., m:]
    gx = _qr_square_grad(q, r[..., :m], gq + y @ gr2.mT, gr1)
    return cat([gx, q @ gr2], -1),


def _qr_square_tangent(q, r, da):
    """m >= n: C = Q^T dA R^-1; Q^T dQ is its skew part from the strict lower triangle; dR = (C - that) R."""
    dar = linalg_solve_triangular(r, da, upper=True, left=False)
    c = q.mT @ dar
    low = tril(c, -1)
    omega = low - low.mT
    dr = (c - omega) @ r
    dq = dar - q @ (c - omega)
    return dq, triu(dr)


@linalg_qr.jvp
def _(ctx, ta, *_):
    _qr_rules_apply(ctx)
    A = ctx.inputs[0]
    q, r = ctx.outputs
    m, n = A.shape[-2:]
    if m >= n:
        return _qr_square_tangent(q, r, ta)
    from .shape import cat
    dq, dr1 = _qr_square_tangent(q, r[..., :m], ta[..., :m])
    dr2 = dq.mT @ A[..., m:] + q.mT @ ta[..., m:]
    return dq, cat([dr1, dr2], -1)


@register("qr", methods=("qr",), cpu="fp32", composite=True)
def qr(ctx, input, some=True):
    """torch.qr: linalg_qr with mode "reduced" (some=True) or "complete"."""
    _matrices("qr", input)
    return linalg_qr(input, "reduced" if some else "complete")


@register("geqrf", methods=("geqrf",), cpu="fp32")
def geqrf(ctx, input):
    """(a, tau): LAPACK's compact QR, Householder vectors below the diagonal of a and R on and above it."""
    _matrices("geqrf", input)
    xp = array_module(input)
    h, tau = xp.linalg.qr(input, mode="raw")
    return xp.ascontiguousarray(xp.swapaxes(h, -1, -2)), tau


geqrf.grad(_no_derivative("geqrf", " (nor is it in torch); differentiate linalg.qr instead"))
geqrf.jvp(_no_derivative("geqrf", " (nor is it in torch); differentiate linalg.qr instead"))


def _reflector(A, i):
    """Householder vector i of a geqrf result: 1 at row i, A's column i below it, 0 above."""
    from ..tensor import arange
    rows = arange(A.shape[-2], device=A.device)
    unit = (rows == i).to(A.dtype)
    return where(rows > i, A[..., :, i], unit)


def _check_householder(name, A, tau, rows_needed=None):
    _matrices(name, A)
    _check_dtype(name, tau, "tau")
    m, n = A.shape[-2:]
    k = tau.shape[-1] if tau.ndim else -1
    if tau.ndim != A.ndim - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or k > n or \
            (rows_needed is None and m < n):
        raise RuntimeError(f"{name}: expected A (..., m, n) with m >= n and tau (..., k) with k <= n and A's batch "
                           f"shape, got A {tuple(A.shape)} and tau {tuple(tau.shape)}")
    return k


@register("linalg_householder_product", aliases=("orgqr",), methods=("orgqr",), promote=(0, 1), cpu="fp32",
          composite=True)
def linalg_householder_product(ctx, A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i the i-th Householder vector in A."""
    k = _check_householder("linalg_householder_product", A, tau)
    m, n = A.shape[-2:]
    q = _eye_like(A, m, n).expand(*A.shape)
    for i in reversed(range(k)):
        v = _reflector(A, i)
        q = q - (tau[..., i, None, None] * v.unsqueeze(-1)) @ (v.unsqueeze(-2) @ q)
    return q


@register("ormqr", methods=("ormqr",), promote=(0, 1, 2), cpu="fp32", composite=True)
def ormqr(ctx, input, tau, other, left=True, transpose=False):
    """other multiplied by Q = H_1 ... H_k of a geqrf result: Q C, Q^T C, C Q or C Q^T."""
    k = _check_householder("ormqr", input, tau, rows_needed=True)
    _matrices("ormqr", other, what="other")
    size = other.shape[-2] if left else other.shape[-1]
    if input.shape[-2] != size:
        raise RuntimeError(f"ormqr: input {tuple(input.shape)} holds reflectors of length {input.shape[-2]}, but "
                           f"other {tuple(other.shape)} needs {size}")
    c = other
    order = range(k) if left == transpose else reversed(range(k))  # Q C applies H_k first; Q^T C applies H_1 first
    for i in order:
        v = _reflector(input, i)
        t = tau[..., i, None, None]
        if left:
            c = c - (t * v.unsqueeze(-1)) @ (v.unsqueeze(-2) @ c)
        else:
            c = c - ((c @ v.unsqueeze(-1)) * t) @ v.unsqueeze(-2)
    return c


# ---------------------------------------------------------------- eigenvalues
def _off_diagonal_ratio(num, den, diag):
    """num / den off the diagonal, ``diag`` (a (..., n) tensor or None for zeros) on it."""
    n = num.shape[-1]
    eye = _eye_like(num, n, dtype=_dt.bool_)
    out = where(eye, 0.0, num / where(eye, 1.0, den))
    return out if diag is None else out + diag_embed(diag)


@register("linalg_eigh", cpu="fp32")
def linalg_eigh(ctx, A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A; only the UPLO triangle is read."""
    _matrices("linalg_eigh", A, square=True)
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg_eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    xp = array_module(A)
    w, v = _run("linalg_eigh", lambda: xp.linalg.eigh(A, UPLO=UPLO), A, lambda a: "the algorithm did not converge")
    return w, v


@linalg_eigh.grad
def _(ctx, gl, gv):
    """gA = V (diag(gL) + skew(V^T gV) / E) V^T with E_ij = L_j - L_i."""
    lam, v = ctx.outputs
    if gv is None:
        return (v * gl.unsqueeze(-2)) @ v.mT,
    vgv = v.mT @ gv
    e = lam.unsqueeze(-2) - lam.unsqueeze(-1)
    inner = _off_diagonal_ratio((vgv - vgv.mT) * 0.5, e, gl)
    return v @ inner @ v.mT,


@linalg_eigh.jvp
def _(ctx, ta, *_):
    """dL = diag(V^T dA V); dV = V (V^T dA V / E) off the diagonal."""
    lam, v = ctx.outputs
    dp = v.mT @ ta @ v
    e = lam.unsqueeze(-2) - lam.unsqueeze(-1)
    return diagonal(dp, 0, -2, -1), v @ _off_diagonal_ratio(dp, e, None)


@register("linalg_eigvalsh", cpu="fp32", composite=True)
def linalg_eigvalsh(ctx, A, UPLO="L"):
    """The eigenvalues of symmetric A, ascending."""
    _matrices("linalg_eigvalsh", A, square=True)
    return linalg_eigh(A, UPLO)[0]


def _eig_on_host(a):
    """NumPy's eig (LAPACK geev), also for CuPy arrays (CuPy 13 has none; torch too runs it on the host)."""
    dev = device_of_array(a)
    w, v = np.linalg.eig(to_device(a, CPU))
    return to_device(w, dev), to_device(v, dev)


@register("linalg_eig", cpu="fp32")
def linalg_eig(ctx, A):
    """(eigenvalues, eigenvectors) of a square matrix, always complex; eigenvectors have unit norm."""
    _matrices("linalg_eig", A, square=True)
    w, v = _run("linalg_eig", lambda: _eig_on_host(A), A, lambda a: "the algorithm did not converge")
    cdt = _dt.complex_of(A.dtype)
    return w.astype(cdt), v.astype(cdt)


@linalg_eig.grad
def _(ctx, gl, gv):
    """torch's formula: gA = V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / conj(E)) V^H."""
    lam, v = ctx.outputs
    vh = _h(v)
    if gv is None:
        inner = diag_embed(gl)
    else:
        vgv = vh @ gv
        vgv = vgv - (vh @ v) * diagonal(vgv, 0, -2, -1).real.unsqueeze(-2)
        lc = lam.conj()
        inner = _off_diagonal_ratio(vgv, lc.unsqueeze(-2) - lc.unsqueeze(-1), gl)
    return linalg_solve(vh, inner @ vh),


@linalg_eig.jvp
def _(ctx, ta, *_):
    """dP = V^-1 dA V: dL = diag(dP); dV = V (dP / E off the diagonal), keeping each column's norm at 1."""
    lam, v = ctx.outputs
    dp = linalg_solve(v, ta.to(v.dtype) @ v)
    dx = v @ _off_diagonal_ratio(dp, lam.unsqueeze(-2) - lam.unsqueeze(-1), None)
    dv = dx - v * (v.conj() * dx).sum(-2, keepdim=True).real
    return diagonal(dp, 0, -2, -1), dv


@register("linalg_eigvals", cpu="fp32", composite=True)
def linalg_eigvals(ctx, A):
    """The eigenvalues of a square matrix, complex."""
    _matrices("linalg_eigvals", A, square=True)
    return linalg_eig(A)[0]


# ---------------------------------------------------------------- SVD
@register("linalg_svd", cpu="fp32")
def linalg_svd(ctx, A, full_matrices=True):
    """(U, S, Vh) with A = U diag(S) Vh, S descending. full_matrices=False gives the thin U (m x k) and Vh
    (k x n), k = min(m, n)."""
    _matrices("linalg_svd", A)
    xp = array_module(A)
    u, s, vh = _run("linalg_svd", lambda: xp.linalg.svd(A, full_matrices=full_matrices), A,
                    lambda a: "the algorithm did not converge")
    return u, s, vh


def _svd_thin(ctx, *ts):
    """Drop the columns of U / rows of Vh that full_matrices added (their gradient is not defined: torch too)."""
    k = ctx.outputs[1].shape[-1]
    u, _, vh = ctx.outputs
    narrow = [u[..., :k], vh[..., :k, :]]
    return narrow + [None if t is None else t[..., :k] if i == 0 else t[..., :k, :] for i, t in enumerate(ts)]


@linalg_svd.grad
def _(ctx, gu, gs, gvh):
    """torch's svd_backward: gA = U [skew(U^T gU) / E S + S skew(V^T gV) / E + diag(gS)] V^T plus the parts of gU,
    gV outside the thin U, V (E_ij = S_j^2 - S_i^2)."""
    s = ctx.outputs[1]
    u, vh, gu, gvh = _svd_thin(ctx, gu, gvh)
    m, n = u.shape[-2], vh.shape[-1]
    if gu is None and gvh is None:
        return (u * gs.unsqueeze(-2)) @ vh,
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1)
    inner = None
    if gu is not None:
        ugu = u.mT @ gu
        inner = _off_diagonal_ratio(ugu - ugu.mT, e, None) * s.unsqueeze(-2)
    if gvh is not None:
        v, gv = vh.mT, gvh.mT
        vgv = v.mT @ gv
        part = s.unsqueeze(-1) * _off_diagonal_ratio(vgv - vgv.mT, e, None)
        inner = part if inner is None else inner + part
    if gs is not None:
        inner = inner + diag_embed(gs)
    ga = u @ inner @ vh
    if m > n and gu is not None:
        gus = gu / s.unsqueeze(-2)
        ga = ga + (gus - u @ (u.mT @ gus)) @ vh
    if n > m and gvh is not None:
        gvs = gvh.mT / s.unsqueeze(-2)
        ga = ga + u @ (gvs - vh.mT @ (vh @ gvs)).mT
    return ga,


@linalg_svd.jvp
def _(ctx, ta, *_):
    """dP = U^T dA V: dS = diag(dP); U^T dU = (dP S + S dP^T) / E, V^T dV = (S dP + dP^T S) / E (off the diagonal),
    plus the parts of dA outside the thin U, V."""
    full = ctx.kwargs.get("full_matrices", ctx.args[1] if len(ctx.args) > 1 else True)
    u, s, vh = ctx.outputs
    m, n = u.shape[-2], vh.shape[-1]
    if full and m != n:
        raise NotImplementedError("linalg_svd: forward-mode AD with full_matrices=True is only defined for square "
                                  "matrices; pass full_matrices=False")
    v = vh.mT
    dp = u.mT @ ta @ v
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1)
    sr, sc = s.unsqueeze(-2), s.unsqueeze(-1)
    du = u @ _off_diagonal_ratio(dp * sr + sc * dp.mT, e, None)
    dv = v @ _off_diagonal_ratio(sc * dp + dp.mT * sr, e, None)
    if m > n:
        du = du + (ta @ v - u @ (u.mT @ ta @ v)) / sr
    if n > m:
        dv = dv + (ta.mT @ u - v @ (v.mT @ ta.mT @ u)) / sr
    return du, diagonal(dp, 0, -2, -1), dv.mT


@register("linalg_svdvals", cpu="fp32", composite=True)
def linalg_svdvals(ctx, A):
    """The singular values, descending."""
    _matrices("linalg_svdvals", A)
    return linalg_svd(A, False)[1]


@register("svd", methods=("svd",), cpu="fp32", composite=True)
def svd(ctx, input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with input = U diag(S) V^T (V, not Vh); compute_uv=False gives zero U and V."""
    _matrices("svd", input)
    if not compute_uv:
        from ..tensor import zeros
        m, n = input.shape[-2:]
        s = linalg_svdvals(input)
        batch = input.shape[:-2]
        return (zeros(*batch, m, m, dtype=input.dtype, device=input.device), s,
                zeros(*batch, n, n, dtype=input.dtype, device=input.device))
    u, s, vh = linalg_svd(input, not some)
    return u, s, vh.mT


def _tolerance(s, atol, rtol, shape):
    """max(atol, rtol * s_max), with torch's default rtol = eps * max(m, n) when neither is given."""
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else np.finfo(s.dtype).eps * max(shape[-2:])
    atol = 0.0 if atol is None else atol
    smax = s.max(-1, keepdims=True) if s.shape[-1] else s.sum(-1, keepdims=True)
    return array_module(s).maximum(s.dtype.type(atol), s.dtype.type(rtol) * smax)


@register("linalg_pinv")
def linalg_pinv(ctx, A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse, dropping singular values below max(atol, rtol * s_max)."""
    _matrices("linalg_pinv", A)
    xp = array_module(A)
    if hermitian:
        w, v = xp.linalg.eigh(A)
        tol = _tolerance(xp.abs(w), atol, rtol, A.shape)
        inv = xp.where(xp.abs(w) > tol, 1 / xp.where(w == 0, 1, w), 0)
        return (v * inv[..., None, :]) @ xp.swapaxes(v, -1, -2)
    u, s, vh = xp.linalg.svd(A, full_matrices=False)
    tol = _tolerance(s, atol, rtol, A.shape)
    inv = xp.where(s > tol, 1 / xp.where(s == 0, 1, s), 0)
    return xp.swapaxes(vh, -1, -2) @ (inv[..., :, None] * xp.swapaxes(u, -1, -2))


@linalg_pinv.grad
def _(ctx, g):
    """Golub & Pereyra (constant rank): -X^T G X^T + (I - A X)^T G^T ... written as its three terms."""
    A = ctx.inputs[0]
    x = ctx.output
    m, n = A.shape[-2:]
    ga = -(x.mT @ g @ x.mT)
    ga = ga + (_eye_like(A, m) - A @ x) @ g.mT @ (x @ x.mT)
    return ga + (x.mT @ x) @ g.mT @ (_eye_like(A, n) - x @ A),


@linalg_pinv.jvp
def _(ctx, ta, *_):
    A = ctx.inputs[0]
    x = ctx.output
    m, n = A.shape[-2:]
    dx = -(x @ ta @ x)
    dx = dx + (x @ x.mT) @ ta.mT @ (_eye_like(A, m) - A @ x)
    return dx + (_eye_like(A, n) - x @ A) @ ta.mT @ (x.mT @ x)


@register("pinverse", methods=("pinverse",), cpu="fp32", composite=True)
def pinverse(ctx, input, rcond=1e-15):
    """torch.pinverse: linalg_pinv with relative tolerance rcond."""
    _matrices("pinverse", input)
    return linalg_pinv(input, rtol=rcond)


@register("linalg_matrix_rank", cpu="fp32", differentiable=False)
def linalg_matrix_rank(ctx, A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values above max(atol, rtol * s_max) (int64)."""
    _matrices("linalg_matrix_rank", A)
    xp = array_module(A)
    s = xp.abs(xp.linalg.eigvalsh(A)) if hermitian else xp.linalg.svd(A, compute_uv=False)
    return (s > _tolerance(s, atol, rtol, A.shape)).sum(-1).astype(np.int64)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@register("linalg_lstsq", promote=(0, 1), cpu="fp32", composite=True)
def linalg_lstsq(ctx, A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B|| (the least-norm X when A is rank-deficient).

    Which extras are filled follows torch's driver semantics: residuals (squared, per column) for m > n and full
    rank except with gelsy (the default), rank except with gels, singular values with gelsd and gelss.
    """
    from ..tensor import zeros
    _matrices("linalg_lstsq", A)
    if driver is None:
        driver = "gelsy"
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError(f"linalg_lstsq: driver must be one of {_LSTSQ_DRIVERS}, got {driver!r}")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    _matrices("linalg_lstsq", b, what="B")
    m, n = A.shape[-2:]
    if b.shape[-2] != m:
        raise RuntimeError(f"linalg_lstsq: A {tuple(A.shape)} and B {tuple(B.shape)} must have the same number of "
                           "rows")
    rtol = np.finfo(A.dtype).eps * max(m, n) if rcond is None or rcond < 0 else rcond
    x = linalg_pinv(A, rtol=rtol) @ b
    empty = zeros(0, dtype=A.dtype, device=A.device)
    rank = linalg_matrix_rank(A, rtol=rtol) if driver != "gels" else zeros(0, dtype=_dt.int64, device=A.device)
    full_rank = m > n and bool((linalg_matrix_rank(A, rtol=rtol) == n).all())
    residuals = ((A @ x - b) ** 2).sum(-2) if driver != "gelsy" and full_rank else empty
    if vector and residuals.ndim:
        residuals = residuals.squeeze(-1)
    svals = linalg_svdvals(A) if driver in ("gelsd", "gelss") else empty
    return (x.squeeze(-1) if vector else x), residuals, rank, svals


@register("linalg_matrix_norm", composite=True)
def linalg_matrix_norm(ctx, A, ord="fro", dim=(-2, -1), keepdim=False):
    """The matrix norm ord ("fro", "nuc", inf, -inf, 1, -1, 2, -2) over dims ``dim``."""
    _matrices("linalg_matrix_norm", A)
    d0, d1 = (dim_index(d, A.ndim, "linalg_matrix_norm") for d in dim)
    rest = [i for i in range(A.ndim) if i not in (d0, d1)]
    a = A.permute(*rest, d0, d1)
    if ord == "fro":
        out = (a * a).sum((-2, -1)).sqrt()
    elif ord in ("nuc", 2, -2):
        s = linalg_svdvals(a)
        out = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
    elif ord in (1, -1, np.inf, -np.inf):
        sums = a.abs().sum(-2 if ord in (1, -1) else -1)
        out = sums.amax(-1) if ord > 0 else sums.amin(-1)
    else:
        raise RuntimeError(f"linalg_matrix_norm: ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {ord!r}")
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


@register("linalg_cond", cpu="fp32", composite=True)
def linalg_cond(ctx, A, p=None):
    """The condition number in norm p (None: the 2-norm, s_max / s_min); inf for a singular matrix."""
    _matrices("linalg_cond", A, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = linalg_svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    inv, info = linalg_inv_ex(A)
    cond = linalg_matrix_norm(A, p) * linalg_matrix_norm(where((info > 0)[..., None, None], 0.0, inv), p)
    return where(info > 0, float("inf"), cond)


@register("linalg_tensorinv", cpu="fp32", composite=True)
def linalg_tensorinv(ctx, A, ind=2):
    """The tensor X with tensordot(X, A, ind) the identity: the inverse of A seen as a (prod(shape[:ind]),
    prod(shape[ind:])) matrix."""
    _check_dtype("linalg_tensorinv", A)
    if not isinstance(ind, int) or ind <= 0:
        raise RuntimeError(f"linalg_tensorinv: ind must be a positive int, got {ind!r}")
    lead, tail = A.shape[:ind], A.shape[ind:]
    rows, cols = int(np.prod(lead)), int(np.prod(tail))
    if rows != cols:
        raise RuntimeError(f"linalg_tensorinv: the product of the first {ind} dims of A {tuple(A.shape)} must equal "
                           "the product of the rest")
    return linalg_inv(A.reshape(rows, cols)).reshape(*tail, *lead)


@register("linalg_tensorsolve", promote=(0, 1), cpu="fp32", composite=True)
def linalg_tensorsolve(ctx, A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B; ``dims`` first moves those dims of A to the end."""
    _check_dtype("linalg_tensorsolve", A)
    if dims is not None:
        moved = [dim_index(d, A.ndim, "linalg_tensorsolve") for d in dims]
        A = A.permute(*[i for i in range(A.ndim) if i not in moved], *moved)
    if tuple(A.shape[:B.ndim]) != tuple(B.shape):
        raise RuntimeError(f"linalg_tensorsolve: the leading dims of A {tuple(A.shape)} must be B's shape "
                           f"{tuple(B.shape)}")
    rest = A.shape[B.ndim:]
    rows = int(np.prod(B.shape))
    return linalg_solve(A.reshape(rows, -1), B.reshape(rows)).reshape(*rest)


# ---------------------------------------------------------------- vecdot and trace
@register("linalg_vecdot", promote=(0, 1), same_dtype=True, cpu="lower_precision_fp", broadcast=True)
def linalg_vecdot(ctx, x, y, *, dim=-1):
    """sum(conj(x) * y) over dim, batches broadcast (half inputs accumulate in float32, rounded once)."""
    from .opmath import opmath
    if x.ndim == 0 or y.ndim == 0:
        raise RuntimeError("linalg_vecdot: x and y must have at least 1 dimension")
    ndim = len(np.broadcast_shapes(x.shape, y.shape))
    ctx.dim = dim_index(dim, ndim, "linalg_vecdot") - ndim  # negative: it names the same dim in every operand
    xp = array_module(x)
    conj = xp.conj if _dt.is_complex(x.dtype) else (lambda a: a)
    return opmath(lambda a, b: (conj(a) * b).sum(axis=ctx.dim), x, y)


@linalg_vecdot.grad
def _(ctx, g):
    x, y = ctx.inputs
    g = g.unsqueeze(ctx.dim)
    return (g.conj() * y, g * x) if _dt.is_complex(g.dtype) else (g * y, g * x)


@linalg_vecdot.jvp
def _(ctx, tx, ty):
    x, y = ctx.inputs
    return linalg_vecdot(tx, y, dim=ctx.dim) + linalg_vecdot(x, ty, dim=ctx.dim)


@register("trace", methods=("trace",), cpu="fp32", linear=True)
def trace(ctx, input):
    """The sum of a matrix's diagonal (integers sum to int64; half precision accumulates in float32)."""
    from .opmath import compute_dtype
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix (2-D), got a {input.ndim}-D tensor")
    ctx.shape = input.shape
    out_dtype = np.dtype(np.int64) if input.dtype.kind in "biu" else input.dtype
    return array_module(input).trace(input, dtype=compute_dtype(out_dtype, ints="keep")).astype(out_dtype)


trace.grad(lambda ctx, g: (g * _eye_like(g, *ctx.shape),))

