"""Loss functions (mp.nn.functional.*), each with its reference autocast policy.

Every loss is a composite: it is built from registered ops, so its gradient
(of any order) comes from theirs. Autocast applies the loss's own policy once
to its inputs and runs the inner ops un-autocast, as torch does for an op on
its lists. Signatures, reductions and edge cases follow torch.nn.functional,
including the deprecated ``size_average``/``reduce`` arguments.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import backend as _be
from .. import dtypes as _dt
from .elementwise import softplus, where
from .registry import register

_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce, reduction):
    """torch's mapping of the deprecated size_average/reduce flags onto reduction."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce are deprecated; use reduction='none' | 'mean' | 'sum'",
                  DeprecationWarning, stacklevel=4)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def _reduction(name, size_average, reduce, reduction, allowed=_REDUCTIONS):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in allowed:
        raise ValueError(f"{name}: {reduction!r} is not a valid value for reduction; expected one of "
                         + ", ".join(repr(r) for r in allowed))
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_floating(name, t, what="input"):
    if not _dt.is_floating(t.dtype):
        raise TypeError(f"{name}: expected a floating-point {what}, got {t.dtype.name}")


def _check_same_size(name, input, target, warn=True):
    if tuple(target.shape) != tuple(input.shape):
        if not warn:
            raise ValueError(f"{name}: target size {tuple(target.shape)} must be the same as input size "
                             f"{tuple(input.shape)}")
        warnings.warn(f"{name}: using a target size {tuple(target.shape)} that is different to the input size "
                      f"{tuple(input.shape)}; this will likely give wrong results due to broadcasting",
                      UserWarning, stacklevel=4)


def _weighted(name, loss, weight, input, reduction, mean_by_weight):
    """Apply torch's optional elementwise weight (same size as input) and reduce."""
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"{name}: weight of shape {tuple(weight.shape)} must have the input's shape "
                         f"{tuple(input.shape)}")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


# ---------------------------------------------------------------- regression losses
@register("mse_loss", functional=True, promote=(0, 1, 5), cuda="fp32", cpu="fp32", composite=True)
def mse_loss(ctx, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error (input - target)**2; with weight, 'mean' is sum(w * e) / sum(w)."""
    reduction = _reduction("mse_loss", size_average, reduce, reduction)
    _check_same_size("mse_loss", input, target)
    d = input - target
    return _weighted("mse_loss", d * d, weight, input, reduction, mean_by_weight=True)


@register("l1_loss", functional=True, promote=(0, 1, 5), cuda="fp32", cpu="fp32", composite=True)
def l1_loss(ctx, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error |input - target|; with weight, 'mean' is sum(w * e) / sum(w)."""
    reduction = _reduction("l1_loss", size_average, reduce, reduction)
    _check_same_size("l1_loss", input, target)
    return _weighted("l1_loss", (input - target).abs(), weight, input, reduction, mean_by_weight=True)


def _huber(d, delta):
    """0.5 d**2 where |d| < delta, else delta * (|d| - 0.5 delta)."""
    a = d.abs()
    return where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta)


@register("smooth_l1_loss", functional=True, promote=(0, 1), cuda="fp32", composite=True)
def smooth_l1_loss(ctx, input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Quadratic below beta, linear above: 0.5 d**2 / beta if |d| < beta else |d| - 0.5 beta (beta=0 is L1)."""
    reduction = _reduction("smooth_l1_loss", size_average, reduce, reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    _check_same_size("smooth_l1_loss", input, target)
    d = input - target
    if beta == 0:
        return _reduce(d.abs(), reduction)
    return _reduce(_huber(d, beta) / beta, reduction)


@register("huber_loss", functional=True, promote=(0, 1, 4), cpu="fp32", composite=True)
def huber_loss(ctx, input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d**2 if |d| < delta else delta * (|d| - 0.5 delta); with weight, 'mean' averages w * loss."""
    reduction = _reduction("huber_loss", None, None, reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    _check_same_size("huber_loss", input, target)
    return _weighted("huber_loss", _huber(input - target, delta), weight, input, reduction, mean_by_weight=False)


# ---------------------------------------------------------------- classification losses
def _class_dim(name, input):
    if input.ndim == 0:
        raise RuntimeError(f"{name}: expected an input of shape (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor")
    return 0 if input.ndim == 1 else 1


def _check_class_target(name, input, target, cdim, ignore_index):
    """Class-index targets: integer, the input's shape without the class dim, each in [0, C) or ignored."""
    expected = tuple(input.shape[:cdim]) + tuple(input.shape[cdim + 1:])
    if tuple(target.shape) != expected:
        raise RuntimeError(f"{name}: expected a target of shape {expected} for an input of shape "
                           f"{tuple(input.shape)}, got {tuple(target.shape)}")
    if target.dtype.kind not in "iu":
        raise TypeError(f"{name}: class-index targets must be an integer tensor, got {target.dtype.name}")
    n_classes = input.shape[cdim]
    valid = target != ignore_index
    bad = ((target < 0).logical_or(target >= n_classes)).logical_and(valid)
    _be.check(bad.data, IndexError, f"{name}: a target is out of bounds for {n_classes} classes (and is not "
              f"ignore_index={ignore_index})", culprit=lambda: f"target {int(target[bad][0])}")
    return valid


def _check_class_weight(name, weight, input, cdim):
    if weight is None:
        return
    if tuple(weight.shape) != (input.shape[cdim],):
        raise RuntimeError(f"{name}: weight must hold one value per class, shape ({input.shape[cdim]},), "
                           f"got {tuple(weight.shape)}")
    if weight.dtype != input.dtype:
        raise TypeError(f"{name}: weight dtype {weight.dtype.name} differs from input dtype {input.dtype.name} "
                        "(cast it, or run under mp.autocast)")


@register("nll_loss", functional=True, promote=(0, 2), cuda="fp32", cpu="fp32", composite=True)
def nll_loss(ctx, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class-index targets, given log-probabilities (C,), (N, C) or (N, C, d...).

    The loss of sample i is -weight[t_i] * input[i, t_i]; targets equal to
    ignore_index contribute nothing. 'mean' divides by the summed weights of the
    counted targets (NaN when every target is ignored, as torch).
    """
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    _check_floating("nll_loss", input)
    cdim = _class_dim("nll_loss", input)
    _check_class_weight("nll_loss", weight, input, cdim)
    valid = _check_class_target("nll_loss", input, target, cdim, ignore_index)
    safe = where(valid, target, 0)
    picked = input.gather(cdim, safe.unsqueeze(cdim)).squeeze(cdim)
    w = where(valid, weight[safe], 0.0) if weight is not None else valid.to(input.dtype)
    loss = -picked * w
    if reduction == "mean":
        with np.errstate(invalid="ignore"):  # every target ignored: 0 / 0 = NaN, as torch
            return loss.sum() / w.sum()
    return _reduce(loss, reduction)


@register("cross_entropy", functional=True, promote=(0, 1, 2), cuda="fp32", cpu="fp32", composite=True,
          aliases=("cross_entropy_loss",))
def cross_entropy(ctx, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Cross entropy between logits (C,), (N, C) or (N, C, d...) and class-index or class-probability targets.

    log_softmax over the class dim, then nll_loss for class indices (weight,
    ignore_index); label_smoothing mixes in a uniform distribution over the C
    classes with that weight. Probability targets have the input's shape.
    """
    reduction = _reduction("cross_entropy", size_average, reduce, reduction)
    _check_floating("cross_entropy", input)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    cdim = _class_dim("cross_entropy", input)
    n_classes = input.shape[cdim]
    _check_class_weight("cross_entropy", weight, input, cdim)
    logp = input.log_softmax(dim=cdim)
    w_b = None if weight is None else weight.reshape((n_classes,) + (1,) * (input.ndim - cdim - 1))
    if _dt.is_floating(target.dtype):  # class probabilities
        if tuple(target.shape) != tuple(input.shape):
            raise RuntimeError(f"cross_entropy: probability targets must have the input's shape "
                               f"{tuple(input.shape)}, got {tuple(target.shape)}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        prod = logp * target if w_b is None else logp * target * w_b
        per_sample = -prod.sum(dim=cdim)
        if reduction == "mean":
            return per_sample.sum() / (input.numel() // max(n_classes, 1))
        return _reduce(per_sample, reduction)
    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing == 0:
        return nll
    valid = target != ignore_index
    smooth = -(logp if w_b is None else logp * w_b).sum(dim=cdim)
    smooth = where(valid, smooth, 0.0)
    if reduction == "mean":
        if weight is None:
            smooth = smooth.sum() / valid.sum().to(smooth.dtype)
        else:
            smooth = smooth.sum() / where(valid, weight[where(valid, target, 0)], 0.0).sum()
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _check_probabilities(name, t, what):
    _be.check((t < 0).logical_or(t > 1).data, ValueError, f"{name}: every element of {what} must be between 0 and 1")


@register("binary_cross_entropy", functional=True, promote=(0, 1, 2), cuda="banned", cpu="fp32", composite=True)
def binary_cross_entropy(ctx, input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w * (t log x + (1 - t) log(1 - x)) for probabilities x; each log is clamped at -100, as torch.

    Banned under CUDA autocast (its gradient overflows float16 near 0 and 1):
    use binary_cross_entropy_with_logits on the logits instead.
    """
    reduction = _reduction("binary_cross_entropy", size_average, reduce, reduction)
    _check_floating("binary_cross_entropy", input)
    _check_same_size("binary_cross_entropy", input, target, warn=False)
    _check_probabilities("binary_cross_entropy", input, "input")
    with np.errstate(divide="ignore"):  # log(0) = -inf is expected here: it is clamped next
        log_x = input.log().maximum(-100.0)
        log_1mx = (1 - input).log().maximum(-100.0)
    loss = -(target * log_x + (1 - target) * log_1mx)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@register("binary_cross_entropy_with_logits", functional=True, promote=(0, 1, 2, 6), cuda="fp32", cpu="fp32",
          composite=True)
def binary_cross_entropy_with_logits(ctx, input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Binary cross entropy of sigmoid(input), computed stably from the logits.

    loss = (1 - t) x + (1 + (pos_weight - 1) t) * log(1 + exp(-x)); pos_weight
    (one value per class, broadcast along the last dim) weighs the positive term.
    """
    reduction = _reduction("binary_cross_entropy_with_logits", size_average, reduce, reduction)
    _check_floating("binary_cross_entropy_with_logits", input)
    _check_same_size("binary_cross_entropy_with_logits", input, target, warn=False)
    log1p_exp_neg = softplus(-input)  # log(1 + exp(-x)), exact gradient sigmoid(x) - 1
    if pos_weight is None:
        loss = (1 - target) * input + log1p_exp_neg
    else:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * log1p_exp_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@register("kl_div", functional=True, promote=(0, 1), cuda="fp32", cpu="fp32", composite=True)
def kl_div(ctx, input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL(target || exp(input)) pointwise: target * (log target - input), 0 where target is 0.

    input is log-probabilities; target probabilities (or log-probabilities with
    log_target=True). 'batchmean' divides the sum by the batch size, which is
    the mathematical KL divergence; 'mean' divides by the element count.
    """
    reduction = _reduction("kl_div", size_average, reduce, reduction, allowed=_REDUCTIONS + ("batchmean",))
    if reduction == "mean":
        warnings.warn("kl_div: reduction='mean' divides by the number of elements, not the batch size; "
                      "use reduction='batchmean' for the KL divergence", UserWarning, stacklevel=3)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        log_t = where(positive, target, 1.0).log()
        loss = where(positive, target * (log_t - input), 0.0)
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction)
