"""Cases for mixprec/ops/ctc.py, against a brute-force CTC that sums over every frame-level path."""
from __future__ import annotations

import itertools

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, const, rnd


def _collapse(path, blank):
    """Merge repeats, then drop blanks: the label sequence a frame-level path stands for."""
    merged = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
    return tuple(k for k in merged if k != blank)


def ctc_brute(lp, target, blank=0):
    """(-log p(target), d(-log p)/d lp) for one sample's (T, C) log-probabilities, by enumerating C**T paths."""
    steps, classes = lp.shape
    total, grad = 0.0, np.zeros_like(lp)
    for path in itertools.product(range(classes), repeat=steps):
        if _collapse(path, blank) == tuple(target):
            p = np.exp(lp[np.arange(steps), path].sum())
            total += p
            grad[np.arange(steps), path] += p
    if total == 0:
        return np.inf, np.full_like(lp, np.nan)
    if not np.isfinite(total):  # a log-probability of +inf (or nan) on a path: undefined, nan as torch
        return np.nan, np.full_like(lp, np.nan)
    return -np.log(total), -grad / total


def ctc_ref(lp, targets, input_lengths, target_lengths, reduction="mean", zero_infinity=False, blank=0):
    """torch's ctc_loss on (T, N, C) log_probs and padded targets, from ctc_brute."""
    losses = []
    for n in range(lp.shape[1]):
        loss, _ = ctc_brute(lp[:input_lengths[n], n], targets[n, :target_lengths[n]], blank)
        losses.append(0.0 if zero_infinity and np.isinf(loss) else loss)
    losses = np.array(losses)
    if reduction == "mean":
        return (losses / np.maximum(target_lengths, 1)).mean()
    return losses.sum() if reduction == "sum" else losses


def ctc_grad_ref(lp, targets, input_lengths, target_lengths):
    """d sum(ctc losses) / d log_probs (T, N, C): 0 past each sample's frames."""
    grad = np.zeros_like(lp)
    for n in range(lp.shape[1]):
        grad[:input_lengths[n], n] = ctc_brute(lp[:input_lengths[n], n], targets[n, :target_lengths[n]])[1]
    return grad


def _ctc_grad(lp, targets, input_lengths, target_lengths):
    """The gradient ctc_loss's backward gives (it runs the op _ctc_loss_backward)."""
    lp = lp.detach().requires_grad_()
    return mp.autograd.grad(F.ctc_loss(lp, targets, input_lengths, target_lengths, reduction="sum"), lp)[0]


TARGETS = np.array([[1, 2, 2], [2, 0, 0], [1, 1, 0]])  # a repeat (needs a blank between), a single label, ...
CASES = [
    Case("ctc_loss-mean", "ctc_loss", [rnd(5, 3, 3), const(TARGETS), const(np.array([5, 4, 5])),
                                       const(np.array([3, 1, 2]))],
         F.ctc_loss, ctc_ref, lowp_ulps=4, lowp_spread=4),
    Case("ctc_loss-none-concatenated-blank2", "ctc_loss",
         [rnd(4, 2, 3), const(np.array([1, 0, 1, 1])), const(np.array([4, 3])), const(np.array([2, 2]))],
         lambda x, t, il, tl: F.ctc_loss(x, t, il, tl, blank=2, reduction="none"),
         lambda x, t, il, tl: ctc_ref(x, np.array([[1, 0], [1, 1]]), il, tl, "none", blank=2),
         lowp_ulps=4, lowp_spread=4),
    Case("ctc_loss-sum-empty-target-and-impossible", "ctc_loss",
         [rnd(4, 3, 3), const(TARGETS), const(np.array([4, 2, 2])), const(np.array([0, 1, 2]))],
         lambda x, t, il, tl: F.ctc_loss(x, t, il, tl, reduction="sum", zero_infinity=True),
         lambda x, t, il, tl: ctc_ref(x, t, il, tl, "sum", zero_infinity=True), lowp_ulps=4, lowp_spread=4),
    Case("ctc_loss-unbatched", "ctc_loss", [rnd(5, 4), const(np.array([3, 1])), const(5), const(2)],
         lambda x, t, il, tl: F.ctc_loss(x, t, il, tl, reduction="none"),
         lambda x, t, il, tl: ctc_ref(x[:, None], t[None], [il], [tl], "none")[0], lowp_ulps=4, lowp_spread=4),
    Case("ctc_loss-grad", "_ctc_loss_backward",
         [rnd(5, 3, 3), const(TARGETS), const(np.array([5, 4, 3])), const(np.array([3, 1, 2]))],
         _ctc_grad, ctc_grad_ref, grad=False, lowp_ulps=8, lowp_spread=8),
]
