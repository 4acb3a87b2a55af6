"""Loss functions (mp.nn.functional.*), each with its reference autocast policy.

Every loss is a composite: it is built from registered ops, so its gradient
(of any order) comes from theirs. Autocast applies the loss's own policy once
to its inputs and runs the inner ops un-autocast, as torch does for an op on
its lists. Signatures, reductions and edge cases follow torch.nn.functional,
including the deprecated ``size_average``/``reduce`` arguments.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import backend as _be
from ..backend import array_module, device_checks
from .. import dtypes as _dt
from .activation import _log_softmax_backward, log_softmax
from .elementwise import clamp, softplus, where
from .math_ops import pairwise_distance
from .opmath import opmath
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
@register("mse_loss", functional=True, promote=(0, 1, 5), composite=True)
def mse_loss(ctx, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error (input - target)**2; with weight, 'mean' is sum(w * e) / sum(w)."""
    reduction = _reduction("mse_loss", size_average, reduce, reduction)
    _check_same_size("mse_loss", input, target)
    d = input - target
    return _weighted("mse_loss", d * d, weight, input, reduction, mean_by_weight=True)


@register("l1_loss", functional=True, promote=(0, 1, 5), composite=True)
def l1_loss(ctx, input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error |input - target|; with weight, 'mean' is sum(w * e) / sum(w)."""
    reduction = _reduction("l1_loss", size_average, reduce, reduction)
    _check_same_size("l1_loss", input, target)
    return _weighted("l1_loss", (input - target).abs(), weight, input, reduction, mean_by_weight=True)


def _huber(d, delta):
    """0.5 d**2 where |d| < delta, else delta * (|d| - 0.5 delta).

    Written as 0.5 q**2 + delta (|d| - q) with q = min(|d|, delta), so no branch that is not taken
    carries an infinite factor into the gradient: at d = +-inf it is +-delta, as torch's, not nan.
    """
    a = d.abs()
    q = clamp(a, max=delta)
    return q * q * 0.5 + (a - q) * delta


@register("smooth_l1_loss", functional=True, promote=(0, 1), composite=True)
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


@register("huber_loss", functional=True, promote=(0, 1, 4), composite=True)
def huber_loss(ctx, input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d**2 if |d| < delta else delta * (|d| - 0.5 delta); with weight, 'mean' averages w * loss."""
    reduction = _reduction("huber_loss", None, None, reduction)
    _check_floating("huber_loss", input)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    _check_same_size("huber_loss", input, target)
    return _weighted("huber_loss", _huber(input - target, delta), weight, input, reduction, mean_by_weight=False)


# ---------------------------------------------------------------- classification losses
def _class_dim(name, input):
    if input.ndim == 0:
        raise RuntimeError(f"{name}: expected an input of shape (C,), (N, C) or (N, C, d1, ...), got a 0-d tensor")
    return 0 if input.ndim == 1 else 1


def _check_class_target(name, input, target, cdim):
    """Class-index targets: integer, the input's shape without the class dim (their range: _nll_loss_core)."""
    expected = tuple(input.shape[:cdim]) + tuple(input.shape[cdim + 1:])
    if tuple(target.shape) != expected:
        raise RuntimeError(f"{name}: expected a target of shape {expected} for an input of shape "
                           f"{tuple(input.shape)}, got {tuple(target.shape)}")
    if target.dtype.kind not in "iu":
        raise TypeError(f"{name}: class-index targets must be an integer tensor, got {target.dtype.name}")


def _check_class_weight(name, weight, input, cdim):
    if weight is None:
        return
    if tuple(weight.shape) != (input.shape[cdim],):
        raise RuntimeError(f"{name}: weight must hold one value per class, shape ({input.shape[cdim]},), "
                           f"got {tuple(weight.shape)}")
    if weight.dtype != input.dtype:
        raise TypeError(f"{name}: weight dtype {weight.dtype.name} differs from input dtype {input.dtype.name} "
                        "(cast it, or run under mp.autocast)")


def _sample_weights(xp, target, weight, counted, n_classes):
    """(safe, w) on arrays: the targets with ignored ones as class 0 (safe to index with), and each sample's
    weight (weight[t]; 0 where ignored), or None without a weight: each counted sample weighs 1, so the loss
    and its gradient skip multiplying by ones (the same values: x * 1 is x, and ignored samples are masked)."""
    safe = target * counted  # (where(counted, target, 0) in one multiplication)
    if weight is None:
        return safe, None
    if n_classes == 0:  # nothing to look up: every target is ignored (any other was out of bounds)
        return safe, xp.zeros(target.shape, weight.dtype)
    return safe, xp.where(counted, weight[safe], weight.dtype.type(0))


def _out_of_range(target, n):
    """Which integer targets are < 0 or >= n. Read as unsigned, a negative value is at least 2**(bits - 1), so
    one comparison finds both kinds whenever n is no larger than that."""
    unsigned = _UNSIGNED.get(target.dtype)
    if unsigned is not None and n <= 1 << (8 * target.dtype.itemsize - 1):
        return target.view(unsigned) >= n
    return (target < 0) | (target >= n)


_UNSIGNED = {np.dtype(s): np.dtype(u) for s, u in ((np.int32, np.uint32), (np.int64, np.uint64))}
_INF = float("inf")


def _quiet_divide(a, total):
    """a / total for an array or scalar ``a`` that is no sum (summing inf and -inf warns too), with 0 / 0 = NaN and
    x / 0 = inf quietly, as torch. NumPy warns only when total is 0 or not finite, and entering np.errstate costs
    more than the division, so it is entered only then (on a GPU total stays on the device: nothing warns)."""
    if isinstance(total, np.generic) and 0 < abs(total) < _INF:
        return a / total
    with np.errstate(invalid="ignore", divide="ignore"):
        return a / total


@register("_nll_loss_core", promote=(0, 2), saves=("input", "target", "weight", "output"))
def _nll_loss_core(ctx, input, target, weight, ignore_index, reduction):
    """nll_loss of class-index targets on checked arguments, as one op: -w[t] * input[t] per sample, reduced.

    One op, not a dozen small ones (the composite nll_loss reads the reduction and calls it): the checks
    (class dim, weight, target shape, dtype and range), the lookup, the weights and the reduction all run
    on arrays, in float32 for half inputs, rounded once. 'mean' divides by the summed weights of the counted
    targets: NaN when none counts.
    """
    _check_floating("nll_loss", input)
    cdim = _class_dim("nll_loss", input)
    _check_class_weight("nll_loss", weight, input, cdim)
    _check_class_target("nll_loss", input, target, cdim)
    xp = array_module(input)
    n_classes = input.shape[cdim]
    ctx.cdim, ctx.ignore_index, ctx.reduction, ctx.n_classes = cdim, ignore_index, reduction, n_classes
    if (weight is None and type(target) is np.ndarray and 0 < target.size <= _EXACT_COUNT  # (on the host)
            and not 0 <= ignore_index < n_classes and not _out_of_range(target, n_classes).any()):
        return _every_target_counted(input, target, cdim, reduction)
    counted = target != ignore_index
    bad = xp.asarray(_out_of_range(target, n_classes) & counted)  # (0-d: a NumPy bool)
    device_checks.check(bad, IndexError, f"nll_loss: a target is out of bounds for {n_classes} classes (and is "
                        f"not ignore_index={ignore_index})", culprit=lambda: f"target {int(target[bad][0])}")
    safe, w = _sample_weights(xp, target, weight, counted, n_classes)
    if n_classes == 0:
        picked = xp.zeros(target.shape, input.dtype)
    else:
        picked = input[_at_targets(xp, safe, cdim)]

    def loss_of(picked, w):
        loss = -picked if w is None else -picked * w
        loss = xp.where(counted, loss, picked.dtype.type(0))  # an ignored target adds nothing, not even NaN
        if reduction == "none":
            return loss
        if reduction == "sum":
            return xp.asarray(loss.sum())
        total = counted.astype(picked.dtype).sum() if w is None else w.sum()
        with np.errstate(invalid="ignore", divide="ignore"):  # every target ignored: 0 / 0 = NaN, as torch
            return xp.asarray(loss.sum() / total)
    return xp.asarray(opmath(loss_of, picked, w))


def _every_target_counted(input, target, cdim, reduction):
    """_nll_loss_core's loss on the host when no weight is given and every target counts (each is a class, and
    ignore_index is none): -input[t] per sample, reduced, as the general path computes it less its masks and
    lookups. 'mean' divides by the number of samples, what the general path's sum of ones comes to (exactly, up
    to _EXACT_COUNT samples)."""
    picked = input[_at_targets(np, target, cdim)]

    def loss_of(picked):
        loss = -picked
        if reduction == "none":
            return loss
        total = loss.sum()
        return np.asarray(total if reduction == "sum" else total / picked.dtype.type(picked.size))
    return np.asarray(opmath(loss_of, picked))


_EXACT_COUNT = 1 << 24  # float32 (the compute dtype of half inputs) counts whole numbers exactly up to here


@register("_nll_loss_backward", promote=(0, 2), saves=("grad", "target", "weight"))
def _nll_loss_backward(ctx, grad, target, weight, n_classes, cdim, ignore_index, reduction):
    """The gradient _nll_loss_core sends its input: -grad * w[t] (over the total weight for 'mean') at each
    counted target, 0 everywhere else (also where grad is NaN and the target is ignored, as torch)."""
    xp = array_module(grad)
    ctx.cdim, ctx.ignore_index, ctx.reduction, ctx.n_classes = cdim, ignore_index, reduction, n_classes
    counted = target != ignore_index
    out = xp.zeros(target.shape[:cdim] + (n_classes,) + target.shape[cdim:], grad.dtype)
    if weight is None and type(target) is np.ndarray and 0 < target.size <= _EXACT_COUNT and counted.all():
        # every sample weighs 1 and counts: the general path's coefficient less its masks (_every_target_counted)
        out[_at_targets(np, target, cdim)] = opmath(
            lambda g: -g / g.dtype.type(target.size) if reduction == "mean" else -g, grad)
        return out
    safe, w = _sample_weights(xp, target, weight, counted, n_classes)

    def coefficient(grad, w):
        if w is None:  # each counted sample weighs 1
            share = _quiet_divide(-grad, counted.astype(grad.dtype).sum()) if reduction == "mean" else -grad
        else:
            with np.errstate(invalid="ignore", divide="ignore"):  # (inf * 0 and 0 / 0 are NaN, quietly)
                share = -grad * w / w.sum() if reduction == "mean" else -grad * w
        return xp.where(counted, share, share.dtype.type(0))
    coef = opmath(coefficient, grad, w)
    if n_classes:  # (with none every target is ignored)
        out[_at_targets(xp, safe, cdim)] = coef  # one gradient per sample: each lands on its own element
    return out


def _at_targets(xp, safe, cdim):
    """The index of each sample's target class in an (N, C, d...) array: ``safe`` along the class dim, every
    other dim by position (what take_along_axis builds, without its overhead on small arrays)."""
    grids = _be.open_grid(xp, safe.shape)
    return grids[:cdim] + (safe,) + grids[cdim:]


def _options(ctx):
    return dict(ignore_index=ctx.ignore_index, reduction=ctx.reduction)


def _total_weight(target, weight, ignore_index):
    """The summed weight of the counted targets, with Tensor ops (so it differentiates in weight)."""
    counted = target != ignore_index
    return where(counted, weight[where(counted, target, 0)], 0.0).sum()


def _class_weight_grad(input, target, weight, g, loss, cdim, ignore_index, reduction):
    """d(g . loss)/d weight for _nll_loss_core's loss of input: each counted sample's -input[t] (less the mean
    loss, over the total weight, for 'mean'), times its upstream gradient, added up per class."""
    from ..creation import zeros
    grad = zeros(weight.shape, dtype=weight.dtype, device=weight.device)
    if weight.shape[0] == 0:
        return grad
    counted = target != ignore_index
    safe = where(counted, target, 0)
    per_sample = -input.gather(cdim, safe.unsqueeze(cdim)).squeeze(cdim)
    if reduction == "mean":
        per_sample = (per_sample - loss) * (g / _total_weight(target, weight, ignore_index))
    else:
        per_sample = per_sample * g
    return grad.scatter_add(0, safe.reshape(-1), where(counted, per_sample, 0.0).reshape(-1))


def _weight_tangent(input, target, weight, tw, loss, options):
    """How _nll_loss_core's loss of input moves with the weight along tw: linear in it, but for 'mean' (a ratio)."""
    if options["reduction"] != "mean":
        return _nll_loss_core(input, target, tw, **options)
    ignore_index = options["ignore_index"]
    summed = _nll_loss_core(input, target, tw, **dict(options, reduction="sum"))
    return (summed - loss * _total_weight(target, tw, ignore_index)) / _total_weight(target, weight, ignore_index)


@_nll_loss_core.grad
def _(ctx, g):
    input, target, weight = ctx.inputs[:3]
    gx = _nll_loss_backward(g, target, weight, ctx.n_classes, ctx.cdim, ctx.ignore_index, ctx.reduction)
    if weight is None or not weight.requires_grad:
        return gx, None, None
    return gx, None, _class_weight_grad(input, target, weight, g, ctx.output, cdim=ctx.cdim, **_options(ctx))


@_nll_loss_core.jvp
def _(ctx, tx, tt, tw, *_):  # (no tangents for the options, when given by position)
    input, target, weight = ctx.inputs[:3]
    tangent = _nll_loss_core(tx, target, weight, **_options(ctx))
    if weight is None:
        return tangent
    return tangent + _weight_tangent(input, target, weight, tw, ctx.output, _options(ctx))


@_nll_loss_backward.grad
def _(ctx, gg):
    # <gg, backward(grad)> is grad . _nll_loss_core(gg): the core again, in grad and (if it needs one) in weight
    grad, target, weight = ctx.inputs[:3]
    ggrad = _nll_loss_core(gg, target, weight, **_options(ctx))
    if weight is None or not weight.requires_grad:
        return ggrad, None, None
    return ggrad, None, _class_weight_grad(gg, target, weight, grad, ggrad, cdim=ctx.cdim, **_options(ctx))


@_nll_loss_backward.jvp
def _(ctx, tg, tt, tw, *_):
    grad, target, weight = ctx.inputs[:3]
    tangent = _nll_loss_backward(tg, target, weight, n_classes=ctx.n_classes, cdim=ctx.cdim, **_options(ctx))
    if weight is None:
        return tangent
    if ctx.reduction != "mean":  # linear in the weight
        return tangent + _nll_loss_backward(grad, target, tw, n_classes=ctx.n_classes, cdim=ctx.cdim, **_options(ctx))
    # -grad w[t] / total(w) moves with w[t] and with the total
    unnormalised = _nll_loss_backward(grad, target, tw, n_classes=ctx.n_classes, cdim=ctx.cdim,
                                      **dict(_options(ctx), reduction="sum"))
    moved = unnormalised - ctx.output * _total_weight(target, tw, ctx.ignore_index)
    return tangent + moved / _total_weight(target, weight, ctx.ignore_index)


@register("_cross_entropy_core", promote=(0, 2), saves=("target", "weight", "output"))
def _cross_entropy_core(ctx, input, target, weight, ignore_index, reduction):
    """cross_entropy of class-index targets on checked arguments, as one op: log_softmax over the class dim, then
    _nll_loss_core's loss of it. Returns (loss, log-probabilities).

    Each half is the forward of its op, run on arrays, so the values are bit for bit those of the two ops in
    turn; one dispatch and one graph node instead of two. The log-probabilities are the second output, saved
    for backward; label smoothing reads them too (their gradient joins backward's as ``g_logp``).
    """
    _check_floating("cross_entropy", input)
    logp = log_softmax.forward(ctx, input, _class_dim("cross_entropy", input))
    return _nll_loss_core.forward(ctx, logp, target, weight, ignore_index, reduction), logp


@_cross_entropy_core.grad
def _(ctx, g, g_logp):
    # the chain of the two ops' rules: _nll_loss_core's gradient (with whatever reached logp directly), then
    # log_softmax's
    target, weight = ctx.inputs[1:3]
    loss, logp = ctx.outputs
    total = None if g is None else _nll_loss_backward(g, target, weight, ctx.n_classes, ctx.cdim, ctx.ignore_index,
                                                      ctx.reduction)
    if g_logp is not None:
        total = g_logp if total is None else total + g_logp
    gw = None
    if g is not None and weight is not None and weight.requires_grad:
        gw = _class_weight_grad(logp, target, weight, g, loss, cdim=ctx.cdim, **_options(ctx))
    gx = _log_softmax_backward(total.to(logp.dtype), logp, ctx.dim) if ctx.needs_input_grad[0] else None
    return gx, None, gw


@_cross_entropy_core.jvp
def _(ctx, tx, tt, tw, *_):
    # log_softmax's tangent rule, then _nll_loss_core's on it
    target, weight = ctx.inputs[1:3]
    loss, logp = ctx.outputs
    tx = tx.to(logp.dtype)
    t_logp = tx - (logp.exp() * tx).sum(dim=ctx.dim, keepdim=True)
    t_loss = _nll_loss_core(t_logp, target, weight, **_options(ctx))
    if weight is not None:
        t_loss = t_loss + _weight_tangent(logp, target, weight, tw, loss, _options(ctx))
    return t_loss, t_logp


@register("nll_loss", functional=True, promote=(0, 2), composite=True)
def nll_loss(ctx, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class-index targets, given log-probabilities (C,), (N, C) or (N, C, d...).

    The loss of sample i is -weight[t_i] * input[i, t_i]; targets equal to
    ignore_index contribute nothing. 'mean' divides by the summed weights of the
    counted targets (NaN when every target is ignored, as torch). The arguments
    are checked, and the loss and its gradients computed, by the op _nll_loss_core.
    """
    reduction = _reduction("nll_loss", size_average, reduce, reduction)
    return _nll_loss_core(input, target, weight, ignore_index, reduction)


@register("cross_entropy", functional=True, promote=(0, 1, 2), composite=True,
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
    share = label_smoothing / n_classes if n_classes else 0.0  # each class's part of the smoothing
    w_b = None if weight is None else weight.reshape((n_classes,) + (1,) * (input.ndim - cdim - 1))
    if _dt.is_floating(target.dtype):  # class probabilities
        logp = log_softmax(input, cdim)
        if tuple(target.shape) != tuple(input.shape):
            raise RuntimeError(f"cross_entropy: probability targets must have the input's shape "
                               f"{tuple(input.shape)}, got {tuple(target.shape)}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + share
        prod = logp * target if w_b is None else logp * target * w_b
        per_sample = -prod.sum(dim=cdim)
        if reduction == "mean":
            return per_sample.sum() / (per_sample.numel() if n_classes else math.nan)  # (torch: 0 / 0 classes)
        return _reduce(per_sample, reduction)
    nll, logp = _cross_entropy_core(input, target, weight, ignore_index, reduction)
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
    return nll * (1 - label_smoothing) + smooth * share


def _check_probabilities(name, t, what):
    device_checks.check((t < 0).logical_or(t > 1)._array, ValueError,
                        f"{name}: every element of {what} must be between 0 and 1")


@register("binary_cross_entropy", functional=True, promote=(0, 1, 2), composite=True)
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


@register("binary_cross_entropy_with_logits", functional=True, promote=(0, 1, 2, 6),
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


@register("kl_div", functional=True, promote=(0, 1), composite=True)
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
    _check_floating("kl_div", input)
    _check_floating("kl_div", target, "target")
    if log_target:
        loss = target.exp() * (target - input)
    else:  # torch's xlogy(t, t) - t * x: 0 log 0 counts as 0; a negative or nan target gives nan
        log_t = where(target == 0, 1.0, target).log()
        loss = target * (log_t - input)
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction)


# ---------------------------------------------------------------- margin and embedding losses
def _classes(input, target_of):
    """A (C,) or (N, C) input as (N, C), and the check that C > 0 (the margin losses' layout); a 0-d input is
    one sample of one class, as in torch."""
    if input.ndim > 2 or (input.ndim and input.shape[-1] == 0):
        raise RuntimeError(f"{target_of}: expected a non-empty input of shape (C,) or (N, C), or a 0-d input, "
                           f"got {tuple(input.shape)}")
    return input.reshape(-1 if input.ndim == 2 else 1, input.shape[-1] if input.ndim else 1)


def _class_range(name, target, n_classes, lowest=0):
    """IndexError unless every class-index target is in [lowest, n_classes)."""
    if target.dtype.kind not in "iu":
        raise TypeError(f"{name}: class-index targets must be an integer tensor, got {target.dtype.name}")
    bad = (target < lowest).logical_or(target >= n_classes)
    device_checks.check(bad._array, IndexError, f"{name}: a target is out of range for {n_classes} classes (expected "
              f"{lowest} <= target < {n_classes})", culprit=lambda: f"target {int(target[bad][0])}")


def _class_ids(x):
    """0, 1, ..., C - 1 on x's device, shaped (1, C) to compare with (N, 1) targets."""
    from ..creation import arange
    return arange(x.shape[-1], device=x.device).unsqueeze(0)


@register("cosine_embedding_loss", functional=True, promote=(0, 1), composite=True)
def cosine_embedding_loss(ctx, input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1 (0 for other targets).

    Rows of (N, D) inputs with an (N,) target, or two (D,) vectors with a 0-d target.
    """
    reduction = _reduction("cosine_embedding_loss", size_average, reduce, reduction)
    for x in (input1, input2):
        _check_floating("cosine_embedding_loss", x)
    if target.ndim > 1 or input1.ndim != target.ndim + 1 or tuple(input1.shape) != tuple(input2.shape) \
            or tuple(target.shape) != tuple(input1.shape[:target.ndim]):
        raise RuntimeError(f"cosine_embedding_loss: expected inputs of one shape (N, D) with a target (N,), or "
                           f"(D,) with a 0-d target; got {tuple(input1.shape)}, {tuple(input2.shape)} and target "
                           f"{tuple(target.shape)}")
    dim, eps = target.ndim, 1e-12  # torch's guard against zero vectors
    prod = (input1 * input2).sum(dim)
    cos = prod / (((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)).sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, clamp(cos - margin, min=0), 0.0)
    return _reduce(loss, reduction)


@register("hinge_embedding_loss", functional=True, promote=(0,), composite=True)
def hinge_embedding_loss(ctx, input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (both terms for other targets)."""
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    _check_floating("hinge_embedding_loss", input)
    loss = where(target != 1, clamp(margin - input, min=0), 0.0) + where(target != -1, input, 0.0)
    return _reduce(loss, reduction)


@register("margin_ranking_loss", functional=True, promote=(0, 1, 2), composite=True)
def margin_ranking_loss(ctx, input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin): target 1 asks for input1 > input2, -1 for the reverse."""
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss: all input tensors should have the same number of dimensions, "
                           f"got shapes {tuple(input1.shape)}, {tuple(input2.shape)} and target "
                           f"{tuple(target.shape)}")
    return _reduce(clamp(-target * (input1 - input2) + margin, min=0), reduction)


@register("triplet_margin_loss", functional=True, promote=(0, 1, 2), composite=True)
def triplet_margin_loss(ctx, anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, d(a, p) - d(a, n) + margin) with d the p-norm pairwise_distance along the last dim.

    swap=True uses min(d(a, n), d(p, n)) as the negative distance (Balntas et al., 2016).
    """
    reduction = _reduction("triplet_margin_loss", size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"triplet_margin_loss: anchor, positive and negative must have the same number of "
                           f"dimensions, got shapes {tuple(anchor.shape)}, {tuple(positive.shape)} and "
                           f"{tuple(negative.shape)}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce(clamp(margin + d_pos - d_neg, min=0), reduction)


@register("soft_margin_loss", functional=True, promote=(0, 1), composite=True)
def soft_margin_loss(ctx, input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), the logistic loss for targets of 1 and -1.

    Computed stably: where torch's log1p(exp(z)) overflows to inf (z > 88 in
    float32) this is the finite value.
    """
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    _check_floating("soft_margin_loss", input)
    return _reduce(softplus(-input * target, 1.0, math.inf), reduction)


@register("multi_margin_loss", functional=True, promote=(0, 4), composite=True)
def multi_margin_loss(ctx, input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Multi-class hinge loss: sum over classes j != y of max(0, margin - x[y] + x[j])**p, divided by C.

    input (C,) or (N, C), target the class indices (N,); weight (C,) scales
    each sample's terms by the weight of its target class. An empty batch
    gives NaN for 'mean' and 0 for 'sum' (torch returns uninitialised memory).
    """
    reduction = _reduction("multi_margin_loss", size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 are supported, got {p!r}")
    _check_floating("multi_margin_loss", input)
    x = _classes(input, "multi_margin_loss")
    n, c = x.shape
    if target.numel() != n or target.ndim > 1:
        raise RuntimeError(f"multi_margin_loss: expected a target of {n} class indices, one per sample of the "
                           f"input of shape {tuple(input.shape)}, got shape {tuple(target.shape)}")
    _class_range("multi_margin_loss", target, c)
    if weight is not None and tuple(weight.shape) != (c,):
        raise RuntimeError(f"multi_margin_loss: weight must hold one value per class, shape ({c},), got "
                           f"{tuple(weight.shape)}")
    t = target.reshape(n, 1)
    z = clamp(margin - x.gather(1, t) + x, min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight[t]
    loss = where(t == _class_ids(x), 0.0, z).sum(1) / c
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), reduction)


@register("multilabel_margin_loss", functional=True, promote=(0,), composite=True)
def multilabel_margin_loss(ctx, input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-label hinge loss: for each target class y and non-target class k, max(0, 1 - (x[y] - x[k])), / C.

    target has the input's shape and lists each sample's target classes first,
    ended by -1 (what follows a -1 is ignored). A class listed twice counts
    twice, as torch's does. An empty batch gives NaN for 'mean'.
    """
    reduction = _reduction("multilabel_margin_loss", size_average, reduce, reduction)
    _check_floating("multilabel_margin_loss", input)
    x = _classes(input, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"multilabel_margin_loss: target must have the input's shape {tuple(input.shape)}, got "
                           f"{tuple(target.shape)}")
    c = x.shape[1]
    _class_range("multilabel_margin_loss", target, c, lowest=-1)
    t = target.reshape(x.shape)
    listed = (t < 0).cumsum(1) == 0                   # the entries before the first -1
    is_target = (t.unsqueeze(2) == _class_ids(x).unsqueeze(0)).logical_and(listed.unsqueeze(2)).any(1)
    x_y = x.gather(1, where(listed, t, 0))            # x[y_j] for each listed target j
    z = clamp(1 - x_y.unsqueeze(2) + x.unsqueeze(1), min=0)  # [n, j, k] = 1 - (x[y_j] - x[k])
    counted = listed.unsqueeze(2).logical_and(is_target.logical_not().unsqueeze(1))
    loss = where(counted, z, 0.0).sum((1, 2)) / c
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), reduction)


@register("multilabel_soft_margin_loss", functional=True, promote=(0, 1, 2), composite=True)
def multilabel_soft_margin_loss(ctx, input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Binary logistic loss per class for 0/1 targets, averaged over the classes (the last dim).

    -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) = t softplus(-x) + (1 - t) softplus(x),
    computed stably; weight scales each class. No autocast policy: not on the lists.
    """
    reduction = _reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    _check_floating("multilabel_soft_margin_loss", input)
    if input.ndim == 0:
        raise RuntimeError("multilabel_soft_margin_loss: expected an input with a class dim, got a 0-d tensor")
    loss = target * softplus(-input, 1.0, math.inf) + (1 - target) * softplus(input, 1.0, math.inf)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.sum(-1) / input.shape[-1], reduction)


@register("poisson_nll_loss", functional=True, promote=(0, 1), composite=True)
def poisson_nll_loss(ctx, input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """Negative log-likelihood of counts ``target`` under a Poisson of rate exp(input) (or input).

    log_input: exp(input) - target * input; otherwise input - target * log(input + eps).
    full adds Stirling's approximation of log(target!), where target > 1.
    """
    reduction = _reduction("poisson_nll_loss", size_average, reduce, reduction)
    _check_floating("poisson_nll_loss", input)
    if target.dtype == np.bool_:
        raise TypeError("poisson_nll_loss: expected a count target, got a bool tensor (convert it: t.to(dtype))")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:  # Stirling's term counts where the target is not <= 1 (a nan target stays nan, as torch)
        small = target <= 1
        t = where(small, 1.0, target)  # (so log(0) never runs)
        loss = loss + where(small, 0.0, t * t.log() - t + 0.5 * (2 * math.pi * t).log())
    return _reduce(loss, reduction)
