"""Cases for the ops of mixprec/ops/losses.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, away, classes, const, grad_wrt_first, probs, rnd, uni
from .refs import (bce_logits_ref, ce_prob_ref, ce_ref, cos_embedding_ref, hinge_embedding_ref, huber_ref,
                   log_softmax_ref, multi_margin_ref, multilabel_margin_ref, multilabel_soft_margin_ref,
                   poisson_nll_ref, triplet_ref)



def _nll_core(reduction):
    """The op _nll_loss_core itself (weight may be None)."""
    def run(x, t, w=None):
        return mp.ops.get("_nll_loss_core")(x, t, w, ignore_index=-100, reduction=reduction)
    return run


def _ce_core(reduction):
    """The op _cross_entropy_core itself: (loss, log-probabilities)."""
    def run(x, t, w=None):
        return mp.ops.get("_cross_entropy_core")(x, t, w, ignore_index=-100, reduction=reduction)
    return run


def _nll_ref(x, t, w=None, reduction="mean", cdim=1):
    """nll_loss written out sample by sample: -w[t] x[t] over the class dim cdim, ignored targets (-100) add 0."""
    x = np.moveaxis(x, cdim, -1)
    w = np.ones(x.shape[-1]) if w is None else w
    flat_x, flat_t = x.reshape(-1, x.shape[-1]), np.asarray(t).reshape(-1)
    losses = np.array([0.0 if k == -100 else -w[k] * row[k] for row, k in zip(flat_x, flat_t)])
    weights = np.array([0.0 if k == -100 else w[k] for k in flat_t])
    if reduction == "none":
        return losses.reshape(np.shape(t))
    return losses.sum() if reduction == "sum" else losses.sum() / weights.sum()


def _ce_core_ref(x, t, w=None, reduction="mean"):
    """(nll_loss of log_softmax(x), log_softmax(x)) over the class dim."""
    cdim = 0 if x.ndim == 1 else 1
    logp = log_softmax_ref(x, cdim)
    if x.ndim == 1:  # one sample: its class dim is the only one
        return -(1.0 if w is None else w[t]) * logp[t], logp
    return _nll_ref(logp, t, w, reduction, cdim), logp


def _nll_grad_ref(x, g, t, w=None, reduction="mean"):
    """d sum(g * nll_loss(x)) / dx for an (N, C) x: -g w[t] (over the total weight for 'mean') at each target."""
    w = np.ones(x.shape[1]) if w is None else w
    out, counted = np.zeros_like(x), t != -100
    share = np.broadcast_to(g, t.shape) * w[np.where(counted, t, 0)]
    if reduction == "mean":
        share = share / w[t[counted]].sum()
    out[np.arange(len(t))[counted], t[counted]] = -share[counted]
    return out


CASES = [
    Case("_nll_loss_core-mean-weight-ignore-3d", "_nll_loss_core",
         [rnd(3, 4, 2), classes(4, 3, 2, ignore_at=3), uni(4, lo=0.2, hi=2.0)], _nll_core("mean"),
         lambda x, t, w: _nll_ref(x, t, w), lowp_ulps=4, lowp_spread=4, second_order=True),
    Case("_nll_loss_core-none", "_nll_loss_core", [rnd(5, 3), classes(3, 5, ignore_at=0)], _nll_core("none"),
         lambda x, t: _nll_ref(x, t, reduction="none"), lowp_ulps=2, lowp_spread=2),
    Case("_nll_loss_core-sum-weight-unbatched", "_nll_loss_core", [rnd(4), const(np.array(2)), uni(4, lo=0.2, hi=2.0)],
         _nll_core("sum"), lambda x, t, w: -w[t] * x[t], lowp_ulps=2, lowp_spread=2),
    Case("_nll_loss_backward-mean-weight", "_nll_loss_backward",
         [rnd(5, 4), rnd(), classes(4, 5, ignore_at=2), uni(4, lo=0.2, hi=2.0)],
         grad_wrt_first(lambda x, t, w: F.nll_loss(x, t, w)), lambda x, g, t, w: _nll_grad_ref(x, g, t, w),
         lowp_ulps=4, lowp_spread=4),  # (no second_order: its x is not used, the op is linear in it)
    Case("_nll_loss_backward-none", "_nll_loss_backward", [rnd(4, 3), rnd(4), classes(3, 4, ignore_at=1)],
         grad_wrt_first(lambda x, t: F.nll_loss(x, t, reduction="none")),
         lambda x, g, t: _nll_grad_ref(x, g, t, reduction="none"), lowp_ulps=2, lowp_spread=2),
    Case("_cross_entropy_core-mean-weight-ignore", "_cross_entropy_core",
         [rnd(6, 4), classes(4, 6, ignore_at=2), uni(4, lo=0.2, hi=2.0)], _ce_core("mean"),
         lambda x, t, w: _ce_core_ref(x, t, w), lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("_cross_entropy_core-none-3d", "_cross_entropy_core", [rnd(2, 3, 4), classes(3, 2, 4, ignore_at=5)],
         _ce_core("none"), lambda x, t: _ce_core_ref(x, t, reduction="none"), lowp_ulps=8, lowp_spread=8),
    Case("_cross_entropy_core-sum-unbatched", "_cross_entropy_core", [rnd(5), const(np.array(3))], _ce_core("sum"),
         lambda x, t: _ce_core_ref(x, t, reduction="sum"), lowp_ulps=8, lowp_spread=8),
    Case("cross_entropy", "cross_entropy", [rnd(5, 4), classes(4, 5)], lambda x, t: F.cross_entropy(x, t.long()),
         lambda x, t: ce_ref(x, t), lowp_ulps=8, lowp_spread=8),
    Case("cross_entropy-weight-ignore-smoothing", "cross_entropy",
         [rnd(6, 4), classes(4, 6, ignore_at=2), uni(4, lo=0.2, hi=2.0)],
         lambda x, t, w: F.cross_entropy(x, t, w, label_smoothing=0.2), lambda x, t, w: ce_ref(x, t, w, ls=0.2),
         lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("cross_entropy-sum-smoothing", "cross_entropy", [rnd(4, 3), classes(3, 4)],
         lambda x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1),
         lambda x, t: ce_ref(x, t, reduction="sum", ls=0.1), lowp_ulps=16, lowp_spread=16),
    Case("cross_entropy-none-3d", "cross_entropy", [rnd(2, 3, 4), classes(3, 2, 4, ignore_at=5)],
         lambda x, t: F.cross_entropy(x, t, reduction="none"), lambda x, t: ce_ref(x, t, reduction="none"),
         lowp_ulps=8, lowp_spread=8),
    Case("cross_entropy-unbatched", "cross_entropy", [rnd(5), const(np.array(3))], F.cross_entropy, ce_ref,
         lowp_ulps=8, lowp_spread=8),
    Case("cross_entropy-probs", "cross_entropy", [rnd(4, 3), probs(4, 3), uni(3, lo=0.5, hi=1.5)],
         lambda x, p, w: F.cross_entropy(x, p, w, label_smoothing=0.3), lambda x, p, w: ce_prob_ref(x, p, w, ls=0.3),
         lowp_ulps=8, lowp_spread=8),
    Case("nll_loss", "nll_loss", [rnd(5, 4), classes(4, 5, ignore_at=1), uni(4, lo=0.2, hi=2.0)],
         lambda x, t, w: F.nll_loss(x, t, w),
         lambda x, t, w: (lambda m: -(x[np.arange(5)[m], t[m]] * w[t[m]]).sum() / w[t[m]].sum())(t != -100),
         lowp_ulps=2, lowp_spread=2),
    Case("nll_loss-none", "nll_loss", [rnd(3, 4), classes(4, 3)], lambda x, t: F.nll_loss(x, t, reduction="none"),
         lambda x, t: -x[np.arange(3), t], lowp_ulps=2, lowp_spread=2),
    Case("mse_loss", "mse_loss", [rnd(3, 4), rnd(3, 4)], F.mse_loss, lambda a, b: ((a - b) ** 2).mean(), lowp_ulps=8,
         lowp_spread=8),
    Case("mse_loss-weight", "mse_loss", [rnd(3, 4), rnd(3, 4), uni(3, 4, lo=0.1, hi=1.0)],
         lambda a, b, w: F.mse_loss(a, b, weight=w), lambda a, b, w: (w * (a - b) ** 2).sum() / w.sum(), lowp_ulps=8,
         lowp_spread=8),
    Case("l1_loss-sum", "l1_loss", [rnd(3, 4), rnd(3, 4)], lambda a, b: F.l1_loss(a, b, reduction="sum"),
         lambda a, b: np.abs(a - b).sum(), lowp_ulps=8, lowp_spread=8),
    Case("smooth_l1_loss", "smooth_l1_loss", [rnd(4, 5), rnd(4, 5)], lambda a, b: F.smooth_l1_loss(a, b, beta=0.7),
         lambda a, b: (huber_ref(a - b, 0.7) / 0.7).mean(), lowp_ulps=8, lowp_spread=8),
    Case("smooth_l1_loss-beta0", "smooth_l1_loss", [rnd(6), rnd(6)],
         lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.0), lambda a, b: np.abs(a - b), lowp_ulps=2,
         lowp_spread=2),
    Case("huber_loss", "huber_loss", [rnd(4, 5), rnd(4, 5)], lambda a, b: F.huber_loss(a, b, delta=0.5),
         lambda a, b: huber_ref(a - b, 0.5).mean(), lowp_ulps=8, lowp_spread=8),
    Case("kl_div-batchmean", "kl_div", [rnd(3, 4), probs(3, 4)],
         lambda x, t: F.kl_div(x.log_softmax(dim=1), t, reduction="batchmean"),
         lambda x, t: (t * (np.log(t) - log_softmax_ref(x, 1))).sum() / 3, lowp_ulps=16, lowp_spread=16),
    Case("kl_div-log-target", "kl_div", [rnd(3, 4), rnd(3, 4)],
         lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True), lambda x, t: (np.exp(t) * (t - x)).sum(),
         lowp_ulps=32, lowp_spread=32),
    Case("binary_cross_entropy", "binary_cross_entropy",
         [uni(3, 4, lo=0.05, hi=0.95), uni(3, 4, lo=0, hi=1), uni(3, 4, lo=0.5, hi=1.5)], F.binary_cross_entropy,
         lambda x, t, w: (-w * (t * np.log(x) + (1 - t) * np.log(1 - x))).mean(), lowp_ulps=16, lowp_spread=16),
    Case("binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits",
         [rnd(3, 4), uni(3, 4, lo=0, hi=1), uni(4, lo=0.5, hi=3.0)],
         lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
         lambda x, t, pw: bce_logits_ref(x, t, pw=pw), lowp_ulps=16, lowp_spread=16, second_order=True),
    Case("nll_loss-2d-images", "nll_loss", [rnd(2, 3, 2, 2), classes(3, 2, 2, 2)],  # torch's nll_loss2d
         lambda x, t: F.nll_loss(x, t, reduction="sum"),
         lambda x, t: -np.take_along_axis(x, t[:, None], 1).sum(), lowp_ulps=2, lowp_spread=2),
    Case("cosine_embedding_loss", "cosine_embedding_loss", [rnd(4, 3), rnd(4, 3), const(np.array([1, -1, -1, 1]))],
         lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=-0.2),
         lambda a, b, t: cos_embedding_ref(a, b, t, -0.2), lowp_ulps=16, lowp_spread=16),
    Case("cosine_embedding_loss-vectors-sum", "cosine_embedding_loss", [rnd(5), rnd(5), const(np.array(-1))],
         lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=-1.0, reduction="sum"),
         lambda a, b, t: cos_embedding_ref(a, b, t, -1.0, "sum"), lowp_ulps=16, lowp_spread=16),
    Case("hinge_embedding_loss", "hinge_embedding_loss", [away(3, 4), const(np.array([1, -1, -1, 1]))],
         lambda x, t: F.hinge_embedding_loss(x, t, margin=0.5, reduction="none"),
         lambda x, t: hinge_embedding_ref(x, t, 0.5, "none"), lowp_ulps=2, lowp_spread=2),
    Case("margin_ranking_loss", "margin_ranking_loss", [rnd(6), rnd(6), const(np.array([1.0, -1, 1, -1, 1, -1]))],
         lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=0.1),
         lambda a, b, t: np.maximum(-t * (a - b) + 0.1, 0).mean(), lowp_ulps=8, lowp_spread=8),
    Case("triplet_margin_loss", "triplet_margin_loss", [rnd(4, 3), rnd(4, 3), rnd(4, 3)],
         lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0), lambda a, p, n: triplet_ref(a, p, n, 2.0),
         lowp_ulps=16, lowp_spread=16),
    Case("triplet_margin_loss-p1-swap-none", "triplet_margin_loss", [rnd(3, 2), rnd(3, 2), rnd(3, 2)],
         lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=3.0, p=1, swap=True, reduction="none"),
         lambda a, p, n: triplet_ref(a, p, n, 3.0, 1, swap=True, reduction="none"), lowp_ulps=16, lowp_spread=16),
    Case("soft_margin_loss", "soft_margin_loss", [rnd(3, 4), const(np.array([1, -1, -1, 1]))], F.soft_margin_loss,
         lambda x, t: np.log1p(np.exp(-t * x)).mean(), lowp_ulps=16, lowp_spread=16),
    Case("multi_margin_loss", "multi_margin_loss", [rnd(4, 5), classes(5, 4)], F.multi_margin_loss,
         multi_margin_ref, lowp_ulps=16, lowp_spread=16),
    Case("multi_margin_loss-p2-weight-sum", "multi_margin_loss", [rnd(4, 3), classes(3, 4), uni(3, lo=0.5, hi=2)],
         lambda x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.7, weight=w, reduction="sum"),
         lambda x, t, w: multi_margin_ref(x, t, 2, 0.7, w, "sum"), lowp_ulps=16, lowp_spread=16),
    Case("multi_margin_loss-one-sample", "multi_margin_loss", [rnd(4), const(np.array(2))],
         lambda x, t: F.multi_margin_loss(x, t, reduction="none"),
         lambda x, t: multi_margin_ref(x, t, reduction="none"), lowp_ulps=16, lowp_spread=16),
    Case("multilabel_margin_loss", "multilabel_margin_loss",
         [rnd(3, 4), const(np.array([[3, 0, -1, 1], [1, 1, 2, -1], [0, 1, 2, 3]]))], F.multilabel_margin_loss,
         multilabel_margin_ref, lowp_ulps=16, lowp_spread=16),
    Case("multilabel_margin_loss-one-sample-none", "multilabel_margin_loss", [rnd(4), const(np.array([2, -1, 0, 3]))],
         lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"),
         lambda x, t: multilabel_margin_ref(x, t, "none"), lowp_ulps=16, lowp_spread=16),
    Case("multilabel_soft_margin_loss", "multilabel_soft_margin_loss",
         [rnd(3, 4), const(np.array([[1.0, 0, 0, 1], [0, 0, 1, 1], [1, 1, 1, 0]])), uni(4, lo=0.5, hi=2)],
         F.multilabel_soft_margin_loss, multilabel_soft_margin_ref, lowp_ulps=16, lowp_spread=16),
    Case("poisson_nll_loss", "poisson_nll_loss", [rnd(3, 4), uni(3, 4, lo=0, hi=4)], F.poisson_nll_loss,
         poisson_nll_ref, lowp_ulps=16, lowp_spread=16),
    Case("poisson_nll_loss-rates-full-none", "poisson_nll_loss", [uni(2, 5, lo=0.2, hi=3), uni(2, 5, lo=0, hi=4)],
         lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="none"),
         lambda x, t: poisson_nll_ref(x, t, False, True, reduction="none"), lowp_ulps=16, lowp_spread=16),
]
