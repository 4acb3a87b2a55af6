"""Hostile values against torch (CPU, float64), issue 13: nan and inf at the kinks, empty batches, indices.

* Kinks: relu, abs, sign, clamp (number and tensor bounds, nan bounds, crossed bounds), maximum/minimum,
  amax/amin, the 1- and inf-norms and the losses, fed nan, +-inf, +-0 and values exactly at their kinks:
  the same values and the same gradients as torch, nan for nan. Then one GradScaler step per kink: when
  torch's gradients hold a nan the step is skipped, by both.
* Empty batches: every layer and loss on N = 0, forward and backward, against torch (and BatchNorm's
  running statistics stay as they are). Convolutions and pools are the conv branch's (marked until it lands).
* Indices: every indexing op refuses an out-of-range index with IndexError naming it; negative indices are
  refused where torch refuses them and count from the end where torch wraps them (x[idx], index_put).

tests/test_fault_campaign.py derives hostile variants for every op of the case table automatically; this
module pins the semantics issue 13 names, value by value.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")
# nan and inf are the point here (NumPy's RuntimeWarnings about them are expected), and kl_div's 'mean' warns
pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:.*reduction.*'mean':UserWarning")]
F = mp.nn.functional
NAN, INF = math.nan, math.inf
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -2.0]
CONV_BRANCH_LANDED = "conv3d" in mp.ops.names()


class Const(np.ndarray):
    """An input that is not differentiated."""


def const(v):
    return np.asarray(v, dtype=np.float64).view(Const)


def _pair(values):
    """The same float64 inputs as (mixprec, torch) leaves that require grad (integer arrays: index tensors;
    Const: no gradient)."""
    ours, theirs = [], []
    for v in values:
        a = np.array(v, dtype=np.float64 if np.asarray(v).dtype.kind == "f" else None)
        floating = a.dtype.kind == "f" and not isinstance(v, Const)
        ours.append(mp.tensor(a, requires_grad=floating))
        theirs.append(torch.tensor(a, requires_grad=floating))
    return ours, theirs


def _run(m, fn, inputs):
    """fn's output and the gradient of each floating input for a fixed output gradient (None: no gradient)."""
    out = fn(m, *inputs)
    weights = np.linspace(-1.5, 2.0, max(out.numel(), 1))[:out.numel()].reshape(tuple(out.shape))
    seed = (mp.tensor if m is mp else torch.tensor)(weights)
    wrt = [t for t in inputs if t.requires_grad]
    grads = (mp.autograd if m is mp else torch.autograd).grad((out * seed).sum(), wrt, allow_unused=True)
    return out.detach().numpy(), [None if g is None else g.numpy() for g in grads]


def _same(ours, theirs, what):
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-300, equal_nan=True, err_msg=what)


# ----------------------------------------------------------------- nan and inf at the kinks
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


@pytest.mark.parametrize("name,fn,values", KINKS, ids=[k[0] for k in KINKS])
def test_nan_and_inf_at_kinks_match_torch(name, fn, values):
    """Values and gradients equal torch's, nan for nan: never a finite number where torch has a nan."""
    ours, theirs = _pair(values)
    (out, grads), (want, want_grads) = _run(mp, fn, ours), _run(torch, fn, theirs)
    _same(out, want, f"{name}: forward")
    for i, (g, w) in enumerate(zip(grads, want_grads)):
        if g is not None or w is not None:
            _same(np.zeros_like(w) if g is None else g, np.zeros_like(g) if w is None else w, f"{name}: gradient {i}")


SCALED = [("relu", lambda m, z: m.relu(z).sum()), ("abs", lambda m, z: m.abs(z).sum()),
          ("clamp", lambda m, z: z.clamp(-1.0, 1.0).sum()), ("maximum", lambda m, z: m.maximum(z, z * 0.5).sum()),
          ("amax", lambda m, z: z.amax()), ("norm-inf", lambda m, z: m.norm(z, INF)),
          ("l1_loss", lambda m, z: m.nn.functional.l1_loss(z, z * 0.0 + 1.0)),
          ("smooth_l1_loss", lambda m, z: m.nn.functional.smooth_l1_loss(z, z * 0.0)),
          ("huber_loss", lambda m, z: m.nn.functional.huber_loss(z, z * 0.0 + 3.0)),
          ("cross_entropy", lambda m, z: m.nn.functional.cross_entropy(z.reshape(2, 2), (m.tensor([0, 1]))))]


@pytest.mark.parametrize("where", [0, 2], ids=["nan-first", "nan-later"])
@pytest.mark.parametrize("name,loss_of", SCALED, ids=[s[0] for s in SCALED])
def test_a_nan_through_a_kink_makes_grad_scaler_skip_the_step_as_torch(name, loss_of, where):
    """w + x with a nan in x (an add, so only the kink decides what the nan does to w's gradient): a
    GradScaler step is skipped exactly when torch's is, and otherwise takes torch's step."""
    x = np.array([0.5, -1.5, 2.0, -0.25])
    x[where] = NAN
    steps = {}
    for m in (mp, torch):
        w = (mp.nn.Parameter if m is mp else torch.nn.Parameter)(m.tensor([1.0, 2.0, -1.0, 0.5]))
        opt = m.optim.SGD([w], lr=0.1)
        scaler = mp.amp.GradScaler("cpu", init_scale=8.0) if m is mp else torch.amp.GradScaler("cpu", init_scale=8.0)
        scaler.scale(loss_of(m, w + m.tensor(x, dtype=w.dtype))).backward()
        scaler.step(opt)
        scaler.update()
        steps[m.__name__] = (w.detach().numpy().copy(), float(scaler.get_scale()))
    np.testing.assert_array_equal(steps["mixprec"][0], steps["torch"][0])
    assert steps["mixprec"][1] == steps["torch"][1]


# ----------------------------------------------------------------- empty batches
def _copy_parameters(ours, theirs):
    """Give the torch module the mixprec module's parameters and buffers."""
    state = {k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state)


def _layer(name, make, shape, conv_branch=False):
    """One layer on an empty input. conv_branch: the conv branch rewrites convolutions and pools; until it has
    landed an empty batch fails there (a reshape with -1), so the case is marked xfail."""
    marks = pytest.mark.xfail(conv_branch and not CONV_BRANCH_LANDED, strict=False,
                              reason="an empty batch through convolutions and pools is the conv branch's")
    return pytest.param(make, shape, id=name, marks=marks)


LAYERS = [
    _layer("Linear", lambda nn: nn.Linear(3, 2), (0, 3)),
    _layer("Linear-3d", lambda nn: nn.Linear(3, 2), (2, 0, 3)),
    _layer("LayerNorm", lambda nn: nn.LayerNorm(4), (0, 4)),
    _layer("BatchNorm1d", lambda nn: nn.BatchNorm1d(3), (0, 3)),
    _layer("BatchNorm2d", lambda nn: nn.BatchNorm2d(3), (0, 3, 2, 2)),
    _layer("BatchNorm2d-eval", lambda nn: nn.BatchNorm2d(3).eval(), (0, 3, 2, 2)),
    _layer("Dropout", lambda nn: nn.Dropout(0.5), (0, 3)),
    _layer("ReLU", lambda nn: nn.ReLU(), (0, 3)),
    _layer("GELU", lambda nn: nn.GELU(), (0, 3)),
    _layer("Softmax", lambda nn: nn.Softmax(dim=1), (0, 3)),
    _layer("LogSoftmax-empty-dim", lambda nn: nn.LogSoftmax(dim=1), (2, 0)),
    _layer("Flatten", lambda nn: nn.Flatten(), (0, 3, 2)),
    _layer("Conv2d", lambda nn: nn.Conv2d(2, 3, 3, padding=1), (0, 2, 5, 5), conv_branch=True),
    _layer("MaxPool2d", lambda nn: nn.MaxPool2d(2), (0, 2, 4, 4), conv_branch=True),
    _layer("AvgPool2d", lambda nn: nn.AvgPool2d(2), (0, 2, 4, 4)),
]


@pytest.mark.parametrize("make,shape", LAYERS)
def test_layers_handle_an_empty_batch_as_torch(make, shape):
    """Output shape, the input's gradient and every parameter's gradient (zeros) match torch, and so does
    the state after the step (BatchNorm's running statistics are not updated from nothing)."""
    ours, theirs = make(mp.nn), make(torch.nn)
    _copy_parameters(ours, theirs)
    x, tx = mp.zeros(*shape, dtype=mp.float32, requires_grad=True), torch.zeros(*shape, requires_grad=True)
    out, want = ours(x), theirs(tx)
    assert out.shape == tuple(want.shape)
    out.sum().backward()
    want.sum().backward()
    assert x.grad.shape == shape
    for (k, p), tp in zip(ours.named_parameters(), theirs.parameters()):
        got = np.zeros(p.shape) if p.grad is None else p.grad.numpy()
        np.testing.assert_array_equal(got, np.zeros(p.shape) if tp.grad is None else tp.grad.numpy(), err_msg=k)
    after = theirs.state_dict()
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), after[k].numpy(), err_msg=f"{k} after an empty batch")


def test_embedding_of_no_indices_and_of_a_zero_width_table():
    for idx, table in ((np.zeros((0,), np.int64), (5, 3)), (np.zeros((2, 0), np.int64), (5, 3)),
                       (np.array([1, 4]), (5, 0))):
        w, tw = mp.zeros(*table, requires_grad=True), torch.zeros(*table, requires_grad=True)
        out, want = F.embedding(mp.tensor(idx), w), torch.nn.functional.embedding(torch.tensor(idx), tw)
        assert out.shape == tuple(want.shape)
        out.sum().backward()
        assert w.grad.shape == table


def test_group_norm_of_an_empty_batch():
    x, tx = mp.zeros(0, 4, 3, requires_grad=True), torch.zeros(0, 4, 3, requires_grad=True)
    w, tw = mp.ones(4, requires_grad=True), torch.ones(4, requires_grad=True)
    out, want = F.group_norm(x, 2, w), torch.nn.functional.group_norm(tx, 2, tw)
    assert out.shape == tuple(want.shape) == (0, 4, 3)
    out.sum().backward()
    want.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())


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


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,fn,values", EMPTY_LOSSES, ids=[e[0] for e in EMPTY_LOSSES])
def test_losses_of_an_empty_batch_match_torch(name, fn, values, reduction):
    """'mean' of nothing is nan, 'sum' 0, 'none' empty, as torch; backward gives empty gradients where torch
    gives them."""
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


# ----------------------------------------------------------------- indices
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
