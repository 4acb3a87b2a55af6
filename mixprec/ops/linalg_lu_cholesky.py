"""Linear algebra (``mp.linalg``), part 1: the shared machinery, LU and Cholesky, and the small matrix ops.

    triangles, diagonals   tril, triu, diagonal, diagonal_scatter, diag_embed
    LU                     lu_factor, inv, inv_ex, solve, solve_triangular, det, slogdet, and on top of them
                           triangular_solve, lu_solve, tensorinv, tensorsolve
    Cholesky               cholesky, cholesky_ex, and on top cholesky_inverse, cholesky_solve
    products               vecdot, trace

Part 2, ops/linalg_qr_eig_svd.py, has QR, eigenvalues and the SVD. Primitives call
NumPy's (LAPACK) or CuPy's (cuSOLVER) routine and give its derivative by the
standard matrix-calculus formulas, the ones torch uses, so gradients agree with
torch's; the other ops are composed of them, so both modes of autograd come
for free.

Batches: every matrix argument may be (..., m, n). Dtypes: float32 and float64
(inv and solve also complex). float16/bfloat16 are refused as torch refuses
them; on the CPU the ops of torch's autocast float32 list run under
``mp.autocast("cpu")`` in float32. Failures (a singular matrix, one that is not
positive-definite) raise :class:`LinAlgError` naming the op and the batch
element, on NumPy and on CuPy alike.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, linalg_errors
from ..backend.devices import CPU, to_device
from .elementwise import where
from .registry import get, register
from .shape import cat, dim_index
from ..tensor import Tensor
from ..creation import eye, zeros, zeros_like


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


def _same_dtype(name, **tensors):
    """A composite's tensors must share one dtype (the primitives it calls would refuse them under their names)."""
    dtypes = {k: t.dtype for k, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{k} is {d.name}" for k, d in dtypes.items())
        raise TypeError(f"{name}: expected inputs of one dtype, but {listed} (cast one with .to(dtype), or run under "
                        "mp.autocast)")


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


def _first_failure(a, info):
    """(' (batch element i)' naming the first failed matrix of a batch, or '' for one matrix; its info)."""
    info = to_device(info, CPU).reshape(-1)
    i = int(np.flatnonzero(info)[0]) if info.any() else 0
    return (f" (batch element {i})" if a.ndim > 2 else ""), int(info[i]) if info.size else 0


def _singular(a):
    """Why a batch of matrices could not be inverted, in torch's words (from our own LU's pivots)."""
    where_, k = _first_failure(a, _lu(a)[2])
    detail = f"the diagonal element {k} of its LU factorization is zero: " if k else ""
    return f"{detail}the input matrix{where_} is singular and cannot be inverted"


def _not_positive_definite(a):
    where_, k = _first_failure(a, _cholesky_partial(a)[1])
    detail = f" (the leading minor of order {k} is not positive-definite)" if k else ""
    return f"the factorization could not be completed because the input{where_} is not positive-definite{detail}"


def _no_convergence(a):
    finite = bool(array_module(a).isfinite(a).all())
    return "the algorithm did not converge" + ("" if finite else " (the input holds inf or NaN values)")


def _nan_fills(a, x):
    """x (the inverse of a, or a solve with it) all NaN for each matrix of a holding a NaN: every entry of A^-1
    depends on every entry of A, and torch's LAPACK gives all NaN there (NumPy's keeps some entries finite)."""
    xp = array_module(a)
    bad = xp.isnan(a).any((-2, -1))
    return xp.where(bad[..., None, None], xp.asarray(xp.nan, dtype=x.dtype), x) if bool(bad.any()) else x


def _flat(a):
    """a (..., m, n) as (B, m, n), and how to restore the batch shape (B counted, not -1: a may be empty)."""
    return a.reshape((int(np.prod(a.shape[:-2])),) + a.shape[-2:]), a.shape[:-2]


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
    n = t.shape[-1] if n is None else n
    return eye(n, m, dtype=dtype or t.dtype, device=t.device)


def _zeros_if_none(g, like):
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


def _bits_if_bfloat16(select):
    """CuPy's tril/triu select through where, which has no bfloat16 loop (it would return float32); selecting
    never changes a value, so bfloat16 goes through as its 16-bit patterns (zero's pattern is +0.0)."""
    def keep(xp, a, k):
        if a.dtype == _dt.bfloat16:
            return select(xp, a.view(np.uint16), k).view(a.dtype)
        return select(xp, a, k)
    return keep


tril = _triangle("tril", _bits_if_bfloat16(lambda xp, a, k: xp.tril(a, k)))
triu = _triangle("triu", _bits_if_bfloat16(lambda xp, a, k: xp.triu(a, k)))


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


@register("diagonal", methods=("diagonal",), view=True, linear=True)
def diagonal(ctx, input, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` of dims dim1/dim2, as the last dim of the result (a view, as in torch)."""
    d1, d2, _, _ = _diagonal_index("diagonal", input.shape, offset, dim1, dim2)
    ctx.in_shape = input.shape
    out = array_module(input).diagonal(input, offset, d1, d2)
    if isinstance(out, np.ndarray) and input.flags.writeable:
        out.flags.writeable = True  # NumPy marks its diagonal view read-only; torch's is writable
    return out


@diagonal.grad
def _(ctx, g):
    base = zeros(*ctx.in_shape, dtype=g.dtype, device=g.device)
    return diagonal_scatter(base, g, *ctx.inputs[1:], **ctx.kwargs),


@register("diagonal_scatter", methods=("diagonal_scatter",), linear=True)
def diagonal_scatter(ctx, input, src, offset=0, dim1=0, dim2=1):
    """A copy of input with its diagonal ``offset`` of dims dim1/dim2 replaced by src (shaped like diagonal()).

    The result has input's dtype, src cast to it (torch); a floating src is not rounded into an integer or
    bool input (torch refuses that too when src requires grad)."""
    xp = array_module(input)
    if input.dtype.kind in "biu" and src.dtype.kind not in "biu":
        raise TypeError(f"diagonal_scatter: a {src.dtype.name} src cannot be written into a {input.dtype.name} "
                        "input (it would be rounded); cast one of them first")
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
    rest = ctx.inputs[2:]
    kept = diagonal(g, *rest, **ctx.kwargs)
    return diagonal_scatter(g, zeros_like(kept), *rest, **ctx.kwargs), kept


@register("diag_embed", methods=("diag_embed",), composite=True)
def diag_embed(ctx, input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1/dim2 of the result) whose diagonal ``offset`` holds the last dim of input."""
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
    return out if len(ctx.outputs) == 1 else (out, None)


@register("linalg_inv", methods=("inverse",), aliases=("inverse",), saves=("A", "output"))
def linalg_inv(ctx, A):
    """The inverse of each square matrix; a singular one raises LinAlgError."""
    _matrices("linalg_inv", A, square=True, complex_ok=True)
    xp = array_module(A)
    return _nan_fills(A, _run("linalg_inv", lambda: xp.linalg.inv(A), A, _singular))


linalg_inv.grad(_inv_grad)
linalg_inv.jvp(_inv_tangent)


@register("linalg_inv_ex", saves=("A", "output"))
def linalg_inv_ex(ctx, A, *, check_errors=False):
    """(inverse, info): info is 0, or k > 0 when the k-th pivot is zero (that matrix's inverse is NaN here)."""
    _matrices("linalg_inv_ex", A, square=True, complex_ok=True)
    xp = array_module(A)
    info = _lu(A)[2]
    if not bool(info.any()):
        return _nan_fills(A, xp.linalg.inv(A)), info
    if check_errors:
        raise LinAlgError(f"linalg_inv_ex: {_singular(A)}")
    ok = (info == 0)[..., None, None]
    safe = xp.where(ok, A, xp.eye(A.shape[-1], dtype=A.dtype))
    return _nan_fills(A, xp.where(ok, xp.linalg.inv(safe), xp.nan)), info


linalg_inv_ex.grad(_inv_grad)
linalg_inv_ex.jvp(_inv_tangent)


def _is_vector_rhs(A, B):
    """torch's rule: B is a (batch of) vector(s) when it is 1-D, or has A's batch shape plus one dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


@register("linalg_solve", promote=(0, 1), same_dtype=True, saves=("A", "B", "output"))
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
    x = _nan_fills(a_, _run("linalg_solve", lambda: xp.linalg.solve(a_, b_), a_, _singular))
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
    """The triangle of a that solve_triangular reads (ones on its diagonal with unitriangular)."""
    t = xp.triu(a) if upper else xp.tril(a)
    return xp.where(xp.eye(a.shape[-1], dtype=bool), a.dtype.type(1), t) if unitriangular else t


def _substitute(t, b, upper):
    """Forward/back substitution for T X = B, vectorized over the batch: what a zero pivot gives is inf/NaN, as in
    LAPACK's trsm (used when the fast solve refuses a singular triangle, or would spread an inf/NaN)."""
    xp = array_module(t)
    n = t.shape[-1]
    x = xp.zeros_like(b)
    for i in (reversed(range(n)) if upper else range(n)):
        rest = (t[..., i:i + 1, i + 1:] @ x[..., i + 1:, :]) if upper else (t[..., i:i + 1, :i] @ x[..., :i, :])
        x[..., i:i + 1, :] = (b[..., i:i + 1, :] - rest) / t[..., i:i + 1, i:i + 1]
    return x


@register("linalg_solve_triangular", promote=(0, 1), same_dtype=True, saves=("A", "B", "output"))
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
    if not (bool(xp.isfinite(t).all()) and bool(xp.isfinite(b).all())):
        # LU's row swaps would spread an inf/NaN to entries that substitution (LAPACK's trsm, torch's) never
        # lets it reach
        x = _substitute(t, b, upper_)
    else:
        try:
            with linalg_errors(xp):
                x = xp.linalg.solve(t, b)
        except np.linalg.LinAlgError:
            x = _substitute(t, b, upper_)
    return x if left else xp.swapaxes(x, -1, -2)


def _triangle_of(t, kw):
    """The part of a gradient/tangent in the entries solve_triangular reads."""
    strict = 1 if kw.get("unitriangular", False) else 0
    return triu(t, strict) if kw["upper"] else tril(t, -strict)


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


@register("triangular_solve", methods=("triangular_solve",), promote=(0, 1), composite=True)
def triangular_solve(ctx, b, A, upper=True, transpose=False, unitriangular=False):
    """(solution, cloned_coefficient): solves op(T) X = b with T a triangle of A, op the transpose if asked."""
    _matrices("triangular_solve", A, square=True)
    _same_dtype("triangular_solve", b=b, A=A)
    a = A.mT if transpose else A
    x = linalg_solve_triangular(a, b, upper=upper != transpose, unitriangular=unitriangular)
    return x, A.clone()


@register("linalg_lu_factor", saves=("A", "output"))
def linalg_lu_factor(ctx, A, *, pivot=True):
    """(LU, pivots): A = P L U packed as LAPACK's getrf (unit L below the diagonal, U on and above; 1-based
    int32 row swaps). A singular matrix raises LinAlgError (it could not be used by lu_solve)."""
    _matrices("linalg_lu_factor", A)
    if not pivot:
        raise RuntimeError("linalg_lu_factor: LU without pivoting is not implemented (nor is it in torch on the CPU)")
    lu, piv, info = _lu(A)
    if bool(info.any()):
        where_, k = _first_failure(A, info)
        raise LinAlgError(f"linalg_lu_factor: U[{k - 1}, {k - 1}]{where_} is zero, so the matrix is singular and "
                          "lu_solve could not use it")
    return lu, piv


def _permutation_matrix(pivots, m, like):
    """P (..., m, m) with A = P L U, from LAPACK's 1-based row swaps (a constant: no gradient)."""
    xp = array_module(pivots._array)
    piv = pivots._array.reshape(int(np.prod(pivots.shape[:-1])), pivots.shape[-1]).astype(np.int64) - 1
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


def _pad_to(t, rows, cols):
    """t (..., r, c) with zero rows/columns appended up to (rows, cols)."""
    r, c = t.shape[-2:]
    if rows > r:
        t = cat([t, zeros(*t.shape[:-2], rows - r, c, dtype=t.dtype, device=t.device)], -2)
    if cols > c:
        t = cat([t, zeros(*t.shape[:-2], t.shape[-2], cols - c, dtype=t.dtype, device=t.device)], -1)
    return t


def lu_vjp(P, L, U, gl, gu):
    """The gradient of A = P L U (P fixed) from those of L (m x k, unit lower) and U (k x n, upper), k = min(m, n).

    Tall or square (k = n): with Y = P^T dA U^-1 = [Y1; Y2] and C = L1^-1 Y1, dL1 = L1 tril(C, -1), dU = triu(C) U
    and dL2 = Y2 - L2 triu(C); so gC = tril(L1^T gL1, -1) + triu(gU U^T - L2^T gL2), gY = [L1^-T gC; gL2] and
    gA = P gY U^-T. Wide (k = m): the same with the roles of L and U exchanged (X = L^-1 P^T dA = [X1 X2],
    C = X1 U1^-1, dU2 = X2 - tril(C, -1) U2).
    """
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    gl, gu = _zeros_if_none(gl, L), _zeros_if_none(gu, U)
    if m >= n:
        l1, l2, gl1, gl2 = L[..., :k, :], L[..., k:, :], gl[..., :k, :], gl[..., k:, :]
        gc = tril(l1.mT @ gl1, -1) + triu(gu @ U.mT - l2.mT @ gl2)
        gy = cat([linalg_solve_triangular(l1.mT, gc, upper=True, unitriangular=True), gl2], -2)
        return P @ linalg_solve_triangular(U.mT, gy, upper=False, left=False)
    u1, u2, gu1, gu2 = U[..., :k], U[..., k:], gu[..., :k], gu[..., k:]
    gc = tril(L.mT @ gl - gu2 @ u2.mT, -1) + triu(gu1 @ u1.mT)
    gx = cat([linalg_solve_triangular(u1.mT, gc, upper=False, left=False), gu2], -1)
    return P @ linalg_solve_triangular(L.mT, gx, upper=True, unitriangular=True)


def lu_jvp(P, L, U, ta):
    """(dL, dU) of A = P L U for a tangent dA (the forward half of lu_vjp's derivation)."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    pa = P.mT @ ta
    if m >= n:
        l1, l2 = L[..., :k, :], L[..., k:, :]
        y = linalg_solve_triangular(U, pa, upper=True, left=False)
        c = linalg_solve_triangular(l1, y[..., :k, :], upper=False, unitriangular=True)
        return cat([l1 @ tril(c, -1), y[..., k:, :] - l2 @ triu(c)], -2), triu(c) @ U
    u1, u2 = U[..., :k], U[..., k:]
    x = linalg_solve_triangular(L, pa, upper=False, unitriangular=True)
    c = linalg_solve_triangular(u1, x[..., :k], upper=True, left=False)
    return L @ tril(c, -1), cat([triu(c) @ u1, x[..., k:] - tril(c, -1) @ u2], -1)


def lu_factor_grad(ctx, g_lu, *_):
    """lu_vjp with L's and U's gradients read from the packed LU's (strict lower part, upper part)."""
    A, (lu, piv) = ctx.inputs[0], ctx.outputs[:2]
    if A.numel() == 0 or g_lu is None:
        return _zeros_if_none(None, A),
    m, n = A.shape[-2:]
    k = min(m, n)
    lower, upper = _lu_parts(lu)
    return lu_vjp(_permutation_matrix(piv, m, A), lower, upper, tril(g_lu[..., :, :k], -1), triu(g_lu[..., :k, :])),


def lu_factor_tangent(ctx, ta, *_):
    A, (lu, piv) = ctx.inputs[0], ctx.outputs[:2]
    rest = (None,) * (len(ctx.outputs) - 1)
    if A.numel() == 0:
        return (_zeros_if_none(None, A),) + rest
    m, n = A.shape[-2:]
    lower, upper = _lu_parts(lu)
    dl, du = lu_jvp(_permutation_matrix(piv, m, A), lower, upper, ta)
    return (tril(_pad_to(dl, m, n), -1) + triu(_pad_to(du, m, n)),) + rest


linalg_lu_factor.grad(lu_factor_grad)
linalg_lu_factor.jvp(lu_factor_tangent)


@register("lu_solve", methods=("lu_solve",), promote=(0, 1), composite=True)
def lu_solve(ctx, b, LU_data, LU_pivots):
    """X with A X = b, from A's (LU, pivots) of lu_factor (torch.lu_solve's argument order)."""
    _matrices("lu_solve", LU_data, what="LU_data", square=True)
    return linalg_lu_solve(LU_data, LU_pivots, b)


@register("linalg_lu_solve", promote=(0, 2), composite=True)
def linalg_lu_solve(ctx, LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (X A = B for left=False; A^T for adjoint=True), from A's lu_factor."""
    _matrices("linalg_lu_solve", LU, what="LU", square=True)
    _matrices("linalg_lu_solve", B, what="B")
    _same_dtype("linalg_lu_solve", LU=LU, B=B)
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
    from .linalg_qr_eig_svd import linalg_svd
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
        return None,  # (inv_ex: a singular A gets a non-finite gradient, as torch's, instead of an error)
    return g_logabs.unsqueeze(-1).unsqueeze(-1) * linalg_inv_ex(ctx.inputs[0])[0].mT,


@linalg_slogdet.jvp
def _(ctx, ta, *_):
    A = ctx.inputs[0]
    return ctx.outputs[0] * 0, (linalg_inv_ex(A)[0].mT * ta).sum((-2, -1))


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
    upper = ctx.kwargs.get("upper", ctx.inputs[1] if len(ctx.inputs) > 1 else False)
    low = ctx.outputs[0].mT if upper else ctx.outputs[0]
    g = g.mT if upper else g
    inner = _phi(low.mT @ g)
    ga = linalg_solve_triangular(low.mT, inner, upper=True)
    ga = linalg_solve_triangular(low, ga, upper=False, left=False)
    return (ga + ga.mT) * 0.5,


def _cholesky_tangent(ctx, ta, *_):
    """dL = L phi(L^-1 dA L^-T)."""
    upper = ctx.kwargs.get("upper", ctx.inputs[1] if len(ctx.inputs) > 1 else False)
    low = ctx.outputs[0].mT if upper else ctx.outputs[0]
    s = linalg_solve_triangular(low, ta, upper=False)
    s = linalg_solve_triangular(low.mT, s, upper=True, left=False)
    dl = low @ _phi(s)
    dl = dl.mT if upper else dl
    return dl if len(ctx.outputs) == 1 else (dl, None)


@register("linalg_cholesky", methods=("cholesky",), aliases=("cholesky",), saves=("A", "output"))
def linalg_cholesky(ctx, A, upper=False):
    """L (lower) with A = L L^T for symmetric positive-definite A (U = L^T with A = U^T U for upper=True).
    Only the lower triangle of A is read."""
    return _cholesky_forward("linalg_cholesky", A, upper, fail=True)[0]


@register("linalg_cholesky_ex", saves=("A", "output"))
def linalg_cholesky_ex(ctx, A, *, upper=False, check_errors=False):
    """(L, info): info is 0, or the order of the first leading minor that is not positive-definite."""
    return _cholesky_forward("linalg_cholesky_ex", A, upper, fail=check_errors)


for _op in (linalg_cholesky, linalg_cholesky_ex):
    _op.grad(_cholesky_grad)
    _op.jvp(_cholesky_tangent)


@register("cholesky_inverse", methods=("cholesky_inverse",), composite=True)
def cholesky_inverse(ctx, L, upper=False):
    """The inverse of A = L L^T (A = U^T U for upper=True), from its Cholesky factor."""
    _matrices("cholesky_inverse", L, square=True)
    inv = linalg_solve_triangular(L, _eye_like(L), upper=upper)
    return inv.mT @ inv if not upper else inv @ inv.mT


@register("cholesky_solve", methods=("cholesky_solve",), promote=(0, 1), composite=True)
def cholesky_solve(ctx, B, L, upper=False):
    """X with A X = B, for A = L L^T (A = U^T U for upper=True) given by its Cholesky factor."""
    _matrices("cholesky_solve", L, what="L", square=True)
    _same_dtype("cholesky_solve", B=B, L=L)
    first, second = (L.mT, L) if upper else (L, L.mT)
    y = linalg_solve_triangular(first, B, upper=False)
    return linalg_solve_triangular(second, y, upper=True)


# ---------------------------------------------------------------- tensors as matrices
@register("linalg_tensorinv", composite=True)
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


@register("linalg_tensorsolve", promote=(0, 1), composite=True)
def linalg_tensorsolve(ctx, A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B; ``dims`` first moves those dims of A to the end."""
    _check_dtype("linalg_tensorsolve", A)
    _same_dtype("linalg_tensorsolve", A=A, B=B)
    if dims is not None:
        moved = [dim_index(d, A.ndim, "linalg_tensorsolve") for d in dims]
        A = A.permute(*[i for i in range(A.ndim) if i not in moved], *moved)
    # as torch, only sizes count: A's first B.ndim dims and the rest each flatten to B's number of elements
    rows, rest = int(np.prod(A.shape[:B.ndim])), A.shape[B.ndim:]
    if rows != int(np.prod(rest)) or rows != B.numel():
        raise RuntimeError(f"linalg_tensorsolve: A of shape {tuple(A.shape)} (after moving dims) must split after "
                           f"its first {B.ndim} dims into two parts of B's {B.numel()} elements each (B of "
                           f"shape {tuple(B.shape)})")
    return linalg_solve(A.reshape(rows, -1), B.reshape(rows)).reshape(*rest)


# ---------------------------------------------------------------- vecdot and trace
@register("linalg_vecdot", promote=(0, 1), same_dtype=True, broadcast=True)
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


@register("trace", methods=("trace",), linear=True)
def trace(ctx, input):
    """The sum of a matrix's diagonal (integers sum to int64; half precision accumulates in float32)."""
    from .opmath import compute_dtype
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix (2-D), got a {input.ndim}-D tensor")
    if input.dtype == np.bool_:
        raise TypeError("trace: bool inputs are not supported (torch has no bool trace); cast to an integer dtype")
    ctx.shape = input.shape
    out_dtype = np.dtype(np.int64) if input.dtype.kind in "biu" else input.dtype
    return array_module(input).trace(input, dtype=compute_dtype(out_dtype, ints="keep")).astype(out_dtype)


trace.grad(lambda ctx, g: (g * _eye_like(g, *ctx.shape),))

