"""mixprec/ops/scatter.py beyond the op cases: the in-place twins under autograd, torch's values, errors."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


def _both(torch, values, requires_grad=False):
    return (mp.tensor(values, requires_grad=requires_grad), torch.tensor(values, requires_grad=requires_grad))


@pytest.mark.parametrize("call", [
    lambda m, x, i, s, mask: x.masked_fill_(mask, 2.0),
    lambda m, x, i, s, mask: x.masked_scatter_(mask, s),
    lambda m, x, i, s, mask: x.scatter_(0, i, s),
    lambda m, x, i, s, mask: x.scatter_reduce_(0, i, s, "amax", include_self=False),
    lambda m, x, i, s, mask: x.index_fill_(1, i[0], -1.0),
    lambda m, x, i, s, mask: x.put_(i[0], s[0], accumulate=True),
    lambda m, x, i, s, mask: x.index_reduce_(0, i[:, 0], s, "mean"),
])
def test_in_place_twins_match_torch_through_a_view_with_gradients(call):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    base, src = rng.standard_normal((3, 5)), rng.standard_normal((2, 3))
    index, mask = np.array([[2, 0, 1], [0, 0, 2]]), np.array([[True, False, True]] * 3)
    results = []
    for lib in (mp, torch):
        x = lib.tensor(base, requires_grad=True)
        s = lib.tensor(src, requires_grad=True)
        y = x * 1
        view = y[:, 1:4]  # writes go through a view of a non-leaf: the base sees them, autograd too
        call(lib, view, lib.tensor(index), s, lib.tensor(mask))
        (y * lib.tensor(base)).sum().backward()
        results.append([y.detach().numpy(), x.grad.numpy(), np.zeros(1) if s.grad is None else s.grad.numpy()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_scatter_reduce_prod_gradient_with_zeros_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, 2.0, 0.0, 3.0])
    s = np.array([0.0, 5.0, 4.0, 0.0, 0.0])
    index = np.array([0, 1, 1, 2, 2])
    grads = []
    for lib in (mp, torch):
        a, b = lib.tensor(x, requires_grad=True), lib.tensor(s, requires_grad=True)
        a.scatter_reduce(0, lib.tensor(index), b, "prod").sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want)


def test_scatter_reduce_amax_gives_a_nan_result_a_nan_gradient():
    """The values equal to a place's result share its gradient; a NaN result, which none equals, gets NaN."""
    x, src = mp.tensor([float("nan"), 1.0, 2.0], requires_grad=True), mp.tensor([0.5, 3.0], requires_grad=True)
    out = x.scatter_reduce(0, mp.tensor([0, 1]), src, "amax")
    gx, gs = (g.numpy() for g in mp.autograd.grad(out.sum(), (x, src)))
    assert np.isnan(gx[0]) and np.isnan(gs[0])
    np.testing.assert_array_equal([gx[1], gx[2], gs[1]], [0.0, 1.0, 1.0])


@pytest.mark.parametrize("fn, exc, match", [
    (lambda: mp.zeros(3).masked_fill(mp.tensor([1, 0, 1]), 1.0), RuntimeError, "masked_fill: mask must be a bool"),
    (lambda: mp.zeros(3).masked_fill(mp.tensor([True]), mp.zeros(2)), RuntimeError, "masked_fill: value must be"),
    (lambda: mp.zeros(3, dtype=mp.int64).masked_fill(mp.tensor([True]), mp.tensor(1.0, requires_grad=True)),
     RuntimeError, "masked_fill: value requires grad, but the result has input's dtype int64"),
    (lambda: mp.fill(mp.zeros(3, dtype=mp.bool), mp.tensor(1.0, requires_grad=True)), RuntimeError,
     "fill: value requires grad"),
    (lambda: mp.zeros(3).masked_scatter(mp.tensor([True] * 3), mp.zeros(2)), RuntimeError,
     "masked_scatter: the mask selects 3"),
    (lambda: mp.zeros(3).take(mp.tensor([0.0])), RuntimeError, "take: index must be an integer tensor"),
    (lambda: mp.zeros(3).put(mp.tensor([0, 1]), mp.zeros(3)), RuntimeError, "put: index and source"),
    (lambda: mp.zeros(3).scatter(0, mp.tensor([3]), mp.zeros(1)), IndexError, "scatter: index 3 is out of bounds"),
    (lambda: mp.zeros(3).scatter(0, mp.tensor([0]), mp.zeros(1), reduce="max"), RuntimeError,
     "scatter: reduce must be 'add' or 'multiply'"),
    (lambda: mp.zeros(3).scatter_reduce(0, mp.tensor([0]), mp.zeros(1), "max"), RuntimeError,
     "scatter_reduce: reduce must be one of"),
    (lambda: mp.zeros(3).index_fill(0, mp.tensor([3]), 1.0), IndexError, "index_fill: an index is out of range"),
    (lambda: mp.select_scatter(mp.zeros(2, 3), mp.zeros(3), 1, 0), RuntimeError, "select_scatter: src of shape"),
    (lambda: mp.zeros(3).index_reduce(0, mp.tensor([0]), mp.zeros(1), "sum"), RuntimeError,
     "index_reduce: reduce must be one of"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
