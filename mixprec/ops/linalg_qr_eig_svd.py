"""Linear algebra (``mp.linalg``), part 2: QR, eigenvalues, the SVD and what is built on it.

    QR       qr, geqrf (no derivative, as in torch), and on top torch.qr, householder_product/orgqr, ormqr
    eigen    eigh, eig (complex results), and on top eigvalsh, eigvals
    SVD      svd, pinv, matrix_rank, and on top svdvals, torch.svd, pinverse, lstsq, matrix_norm, cond

Part 1 (ops/linalg_lu_cholesky.py) has the shared checks, LU and Cholesky; the same rules
hold here (see its docstring). Gauge: eigenvectors and singular vectors are
only defined up to sign (a phase, for complex ones). Their derivatives are
correct for losses that do not depend on that choice (torch's docs make the
same caveat), and grow without bound as two eigenvalues or singular values
meet.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..backend.devices import CPU, device_of_array, to_device
from .elementwise import where
from .linalg_lu_cholesky import (LinAlgError, _eye_like, _h, _matrices, _no_convergence, _no_derivative, _run,
                                 _same_dtype, _zeros_if_none, diag_embed, diagonal, linalg_inv_ex, linalg_solve,
                                 linalg_solve_triangular, tril, triu)
from .math_ops import norm
from .registry import register
from .shape import cat, dim_index
from ..tensor import Tensor
from ..creation import arange, zeros


# ---------------------------------------------------------------- QR
@register("linalg_qr", saves=("A", "output"))
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
    mode = ctx.kwargs.get("mode", ctx.inputs[1] if len(ctx.inputs) > 1 else "reduced")
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
    dq, dr1 = _qr_square_tangent(q, r[..., :m], ta[..., :m])
    dr2 = dq.mT @ A[..., m:] + q.mT @ ta[..., m:]
    return dq, cat([dr1, dr2], -1)


@register("qr", methods=("qr",), composite=True)
def qr(ctx, input, some=True):
    """torch.qr: linalg_qr with mode "reduced" (some=True) or "complete"."""
    _matrices("qr", input)
    return linalg_qr(input, "reduced" if some else "complete")


@register("geqrf", methods=("geqrf",))
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
    rows = arange(A.shape[-2], device=A.device)
    unit = (rows == i).to(A.dtype)
    return where(rows > i, A[..., :, i], unit)


def _check_householder(name, A, tau, rows_needed=None):
    _matrices(name, A)
    _same_dtype(name, A=A, tau=tau)
    m, n = A.shape[-2:]
    k = tau.shape[-1] if tau.ndim else -1
    if tau.ndim != A.ndim - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]) or k > n or \
            (rows_needed is None and m < n):
        raise RuntimeError(f"{name}: expected A (..., m, n) with m >= n and tau (..., k) with k <= n and A's batch "
                           f"shape, got A {tuple(A.shape)} and tau {tuple(tau.shape)}")
    return k


def _householder_q(A, tau, k, cols):
    """The first ``cols`` columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i the i-th Householder vector
    in A (H_k applied first)."""
    m = A.shape[-2]
    q = _eye_like(A, m, cols).expand(*A.shape[:-2], m, cols)
    for i in reversed(range(k)):
        v = _reflector(A, i)
        q = q - (tau[..., i, None, None] * v.unsqueeze(-1)) @ (v.unsqueeze(-2) @ q)
    return q


@register("linalg_householder_product", aliases=("orgqr",), methods=("orgqr",), promote=(0, 1),
          composite=True)
def linalg_householder_product(ctx, A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i the i-th Householder vector in A."""
    k = _check_householder("linalg_householder_product", A, tau)
    q = _householder_q(A, tau, k, A.shape[-1])
    # With no reflector the result is the identity; adding the sum over no elements of A (exactly 0, also beside an
    # inf) keeps it on A's graph, as torch's, with a zero gradient.
    return q if k else q + A[..., :0].sum(-1, keepdim=True)


@register("ormqr", methods=("ormqr",), promote=(0, 1, 2), composite=True)
def ormqr(ctx, input, tau, other, left=True, transpose=False):
    """other multiplied by Q = H_1 ... H_k of a geqrf result: Q C, Q^T C, C Q or C Q^T."""
    k = _check_householder("ormqr", input, tau, rows_needed=True)
    _matrices("ormqr", other, what="other")
    _same_dtype("ormqr", input=input, other=other)
    size = other.shape[-2] if left else other.shape[-1]
    if input.shape[-2] != size:
        raise RuntimeError(f"ormqr: input {tuple(input.shape)} holds reflectors of length {input.shape[-2]}, but "
                           f"other {tuple(other.shape)} needs {size}")
    if k != min(size, input.shape[-1]):
        raise RuntimeError(f"ormqr: tau must hold min({size}, {input.shape[-1]}) = {min(size, input.shape[-1])} "
                           f"scalar factors (one per reflector of input), got tau of shape {tuple(tau.shape)}")
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
def _finite(name, A):
    """Refuse inf/NaN before LAPACK's iterative eig/SVD sees them: given an inf, NumPy's gesdd never returns."""
    if not bool(array_module(A).isfinite(A).all()):
        raise LinAlgError(f"{name}: the input holds inf or NaN values; the algorithm cannot converge on them")


def _off_diagonal_ratio(num, den, diag):
    """num / den off the diagonal, ``diag`` (a (..., n) tensor or None for zeros) on it."""
    n = num.shape[-1]
    eye = _eye_like(num, n, dtype=_dt.bool_)
    out = where(eye, 0.0, num / where(eye, 1.0, den))
    return out if diag is None else out + diag_embed(diag)


@register("linalg_eigh", saves=("A", "output"))
def linalg_eigh(ctx, A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A; only the UPLO triangle is read."""
    _matrices("linalg_eigh", A, square=True)
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg_eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    xp = array_module(A)
    w, v = _run("linalg_eigh", lambda: xp.linalg.eigh(A, UPLO=UPLO), A, _no_convergence)
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


@register("linalg_eigvalsh", composite=True)
def linalg_eigvalsh(ctx, A, UPLO="L"):
    """The eigenvalues of symmetric A, ascending."""
    _matrices("linalg_eigvalsh", A, square=True)
    return linalg_eigh(A, UPLO)[0]


def _eig_on_host(a):
    """NumPy's eig (LAPACK geev), also for CuPy arrays (CuPy 13 has none; torch too runs it on the host)."""
    dev = device_of_array(a)
    w, v = np.linalg.eig(to_device(a, CPU))
    return to_device(w, dev), to_device(v, dev)


@register("linalg_eig", saves=("A", "output"))
def linalg_eig(ctx, A):
    """(eigenvalues, eigenvectors) of a square matrix, always complex; eigenvectors have unit norm."""
    _matrices("linalg_eig", A, square=True)
    _finite("linalg_eig", A)
    w, v = _run("linalg_eig", lambda: _eig_on_host(A), A, _no_convergence)
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


@register("linalg_eigvals", composite=True)
def linalg_eigvals(ctx, A):
    """The eigenvalues of a square matrix, complex."""
    _matrices("linalg_eigvals", A, square=True)
    return linalg_eig(A)[0]


# ---------------------------------------------------------------- SVD
@register("linalg_svd", saves=("A", "output"))
def linalg_svd(ctx, A, full_matrices=True):
    """(U, S, Vh) with A = U diag(S) Vh, S descending. full_matrices=False gives the thin U (m x k) and Vh
    (k x n), k = min(m, n)."""
    _matrices("linalg_svd", A)
    _finite("linalg_svd", A)
    xp = array_module(A)
    u, s, vh = _run("linalg_svd", lambda: xp.linalg.svd(A, full_matrices=full_matrices), A,
                    _no_convergence)
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
    full = ctx.kwargs.get("full_matrices", ctx.inputs[1] if len(ctx.inputs) > 1 else True)
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


@register("linalg_svdvals", composite=True)
def linalg_svdvals(ctx, A):
    """The singular values, descending."""
    _matrices("linalg_svdvals", A)
    return linalg_svd(A, False)[1]


@register("svd", methods=("svd",), composite=True)
def svd(ctx, input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with input = U diag(S) V^T (V, not Vh); compute_uv=False gives zero U and V."""
    _matrices("svd", input)
    if not compute_uv:
        m, n = input.shape[-2:]
        s = linalg_svdvals(input)
        batch = input.shape[:-2]
        return (zeros(*batch, m, m, dtype=input.dtype, device=input.device), s,
                zeros(*batch, n, n, dtype=input.dtype, device=input.device))
    u, s, vh = linalg_svd(input, not some)
    return u, s, vh.mT


def _tolerance(s, atol, rtol, shape):
    """max(atol, rtol * s_max) per matrix, shaped (..., 1) to compare with s, with torch's default rtol = eps *
    max(m, n) when neither is given (0 where atol > 0). atol and rtol may be numbers or arrays that broadcast against
    the batch shape (so the result's batch shape may be the broadcast of both)."""
    xp = array_module(s)
    dt = s.dtype
    smax = s.max(-1) if s.shape[-1] else s.sum(-1)
    atol_ = xp.asarray(0.0 if atol is None else atol, dtype=dt)
    if rtol is None:
        default = dt.type(np.finfo(dt).eps * max(shape[-2:]))
        rtol_ = default if atol is None else xp.where(atol_ > 0, dt.type(0), default)
    else:
        rtol_ = xp.asarray(rtol, dtype=dt)
    return xp.maximum(atol_, rtol_ * smax)[..., None]


@register("linalg_pinv", saves=("A", "output"))
def linalg_pinv(ctx, A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse, dropping singular values below max(atol, rtol * s_max)."""
    _matrices("linalg_pinv", A)
    xp = array_module(A)
    if hermitian:
        w, v = xp.linalg.eigh(A)
        tol = _tolerance(xp.abs(w), atol, rtol, A.shape)
        inv = xp.where(xp.abs(w) > tol, 1 / xp.where(w == 0, 1, w), 0)
        return (v * inv[..., None, :]) @ xp.swapaxes(v, -1, -2)
    _finite("linalg_pinv", A)
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


@register("pinverse", methods=("pinverse",), composite=True)
def pinverse(ctx, input, rcond=1e-15):
    """torch.pinverse: linalg_pinv with relative tolerance rcond."""
    _matrices("pinverse", input)
    return linalg_pinv(input, rtol=rcond)


@register("linalg_matrix_rank", differentiable=False)
def linalg_matrix_rank(ctx, A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values above max(atol, rtol * s_max) (int64)."""
    _matrices("linalg_matrix_rank", A)
    xp = array_module(A)
    if not hermitian:
        _finite("linalg_matrix_rank", A)
    s = xp.abs(xp.linalg.eigvalsh(A)) if hermitian else xp.linalg.svd(A, compute_uv=False)
    return (s > _tolerance(s, atol, rtol, A.shape)).sum(-1).astype(np.int64)


_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _nan_where_not_finite(b):
    """A constant: NaN for each matrix of b holding an inf or NaN, else 0. LAPACK's least-squares drivers scale B
    by its largest entry, so an inf anywhere makes torch's whole solution NaN; adding this does the same and leaves
    the gradients what the product gives (torch's come from the pseudo-inverse too)."""
    xp = array_module(b._array)
    bad = ~xp.isfinite(b._array).all((-2, -1))
    return Tensor._wrap(xp.where(bad, xp.asarray(xp.nan, dtype=b._array.dtype), b._array.dtype.type(0))[..., None, None])


@register("linalg_lstsq", promote=(0, 1), composite=True)
def linalg_lstsq(ctx, A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B|| (the least-norm X when A is rank-deficient).

    Which extras are filled follows torch's driver semantics: residuals (squared, per column) for m > n and full
    rank except with gelsy (the default), rank except with gels, singular values with gelsd and gelss.
    """
    _matrices("linalg_lstsq", A)
    if driver is None:
        driver = "gelsy"
    if driver not in _LSTSQ_DRIVERS:
        raise RuntimeError(f"linalg_lstsq: driver must be one of {_LSTSQ_DRIVERS}, got {driver!r}")
    vector = B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    _matrices("linalg_lstsq", b, what="B")
    _same_dtype("linalg_lstsq", A=A, B=B)
    m, n = A.shape[-2:]
    if b.shape[-2] != m:
        raise RuntimeError(f"linalg_lstsq: A {tuple(A.shape)} and B {tuple(B.shape)} must have the same number of "
                           "rows")
    rtol = np.finfo(A.dtype).eps * max(m, n) if rcond is None or rcond < 0 else rcond
    x = linalg_pinv(A, rtol=rtol) @ b + _nan_where_not_finite(b)
    empty = zeros(0, dtype=A.dtype, device=A.device)
    rank = linalg_matrix_rank(A, rtol=rtol)
    full_rank = m > n and bool((rank == n).all())
    if driver == "gels":
        rank = zeros(0, dtype=_dt.int64, device=A.device)
    # unfilled residuals are still an output of the graph (empty, taken from x), differentiable as torch's are
    residuals = ((A @ x - b) ** 2).sum(-2) if driver != "gelsy" and full_rank else x.reshape(-1)[:0]
    # (a vector B keeps its column of residuals, as torch's does)
    svals = linalg_svdvals(A).detach() if driver in ("gelsd", "gelss") else empty  # torch: not differentiable
    return (x.squeeze(-1) if vector else x), residuals, rank, svals


@register("linalg_matrix_norm", composite=True)
def linalg_matrix_norm(ctx, A, ord="fro", dim=(-2, -1), keepdim=False):
    """The matrix norm ord ("fro", "nuc", inf, -inf, 1, -1, 2, -2) over dims ``dim``."""
    _matrices("linalg_matrix_norm", A)
    d0, d1 = (dim_index(d, A.ndim, "linalg_matrix_norm") for d in dim)
    rest = [i for i in range(A.ndim) if i not in (d0, d1)]
    a = A.permute(*rest, d0, d1)
    if ord not in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf):
        raise RuntimeError(f"linalg_matrix_norm: ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {ord!r}")
    if (a.shape[-1] == 0 or a.shape[-2] == 0) and ord not in (-1, -2, -np.inf):
        out = a.abs().sum((-2, -1))  # an empty matrix's norm is 0, as in torch (the negative orders' min refuses)
    elif ord == "fro":
        out = norm(a, 2, (-2, -1))  # (the vector norm's subgradient at 0 is 0, where sqrt's derivative is not)
    elif ord in ("nuc", 2, -2):
        s = linalg_svdvals(a)
        out = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
    elif ord in (1, -1, np.inf, -np.inf):
        sums = a.abs().sum(-2 if ord in (1, -1) else -1)
        out = sums.amax(-1) if ord > 0 else sums.amin(-1)
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


@register("linalg_cond", composite=True)
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


