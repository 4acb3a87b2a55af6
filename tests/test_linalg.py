"""mp.linalg against torch.linalg (CPU, float64): values and gradients, errors, empty inputs, autocast.

The op-case table (tests/op_cases/linalg_lu_cholesky.py) checks every rule against finite
differences; here the same ops are compared with torch, whose derivative
formulas mixprec follows. Eigen- and singular vectors are compared through
sign-invariant functions, as torch's docs advise.
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((2, 4, 4))
B = RNG.standard_normal((2, 4, 3))
TALL, WIDE = RNG.standard_normal((5, 3)), RNG.standard_normal((3, 5))
SPD = A @ A.transpose(0, 2, 1) + 4 * np.eye(4)
L = np.linalg.cholesky(SPD)
LU, PIV = torch.linalg.lu_factor(torch.tensor(A))
GEQRF = [torch.geqrf(torch.tensor(x)) for x in (TALL, A[0])]


def _outputs(o):
    return list(o) if isinstance(o, (tuple, list)) else [o]


def _mp_piv():
    return mp.tensor(PIV.numpy())


def _first_k(f):
    """The columns of U / rows of Vh that full_matrices adds are not unique: compare the first k, by |.|."""
    def g(a):
        u, s, vh = f(a)
        k = s.shape[-1]
        return u[..., :k].abs(), s, vh[..., :k, :].abs()
    return g


# (id, mixprec function, torch function, inputs, compare gradients)
CASES = [
    ("inv", mp.linalg.inv, torch.linalg.inv, [A], True),
    ("inverse", mp.inverse, torch.inverse, [A[0]], True),
    ("inv_ex", mp.linalg.inv_ex, torch.linalg.inv_ex, [A], True),
    ("solve", mp.linalg.solve, torch.linalg.solve, [A, B], True),
    ("solve-vector", mp.linalg.solve, torch.linalg.solve, [A[0], B[0, :, 0]], True),
    ("solve-broadcast", mp.linalg.solve, torch.linalg.solve, [A[0], B], True),
    ("solve-right", lambda a, b: mp.linalg.solve(a, b, left=False),
     lambda a, b: torch.linalg.solve(a, b, left=False), [A, B.transpose(0, 2, 1)], True),
    *[(f"solve_triangular-upper={up}-left={left}-unit={unit}",
       (lambda up, left, unit: lambda a, b: mp.linalg.solve_triangular(a, b, upper=up, left=left,
                                                                      unitriangular=unit))(up, left, unit),
       (lambda up, left, unit: lambda a, b: torch.linalg.solve_triangular(a, b, upper=up, left=left,
                                                                         unitriangular=unit))(up, left, unit),
       [A + 3 * np.eye(4), B if left else B.transpose(0, 2, 1)], True)
      for up in (True, False) for left in (True, False) for unit in (True, False)],
    ("triangular_solve", lambda b, a: mp.triangular_solve(b, a, upper=False, transpose=True),
     lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=True), [B, A + 3 * np.eye(4)], True),
    ("cholesky", lambda a: mp.linalg.cholesky(a + a.mT), lambda a: torch.linalg.cholesky(a + a.mT), [SPD], True),
    ("cholesky-upper", lambda a: mp.cholesky(a + a.mT, True), lambda a: torch.cholesky(a + a.mT, True), [SPD], True),
    ("cholesky_ex", lambda a: mp.linalg.cholesky_ex(a + a.mT), lambda a: torch.linalg.cholesky_ex(a + a.mT), [SPD],
     True),
    # torch's gradient for the triangle these two never read is not their derivative (its own gradcheck fails
    # there); mixprec's is 0: compare through tril/triu, which is what torch's tests do
    ("cholesky_inverse", lambda x: mp.cholesky_inverse(x.tril()), lambda x: torch.cholesky_inverse(x.tril()), [L],
     True),
    ("cholesky_solve-upper", lambda b, x: mp.cholesky_solve(b, x.triu(), True),
     lambda b, x: torch.cholesky_solve(b, x.triu(), True), [B, L.transpose(0, 2, 1)], True),
    ("lu_factor", mp.linalg.lu_factor, torch.linalg.lu_factor, [A], True),
    ("lu_solve", lambda b, lu: mp.lu_solve(b, lu, _mp_piv()), lambda b, lu: torch.lu_solve(b, lu, PIV),
     [B, LU.numpy()], True),
    *[(f"linalg.lu_solve-left={left}-adjoint={adj}",
       (lambda left, adj: lambda lu, b: mp.linalg.lu_solve(lu, _mp_piv(), b, left=left, adjoint=adj))(left, adj),
       (lambda left, adj: lambda lu, b: torch.linalg.lu_solve(lu, PIV, b, left=left, adjoint=adj))(left, adj),
       [LU.numpy(), B if left else B.transpose(0, 2, 1)], True) for left in (True, False) for adj in (True, False)],
    ("det", mp.linalg.det, torch.linalg.det, [A], True),
    # (at an exactly singular matrix torch's gradient is 0; the derivative is the cofactor matrix, which mixprec
    # gives: op_cases/linalg_lu_cholesky.py's det-singular checks it against finite differences)
    ("det-rank-deficient", mp.det, torch.det, [np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, -1.0, 2.0]])], False),
    ("slogdet", mp.linalg.slogdet, torch.linalg.slogdet, [A], True),
    *[(f"qr-{mode}-{x.shape}", (lambda mode: lambda a: mp.linalg.qr(a, mode))(mode),
       (lambda mode: lambda a: torch.linalg.qr(a, mode))(mode), [x], mode != "r" and (mode == "reduced" or m <= n))
      for x in (TALL, A, WIDE) for m, n in [x.shape[-2:]] for mode in ("reduced", "complete", "r")],
    ("qr-some", lambda a: mp.qr(a, some=False), lambda a: torch.qr(a, some=False), [WIDE], True),
    ("geqrf", mp.geqrf, torch.geqrf, [TALL], False),
    ("householder_product", mp.linalg.householder_product, torch.linalg.householder_product,
     [GEQRF[0][0].numpy(), GEQRF[0][1].numpy()], True),
    ("orgqr", mp.orgqr, torch.orgqr, [GEQRF[1][0].numpy(), GEQRF[1][1].numpy()[:2]], True),
    *[(f"ormqr-left={left}-transpose={tr}", (lambda left, tr: lambda a, t, c: mp.ormqr(a, t, c, left, tr))(left, tr),
       (lambda left, tr: lambda a, t, c: torch.ormqr(a, t, c, left, tr))(left, tr),
       [GEQRF[0][0].numpy(), GEQRF[0][1].numpy(), RNG.standard_normal((5, 2) if left else (2, 5))], True)
      for left in (True, False) for tr in (True, False)],
    ("eigh", lambda a: (lambda w, v: (w, v * v))(*mp.linalg.eigh(a + a.mT)),
     lambda a: (lambda w, v: (w, v * v))(*torch.linalg.eigh(a + a.mT)), [A], True),
    ("eigvalsh-U", lambda a: mp.linalg.eigvalsh(a + a.mT, "U"), lambda a: torch.linalg.eigvalsh(a + a.mT, "U"), [A],
     True),
    ("eig", lambda a: (lambda w, v: (mp.view_as_real(w), v.abs()))(*mp.linalg.eig(a)),
     lambda a: (lambda w, v: (torch.view_as_real(w), v.abs()))(*torch.linalg.eig(a)), [A], True),
    ("eigvals", lambda a: mp.view_as_real(mp.linalg.eigvals(a)), lambda a: torch.view_as_real(torch.linalg.eigvals(a)),
     [A], True),
    *[(f"svd-{x.shape}", lambda a: (lambda u, s, vh: (u.abs(), s, vh.abs(), u @ vh))(*mp.linalg.svd(a, False)),
       lambda a: (lambda u, s, vh: (u.abs(), s, vh.abs(), u @ vh))(*torch.linalg.svd(a, full_matrices=False)),
       [x], True) for x in (TALL, WIDE, A)],
    *[(f"svd-full-{x.shape}", _first_k(mp.linalg.svd), _first_k(torch.linalg.svd), [x], True) for x in (TALL, WIDE)],
    ("svdvals", mp.linalg.svdvals, torch.linalg.svdvals, [WIDE], True),
    ("svd-torch", lambda a: [t.abs() for t in mp.svd(a)], lambda a: [t.abs() for t in torch.svd(a)], [TALL], True),
    ("svd-torch-no-uv", lambda a: mp.svd(a, compute_uv=False), lambda a: torch.svd(a, compute_uv=False), [TALL], True),
    *[(f"pinv-{x.shape}", mp.linalg.pinv, torch.linalg.pinv, [x], True) for x in (TALL, WIDE)],
    ("pinv-hermitian", lambda a: mp.linalg.pinv(a + a.mT, hermitian=True),
     lambda a: torch.linalg.pinv(a + a.mT, hermitian=True), [A], True),
    ("pinverse", mp.pinverse, torch.pinverse, [A], True),
    ("matrix_rank", mp.linalg.matrix_rank, torch.linalg.matrix_rank, [np.outer(TALL[:, 0], WIDE[0])], False),
    ("matrix_rank-tol", lambda a: mp.linalg.matrix_rank(a, atol=1.0, rtol=0.1),
     lambda a: torch.linalg.matrix_rank(a, atol=1.0, rtol=0.1), [A], False),
    *[(f"lstsq-{driver}", (lambda d: lambda a, b: mp.linalg.lstsq(a, b, driver=d))(driver),
       (lambda d: lambda a, b: torch.linalg.lstsq(a, b, driver=d))(driver),
       [RNG.standard_normal((2, 6, 3)), RNG.standard_normal((2, 6, 2))], True)
      for driver in (None, "gels", "gelsd", "gelss")],
    ("lstsq-wide", lambda a, b: mp.linalg.lstsq(a, b)[0], lambda a, b: torch.linalg.lstsq(a, b)[0],
     [WIDE, RNG.standard_normal((3, 2))], True),
    # (torch's backward of cond for the p that go through an inverse fails in torch itself: values only there)
    *[(f"cond-{p}", (lambda p: lambda a: mp.linalg.cond(a, p))(p), (lambda p: lambda a: torch.linalg.cond(a, p))(p),
       [A], p in (None, 2, -2, "nuc")) for p in (None, "fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2)],
    *[(f"matrix_norm-{o}", (lambda o: lambda a: mp.linalg.matrix_norm(a, o))(o),
       (lambda o: lambda a: torch.linalg.matrix_norm(a, o))(o), [TALL], True)
      for o in ("fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2)],
    ("matrix_norm-dims", lambda a: mp.linalg.matrix_norm(a, 1, dim=(0, 2), keepdim=True),
     lambda a: torch.linalg.matrix_norm(a, 1, dim=(0, 2), keepdim=True), [B], True),
    ("tensorinv", lambda a: mp.linalg.tensorinv(a, 1), lambda a: torch.linalg.tensorinv(a, 1),
     [RNG.standard_normal((6, 2, 3))], True),
    ("tensorsolve", lambda a, b: mp.linalg.tensorsolve(a, b, dims=(0,)),
     lambda a, b: torch.linalg.tensorsolve(a, b, dims=(0,)),
     [RNG.standard_normal((6, 2, 3)), RNG.standard_normal((2, 3))], True),
    # dims go to the end in the order given; then only sizes count, not B's shape
    ("tensorsolve-two-dims", lambda a, b: mp.linalg.tensorsolve(a, b, dims=[2, 0]),
     lambda a, b: torch.linalg.tensorsolve(a, b, dims=[2, 0]),
     [RNG.standard_normal((3, 4, 4, 3)), RNG.standard_normal((3, 4))], True),
    ("tensorsolve-reshaped-B", lambda a, b: mp.linalg.tensorsolve(a, b), lambda a, b: torch.linalg.tensorsolve(a, b),
     [RNG.standard_normal((2, 3, 6)), RNG.standard_normal((3, 2))], True),
    ("vecdot", lambda x, y: mp.linalg.vecdot(x, y, dim=0), lambda x, y: torch.linalg.vecdot(x, y, dim=0),
     [TALL, TALL[:, :1]], True),
    ("trace", mp.trace, torch.trace, [TALL], True),
    ("tril-triu", lambda a: (mp.tril(a, 1), mp.triu(a, -1)), lambda a: (torch.tril(a, 1), torch.triu(a, -1)), [A],
     True),
    ("diagonal", lambda a: mp.diagonal(a, 1, 0, 2), lambda a: torch.diagonal(a, 1, 0, 2), [A], True),
    ("diag_embed", lambda a: mp.diag_embed(a, -1, 0, 2), lambda a: torch.diag_embed(a, -1, 0, 2), [B], True),
    ("diagonal_scatter", lambda a, s: mp.diagonal_scatter(a, s, 1), lambda a, s: torch.diagonal_scatter(a, s, 1),
     [TALL, RNG.standard_normal(2)], True),
]


@pytest.mark.parametrize("fn,tfn,arrays,grads", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_matches_torch(fn, tfn, arrays, grads):
    xs = [mp.tensor(a, dtype=mp.float64, requires_grad=grads) for a in arrays]
    ts = [torch.tensor(a, requires_grad=grads) for a in arrays]
    outs, touts = _outputs(fn(*xs)), _outputs(tfn(*ts))
    assert len(outs) == len(touts)
    rng = np.random.default_rng(1)
    loss, tloss = 0, 0
    for o, t in zip(outs, touts):
        assert o.shape == tuple(t.shape)
        assert str(o.dtype) == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(o.detach().numpy(), t.detach().resolve_conj().numpy(), rtol=1e-7, atol=1e-9)
        if grads and t.requires_grad:  # (torch marks some outputs non-differentiable: lstsq's residuals)
            w = rng.standard_normal(o.shape)
            loss, tloss = loss + (o * mp.tensor(w)).sum(), tloss + (t * torch.tensor(w)).sum()
    if not grads:
        return
    loss.backward()
    tloss.backward()
    for x, t in zip(xs, ts):
        want = np.zeros(x.shape) if t.grad is None else t.grad.numpy()
        got = np.zeros(x.shape) if x.grad is None else x.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------------- errors, as torch raises them
SINGULAR = mp.stack([mp.eye(2), mp.tensor([[1.0, 2.0], [2.0, 4.0]])])
NOT_PD = mp.stack([mp.eye(2), mp.tensor([[1.0, 2.0], [2.0, 1.0]])])

ERRORS = [
    ("inv-singular", lambda: mp.linalg.inv(SINGULAR), mp.linalg.LinAlgError,
     r"linalg_inv: the diagonal element 2 .* \(batch element 1\) is singular"),
    ("solve-singular", lambda: mp.linalg.solve(SINGULAR, mp.ones(2, 2, 1)), RuntimeError, r"linalg_solve: .*singular"),
    ("inv_ex-check", lambda: mp.linalg.inv_ex(SINGULAR, check_errors=True), mp.linalg.LinAlgError, "singular"),
    ("cholesky-not-pd", lambda: mp.linalg.cholesky(NOT_PD), mp.linalg.LinAlgError,
     r"linalg_cholesky: .*\(batch element 1\) is not positive-definite \(the leading minor of order 2"),
    ("lu_factor-singular", lambda: mp.linalg.lu_factor(SINGULAR), mp.linalg.LinAlgError,
     r"U\[1, 1\] \(batch element 1\) is zero"),
    ("lu_factor-no-pivot", lambda: mp.linalg.lu_factor(mp.eye(2), pivot=False), RuntimeError, "without pivoting"),
    ("inv-not-square", lambda: mp.linalg.inv(mp.ones(2, 3)), RuntimeError, "square matrices, but they are 2 by 3"),
    ("inv-1d", lambda: mp.linalg.inv(mp.ones(3)), RuntimeError, "at least 2 dimensions"),
    ("inv-int", lambda: mp.inverse(mp.ones(2, 2, dtype=mp.int64)), TypeError, "expected a floating point tensor"),
    ("svd-complex", lambda: mp.linalg.svd(mp.ones(2, 2) * 1j), TypeError, "complex inputs are not supported"),
    ("solve-shapes", lambda: mp.linalg.solve(mp.eye(3), mp.ones(2, 1)), RuntimeError, "do not fit"),
    ("solve-batches", lambda: mp.linalg.solve(mp.ones(2, 3, 3), mp.ones(4, 3, 1)), RuntimeError, "do not broadcast"),
    ("qr-mode", lambda: mp.linalg.qr(mp.eye(2), "full"), ValueError, "mode must be"),
    ("eigh-uplo", lambda: mp.linalg.eigh(mp.eye(2), "X"), ValueError, "UPLO"),
    ("lstsq-driver", lambda: mp.linalg.lstsq(mp.eye(2), mp.eye(2), driver="x"), RuntimeError, "driver must be"),
    ("lstsq-rows", lambda: mp.linalg.lstsq(mp.ones(3, 2), mp.ones(2, 1)), RuntimeError, "same number of rows"),
    ("householder-shapes", lambda: mp.linalg.householder_product(mp.ones(2, 3), mp.ones(2)), RuntimeError, "m >= n"),
    ("ormqr-sizes", lambda: mp.ormqr(mp.ones(4, 2), mp.ones(2), mp.ones(3, 3)), RuntimeError, "needs 3"),
    ("tensorinv-ind", lambda: mp.linalg.tensorinv(mp.ones(2, 3), 1), RuntimeError, "must equal"),
    ("tensorsolve-sizes", lambda: mp.linalg.tensorsolve(mp.ones(6, 2, 3), mp.ones(3, 2)), RuntimeError,
     "two parts of B's 6 elements"),
    ("tensorsolve-B-size", lambda: mp.linalg.tensorsolve(mp.ones(2, 2, 4), mp.ones(2, 3)), RuntimeError,
     "two parts of B's 6 elements"),
    ("matrix_norm-ord", lambda: mp.linalg.matrix_norm(mp.eye(2), 3), RuntimeError, "ord must be"),
    ("trace-3d", lambda: mp.trace(mp.ones(2, 2, 2)), RuntimeError, "expected a matrix"),
    ("diagonal-same-dims", lambda: mp.diagonal(mp.ones(2, 2), 0, 1, 1), RuntimeError, "cannot be the same"),
    ("diagonal_scatter-shape", lambda: mp.diagonal_scatter(mp.ones(2, 3), mp.ones(3)), RuntimeError,
     r"shape of the diagonal, \(2,\)"),
    ("vecdot-shapes", lambda: mp.linalg.vecdot(mp.ones(3), mp.ones(4)), RuntimeError, "cannot be broadcast"),
    ("tril-1d", lambda: mp.tril(mp.ones(3)), RuntimeError, "at least 2 dimensions"),
    ("cholesky_solve-dtypes", lambda: mp.cholesky_solve(mp.ones(2, 1), mp.eye(2, dtype=mp.float64)), TypeError,
     "cholesky_solve: expected inputs of one dtype, but B is float32, L is float64"),
    ("lstsq-dtypes", lambda: mp.linalg.lstsq(mp.eye(2), mp.ones(2, 1, dtype=mp.float64)), TypeError,
     "linalg_lstsq: expected inputs of one dtype"),
    ("householder-dtypes", lambda: mp.orgqr(mp.eye(2), mp.ones(1, dtype=mp.float64)), TypeError, "one dtype"),
]


@pytest.mark.parametrize("fn,exc,match", [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((5, 3), (5, 2)), ((5, 3), (5,)), ((2, 5, 3), (2, 5))],
                         ids=str)
def test_lstsq_differentiable_outputs_match_torch(shapes, driver):
    """solution and residuals (even when left empty) carry a gradient; rank and singular values do not."""
    arrays = [RNG.standard_normal(s) for s in shapes]
    ours = mp.linalg.lstsq(*[mp.tensor(a, requires_grad=True) for a in arrays], driver=driver)
    theirs = torch.linalg.lstsq(*[torch.tensor(a, requires_grad=True) for a in arrays], driver=driver)
    assert [t.requires_grad for t in ours] == [t.requires_grad for t in theirs]
    assert [t.shape for t in ours] == [tuple(t.shape) for t in theirs]


def test_linalg_error_is_a_runtime_error_like_torchs():
    assert issubclass(mp.linalg.LinAlgError, RuntimeError) and issubclass(torch.linalg.LinAlgError, RuntimeError)


def test_log_determinants_of_a_singular_matrix_have_a_non_finite_gradient_as_torchs():
    m = [[1.0, 2.0], [2.0, 4.0]]
    for name in ("logdet", "slogdet"):
        x, t = mp.tensor(m, dtype=mp.float64, requires_grad=True), torch.tensor(m, dtype=torch.float64,
                                                                                 requires_grad=True)
        pick = (lambda r: r) if name == "logdet" else (lambda r: r[1])
        pick(getattr(mp, name)(x)).backward()
        pick(getattr(torch, name)(t)).backward()
        assert not np.isfinite(x.grad.numpy()).any() and not np.isfinite(t.grad.numpy()).any()


def test_info_of_the_ex_variants_matches_torch():
    inv, info = mp.linalg.inv_ex(SINGULAR)
    assert info.dtype == mp.int32 and info.tolist() == torch.linalg.inv_ex(torch.tensor(SINGULAR.numpy()))[1].tolist()
    np.testing.assert_allclose(inv[0].numpy(), np.eye(2))
    assert np.isnan(inv[1].numpy()).all()  # torch leaves that matrix undefined; here it is NaN
    low, info = mp.linalg.cholesky_ex(NOT_PD)
    t_low, t_info = torch.linalg.cholesky_ex(torch.tensor(NOT_PD.numpy()))
    assert info.tolist() == t_info.tolist() == [0, 2]
    np.testing.assert_allclose(low.numpy(), t_low.numpy())  # the partial factorization LAPACK leaves, as torch


LOW_PRECISION_REFUSED = [
    ("inv", mp.linalg.inv, True), ("solve", lambda a: mp.linalg.solve(a, a), True), ("det", mp.linalg.det, False),
    ("slogdet", mp.linalg.slogdet, False), ("cholesky", mp.linalg.cholesky, True), ("qr", mp.linalg.qr, True),
    ("eigh", mp.linalg.eigh, True), ("eig", mp.linalg.eig, True), ("svd", mp.linalg.svd, True),
    ("svdvals", mp.linalg.svdvals, True), ("pinv", mp.linalg.pinv, False),
    ("lstsq", lambda a: mp.linalg.lstsq(a, a), True), ("matrix_rank", mp.linalg.matrix_rank, True),
    ("cond", mp.linalg.cond, True), ("lu_factor", mp.linalg.lu_factor, False),
    ("geqrf", mp.geqrf, True), ("cholesky_inverse", mp.cholesky_inverse, True), ("pinverse", mp.pinverse, True),
]


@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("fn,listed", [pytest.param(f, listed, id=n) for n, f, listed in LOW_PRECISION_REFUSED])
def test_half_precision_is_refused_as_in_torch(fn, listed, dtype):
    """torch's CPU linear algebra refuses float16/bfloat16; the error says what to do (autocast only for the ops
    whose autocast policy casts to float32)."""
    with pytest.raises(TypeError, match=f"{dtype.name} inputs are not supported") as info:
        fn(mp.eye(3, dtype=dtype))
    assert ("mp.autocast('cpu')" in str(info.value)) == listed


@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16], ids=["float16", "bfloat16"])
def test_vecdot_and_trace_run_in_half_precision_like_torch(dtype):
    x = mp.tensor(RNG.standard_normal((3, 8)), dtype=dtype)
    t = torch.tensor(x.float().numpy()).to(getattr(torch, dtype.name))
    got, want = mp.linalg.vecdot(x, x), torch.linalg.vecdot(t, t)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2 ** -7)
    assert mp.trace(x).dtype == dtype
    assert mp.trace(x).item() == pytest.approx(torch.trace(t).item(), rel=2 ** -7)


# ----------------------------------------------------------------- derivatives that are not defined
NO_DERIVATIVE = [
    ("geqrf", lambda a: mp.geqrf(a)[0], "derivative of geqrf is not implemented"),
    ("qr-r", lambda a: mp.linalg.qr(a, "r")[1], "mode='r'"),
    ("qr-complete-tall", lambda a: mp.linalg.qr(a, "complete")[0], "mode='complete' and nrows > ncols"),
]


@pytest.mark.parametrize("fn,match", [pytest.param(f, m, id=i) for i, f, m in NO_DERIVATIVE])
def test_an_undefined_derivative_raises_naming_the_op(fn, match):
    x = mp.tensor(TALL, requires_grad=True)
    out = fn(x)
    with pytest.raises(NotImplementedError, match=match):
        out.sum().backward()
    with mp.autograd.forward_ad.dual_level(), pytest.raises(NotImplementedError, match=match):
        fn(mp.autograd.forward_ad.make_dual(x.detach(), mp.ones_like(x)))


def test_svd_forward_mode_with_full_matrices_needs_a_square_input():
    with mp.autograd.forward_ad.dual_level(), pytest.raises(NotImplementedError, match="full_matrices=False"):
        mp.linalg.svd(mp.autograd.forward_ad.make_dual(mp.tensor(TALL), mp.ones(5, 3, dtype=mp.float64)))


# ----------------------------------------------------------------- empty inputs, as torch
EMPTY = [
    ("inv", mp.linalg.inv, torch.linalg.inv, (0, 0)),
    ("inv-batch", mp.linalg.inv, torch.linalg.inv, (0, 3, 3)),
    ("det", mp.linalg.det, torch.linalg.det, (0, 0)),
    ("det-batch", mp.linalg.det, torch.linalg.det, (2, 0, 0)),
    ("cholesky", mp.linalg.cholesky, torch.linalg.cholesky, (0, 2, 2)),
    ("svdvals", mp.linalg.svdvals, torch.linalg.svdvals, (0, 3)),
    ("eigh", mp.linalg.eigh, torch.linalg.eigh, (0, 0)),
    ("qr", mp.linalg.qr, torch.linalg.qr, (3, 0)),
    ("pinv", mp.linalg.pinv, torch.linalg.pinv, (0, 2)),
]


@pytest.mark.parametrize("fn,tfn,shape", [pytest.param(*e[1:], id=e[0]) for e in EMPTY])
def test_empty_inputs_give_torchs_shapes_and_values(fn, tfn, shape):
    outs, touts = _outputs(fn(mp.zeros(*shape, dtype=mp.float64))), _outputs(tfn(torch.zeros(shape,
                                                                                             dtype=torch.float64)))
    for o, t in zip(outs, touts):
        assert o.shape == tuple(t.shape)
        np.testing.assert_array_equal(o.numpy(), t.numpy())


# ----------------------------------------------------------------- autocast (the CPU float32 list)
@pytest.mark.parametrize("fn", [mp.linalg.inv, mp.linalg.cholesky, mp.linalg.svdvals, mp.linalg.eigvalsh,
                                mp.linalg.qr, mp.linalg.cond, mp.pinverse, mp.trace, mp.cholesky_inverse,
                                lambda a: mp.linalg.solve(a, a), lambda a: mp.linalg.lstsq(a, a),
                                lambda a: mp.linalg.tensorinv(a, 1)],
                         ids=["inv", "cholesky", "svdvals", "eigvalsh", "qr", "cond", "pinverse", "trace",
                              "cholesky_inverse", "solve", "lstsq", "tensorinv"])
def test_cpu_autocast_runs_the_float32_list_in_float32(fn):
    a = mp.tensor(SPD[0], dtype=mp.bfloat16, requires_grad=True)
    with mp.autocast("cpu"):
        out = _outputs(fn(a))
    assert all(o.dtype in (mp.float32, mp.int64) for o in out)
    floating = [o for o in out if o.dtype == mp.float32]
    sum(o.sum() for o in floating).backward()
    assert a.grad.dtype == mp.bfloat16


MULTI_INPUT = [
    ("triangular_solve", lambda a: mp.triangular_solve(a, a)), ("cholesky_solve", lambda a: mp.cholesky_solve(a, a)),
    ("lu_solve", lambda a: mp.lu_solve(a, a, mp.tensor([1, 2, 3, 4], dtype=mp.int32))),
    ("householder_product", lambda a: mp.linalg.householder_product(a, a[0])),
    ("ormqr", lambda a: mp.ormqr(a, a[0], a)), ("tensorsolve", lambda a: mp.linalg.tensorsolve(a, a[0])),
    ("quantile", lambda a: mp.quantile(a, a[0, 0].sigmoid())),
    ("stft", lambda a: mp.stft(a.flatten(), 4, window=a[0], return_complex=True)),
]


@pytest.mark.parametrize("fn", [pytest.param(f, id=n) for n, f in MULTI_INPUT])
def test_cpu_autocast_casts_every_floating_input_of_a_float32_op(fn):
    """torch casts all floating tensor arguments of an op on the float32 list, not only the first."""
    a = mp.tensor(SPD[0], dtype=mp.bfloat16)
    with mp.autocast("cpu"):
        out = _outputs(fn(a))
    assert {o.dtype for o in out} <= {mp.float32, mp.complex64}


def test_autocast_runs_vecdot_in_lower_precision_on_both_devices_and_leaves_det_alone():
    x = mp.tensor(RNG.standard_normal((2, 4)), dtype=mp.float32)
    with mp.autocast("cpu"):
        assert mp.linalg.vecdot(x, x).dtype == mp.bfloat16
    # CUDA: torch 2.13's table, beyond its documented list (mixprec/ops/policies.py)
    assert mp.amp.op_policy("linalg_vecdot", "cuda") is mp.amp.CastPolicy.LOWER_PRECISION_FP
    assert mp.amp.op_policy("linalg_det", "cpu") is None
    assert mp.amp.op_policy("inverse", "cpu") is mp.amp.CastPolicy.FP32


# ----------------------------------------------------------------- the CuPy path
@pytest.mark.gpu
def test_gpu_results_and_errors_match_the_cpu():
    a = mp.tensor(SPD, dtype=mp.float64)
    for fn in (mp.linalg.inv, mp.linalg.cholesky, mp.linalg.det, mp.linalg.eigvalsh, mp.linalg.svdvals,
               lambda x: mp.linalg.solve(x, x[..., :1]), lambda x: mp.view_as_real(mp.linalg.eigvals(x)),
               lambda x: mp.linalg.lu_factor(x)[0], lambda x: mp.linalg.qr(x)[1].abs()):
        np.testing.assert_allclose(fn(a.cuda()).numpy(), fn(a).numpy(), rtol=1e-8, atol=1e-10)
    with pytest.raises(mp.linalg.LinAlgError, match="batch element 1"):
        mp.linalg.inv(SINGULAR.cuda())
    with pytest.raises(mp.linalg.LinAlgError, match="not positive-definite"):
        mp.linalg.cholesky(NOT_PD.cuda())


# ----------------------------------------------------------------- edge cases torch's OpInfo samples found
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_factor_gradients_match_torch_in_the_triangle_read_and_are_zero_outside(upper):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 5))
    factor = np.linalg.cholesky(x @ x.T + np.eye(5))
    factor = factor.T if upper else factor
    b, g_inv, g_solve = rng.standard_normal((5, 3)), rng.standard_normal((5, 5)), rng.standard_normal((5, 3))
    read = np.triu(np.ones((5, 5))) if upper else np.tril(np.ones((5, 5)))
    tl = torch.tensor(factor, requires_grad=True)
    want_inv, = torch.autograd.grad(torch.cholesky_inverse(tl, upper=upper), tl, torch.tensor(g_inv))
    want_solve, = torch.autograd.grad(torch.cholesky_solve(torch.tensor(b), tl, upper=upper), tl,
                                      torch.tensor(g_solve))
    ml = mp.tensor(factor, requires_grad=True)
    got_inv, = mp.autograd.grad(mp.cholesky_inverse(ml, upper=upper), ml, mp.tensor(g_inv))
    got_solve, = mp.autograd.grad(mp.cholesky_solve(mp.tensor(b), ml, upper=upper), ml, mp.tensor(g_solve))
    for got, want in ((got_inv, want_inv), (got_solve, want_solve)):
        np.testing.assert_allclose(got.numpy(), want.numpy() * read, rtol=1e-10, atol=1e-12)
        assert np.abs(want.numpy() * (1 - read)).max() > 1e-3  # (torch's is not zero there: the listed deviation)


def test_householder_product_of_no_reflector_stays_on_the_graph():
    a = mp.randn(4, 3, dtype=mp.float64, requires_grad=True)
    q = mp.linalg.householder_product(a, mp.zeros(0, dtype=mp.float64))
    assert q.requires_grad
    np.testing.assert_array_equal(q.detach().numpy(), np.eye(4, 3))
    (g,) = mp.autograd.grad(q.sum(), a)
    assert not g.numpy().any()


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")  # (torch's own, internal)
def test_matrix_rank_takes_batched_tolerance_tensors_like_torch():
    a = np.random.default_rng(2).standard_normal((2, 5, 5))
    for kw in ({"atol": [0.0, 1.0]}, {"rtol": [[0.5], [0.1]]}, {"atol": [0.0, 2.0], "rtol": [0.3, 0.0]}):
        got = mp.linalg.matrix_rank(mp.tensor(a), **{k: mp.tensor(v) for k, v in kw.items()})
        want = torch.linalg.matrix_rank(torch.tensor(a), **{k: torch.tensor(v) for k, v in kw.items()})
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_lu_solve_of_empty_matrices_gives_torchs_shapes():
    lu, piv = mp.zeros(0, 0), mp.zeros(0, dtype=mp.int32)
    assert tuple(mp.linalg.lu_solve(lu, piv, mp.zeros(0, 4)).shape) == (0, 4)
    assert tuple(mp.lu_solve(mp.zeros(2, 0, 3), mp.zeros(2, 0, 0), mp.zeros(2, 0, dtype=mp.int32)).shape) == (2, 0, 3)


def test_ldl_factor_and_solve_match_torchs_bunch_kaufman_pivoting():
    rng = np.random.default_rng(11)
    blocks = 0
    for n in (1, 2, 3, 5, 8) * 6:
        a = rng.standard_normal((n, n))
        a = a + a.T
        a[np.diag_indices(n)] *= rng.choice([1.0, 0.01])  # small diagonals force 2 x 2 pivots
        want = torch.linalg.ldl_factor_ex(torch.tensor(a))
        got = mp.linalg.ldl_factor_ex(mp.tensor(a))
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        assert got[1].dtype == mp.int32 and int(got[2]) == int(want[2])
        blocks += int((want[1] < 0).any())
        b = rng.standard_normal((n, 2))
        np.testing.assert_allclose(mp.linalg.ldl_solve(got[0], got[1], mp.tensor(b)).numpy(),
                                   torch.linalg.ldl_solve(want[0], want[1], torch.tensor(b)).numpy(), rtol=1e-9,
                                   atol=1e-10)
    assert blocks > 5  # (the 2 x 2 pivots were exercised)
