"""Cases for the ops of mixprec/ops/nn_norms_losses.py (references from each formula, in NumPy)."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, const, pos, rnd


def _instance_norm_ref(a, w=None, b=None, eps=1e-5):
    axes = tuple(range(2, a.ndim))
    y = (a - a.mean(axes, keepdims=True)) / np.sqrt(a.var(axes, keepdims=True) + eps)
    shape = (1, -1) + (1,) * (a.ndim - 2)
    return y * (1 if w is None else w.reshape(shape)) + (0 if b is None else b.reshape(shape))


def _lrn_ref(a, size, alpha=1e-4, beta=0.75, k=1.0):
    c = a.shape[1]
    out = np.empty_like(a)
    for ch in range(c):
        lo, hi = max(0, ch - size // 2), min(c, ch + (size - 1) // 2 + 1)
        out[:, ch] = a[:, ch] / (k + alpha / size * (a[:, lo:hi] ** 2).sum(1)) ** beta
    return out


def _gaussian_ref(x, t, v, full=False, eps=1e-6):
    v = np.maximum(v, eps)
    loss = 0.5 * (np.log(v) + (x - t) ** 2 / v) + (0.5 * np.log(2 * np.pi) if full else 0)
    return loss.mean()


def _triplet_ref(a, p, n, margin=1.0, swap=False):
    def d(x, y):
        return np.sqrt(((x - y + 1e-6) ** 2).sum(-1))
    neg = np.minimum(d(a, n), d(p, n)) if swap else d(a, n)
    return np.maximum(margin + d(a, p) - neg, 0).mean()


CASES = [
    Case("instance_norm", "instance_norm", [rnd(2, 3, 5)], F.instance_norm, _instance_norm_ref, lowp_ulps=4,
         lowp_spread=2),
    Case("instance_norm-affine", "instance_norm", [rnd(2, 3, 2, 3), rnd(3), rnd(3)],
         lambda a, w, b: F.instance_norm(a, weight=w, bias=b), _instance_norm_ref, lowp_ulps=4, lowp_spread=4),
    Case("instance_norm-running", "instance_norm", [rnd(2, 3, 4), rnd(3), pos(3)],
         lambda a, m, v: F.instance_norm(a, m, v, use_input_stats=False),
         lambda a, m, v: (a - m.reshape(1, -1, 1)) / np.sqrt(v.reshape(1, -1, 1) + 1e-5), lowp_ulps=4,
         lowp_spread=2),
    Case("local_response_norm", "local_response_norm", [rnd(2, 5, 3)], lambda a: F.local_response_norm(a, 3, 0.5),
         lambda a: _lrn_ref(a, 3, 0.5), lowp_ulps=3),
    Case("local_response_norm-4d-even", "local_response_norm", [rnd(1, 4, 2, 2)],
         lambda a: F.local_response_norm(a, 2, 0.3, 0.5, 2.0), lambda a: _lrn_ref(a, 2, 0.3, 0.5, 2.0), lowp_ulps=3),
    Case("gaussian_nll_loss", "gaussian_nll_loss", [rnd(3, 4), rnd(3, 4), pos(3, 4)], F.gaussian_nll_loss,
         _gaussian_ref, lowp_ulps=4, lowp_spread=4),
    Case("gaussian_nll_loss-shared-var-full", "gaussian_nll_loss", [rnd(3, 4), rnd(3, 4), pos(3)],
         lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True),
         lambda x, t, v: _gaussian_ref(x, t, v[:, None], full=True), lowp_ulps=4, lowp_spread=4),
    Case("triplet_margin_with_distance_loss", "triplet_margin_with_distance_loss", [rnd(4, 3), rnd(4, 3), rnd(4, 3)],
         lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, margin=2.0), lambda a, p, n:
         _triplet_ref(a, p, n, 2.0), lowp_ulps=4, lowp_spread=4),
    Case("triplet_margin_with_distance_loss-fn-swap", "triplet_margin_with_distance_loss",
         [rnd(4, 3), rnd(4, 3), rnd(4, 3)],
         lambda a, p, n: F.triplet_margin_with_distance_loss(
             a, p, n, distance_function=lambda x, y: 1 - mp.nn.functional.cosine_similarity(x, y), swap=True),
         lambda a, p, n: np.maximum(1 + _cos_d(a, p) - np.minimum(_cos_d(a, n), _cos_d(p, n)), 0).mean(),
         lowp_ulps=4, lowp_spread=4),
    Case("linear_cross_entropy", "linear_cross_entropy", [rnd(4, 3), rnd(5, 3), const(np.array([0, 4, 2, 2]))],
         F.linear_cross_entropy, lambda x, w, t: _linear_ce_ref(x, w, t), lowp_ulps=8, lowp_spread=8),
]


def _linear_ce_ref(x, w, t):
    logits = x @ w.T
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    return -logp[np.arange(len(t)), t].mean()


def _cos_d(x, y):
    return 1 - (x * y).sum(-1) / np.maximum(np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1), 1e-8)
