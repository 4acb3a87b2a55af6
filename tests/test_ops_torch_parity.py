"""Products, distances, indexing ops and losses against torch (CPU, float64), plus their edge cases.

For each call in PARITY, mixprec and torch get the same float64 inputs: the
values and the gradient of every floating input (for one random output
gradient) must agree, and under CPU autocast both must return the same dtype,
for bfloat16 and for float32 inputs. EMPTY compares 0-size inputs; BAD the
errors (no torch needed). The op cases (tests/op_cases/) check the same ops
against NumPy, in both modes of autograd and in half precision.

Hostile values, value by value (tests/test_fault_campaign.py derives hostile
variants of every case automatically):

* KINKS: relu, abs, sign, clamp (number and tensor bounds, nan bounds, crossed
  bounds), maximum/minimum, amax/amin, the 1- and inf-norms and the losses, fed
  nan, +-inf, +-0 and values exactly at their kinks: the same values and the
  same gradients as torch, nan for nan.
* EMPTY_LOSSES: every loss on a batch of N = 0, forward and backward, for each
  reduction.
* OUT_OF_RANGE: every indexing op refuses an out-of-range index with IndexError
  naming it; negative indices are refused where torch refuses them and count
  from the end where torch wraps them (x[idx], index_put).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import mixprec as mp

F = mp.nn.functional
rng = np.random.default_rng(12)


def rnd(*shape):
    return rng.standard_normal(shape)


def ints(*values):
    return np.array(values, dtype=np.int64)


def signs(n):
    return rng.choice([-1.0, 1.0], n)


class Const(np.ndarray):
    """An input that is not differentiated (torch refuses a gradient for it: soft_margin_loss's target)."""


def const(a):
    return np.asarray(a).view(Const)


# (id, call, inputs): each call gets mp or torch as its first argument, then the inputs as tensors of it.
PARITY = [
    ("addbmm", lambda m, c, a, b: m.addbmm(c, a, b, beta=0.5, alpha=2.0), [rnd(3, 4), rnd(2, 3, 5), rnd(2, 5, 4)]),
    ("addmv", lambda m, c, a, v: m.addmv(c, a, v, beta=-1.0, alpha=0.5), [rnd(3), rnd(3, 4), rnd(4)]),
    ("addr", lambda m, c, u, v: m.addr(c, u, v, alpha=3.0), [rnd(1, 4), rnd(3), rnd(4)]),
    ("vdot", lambda m, a, b: m.vdot(a, b), [rnd(6), rnd(6)]),
    ("multi_dot", lambda m, a, b, c, d: m.linalg.multi_dot([a, b, c, d]), 
     [rnd(5), rnd(5, 2), rnd(2, 7), rnd(7, 3)]),
    ("chain_matmul", lambda m, a, b, c: m.chain_matmul(a, b, c), [rnd(2, 6), rnd(6, 3), rnd(3, 4)]),
    ("cdist", lambda m, a, b: m.cdist(a, b), [rnd(2, 5, 3), rnd(2, 4, 3)]),
    ("cdist-matrix-product", lambda m, a, b: m.cdist(a, b), [rnd(27, 4), rnd(3, 4)]),
    ("cdist-p1", lambda m, a, b: m.cdist(a, b, p=1), [rnd(5, 3), rnd(4, 3)]),
    ("cdist-p0.5-batch-broadcast", lambda m, a, b: m.cdist(a, b, p=0.5), [rnd(2, 1, 3, 2), rnd(4, 5, 2)]),
    ("cdist-inf", lambda m, a, b: m.cdist(a, b, p=math.inf), [rnd(5, 3), rnd(4, 3)]),
    ("pdist", lambda m, x: m.nn.functional.pdist(x, p=3), [rnd(5, 3)]),
    ("pairwise_distance", lambda m, a, b: m.nn.functional.pairwise_distance(a, b, p=1.5, keepdim=True), 
     [rnd(4, 3), rnd(4, 3)]),
    ("dist", lambda m, a, b: m.dist(a, b, 4), [rnd(3, 2), rnd(2)]),
    ("cross", lambda m, a, b: m.cross(a, b, dim=-1), [rnd(2, 1, 3), rnd(1, 4, 3)]),
    ("renorm", lambda m, x: m.renorm(x, 2, 1, 1.2), [rnd(3, 4, 2)]),
    ("cumprod", lambda m, x: m.cumprod(x, 1), [rnd(2, 6)]),
    ("cumprod-zeros", lambda m, x: m.cumprod(x, 1), [np.array([[0.5, 0.0, 2.0, 0.0, 1.5], [1.2, -0.7, 0.0, 3.0,
                                                                                              0.4]])]),
    ("index_select", lambda m, x, i: m.index_select(x, 1, i), [rnd(3, 4), ints(3, 0, 3)]),
    ("index_add", lambda m, x, i, s: x.index_add(0, i, s, alpha=-2.0), [rnd(4, 2), ints(1, 3, 1), rnd(3, 2)]),
    ("index_copy", lambda m, x, i, s: x.index_copy(1, i, s), [rnd(2, 4), ints(2, 0), rnd(2, 2)]),
    # a 0-d input is one slice of one element, as in torch
    ("index_select-0d", lambda m, x, i: m.index_select(x, 0, i), [np.array(0.7), ints(0)]),
    ("index_add-0d", lambda m, x, i, s: x.index_add(0, i, s, alpha=2.0), [np.array(0.7), ints(0), np.array(-1.3)]),
    ("index_copy-0d", lambda m, x, i, s: x.index_copy(-1, i, s), [np.array(0.7), np.array(0), np.array(1.1)]),
    ("gather-0d", lambda m, x, i: m.gather(x, 0, i), [np.array(0.7), ints(0, 0, 0)]),
    ("transpose-0d", lambda m, x: m.transpose(x, 0, -1) * 3.0, [np.array(0.7)]),
    ("cosine_similarity-broadcast", lambda m, a, b: m.nn.functional.cosine_similarity(a, b, dim=-2),
     [rnd(1, 2, 3), rnd(2, 1, 3)]),
    # torch's overloads of var: a bool in dim's place is unbiased, then var(x, dim, unbiased, keepdim)
    ("var-unbiased-flag", lambda m, x: m.var(x, False), [rnd(5, 4)]),
    ("var-method-unbiased-flag", lambda m, x: x.var(True), [rnd(5, 4)]),
    ("var-dim-unbiased-keepdim", lambda m, x: m.var(x, 1, False, True), [rnd(3, 4)]),
    ("var-correction-none", lambda m, x: m.var(x, dim=None, correction=None), [rnd(3, 4)]),
    ("cosine_embedding_loss", lambda m, a, b, t: m.nn.functional.cosine_embedding_loss(a, b, t, margin=0.1), 
     [rnd(5, 3), rnd(5, 3), ints(1, -1, 1, -1, -1)]),
    ("cosine_embedding_loss-vectors", lambda m, a, b, t: m.nn.functional.cosine_embedding_loss(a, b, t), 
     [rnd(4), rnd(4), np.array(-1)]),
    ("hinge_embedding_loss", lambda m, x, t: m.nn.functional.hinge_embedding_loss(x, t, margin=0.5), 
     [rnd(3, 4), signs(4)]),
    ("margin_ranking_loss", lambda m, a, b, t: m.nn.functional.margin_ranking_loss(a, b, t, 0.2, reduction="sum"),
     [rnd(6), rnd(6), signs(6)]),
    ("triplet_margin_loss", lambda m, a, p, n: m.nn.functional.triplet_margin_loss(a, p, n, margin=1.5), 
     [rnd(4, 3), rnd(4, 3), rnd(4, 3)]),
    ("triplet_margin_loss-swap-p1", lambda m, a, p, n: m.nn.functional.triplet_margin_loss(a, p, n, 2.0, 1, swap=True,
                                                                                           reduction="none"),
     [rnd(2, 3, 2), rnd(2, 3, 2), rnd(2, 3, 2)]),
    ("soft_margin_loss", lambda m, x, t: m.nn.functional.soft_margin_loss(x, t), [rnd(3, 4), const(signs(4))]),
    ("multi_margin_loss", lambda m, x, t, w: m.nn.functional.multi_margin_loss(x, t, p=2, margin=0.8, weight=w), 
     [rnd(5, 4), ints(0, 3, 3, 1, 2), const(rng.uniform(0.5, 2.0, 4))]),
    ("multi_margin_loss-vector", lambda m, x, t: m.nn.functional.multi_margin_loss(x, t, reduction="none"), 
     [rnd(4), np.array(2)]),
    ("multi_margin_loss-0d", lambda m, x, t: m.nn.functional.multi_margin_loss(x, t, reduction="none") + x,
     [np.array(0.3), np.array(0)]),
    ("multilabel_margin_loss-0d", lambda m, x, t: m.nn.functional.multilabel_margin_loss(x, t) + x,
     [np.array(0.3), np.array(0)]),
    ("multilabel_margin_loss", lambda m, x, t: m.nn.functional.multilabel_margin_loss(x, t, reduction="none"), 
     [rnd(3, 5), np.array([[4, 0, -1, 2, 2], [1, 1, 3, -1, 4], [0, 1, 2, 3, 4]])]),
    ("multilabel_soft_margin_loss", lambda m, x, t, w: m.nn.functional.multilabel_soft_margin_loss(x, t, w), 
     [rnd(3, 4), (rnd(3, 4) > 0).astype(float), rng.uniform(0.5, 2.0, 4)]),
    ("poisson_nll_loss", lambda m, x, t: m.nn.functional.poisson_nll_loss(x, t, full=True), 
     [rnd(3, 4), rng.uniform(0, 4, (3, 4))]),
    ("poisson_nll_loss-rates", lambda m, x, t: m.nn.functional.poisson_nll_loss(x, t, log_input=False,
                                                                              reduction="sum"), 
     [rng.uniform(0.1, 3, (5,)), rng.uniform(0, 4, (5,))]),
    ("nll_loss2d", lambda m, x, t: m.nn.functional.nll_loss(x, t, ignore_index=1), 
     [rnd(2, 3, 4, 5), rng.integers(0, 3, (2, 4, 5))]),
    ("smooth_l1_loss", lambda m, a, b: m.nn.functional.smooth_l1_loss(a, b, beta=0.5), [rnd(3, 4), rnd(3, 4)]),
    ("huber_loss", lambda m, a, b: m.nn.functional.huber_loss(a, b, delta=0.7), [rnd(3, 4), rnd(3, 4)]),
]


def _tensors(lib, values, dtype=None, grad=False):
    import torch
    out = []
    for v in values:
        floating, wanted = v.dtype.kind == "f", grad and not isinstance(v, Const)
        v = np.asarray(v).view(np.ndarray)
        if lib is mp:
            out.append(mp.tensor(v, dtype=dtype or mp.float64, requires_grad=wanted) if floating else mp.tensor(v))
        else:
            out.append(torch.tensor(v, dtype=dtype or torch.float64, requires_grad=wanted) if floating
                       else torch.tensor(v))
    return out


def _call(fn, lib, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.chain_matmul's deprecation
        return fn(lib, *args)


@pytest.mark.parametrize("name,fn,values", PARITY, ids=[p[0] for p in PARITY])
def test_values_and_gradients_match_torch(name, fn, values):
    torch = pytest.importorskip("torch")
    ours_in, theirs_in = _tensors(mp, values, grad=True), _tensors(torch, values, grad=True)
    ours, theirs = _call(fn, mp, ours_in), _call(fn, torch, theirs_in)
    assert ours.shape == tuple(theirs.shape) and ours.dtype == mp.float64
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rng.standard_normal(ours.shape)
    (ours * mp.tensor(g, dtype=mp.float64)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    for i, (a, b) in enumerate(zip(ours_in, theirs_in)):
        if b.grad is None:  # a constant, or a target used only in comparisons
            assert a.grad is None or not a.grad.numpy().any(), f"input {i}"
        else:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=f"input {i}")


@pytest.mark.parametrize("low", [True, False], ids=["bfloat16-inputs", "float32-inputs"])
@pytest.mark.parametrize("name,fn,values", PARITY, ids=[p[0] for p in PARITY])
def test_cpu_autocast_output_dtype_matches_torch(name, fn, values, low):
    torch = pytest.importorskip("torch")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        try:
            theirs = _call(fn, torch, _tensors(torch, values, torch.bfloat16 if low else torch.float32))
        except RuntimeError as exc:  # torch has no bfloat16 kernel for some (pdist)
            pytest.skip(f"torch: {exc}")
    with mp.autocast("cpu", dtype=mp.bfloat16):
        ours = _call(fn, mp, _tensors(mp, values, mp.bfloat16 if low else mp.float32))
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")


def test_cumprod_second_derivatives_at_zeros_match_torch():
    """create_graph switches cumprod's backward to the whole-Jacobian formula, differentiable at zeros."""
    torch = pytest.importorskip("torch")
    x = np.array([[0.5, 0.0, 2.0, 0.0, 1.5], [1.2, -0.7, 0.0, 3.0, 0.4], [0.3, 0.9, -1.1, 2.0, 0.6]])
    w = rnd(3, 5)
    grads = []
    for lib in (mp, torch):
        t = _tensors(lib, [x], grad=True)[0]
        wt = _tensors(lib, [w])[0]
        g = (mp.autograd.grad if lib is mp else torch.autograd.grad)(((t.cumprod(1)) * wt).sum(), [t],
                                                                     create_graph=True)[0]
        (g * g).sum().backward()
        grads.append((g.detach().numpy(), t.grad.numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-10)


def test_cumprod_both_backward_formulas_agree():
    x = mp.tensor([[0.5, 0.0, 2.0, 0.0, 1.5], [1.2, -0.7, 0.3, 3.0, 0.4]], dtype=mp.float64, requires_grad=True)
    w = mp.tensor(rnd(2, 5))
    plain = mp.autograd.grad((x.cumprod(1) * w).sum(), [x])[0]
    recorded = mp.autograd.grad((x.cumprod(1) * w).sum(), [x], create_graph=True)[0]
    np.testing.assert_allclose(plain.numpy(), recorded.detach().numpy(), rtol=1e-13, atol=1e-15)


# ----------------------------------------------------------------- empty inputs, as torch
EMPTY = [
    ("addbmm-no-batches", lambda m, c, a, b: m.addbmm(c, a, b), [rnd(3, 2), rnd(0, 3, 4), rnd(0, 4, 2)]),
    ("addmv-no-columns", lambda m, c, a, v: m.addmv(c, a, v), [rnd(3), rnd(3, 0), rnd(0)]),
    ("addr-no-rows", lambda m, c, u, v: m.addr(c, u, v), [rnd(0, 2), rnd(0), rnd(2)]),
    ("multi_dot-inner-zero", lambda m, a, b: m.linalg.multi_dot([a, b]),
     [rnd(2, 0), rnd(0, 3)]),
    ("cdist-no-rows", lambda m, a, b: m.cdist(a, b), [rnd(0, 3), rnd(4, 3)]),
    ("cdist-no-features", lambda m, a, b: m.cdist(a, b, p=3), [rnd(2, 0), rnd(3, 0)]),
    ("pdist-one-row", lambda m, x: m.nn.functional.pdist(x), [rnd(1, 3)]),
    ("pdist-no-rows", lambda m, x: m.nn.functional.pdist(x), [rnd(0, 3)]),
    ("cross", lambda m, a, b: m.cross(a, b, dim=1), [rnd(0, 3), rnd(0, 3)]),
    ("renorm", lambda m, x: m.renorm(x, 2, 0, 1.0), [rnd(0, 3)]),
    ("cumprod", lambda m, x: m.cumprod(x, 0), [rnd(0, 2)]),
    ("index_select-no-indices", lambda m, x, i: m.index_select(x, 0, i), [rnd(3, 2), ints()]),
    ("index_add-no-indices", lambda m, x, i, s: x.index_add(1, i, s), [rnd(3, 2), ints(), rnd(3, 0)]),
    ("gather-index-with-more-dims", lambda m, x, i: m.gather(x, 0, i), [rnd(5), np.zeros((2, 0), dtype=np.int64)]),
    ("gather-0d-input", lambda m, x, i: m.gather(x, -1, i), [np.array(0.7), np.zeros((0, 3), dtype=np.int64)]),
    ("index_copy-empty-input", lambda m, x, i, s: x.index_copy(0, i, s), [rnd(0, 2), ints(), rnd(0, 2)]),
    ("cosine_embedding_loss", lambda m, a, b, t: m.nn.functional.cosine_embedding_loss(a, b, t),
     [rnd(0, 3), rnd(0, 3), ints()]),
    ("hinge_embedding_loss", lambda m, x, t: m.nn.functional.hinge_embedding_loss(x, t), [rnd(0), rnd(0)]),
    ("margin_ranking_loss-sum", lambda m, a, b, t: m.nn.functional.margin_ranking_loss(a, b, t, reduction="sum"),
     [rnd(0), rnd(0), rnd(0)]),
    ("triplet_margin_loss", lambda m, a, p, n: m.nn.functional.triplet_margin_loss(a, p, n), [rnd(0, 2)] * 3),
    ("soft_margin_loss-none", lambda m, x, t: m.nn.functional.soft_margin_loss(x, t, reduction="none"),
     [rnd(0, 2), rnd(0, 2)]),
    ("multilabel_soft_margin_loss", lambda m, x, t: m.nn.functional.multilabel_soft_margin_loss(x, t),
     [rnd(0, 4), rnd(0, 4)]),
    ("poisson_nll_loss", lambda m, x, t: m.nn.functional.poisson_nll_loss(x, t), [rnd(0), rnd(0)]),
    ("multi_margin_loss-none", lambda m, x, t: m.nn.functional.multi_margin_loss(x, t, reduction="none"),
     [rnd(0, 3), ints()]),
]


@pytest.mark.parametrize("name,fn,values", EMPTY, ids=[e[0] for e in EMPTY])
def test_empty_inputs_match_torch(name, fn, values):
    torch = pytest.importorskip("torch")
    ours, theirs = fn(mp, *_tensors(mp, values)), fn(torch, *_tensors(torch, values))
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())  # NaN for a mean over nothing, as torch


def test_gather_with_an_empty_index_gives_a_zero_gradient_as_torch():
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (mp, torch):
        x = lib.ones(2, 3, dtype=lib.float64, requires_grad=True)
        out = lib.gather(x, 1, lib.zeros(0, 4, 5, dtype=lib.int64))
        assert tuple(out.shape) == (0, 4, 5)
        out.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(*grads)
    with pytest.raises(IndexError, match="gather"):
        mp.gather(mp.ones(2, 3), 2, mp.zeros(0, 4, dtype=mp.int64))


def test_margin_losses_of_an_empty_batch_are_nan_for_mean_and_zero_for_sum():
    """torch returns uninitialised memory here; mixprec reduces an empty batch like every other loss."""
    for loss, target in ((F.multi_margin_loss, mp.zeros(0, dtype=mp.int64)),
                         (F.multilabel_margin_loss, mp.zeros(0, 3, dtype=mp.int64))):
        x = mp.zeros(0, 3, requires_grad=True)
        assert math.isnan(loss(x, target).item()) and loss(x, target, reduction="sum").item() == 0.0
        loss(x, target, reduction="sum").backward()
        assert x.grad.shape == (0, 3)


def test_chain_matmul_picks_the_cheapest_order():
    """(10x1000) (1000x5) (5x800): left first costs 10*1000*5 + 10*5*800 multiplications, right first 100x more."""
    from mixprec.ops.matmul import _cheapest_splits
    assert _cheapest_splits([10, 1000, 5, 800])[0][2] == 1  # split after the second matrix: (A B) C
    assert _cheapest_splits([800, 5, 1000, 10])[0][2] == 0  # A (B C)


def test_varargs_data_are_cast_by_autocast():
    """chain_matmul(*matrices): every matrix is a data argument, so a policy casts them all."""
    mats = [mp.randn(2, 2, dtype=mp.bfloat16) for _ in range(3)] + [mp.randn(2, 2)]
    with mp.autocast("cpu"):
        assert mp.chain_matmul(*mats[3:] * 3).dtype == mp.bfloat16  # no CPU policy: the inner mm casts, as torch's
        with mp.amp.override({"chain_matmul": "fp32"}, device_type="cpu"):  # a policy casts matrices 0..3
            assert mp.chain_matmul(*mats).dtype == mp.float32


def test_index_ops_on_half_inputs_round_once():
    x = mp.tensor([1.0, 2.0, 3.0], dtype=mp.bfloat16)
    src = mp.tensor([1.0, 1.0, 1.0], dtype=mp.bfloat16)
    out = x.index_add(0, mp.tensor([0, 0, 0]), src, alpha=1 / 3)  # three thirds summed in float32: exactly 2
    assert out.dtype == mp.bfloat16 and out.tolist() == [2.0, 2.0, 3.0]


def test_loss_modules_call_their_functions():
    x, y = mp.randn(4, 3), mp.randn(4, 3)
    t = mp.tensor([1, -1, 1, -1])
    cases = [
        (mp.nn.CosineEmbeddingLoss(margin=0.2), (x, y, t), F.cosine_embedding_loss(x, y, t, margin=0.2)),
        (mp.nn.HingeEmbeddingLoss(margin=2.0, reduction="sum"), (x, t[:3]),
         F.hinge_embedding_loss(x, t[:3], margin=2.0, reduction="sum")),
        (mp.nn.MarginRankingLoss(0.5), (x[:, 0], y[:, 0], t), F.margin_ranking_loss(x[:, 0], y[:, 0], t, 0.5)),
        (mp.nn.TripletMarginLoss(p=1, swap=True), (x, y, x * 2), F.triplet_margin_loss(x, y, x * 2, p=1, swap=True)),
        (mp.nn.SoftMarginLoss(reduction="none"), (x, t[:3]), F.soft_margin_loss(x, t[:3], reduction="none")),
        (mp.nn.MultiMarginLoss(p=2, weight=mp.ones(3)), (x, mp.tensor([0, 2, 1, 1])),
         F.multi_margin_loss(x, mp.tensor([0, 2, 1, 1]), p=2, weight=mp.ones(3))),
        (mp.nn.MultiLabelMarginLoss(), (x, mp.tensor([[0, -1, 1]] * 4)),
         F.multilabel_margin_loss(x, mp.tensor([[0, -1, 1]] * 4))),
        (mp.nn.MultiLabelSoftMarginLoss(), (x, (y > 0).float()), F.multilabel_soft_margin_loss(x, (y > 0).float())),
        (mp.nn.PoissonNLLLoss(full=True), (x, y.abs()), F.poisson_nll_loss(x, y.abs(), full=True)),
        (mp.nn.HuberLoss(delta=0.3), (x, y), F.huber_loss(x, y, delta=0.3)),
        (mp.nn.KLDivLoss(reduction="batchmean", log_target=True), (x, y),
         F.kl_div(x, y, reduction="batchmean", log_target=True)),
    ]
    for module, args, expected in cases:
        np.testing.assert_array_equal(module(*args).numpy(), expected.numpy(), err_msg=repr(module))
    assert "weight" in dict(mp.nn.MultiMarginLoss(weight=mp.ones(3)).named_buffers())
    with pytest.raises(ValueError, match="KLDivLoss: reduction must be one of .*'batchmean', got 'avg'"):
        mp.nn.KLDivLoss(reduction="avg")
    with pytest.raises(ValueError, match="MSELoss: reduction must be one of 'mean', 'sum', 'none', got 'batchmean'"):
        mp.nn.MSELoss(reduction="batchmean")


# ----------------------------------------------------------------- bad input: clear errors
BAD = [
    (lambda: mp.addbmm(mp.ones(3, 5), mp.ones(2, 3, 4), mp.ones(3, 4, 5)), RuntimeError,
     r"addbmm: shapes \(2, 3, 4\) and \(3, 4, 5\) cannot be multiplied"),
    (lambda: mp.addbmm(mp.ones(2, 5), mp.ones(2, 3, 4), mp.ones(2, 4, 5)), RuntimeError,
     r"addbmm: the added tensor of shape \(2, 5\) does not broadcast to the product's shape \(3, 5\)"),
    (lambda: mp.addmv(mp.ones(3), mp.ones(3, 4), mp.ones(5)), RuntimeError, r"addmv: shapes \(3, 4\) and \(5,\)"),
    (lambda: mp.addmv(mp.ones(2), mp.ones(3, 4), mp.ones(4)), RuntimeError, r"addmv: the added tensor of shape \(2,\)"),
    (lambda: mp.addr(mp.ones(3, 4), mp.ones(3, 1), mp.ones(4)), RuntimeError, r"addr: expected a 1-D vec1, got shape"),
    (lambda: mp.vdot(mp.ones(3), mp.ones(4)), RuntimeError, r"vdot: shapes \(3,\) and \(4,\)"),
    (lambda: mp.vdot(mp.ones(3), mp.ones(3, dtype=mp.float64)), TypeError, r"vdot: .*same dtype"),
    (lambda: mp.linalg.multi_dot(mp.ones(3, 3)), TypeError, r"linalg.multi_dot: expected a list or tuple of tensors, got "
     r"Tensor"),
    (lambda: mp.linalg.multi_dot([mp.ones(3, 3)]), RuntimeError, r"linalg.multi_dot: expected a list of at least 2 tensors, got 1"),
    (lambda: mp.linalg.multi_dot([mp.ones(3, 3), mp.ones(3), mp.ones(3, 3)]), RuntimeError,
     r"linalg.multi_dot: tensor 1 must be 2-D, got shape \(3,\)"),
    (lambda: mp.linalg.multi_dot([mp.ones(3, 3, 3), mp.ones(3, 3)]), RuntimeError, r"linalg.multi_dot: tensor 0 must be 1-D or 2-D"),
    (lambda: mp.linalg.multi_dot([mp.ones(3, 3), mp.ones(4, 3)]), RuntimeError,
     r"linalg.multi_dot: tensors 0 and 1 with shapes \(3, 3\) and \(4, 3\) cannot be multiplied"),
    (lambda: mp.linalg.multi_dot([mp.ones(3, 3), mp.ones(3, 3, dtype=mp.float64)]), TypeError,
     r"linalg.multi_dot: .*same dtype, got float32 \(tensor 0\) and float64 \(tensor 1\)"),
    (lambda: mp.chain_matmul(), TypeError, r"chain_matmul: expected a Tensor argument"),
    (lambda: mp.chain_matmul(mp.ones(3), mp.ones(3, 3)), RuntimeError, r"chain_matmul: matrix 0 must be 2-D"),
    (lambda: mp.cdist(mp.ones(3), mp.ones(3)), RuntimeError, r"cdist: x1 must have at least 2 dimensions"),
    (lambda: mp.cdist(mp.ones(3, 2), mp.ones(3, 4)), RuntimeError, r"cdist: .*same number of features"),
    (lambda: mp.cdist(mp.ones(3, 2), mp.ones(3, 2), p=-1), ValueError, r"cdist: p must be a non-negative number"),
    (lambda: mp.cdist(mp.ones(3, 2), mp.ones(3, 2), compute_mode="x"), ValueError,
     r"cdist: 'x' is not a valid value for compute_mode"),
    (lambda: mp.cdist(mp.tensor([[1, 2]]), mp.tensor([[1, 2]])), TypeError, r"cdist: expected floating-point inputs"),
    (lambda: mp.cdist(mp.ones(2, 3, 2), mp.ones(3, 3, 2)), RuntimeError, r"cdist: batch dims .* cannot be broadcast"),
    (lambda: mp.cdist(mp.ones(3, 2), mp.ones(3, 2, dtype=mp.float64)), TypeError, r"cdist: .*same dtype"),
    (lambda: F.pdist(mp.ones(3)), RuntimeError, r"pdist: expected a 2-D input"),
    (lambda: F.pdist(mp.ones(3, 3), p=-1), ValueError, r"pdist: p must be a non-negative number"),
    (lambda: F.pdist(mp.tensor([[1, 2]])), TypeError, r"pdist: expected a floating-point input, got int64"),
    (lambda: mp.cross(mp.ones(2, 3), mp.ones(3), dim=-1), RuntimeError, r"cross: .*same number of dimensions"),
    (lambda: mp.cross(mp.ones(2, 4), mp.ones(2, 4), dim=1), RuntimeError, r"cross: dimension 1 must have length 3"),
    (lambda: mp.cross(mp.ones(2, 4), mp.ones(2, 4)), RuntimeError, r"cross: no dimension of size 3"),
    (lambda: mp.cross(mp.ones(2, 3), mp.ones(5, 3), dim=1), RuntimeError, r"cross: shapes \(2, 3\) and \(5, 3\)"),
    (lambda: mp.cross(mp.ones(3, 3), mp.ones(3, 3), dim=2), IndexError, r"cross: dim 2 is out of range"),
    (lambda: mp.renorm(mp.ones(3), 2, 0, 1.0), RuntimeError, r"renorm: input needs at least 2 dimensions"),
    (lambda: mp.renorm(mp.ones(3, 3), 0, 0, 1.0), ValueError, r"renorm: p must be a positive number, got 0"),
    (lambda: mp.renorm(mp.ones(3, 3), 2, 0, -1.0), ValueError, r"renorm: maxnorm must be >= 0"),
    (lambda: mp.renorm(mp.tensor([[1, 2]]), 2, 0, 1.0), TypeError, r"renorm: expected a floating input"),
    (lambda: mp.cumprod(mp.ones(2, 3), 2), IndexError, r"cumprod: dim 2 is out of range"),
    (lambda: mp.ones(3, 4).index_select(0, mp.tensor([-1])), IndexError,
     r"index_select: index -1 is out of bounds for dimension 0 with size 3 \(expected 0 <= index < 3\)"),
    (lambda: mp.ones(3, 4).index_select(1, mp.tensor([4])), IndexError, r"index_select: index 4 is out of bounds"),
    (lambda: mp.ones(3, 4).index_select(0, mp.tensor([0.0])), TypeError, r"index_select: index must be an integer"),
    (lambda: mp.ones(3, 4).index_select(0, mp.tensor([[0]])), RuntimeError, r"index_select: index must be 0-d or 1-D"),
    (lambda: mp.tensor(1.0).index_select(0, mp.tensor([0, 0])), RuntimeError,
     r"index_select: the input is 0-d, so index must hold exactly 1 value, got 2"),
    (lambda: mp.tensor(1.0).index_add(0, mp.tensor([0]), mp.tensor([2.0])), RuntimeError,
     r"index_add: source of shape \(1,\) does not fit: expected \(\)"),
    (lambda: mp.ones(3, 4).index_add(0, mp.tensor([-1]), mp.ones(1, 4)), IndexError, r"index_add: index -1 is out of"),
    (lambda: mp.ones(3, 4).index_add(0, mp.tensor([0]), mp.ones(2, 4)), RuntimeError,
     r"index_add: source of shape \(2, 4\) does not fit: expected \(1, 4\)"),
    (lambda: mp.ones(3, 4).index_add(0, mp.tensor([0]), mp.ones(1, 4, dtype=mp.float64)), TypeError,
     r"index_add: .*same dtype"),
    (lambda: mp.ones(3, 4).index_copy(1, mp.tensor([5]), mp.ones(3, 1)), IndexError, r"index_copy: index 5 is out of"),
    (lambda: mp.ones(3, 4).index_copy(0, mp.tensor([0]), mp.ones(1, 5)), RuntimeError, r"index_copy: source of shape"),
    (lambda: mp.ones(3, 4).index_copy(0, mp.tensor([0]), mp.ones(1, 4, dtype=mp.bfloat16)), TypeError,
     r"index_copy: .*same dtype.*mp.autocast"),
    (lambda: mp.ones(2, 3).gather(1, mp.tensor([[-1], [0]])), IndexError, r"gather: index -1 is out of bounds"),
    (lambda: mp.ones(2, 3).gather(1, mp.tensor([[3], [0]])), IndexError, r"gather: index 3 is out of bounds"),
    (lambda: mp.scatter_add(mp.zeros(3), 0, mp.tensor([-1]), mp.ones(1)), IndexError,
     r"scatter_add: index -1 is out of bounds"),
    (lambda: F.cosine_embedding_loss(mp.ones(4), mp.ones(4), mp.tensor([1])), RuntimeError,
     r"cosine_embedding_loss: expected inputs of one shape \(N, D\) with a target \(N,\)"),
    (lambda: F.cosine_embedding_loss(mp.ones(2, 4), mp.ones(2, 5), mp.ones(2)), RuntimeError,
     r"cosine_embedding_loss: expected inputs of one shape"),
    (lambda: F.cosine_embedding_loss(mp.ones(2, 4), mp.ones(2, 4), mp.ones(3)), RuntimeError,
     r"cosine_embedding_loss: .*target \(3,\)"),
    (lambda: F.hinge_embedding_loss(mp.tensor([1, 2]), mp.ones(2)), TypeError,
     r"hinge_embedding_loss: expected a floating-point input, got int64"),
    (lambda: F.margin_ranking_loss(mp.ones(3), mp.ones(3, 1), mp.ones(3)), RuntimeError,
     r"margin_ranking_loss: all input tensors should have the same number of dimensions"),
    (lambda: F.triplet_margin_loss(mp.ones(3, 4), mp.ones(3, 4), mp.ones(4)), RuntimeError,
     r"triplet_margin_loss: anchor, positive and negative must have the same number of dimensions"),
    (lambda: F.triplet_margin_loss(mp.ones(3, 4), mp.ones(3, 4), mp.ones(3, 4), margin=0), ValueError,
     r"triplet_margin_loss: margin must be greater than 0"),
    (lambda: F.soft_margin_loss(mp.ones(3), mp.ones(3), reduction="avg"), ValueError,
     r"soft_margin_loss: 'avg' is not a valid value for reduction"),
    (lambda: F.multi_margin_loss(mp.ones(3, 4), mp.tensor([0, 1, 2]), p=3), ValueError,
     r"multi_margin_loss: only p == 1 and p == 2 are supported, got 3"),
    (lambda: F.multi_margin_loss(mp.ones(3, 4), mp.tensor([0, 1, 4])), IndexError,
     r"multi_margin_loss: a target is out of range for 4 classes \(expected 0 <= target < 4\); got target 4"),
    (lambda: F.multi_margin_loss(mp.ones(3, 4), mp.tensor([0, -1, 1])), IndexError, r"got target -1"),
    (lambda: F.multi_margin_loss(mp.ones(3, 4), mp.tensor([0.0, 1, 2])), TypeError,
     r"multi_margin_loss: class-index targets must be an integer tensor"),
    (lambda: F.multi_margin_loss(mp.ones(3, 4), mp.tensor([0, 1])), RuntimeError,
     r"multi_margin_loss: expected a target of 3 class indices"),
    (lambda: F.multi_margin_loss(mp.ones(2, 3, 4), mp.tensor([0, 1])), RuntimeError,
     r"multi_margin_loss: expected a non-empty input of shape \(C,\) or \(N, C\), or a 0-d input, got \(2, 3, 4\)"),
    (lambda: F.multi_margin_loss(mp.ones(2, 0), mp.tensor([0, 0])), RuntimeError, r"multi_margin_loss: .*non-empty"),
    (lambda: F.multi_margin_loss(mp.ones(3, 4), mp.tensor([0, 1, 2]), weight=mp.ones(3)), RuntimeError,
     r"multi_margin_loss: weight must hold one value per class, shape \(4,\), got \(3,\)"),
    (lambda: F.multilabel_margin_loss(mp.ones(2, 4), mp.tensor([[0, 4, -1, 0], [1, -1, 0, 0]])), IndexError,
     r"multilabel_margin_loss: a target is out of range for 4 classes \(expected -1 <= target < 4\); got target 4"),
    (lambda: F.multilabel_margin_loss(mp.ones(2, 4), mp.tensor([[0, -1, 9, 0], [1, -1, 0, 0]])), IndexError,
     r"got target 9"),
    (lambda: F.multilabel_margin_loss(mp.ones(2, 4), mp.ones(2, 3, dtype=mp.int64)), RuntimeError,
     r"multilabel_margin_loss: target must have the input's shape \(2, 4\), got \(2, 3\)"),
    (lambda: F.multilabel_margin_loss(mp.ones(2, 4), mp.ones(2, 4)), TypeError, r"must be an integer tensor"),
    (lambda: F.multilabel_soft_margin_loss(mp.tensor(1.0), mp.tensor(1.0)), RuntimeError,
     r"multilabel_soft_margin_loss: expected an input with a class dim"),
    (lambda: F.poisson_nll_loss(mp.tensor([1, 2]), mp.ones(2)), TypeError, r"poisson_nll_loss: expected a floating"),
    (lambda: mp.nn.MultiMarginLoss(p=3), ValueError, r"MultiMarginLoss: only p == 1 and p == 2"),
    (lambda: mp.nn.TripletMarginLoss(margin=-1), ValueError, r"TripletMarginLoss: margin must be greater than 0"),
]


@pytest.mark.parametrize("call,exc,match", BAD, ids=[f"{i}-{b[2][:30]}" for i, b in enumerate(BAD)])
def test_bad_input_raises_a_clear_error(call, exc, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=match):
            call()


def test_cross_without_dim_warns_and_uses_the_first_dim_of_size_3():
    a, b = mp.randn(2, 3, 3, dtype=mp.float64), mp.randn(2, 3, 3, dtype=mp.float64)
    with pytest.warns(UserWarning, match="cross: calling without dim is deprecated"):
        out = mp.cross(a, b)
    np.testing.assert_array_equal(out.numpy(), mp.cross(a, b, dim=1).numpy())


def test_a_failed_index_op_leaves_its_input_untouched():
    x = mp.arange(6.0).reshape(2, 3)
    before = x.numpy().copy()
    for call in (lambda: x.index_add(1, mp.tensor([0, 5]), mp.ones(2, 2)),
                 lambda: x.index_copy(1, mp.tensor([-1]), mp.ones(2, 1))):
        with pytest.raises(IndexError):
            call()
    np.testing.assert_array_equal(x.numpy(), before)


# ----------------------------------------------------------------- nan and inf at the kinks, as torch
NAN, INF = math.nan, math.inf
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -2.0]


def _pair(values):
    """The same float64 inputs as (mixprec, torch) leaves that require grad (integer arrays: index tensors;
    Const: no gradient)."""
    import torch
    ours, theirs = [], []
    for v in values:
        a = np.array(v, dtype=np.float64 if np.asarray(v).dtype.kind == "f" else None)
        floating = a.dtype.kind == "f" and not isinstance(v, Const)
        ours.append(mp.tensor(a, requires_grad=floating))
        theirs.append(torch.tensor(a, requires_grad=floating))
    return ours, theirs


def _run(m, fn, inputs):
    """fn's output and the gradient of each floating input for a fixed output gradient (None: no gradient)."""
    import torch
    out = fn(m, *inputs)
    weights = np.linspace(-1.5, 2.0, max(out.numel(), 1))[:out.numel()].reshape(tuple(out.shape))
    seed = (mp.tensor if m is mp else torch.tensor)(weights)
    wrt = [t for t in inputs if t.requires_grad]
    grads = (mp.autograd if m is mp else torch.autograd).grad((out * seed).sum(), wrt, allow_unused=True)
    return out.detach().numpy(), [None if g is None else g.numpy() for g in grads]


def _same(ours, theirs, what):
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-300, equal_nan=True, err_msg=what)


def _grid(*rows):
    return np.array(rows, dtype=np.float64)


KINKS = [
    ("relu", lambda m, x: m.relu(x), [SPECIAL]),
    ("abs", lambda m, x: m.abs(x), [SPECIAL]),
    ("sign", lambda m, x: m.sign(x), [SPECIAL]),
    ("clamp-numbers", lambda m, x: x.clamp(-1.0, 0.5), [SPECIAL]),
    ("clamp-min", lambda m, x: m.clamp(x, min=0.0), [SPECIAL]),
    ("clamp-max", lambda m, x: m.clamp(x, max=-0.0), [SPECIAL]),
    ("clamp-tensor-bounds", lambda m, x, lo, hi: m.clamp(x, lo, hi),
     [[NAN, 0.5, 0.5, 0.5, 2.0, 1.5, 1.0, -INF, INF, 0.3],
      [0.0, NAN, 0.0, 0.5, 1.0, 2.0, 1.0, 0.0, -INF, 0.3],
      [1.0, 1.0, NAN, 1.0, 1.0, 1.0, 1.0, INF, 2.0, 0.3]]),
    ("clamp-tensor-min", lambda m, x, lo: m.clamp(x, min=lo), [[NAN, 1.0, 0.0, INF, -1.0], [0.0, NAN, 0.0, INF, 0.0]]),
    ("maximum", lambda m, a, b: m.maximum(a, b), [[NAN, 1.0, 1.0, INF, NAN, -0.0, -INF, 2.0],
                                                 [1.0, NAN, 1.0, INF, NAN, 0.0, 3.0, -1.0]]),
    ("minimum", lambda m, a, b: m.minimum(a, b), [[NAN, 1.0, 1.0, -INF, NAN, 0.0, INF, 2.0],
                                                 [1.0, NAN, 1.0, -INF, NAN, -0.0, 3.0, -1.0]]),
    ("amax-dim", lambda m, x: x.amax(1),
     [_grid([NAN, 1.0, 2.0], [2.0, 2.0, 1.0], [INF, INF, 1.0], [-INF, -INF, -INF])]),
    ("amin-all", lambda m, x: x.amin(), [_grid([1.0, -INF, 2.0], [-INF, 0.0, 5.0])]),
    ("amin-dims-nan", lambda m, x: m.amin(x, (0, 1)), [_grid([1.0, NAN], [NAN, 0.0])]),
    ("norm-1", lambda m, x: m.norm(x, 1, dim=1), [_grid([NAN, 1.0, -2.0], [0.0, -0.0, 3.0], [INF, 1.0, 0.0])]),
    ("norm-inf", lambda m, x: m.norm(x, INF, dim=1), [_grid([NAN, 1.0, -2.0], [-3.0, 3.0, 1.0], [INF, -INF, 0.0])]),
    ("l1_loss", lambda m, a, b: m.nn.functional.l1_loss(a, b, reduction="none"), [SPECIAL, [0.0] * 9]),
    ("mse_loss", lambda m, a, b: m.nn.functional.mse_loss(a, b, reduction="none"), [SPECIAL, [1.0] * 9]),
    ("smooth_l1_loss", lambda m, a, b: m.nn.functional.smooth_l1_loss(a, b, reduction="none", beta=0.5),
     [SPECIAL + [0.5, -0.5, 0.25], [0.0] * 12]),
    ("huber_loss", lambda m, a, b: m.nn.functional.huber_loss(a, b, reduction="none", delta=2.0),
     [SPECIAL + [2.0, -2.0, 3.0], [0.0] * 12]),
    ("binary_cross_entropy_with_logits",
     lambda m, x, t: m.nn.functional.binary_cross_entropy_with_logits(x, t, reduction="none"),
     [SPECIAL, [1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.0, 0.3, NAN]]),
    # (a target gradient at a zero target is torch's 0 / 0 = nan: targets here are constants)
    ("kl_div", lambda m, x, t: m.nn.functional.kl_div(x, t, reduction="none"),
     [[0.1, -INF, 0.3, -1.0, NAN, 0.2, INF], const([0.0, 0.0, NAN, -0.5, 0.5, 0.2, 0.3])]),
    ("margin_ranking_loss", lambda m, a, b, t: m.nn.functional.margin_ranking_loss(a, b, t, 0.5, reduction="none"),
     [[NAN, 1.0, 0.5, INF, 2.0], [0.0, NAN, 0.0, 1.0, 1.5], [1.0, -1.0, 1.0, -1.0, 1.0]]),
    ("hinge_embedding_loss", lambda m, x, t: m.nn.functional.hinge_embedding_loss(x, t, reduction="none"),
     [[NAN, 1.0, 1.0, INF, -INF, 0.5], const([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])]),
    ("cross_entropy", lambda m, x, t: m.nn.functional.cross_entropy(x, t, reduction="none"),
     [_grid([NAN, 1.0, 2.0], [INF, 0.0, 1.0], [1.0, 2.0, 3.0], [-INF, 0.0, 1.0]), np.array([1, 0, 2, 0])]),
    ("nll_loss", lambda m, x, t: m.nn.functional.nll_loss(x, t), [_grid([NAN, 1.0], [2.0, 3.0]), np.array([1, 0])]),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan and inf are the point: NumPy's warnings are expected
@pytest.mark.parametrize("name,fn,values", KINKS, ids=[k[0] for k in KINKS])
def test_nan_and_inf_at_kinks_match_torch(name, fn, values):
    """Values and gradients equal torch's, nan for nan: never a finite number where torch has a nan."""
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(values)
    (out, grads), (want, want_grads) = _run(mp, fn, ours), _run(torch, fn, theirs)
    _same(out, want, f"{name}: forward")
    for i, (g, w) in enumerate(zip(grads, want_grads)):
        if g is not None or w is not None:
            _same(np.zeros_like(w) if g is None else g, np.zeros_like(g) if w is None else w, f"{name}: gradient {i}")


# ----------------------------------------------------------------- empty batches through the losses, as torch
def _empty(*shape):
    return np.zeros(shape)


EMPTY_LOSSES = [
    ("mse_loss", lambda m, x, t, r: m.nn.functional.mse_loss(x, t, reduction=r), [_empty(0, 3), _empty(0, 3)]),
    ("l1_loss", lambda m, x, t, r: m.nn.functional.l1_loss(x, t, reduction=r), [_empty(0), _empty(0)]),
    ("smooth_l1_loss", lambda m, x, t, r: m.nn.functional.smooth_l1_loss(x, t, reduction=r), [_empty(0), _empty(0)]),
    ("huber_loss", lambda m, x, t, r: m.nn.functional.huber_loss(x, t, reduction=r), [_empty(0, 2), _empty(0, 2)]),
    ("binary_cross_entropy", lambda m, x, t, r: m.nn.functional.binary_cross_entropy(x, t, reduction=r),
     [_empty(0), _empty(0)]),
    ("binary_cross_entropy_with_logits",
     lambda m, x, t, r: m.nn.functional.binary_cross_entropy_with_logits(x, t, reduction=r), [_empty(0), _empty(0)]),
    ("kl_div", lambda m, x, t, r: m.nn.functional.kl_div(x, t, reduction=r), [_empty(0, 3), _empty(0, 3)]),
    ("cross_entropy", lambda m, x, t, r: m.nn.functional.cross_entropy(x, t, reduction=r),
     [_empty(0, 4), np.zeros(0, np.int64)]),
    ("cross_entropy-smoothing", lambda m, x, t, r: m.nn.functional.cross_entropy(x, t, reduction=r,
                                                                                 label_smoothing=0.1),
     [_empty(0, 4), np.zeros(0, np.int64)]),
    ("cross_entropy-probabilities", lambda m, x, t, r: m.nn.functional.cross_entropy(x, t, reduction=r),
     [_empty(0, 4), _empty(0, 4)]),
    ("cross_entropy-no-classes", lambda m, x, t, r: m.nn.functional.cross_entropy(x, t, reduction=r),
     [_empty(3, 0), _empty(3, 0)]),
    ("nll_loss-images", lambda m, x, t, r: m.nn.functional.nll_loss(x, t, reduction=r),
     [_empty(0, 3, 2, 2), np.zeros((0, 2, 2), np.int64)]),
    ("poisson_nll_loss", lambda m, x, t, r: m.nn.functional.poisson_nll_loss(x, t, full=True, reduction=r),
     [_empty(0), _empty(0)]),
    ("soft_margin_loss", lambda m, x, t, r: m.nn.functional.soft_margin_loss(x, t, reduction=r),
     [_empty(0), const(_empty(0))]),
    ("multilabel_soft_margin_loss",
     lambda m, x, t, r: m.nn.functional.multilabel_soft_margin_loss(x, t, reduction=r), [_empty(0, 3), _empty(0, 3)]),
    ("hinge_embedding_loss", lambda m, x, t, r: m.nn.functional.hinge_embedding_loss(x, t, reduction=r),
     [_empty(0), _empty(0)]),
    ("cosine_embedding_loss", lambda m, a, b, t, r: m.nn.functional.cosine_embedding_loss(a, b, t, reduction=r),
     [_empty(0, 3), _empty(0, 3), np.zeros(0, np.int64)]),
    ("margin_ranking_loss", lambda m, a, b, t, r: m.nn.functional.margin_ranking_loss(a, b, t, reduction=r),
     [_empty(0), _empty(0), _empty(0)]),
    ("triplet_margin_loss", lambda m, a, p, n, r: m.nn.functional.triplet_margin_loss(a, p, n, reduction=r),
     [_empty(0, 3)] * 3),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # a mean over nothing is nan, and NumPy says so
@pytest.mark.filterwarnings("ignore:.*reduction.*'mean':UserWarning")  # kl_div's 'mean' warns, as torch's
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,fn,values", EMPTY_LOSSES, ids=[e[0] for e in EMPTY_LOSSES])
def test_losses_of_an_empty_batch_match_torch(name, fn, values, reduction):
    """'mean' of nothing is nan, 'sum' 0, 'none' empty, as torch; backward gives empty gradients where torch
    gives them."""
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(values)
    out = fn(mp, *ours, reduction)
    want = fn(torch, *theirs, reduction)
    assert out.shape == tuple(want.shape)
    _same(out.detach().numpy(), want.detach().numpy(), name)
    out.sum().backward()
    want.sum().backward()
    for t, tt in zip(ours, theirs):
        if tt.grad is not None:
            assert t.grad is not None and t.grad.shape == t.shape


# ----------------------------------------------------------------- indices out of range
def _mat():
    return mp.tensor(np.arange(6.0).reshape(2, 3))


OUT_OF_RANGE = [
    ("getitem", lambda: _mat()[mp.tensor([0, 2])], r"__getitem__: index 2 is out of bounds .* size 2"),
    ("getitem-negative", lambda: _mat()[mp.tensor([-3])], r"__getitem__: index -3 is out of bounds .* size 2"),
    ("getitem-second-dim", lambda: _mat()[:, mp.tensor([3])], r"__getitem__: index 3 is out of bounds .* size 3"),
    ("getitem-int", lambda: _mat()[2], r"__getitem__: index 2 is out of bounds .* size 2"),
    ("select", lambda: _mat().select(1, -4), r"select: index -4 is out of range .* size 3 \(expected -3 <= index < 3"),
    ("index_put", lambda: mp.index_put(_mat(), (mp.tensor([1]), mp.tensor([3])), mp.tensor(1.0, dtype=mp.float64)),
     r"index_put: index 3 is out of bounds .* size 3"),
    ("index_put-accumulate", lambda: mp.index_put(_mat(), (mp.tensor([-3]),), mp.zeros(3, dtype=mp.float64), True),
     r"index_put: index -3 is out of bounds .* size 2"),
    ("gather", lambda: _mat().gather(1, mp.tensor([[0], [3]])), r"gather: index 3 is out of bounds .*0 <= index < 3"),
    ("gather-negative", lambda: _mat().gather(0, mp.tensor([[-1, 0, 0]])), r"gather: index -1 is out of bounds"),
    ("scatter_add-negative", lambda: _mat().scatter_add(1, mp.tensor([[-1]]), mp.ones(1, 1, dtype=mp.float64)),
     r"scatter_add: index -1 is out of bounds .*0 <= index < 3"),
    ("index_select-negative", lambda: _mat().index_select(0, mp.tensor([-1])), r"index_select: index -1 is out"),
    ("index_add", lambda: _mat().index_add(0, mp.tensor([2]), mp.ones(1, 3, dtype=mp.float64)),
     r"index_add: index 2 is out of bounds .*0 <= index < 2"),
    ("index_copy-negative", lambda: _mat().index_copy(1, mp.tensor([-1]), mp.ones(2, 1, dtype=mp.float64)),
     r"index_copy: index -1 is out of bounds"),
    ("embedding-negative", lambda: F.embedding(mp.tensor([1, -1]), mp.ones(4, 2)),
     r"embedding: index out of range for a table of 4 rows.*\[-1, 1\]"),
    ("nll_loss-negative", lambda: F.nll_loss(mp.zeros(2, 3), mp.tensor([0, -1])),
     r"nll_loss: a target is out of bounds for 3 classes.*target -1"),
    ("cross_entropy", lambda: F.cross_entropy(mp.zeros(2, 3), mp.tensor([3, 0])),
     r"nll_loss: a target is out of bounds for 3 classes.*target 3"),
    ("multi_margin_loss", lambda: F.multi_margin_loss(mp.zeros(2, 3), mp.tensor([0, 3])),
     r"multi_margin_loss: a target is out of range for 3 classes.*target 3"),
]


@pytest.mark.parametrize("name,call,match", OUT_OF_RANGE, ids=[o[0] for o in OUT_OF_RANGE])
def test_every_indexing_op_refuses_an_out_of_range_index_naming_it(name, call, match):
    with pytest.raises(IndexError, match=match):
        call()


def test_negative_indices_count_from_the_end_where_torch_wraps_them():
    torch = pytest.importorskip("torch")
    x, tx = np.arange(6.0).reshape(2, 3), torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    np.testing.assert_array_equal(mp.tensor(x)[mp.tensor([-1, 0])].numpy(), tx[torch.tensor([-1, 0])].numpy())
    np.testing.assert_array_equal(mp.tensor(x)[:, mp.tensor([-3])].numpy(), tx[:, torch.tensor([-3])].numpy())
    got = mp.index_put(mp.tensor(x), (mp.tensor([-1]),), mp.tensor(9.0, dtype=mp.float64))
    want = tx.index_put((torch.tensor([-1]),), torch.tensor(9.0, dtype=torch.float64))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(mp.tensor(x).select(1, -1).numpy(), tx.select(1, -1).numpy())


def test_a_mask_must_cover_the_dims_it_indexes():
    x = _mat()
    with pytest.raises(IndexError, match=r"mask of shape \(0, 3\) does not match the shape \(2, 3\)"):
        x[mp.tensor(np.zeros((0, 3), bool))]
    with pytest.raises(IndexError, match="must be integer or bool"):
        x[mp.tensor([0.0])]


@pytest.mark.gpu
@pytest.mark.parametrize("call", [
    lambda x: x[mp.tensor([0, 2], device="cuda")],
    lambda x: x[:, mp.tensor([-4], device="cuda")],
    lambda x: mp.index_put(x, (mp.tensor([5], device="cuda"),), mp.tensor(1.0, dtype=x.dtype, device="cuda")),
], ids=["getitem", "getitem-negative", "index_put"])
def test_out_of_range_indices_on_a_gpu_raise_at_the_next_sync(call):
    """CuPy wraps an out-of-range index silently: mixprec flags it on the device and raises at the next sync."""
    x = _mat().cuda()
    call(x)  # no host wait here
    with pytest.raises(IndexError, match="out of bounds"):
        mp.cuda.synchronize()
