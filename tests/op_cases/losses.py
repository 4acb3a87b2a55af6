"""Cases for the ops of mixprec/ops/losses.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, classes, const, probs, rnd, uni
from .refs import bce_logits_ref, ce_prob_ref, ce_ref, huber_ref, log_softmax_ref

CASES = [
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
]
