"""The ops issue 3 added (convolutions, norms, losses, math), table-driven.

Each case builds float64 NumPy inputs, calls mixprec, and compares with an
independent NumPy float64 computation; the same table drives gradcheck (float64
finite differences), a second-derivative check, and float16/bfloat16 forwards
against float64 on the rounded inputs — on the CPU and, marked gpu, on CUDA.
A few semantics (label smoothing with weights, padding='same', ...) are also
compared with torch when it is installed.
"""
from __future__ import annotations

import math
import warnings
import zlib

import numpy as np
import pytest
from scipy.special import erfinv as _erfinv_ref

import mixprec as mp
import mixprec.nn.functional as F

LOW = [pytest.param(mp.float16, id="float16"), pytest.param(mp.bfloat16, id="bfloat16")]
EPS = {mp.float16: 2.0 ** -10, mp.bfloat16: 2.0 ** -7}


def rnd(*shape):
    return lambda rng: rng.standard_normal(shape)


def uni(*shape, lo, hi):
    return lambda rng: rng.uniform(lo, hi, shape)


def const(value):
    return lambda rng: value


def classes(n_classes, *shape, ignore_at=None):
    def make(rng):
        t = rng.integers(0, n_classes, shape)
        if ignore_at is not None:
            t.reshape(-1)[ignore_at] = -100
        return t
    return make


def probs(*shape, axis=1):
    def make(rng):
        p = rng.uniform(0.05, 1.0, shape)
        return p / p.sum(axis=axis, keepdims=True)
    return make


class Case:
    """``fn(*tensors)`` in mixprec vs ``ref(*arrays)`` in NumPy float64; float inputs are differentiated."""

    def __init__(self, id, makers, fn, ref, grad=True, lowp=True, lowp_scale=1.0):
        self.id, self.makers, self.fn, self.ref = id, makers, fn, ref
        self.grad, self.lowp, self.lowp_scale = grad, lowp, lowp_scale

    def inputs(self):
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        return [m(rng) for m in self.makers]

    def __repr__(self):
        return self.id


# ----------------------------------------------------------------- NumPy references
def conv2d_ref(x, w, b=None, stride=(1, 1), pad=((0, 0), (0, 0)), dilation=(1, 1), groups=1):
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(pad))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho = (h - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, ho, wo))
    per = o // groups
    for oc in range(o):
        g = oc // per
        for i in range(ho):
            for j in range(wo):
                patch = x[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                          j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def conv1d_ref(x, w, b=None, stride=1, pad=0, dilation=1, groups=1):
    return conv2d_ref(x[:, :, None], w[:, :, None], b, (1, stride), ((0, 0), (pad, pad)), (1, dilation),
                      groups)[:, :, 0]


def norm_ref(x, axes, eps=1e-5):
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


def group_norm_ref(x, groups, w=None, b=None, eps=1e-5):
    n, c = x.shape[:2]
    y = norm_ref(x.reshape(n, groups, -1), (2,), eps).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    y = y if w is None else y * w.reshape(shape)
    return y if b is None else y + b.reshape(shape)


def log_softmax_ref(x, axis):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def ce_ref(x, t, w=None, ignore=-100, reduction="mean", ls=0.0):
    """Cross entropy written out sample by sample (class-index targets)."""
    cdim = 0 if x.ndim == 1 else 1
    logp = log_softmax_ref(x, cdim)
    logp = np.moveaxis(logp, cdim, -1).reshape(-1, x.shape[cdim])
    t = np.asarray(t).reshape(-1)
    c = x.shape[cdim]
    w = np.ones(c) if w is None else w
    losses, weights = [], []
    for lp, k in zip(logp, t):
        if k == ignore:
            losses.append(0.0)
            weights.append(0.0)
            continue
        nll = -w[k] * lp[k]
        smooth = -(w * lp).sum()
        losses.append((1 - ls) * nll + ls / c * smooth)
        weights.append(w[k])
    losses = np.array(losses)
    if reduction == "none":
        return losses.reshape(np.asarray(x).shape[:cdim] + np.asarray(x).shape[cdim + 1:])
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / np.sum(weights)


def ce_prob_ref(x, p, w=None, ls=0.0, reduction="mean"):
    c = x.shape[1]
    p = p * (1 - ls) + ls / c
    wb = 1.0 if w is None else w.reshape((c,) + (1,) * (x.ndim - 2))
    per = -(log_softmax_ref(x, 1) * p * wb).sum(1)
    return {"mean": per.sum() / per.size, "sum": per.sum(), "none": per}[reduction]


def reduce_ref(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction](loss)


def huber_ref(d, delta):
    a = np.abs(d)
    return np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))


def bce_logits_ref(x, t, w=None, pw=None):
    pw = 1.0 if pw is None else pw
    loss = -(pw * t * np.log(1 / (1 + np.exp(-x))) + (1 - t) * np.log(1 - 1 / (1 + np.exp(-x))))
    return (loss if w is None else loss * w).mean()


def lp_norm_ref(x, p, axis=None, keepdims=False):
    a = np.abs(x)
    if p == math.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == -math.inf:
        return a.min(axis=axis, keepdims=keepdims)
    return (a ** p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


def cos_sim_ref(a, b, axis=1, eps=1e-8):
    na = np.maximum(np.sqrt((a * a).sum(axis, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(axis, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(axis)


CASES = [
    # ---- convolutions
    Case("conv2d", [rnd(2, 3, 5, 6), rnd(4, 3, 3, 2), rnd(4)], F.conv2d, conv2d_ref, lowp_scale=4),
    Case("conv2d-stride-pad", [rnd(1, 2, 5, 5), rnd(3, 2, 3, 3)],
         lambda x, w: F.conv2d(x, w, stride=2, padding=1),
         lambda x, w: conv2d_ref(x, w, None, (2, 2), ((1, 1), (1, 1))), lowp_scale=4),
    Case("conv2d-dilation-asym", [rnd(1, 2, 6, 5), rnd(2, 2, 2, 2), rnd(2)],
         lambda x, w, b: mp.conv2d(x, w, b, stride=(1, 2), padding=(2, 1), dilation=(2, 1)),
         lambda x, w, b: conv2d_ref(x, w, b, (1, 2), ((2, 2), (1, 1)), (2, 1)), lowp_scale=4),
    Case("conv2d-groups", [rnd(2, 4, 4, 4), rnd(6, 2, 3, 3)], lambda x, w: F.conv2d(x, w, groups=2, padding=1),
         lambda x, w: conv2d_ref(x, w, None, (1, 1), ((1, 1), (1, 1)), groups=2), lowp_scale=4),
    Case("conv2d-same-even-kernel", [rnd(1, 1, 4, 5), rnd(2, 1, 2, 4)], lambda x, w: F.conv2d(x, w, padding="same"),
         lambda x, w: conv2d_ref(x, w, None, (1, 1), ((0, 1), (1, 2))), lowp_scale=4),
    Case("conv2d-unbatched", [rnd(2, 4, 4), rnd(3, 2, 2, 2)], F.conv2d,
         lambda x, w: conv2d_ref(x[None], w)[0], lowp_scale=4),
    Case("conv1d", [rnd(2, 3, 7), rnd(4, 3, 3), rnd(4)], lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
         lambda x, w, b: conv1d_ref(x, w, b, 2, 1), lowp_scale=4),
    Case("conv1d-dilation-groups", [rnd(1, 4, 9), rnd(2, 2, 2)], lambda x, w: mp.conv1d(x, w, dilation=3, groups=2),
         lambda x, w: conv1d_ref(x, w, dilation=3, groups=2), lowp_scale=4),
    # ---- normalisation
    Case("layer_norm", [rnd(3, 4, 5), rnd(4, 5), rnd(4, 5)], lambda x, w, b: F.layer_norm(x, (4, 5), w, b),
         lambda x, w, b: norm_ref(x, (1, 2)) * w + b, lowp_scale=8),
    Case("layer_norm-no-affine", [rnd(2, 6)], lambda x: mp.layer_norm(x, 6, eps=1e-3),
         lambda x: norm_ref(x, (1,), 1e-3), lowp_scale=8),
    Case("layer_norm-weight-only", [rnd(2, 3, 4), rnd(4)], lambda x, w: F.layer_norm(x, [4], w),
         lambda x, w: norm_ref(x, (2,)) * w, lowp_scale=8),
    Case("group_norm", [rnd(2, 6, 3), rnd(6), rnd(6)], lambda x, w, b: F.group_norm(x, 3, w, b),
         lambda x, w, b: group_norm_ref(x, 3, w, b), lowp_scale=8),
    Case("group_norm-4d-no-affine", [rnd(2, 4, 2, 3)], lambda x: mp.group_norm(x, 2),
         lambda x: group_norm_ref(x, 2), lowp_scale=8),
    # ---- losses
    Case("cross_entropy", [rnd(5, 4), classes(4, 5)], lambda x, t: F.cross_entropy(x, t.long()),
         lambda x, t: ce_ref(x, t), lowp_scale=4),
    Case("cross_entropy-weight-ignore-smoothing", [rnd(6, 4), classes(4, 6, ignore_at=2), uni(4, lo=0.2, hi=2.0)],
         lambda x, t, w: F.cross_entropy(x, t, w, label_smoothing=0.2),
         lambda x, t, w: ce_ref(x, t, w, ls=0.2), lowp_scale=4),
    Case("cross_entropy-sum-smoothing", [rnd(4, 3), classes(3, 4)],
         lambda x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1),
         lambda x, t: ce_ref(x, t, reduction="sum", ls=0.1), lowp_scale=8),
    Case("cross_entropy-none-3d", [rnd(2, 3, 4), classes(3, 2, 4, ignore_at=5)],
         lambda x, t: F.cross_entropy(x, t, reduction="none"), lambda x, t: ce_ref(x, t, reduction="none"),
         lowp_scale=4),
    Case("cross_entropy-unbatched", [rnd(5), const(np.array(3))], F.cross_entropy, ce_ref, lowp_scale=4),
    Case("cross_entropy-probs", [rnd(4, 3), probs(4, 3), uni(3, lo=0.5, hi=1.5)],
         lambda x, p, w: F.cross_entropy(x, p, w, label_smoothing=0.3),
         lambda x, p, w: ce_prob_ref(x, p, w, ls=0.3), lowp_scale=4),
    Case("nll_loss", [rnd(5, 4), classes(4, 5, ignore_at=1), uni(4, lo=0.2, hi=2.0)],
         lambda x, t, w: F.nll_loss(x, t, w),
         lambda x, t, w: (lambda m: -(x[np.arange(5)[m], t[m]] * w[t[m]]).sum() / w[t[m]].sum())(t != -100)),
    Case("nll_loss-none", [rnd(3, 4), classes(4, 3)], lambda x, t: F.nll_loss(x, t, reduction="none"),
         lambda x, t: -x[np.arange(3), t]),
    Case("mse_loss", [rnd(3, 4), rnd(3, 4)], F.mse_loss, lambda a, b: ((a - b) ** 2).mean(), lowp_scale=4),
    Case("mse_loss-weight", [rnd(3, 4), rnd(3, 4), uni(3, 4, lo=0.1, hi=1.0)],
         lambda a, b, w: F.mse_loss(a, b, weight=w), lambda a, b, w: (w * (a - b) ** 2).sum() / w.sum(),
         lowp_scale=4),
    Case("l1_loss-sum", [rnd(3, 4), rnd(3, 4)], lambda a, b: F.l1_loss(a, b, reduction="sum"),
         lambda a, b: np.abs(a - b).sum(), lowp_scale=4),
    Case("smooth_l1_loss", [rnd(4, 5), rnd(4, 5)], lambda a, b: F.smooth_l1_loss(a, b, beta=0.7),
         lambda a, b: (huber_ref(a - b, 0.7) / 0.7).mean(), lowp_scale=4),
    Case("smooth_l1_loss-beta0", [rnd(6), rnd(6)], lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.0),
         lambda a, b: np.abs(a - b)),
    Case("huber_loss", [rnd(4, 5), rnd(4, 5)], lambda a, b: F.huber_loss(a, b, delta=0.5),
         lambda a, b: huber_ref(a - b, 0.5).mean(), lowp_scale=4),
    Case("kl_div-batchmean", [rnd(3, 4), probs(3, 4)],
         lambda x, t: F.kl_div(x.log_softmax(dim=1), t, reduction="batchmean"),
         lambda x, t: (t * (np.log(t) - log_softmax_ref(x, 1))).sum() / 3, lowp_scale=8),
    Case("kl_div-log-target", [rnd(3, 4), rnd(3, 4)], lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True),
         lambda x, t: (np.exp(t) * (t - x)).sum(), lowp_scale=16),
    Case("binary_cross_entropy", [uni(3, 4, lo=0.05, hi=0.95), uni(3, 4, lo=0, hi=1), uni(3, 4, lo=0.5, hi=1.5)],
         F.binary_cross_entropy, lambda x, t, w: (-w * (t * np.log(x) + (1 - t) * np.log(1 - x))).mean(),
         lowp_scale=8),
    Case("binary_cross_entropy_with_logits", [rnd(3, 4), uni(3, 4, lo=0, hi=1), uni(4, lo=0.5, hi=3.0)],
         lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
         lambda x, t, pw: bce_logits_ref(x, t, pw=pw), lowp_scale=8),
    Case("cosine_similarity", [rnd(3, 5), rnd(1, 5)], F.cosine_similarity, cos_sim_ref, lowp_scale=4),
    Case("cosine_similarity-dim0", [rnd(4, 2), rnd(4, 2)], lambda a, b: mp.cosine_similarity(a, b, dim=0),
         lambda a, b: cos_sim_ref(a, b, 0), lowp_scale=4),
    Case("normalize", [rnd(3, 4)], lambda x: F.normalize(x, p=3.0, dim=0),
         lambda x: x / lp_norm_ref(x, 3.0, 0, True), lowp_scale=4),
    # ---- math
    Case("log2", [uni(2, 3, lo=0.2, hi=3)], mp.log2, np.log2),
    Case("log10", [uni(2, 3, lo=0.2, hi=3)], lambda a: a.log10(), np.log10),
    Case("exp2", [rnd(5)], mp.exp2, np.exp2),
    Case("sinh", [rnd(5)], mp.sinh, np.sinh),
    Case("cosh", [rnd(5)], lambda a: a.cosh(), np.cosh),
    Case("tan", [uni(5, lo=-1.2, hi=1.2)], mp.tan, np.tan, lowp_scale=4),
    Case("asin", [uni(5, lo=-0.9, hi=0.9)], mp.asin, np.arcsin, lowp_scale=2),
    Case("acos", [uni(5, lo=-0.9, hi=0.9)], lambda a: a.acos(), np.arccos, lowp_scale=2),
    Case("erfinv", [uni(6, lo=-0.95, hi=0.95)], mp.erfinv, _erfinv_ref, lowp_scale=8),
    Case("atan2", [rnd(2, 3), rnd(3)], mp.atan2, np.arctan2, lowp_scale=2),
    Case("addcmul", [rnd(2, 3), rnd(2, 3), rnd(3)], lambda a, b, c: mp.addcmul(a, b, c, value=-0.5),
         lambda a, b, c: a - 0.5 * b * c),
    Case("addcdiv", [rnd(2, 3), rnd(2, 3), uni(3, lo=0.5, hi=2)], lambda a, b, c: a.addcdiv(b, c, value=2),
         lambda a, b, c: a + 2 * b / c),
    Case("norm-fro", [rnd(3, 4)], mp.norm, lambda x: np.sqrt((x * x).sum()), lowp_scale=2),
    Case("norm-p1-dim", [rnd(3, 4)], lambda x: x.norm(1, dim=1), lambda x: np.abs(x).sum(1), lowp_scale=4),
    Case("norm-p3-keepdim", [rnd(3, 4)], lambda x: mp.norm(x, 3, dim=0, keepdim=True),
         lambda x: lp_norm_ref(x, 3, 0, True), lowp_scale=4),
    Case("norm-inf", [const(np.array([[0.5, -2.0, 1.0], [3.0, 0.1, -0.2]]))], lambda x: mp.norm(x, math.inf, 1),
         lambda x: np.abs(x).max(1)),
    Case("norm-minus-inf", [const(np.array([[0.5, -2.0, 1.0], [3.0, 0.1, -0.2]]))],
         lambda x: mp.norm(x, -math.inf), lambda x: np.abs(x).min()),
    Case("dist", [rnd(2, 3), rnd(3)], lambda a, b: mp.dist(a, b, 3), lambda a, b: lp_norm_ref(a - b, 3),
         lowp_scale=4),
    Case("tensordot", [rnd(2, 3, 4), rnd(3, 4, 2)], mp.tensordot, lambda a, b: np.tensordot(a, b, 2), lowp_scale=4),
    Case("tensordot-dims-lists", [rnd(2, 3, 4), rnd(4, 3, 5)], lambda a, b: mp.tensordot(a, b, dims=([1, 2], [1, 0])),
         lambda a, b: np.tensordot(a, b, ([1, 2], [1, 0])), lowp_scale=4),
    Case("tensordot-outer", [rnd(2), rnd(3)], lambda a, b: mp.tensordot(a, b, 0),
         lambda a, b: np.tensordot(a, b, 0)),
    Case("softmin", [rnd(3, 4)], lambda x: F.softmin(x, dim=1), lambda x: np.exp(log_softmax_ref(-x, 1))),
]


def _tensors(arrays, device, dtype=mp.float64, grad=True):
    out = []
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind == "f":
            out.append(mp.tensor(a, dtype=dtype, device=device, requires_grad=grad))
        else:
            out.append(mp.tensor(a, device=device))
    return out


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_forward_float64(case, device):
    arrays = case.inputs()
    out = case.fn(*_tensors(arrays, device, grad=False))
    assert out.dtype == mp.float64
    np.testing.assert_allclose(out.numpy(), case.ref(*arrays), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad], ids=repr)
def test_gradcheck(case, device):
    inputs = _tensors(case.inputs(), device)
    assert mp.autograd.gradcheck(case.fn, inputs)


@pytest.mark.parametrize("case", [c for c in CASES if c.lowp], ids=repr)
@pytest.mark.parametrize("dtype", LOW)
def test_forward_low_precision(case, dtype, device):
    """Half inputs: the result has the input dtype and matches float64 on the rounded inputs."""
    arrays = case.inputs()
    tensors = _tensors(arrays, device, dtype=dtype, grad=False)
    rounded = [t.numpy().astype(np.float64) if t.is_floating_point else a for t, a in zip(tensors, arrays)]
    out = case.fn(*tensors)
    assert out.dtype == dtype
    ref = case.ref(*rounded)
    eps = EPS[dtype] * case.lowp_scale
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=2 * eps, atol=2 * eps * max(1.0, np.abs(ref).max()))


SECOND_ORDER = ["conv2d-stride-pad", "layer_norm", "group_norm", "cross_entropy-weight-ignore-smoothing",
                "binary_cross_entropy_with_logits", "norm-p3-keepdim", "atan2", "erfinv", "cosine_similarity"]


@pytest.mark.parametrize("case", [c for c in CASES if c.id in SECOND_ORDER], ids=repr)
def test_second_derivatives(case):
    """Backwards are built from Tensor ops, so they differentiate again."""
    inputs = _tensors(case.inputs(), "cpu")
    diff = [t for t in inputs if t.requires_grad]

    def first_grad_sum(*xs):
        out = case.fn(*xs)
        grads = mp.autograd.grad(out.sum(), [x for x in xs if x.requires_grad], create_graph=True)
        return sum((g * g).sum() for g in grads if g is not None)
    assert mp.autograd.gradcheck(first_grad_sum, inputs, atol=1e-4, rtol=1e-3)
    assert diff


# ----------------------------------------------------------------- half-precision details
@pytest.mark.parametrize("dtype", LOW)
def test_layer_norm_half_statistics_are_float32(dtype):
    """A large mean would swamp a half-precision variance; float32 statistics keep it."""
    x = np.array([[1000.0, 1001.0, 1002.0, 1003.0]])
    out = mp.layer_norm(mp.tensor(x, dtype=dtype), 4).numpy().astype(np.float64)
    xr = mp.tensor(x, dtype=dtype).numpy().astype(np.float64)
    np.testing.assert_allclose(out, norm_ref(xr, (1,)), rtol=4 * EPS[dtype], atol=4 * EPS[dtype])


@pytest.mark.parametrize("dtype", LOW)
def test_conv_half_gradients_have_half_dtype(dtype):
    x = mp.randn(1, 2, 4, 4, dtype=dtype, requires_grad=True)
    w = mp.randn(3, 2, 3, 3, dtype=dtype, requires_grad=True)
    b = mp.randn(3, dtype=dtype, requires_grad=True)
    mp.conv2d(x, w, b, padding=1).sum().backward()
    assert (x.grad.dtype, w.grad.dtype, b.grad.dtype) == (dtype, dtype, dtype)


# ----------------------------------------------------------------- semantics
def test_nll_loss_mean_with_every_target_ignored_is_nan():
    x = mp.randn(2, 3)
    assert math.isnan(F.nll_loss(x, mp.tensor([-100, -100])).item())
    assert F.cross_entropy(x, mp.tensor([-100, -100]), reduction="sum").item() == 0.0


def test_cross_entropy_custom_ignore_index_and_alias():
    x = mp.randn(3, 4, dtype=mp.float64)
    t = mp.tensor([1, 7, 2])
    a = F.cross_entropy(x, t, ignore_index=7)
    b = mp.cross_entropy_loss(x, mp.tensor([1, -100, 2]))
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-12)
    assert mp.ops.get("cross_entropy_loss") is mp.ops.get("cross_entropy")


def test_deprecated_size_average_and_reduce_map_to_reduction():
    x, y = mp.randn(3, 4), mp.randn(3, 4)
    with pytest.warns(DeprecationWarning):
        s = F.mse_loss(x, y, size_average=False)
    np.testing.assert_allclose(s.item(), F.mse_loss(x, y, reduction="sum").item(), rtol=1e-6)
    with pytest.warns(DeprecationWarning):
        assert F.l1_loss(x, y, reduce=False).shape == (3, 4)


def test_kl_div_mean_warns_and_zero_target_contributes_zero():
    x = mp.tensor([[-1.0, -2.0]])
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, mp.tensor([[1.0, 0.0]]))
    out = F.kl_div(x, mp.tensor([[1.0, 0.0]]), reduction="none")
    assert out.tolist() == [[1.0, 0.0]]


def test_binary_cross_entropy_clamps_log_at_minus_100():
    out = F.binary_cross_entropy(mp.tensor([0.0, 1.0]), mp.tensor([1.0, 0.0]), reduction="none")
    assert out.tolist() == [100.0, 100.0]


def test_erfinv_edges_and_generic_path_matches_scipy():
    from mixprec.ops.math_ops import _erfinv_array
    out = mp.erfinv(mp.tensor([1.0, -1.0, 0.0, 1.5], dtype=mp.float64)).numpy()
    assert out[0] == math.inf and out[1] == -math.inf and out[2] == 0.0 and math.isnan(out[3])
    z = np.linspace(-0.999999, 0.999999, 2001)
    np.testing.assert_allclose(_erfinv_array(z), _erfinv_ref(z), rtol=1e-12, atol=1e-14)  # the CuPy/no-SciPy path


def test_integer_inputs_to_unary_math_give_float32():
    assert mp.log2(mp.tensor([1, 2, 4])).dtype == mp.float32
    assert mp.log2(mp.tensor([1, 2, 4])).tolist() == [0.0, 1.0, 2.0]


def test_norm_gradient_at_zero_vector_is_zero():
    x = mp.zeros(3, dtype=mp.float64, requires_grad=True)
    mp.norm(x).backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_norm_inf_splits_gradient_between_ties():
    x = mp.tensor([2.0, -2.0, 1.0], dtype=mp.float64, requires_grad=True)
    mp.norm(x, math.inf).backward()
    assert x.grad.tolist() == [0.5, -0.5, 0.0]


def test_norm_dtype_argument_casts_first():
    x = mp.tensor([3.0, 4.0], dtype=mp.float16, requires_grad=True)
    out = mp.norm(x, dtype=mp.float64)
    assert out.dtype == mp.float64 and out.item() == 5.0
    out.backward()
    assert x.grad.dtype == mp.float16


# ----------------------------------------------------------------- bad input
BAD = [
    (lambda: mp.conv2d(mp.randn(1, 3, 4, 4), mp.randn(2, 2, 3, 3)), RuntimeError, "3 channels"),
    (lambda: mp.conv2d(mp.randn(1, 2, 4, 4), mp.randn(2, 2, 5, 5)), RuntimeError, "smaller than"),
    (lambda: mp.conv2d(mp.randn(1, 2, 4, 4), mp.randn(2, 2, 3, 3, dtype=mp.float16)), TypeError, "should be the same"),
    (lambda: mp.conv2d(mp.randn(2, 4, 4), mp.randn(2, 2, 3)), RuntimeError, "4-D weight"),
    (lambda: mp.conv2d(mp.randn(1, 2, 4, 4), mp.randn(2, 2, 3, 3), stride=2, padding="same"), ValueError, "strided"),
    (lambda: mp.conv2d(mp.randn(1, 2, 4, 4), mp.randn(3, 1, 3, 3), groups=2), RuntimeError, "divisible"),
    (lambda: mp.conv1d(mp.randn(1, 2, 5), mp.randn(2, 2, 3), padding="full"), ValueError, "padding"),
    (lambda: mp.layer_norm(mp.randn(2, 3), (4,)), RuntimeError, "normalized_shape"),
    (lambda: mp.layer_norm(mp.randn(2, 3), 3, mp.randn(4)), RuntimeError, "weight of shape"),
    (lambda: mp.group_norm(mp.randn(2, 6, 3), 4), RuntimeError, "num_groups"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 4, 1])), IndexError, "out of bounds"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 1])), RuntimeError, "target of shape"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 1, 2]), reduction="avg"), ValueError, "reduction"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 1, 2]), label_smoothing=1.5), ValueError, "label_smoothing"),
    (lambda: F.cross_entropy(mp.randn(3, 4), mp.tensor([0, 1, 2]), mp.ones(3)), RuntimeError, "one value per class"),
    (lambda: F.nll_loss(mp.randn(3, 4), mp.randn(3)), TypeError, "integer"),
    (lambda: F.binary_cross_entropy(mp.tensor([0.5, 1.2]), mp.tensor([0.0, 1.0])), ValueError, "between 0 and 1"),
    (lambda: F.binary_cross_entropy(mp.tensor([0.5, 0.2]), mp.tensor([1.0])), ValueError, "same as input size"),
    (lambda: F.mse_loss(mp.randn(3), mp.randn(3), weight=mp.ones(2)), ValueError, "weight"),
    (lambda: F.smooth_l1_loss(mp.randn(3), mp.randn(3), beta=-1.0), ValueError, "beta"),
    (lambda: mp.norm(mp.randn(3), "nuc"), NotImplementedError, "nuclear"),
    (lambda: mp.norm(mp.tensor([1, 2])), TypeError, "floating"),
    (lambda: mp.tensordot(mp.randn(2, 3), mp.randn(4, 2), 1), RuntimeError, "does not match"),
    (lambda: mp.tensordot(mp.randn(2, 3), mp.randn(3, 2, dtype=mp.float16), 1), TypeError, "same dtype"),
]


@pytest.mark.parametrize("call,exc,match", BAD)
def test_bad_input_raises_clear_error(call, exc, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=match):
            call()


def test_mismatched_target_size_warns():
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(mp.randn(3, 1), mp.randn(3))


# ----------------------------------------------------------------- against torch, where installed
def test_matches_torch_where_semantics_are_subtle():
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5))
    t = np.array([0, 4, -100, 2, 1, 4])
    w = rng.uniform(0.2, 2.0, 5)
    for kw in (dict(label_smoothing=0.25), dict(reduction="sum", label_smoothing=0.1), dict(reduction="none")):
        ours = F.cross_entropy(mp.tensor(x, dtype=mp.float64), mp.tensor(t), mp.tensor(w, dtype=mp.float64), **kw)
        ref = tF.cross_entropy(torch.tensor(x), torch.tensor(t), torch.tensor(w), **kw)
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-12)
    img = rng.standard_normal((2, 4, 5, 6))
    ker = rng.standard_normal((6, 2, 2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's note about even kernels with padding='same'
        ref = tF.conv2d(torch.tensor(img), torch.tensor(ker), padding="same", dilation=(1, 2), groups=2)
    ours = F.conv2d(mp.tensor(img, dtype=mp.float64), mp.tensor(ker, dtype=mp.float64), padding="same",
                    dilation=(1, 2), groups=2)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ours = F.huber_loss(mp.tensor(a, dtype=mp.float64), mp.tensor(b, dtype=mp.float64), delta=0.4,
                        weight=mp.tensor(np.abs(b), dtype=mp.float64))
    ref = tF.huber_loss(torch.tensor(a), torch.tensor(b), delta=0.4, weight=torch.tensor(np.abs(b)))
    np.testing.assert_allclose(ours.item(), ref.item(), rtol=1e-12)
