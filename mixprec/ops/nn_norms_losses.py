"""instance_norm and local_response_norm; gaussian_nll_loss, triplet_margin_with_distance_loss and
linear_cross_entropy.

All are composites of Tensor ops (so both modes of autograd come from those); the norms and the first two
losses compute in float32 for half inputs and round once. None is on an autocast list (linear_cross_entropy's
matrix product and cross entropy keep their own policies). The losses reduce as losses.py's do.
"""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from ..creation import zeros
from .elementwise import where
from .losses import _reduce, _reduction, cross_entropy
from .math_ops import pairwise_distance
from .nn_layers import scale_shift
from .opmath import compute_dtype
from .registry import register
from .shape import cat


def _floating_tensor(x, name, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor {what}, got {type(x).__name__}")
    if not _dt.is_floating(x.dtype):
        raise TypeError(f"{name}: expected a floating-point {what}, got {x.dtype.name}")


# ---------------------------------------------------------------- instance_norm
@register("instance_norm", functional=True, composite=True)
def instance_norm(ctx, input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalise each (sample, channel) of an (N, C, *) input over its spatial dims, then scale and shift per
    channel. With running stats and use_input_stats, they move towards the batch's (averaged over the samples;
    the variance unbiased) by momentum; use_input_stats=False normalises by the running stats instead."""
    _floating_tensor(input, "instance_norm")
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input of shape (N, C, *) with at least 3 dims, got shape "
                         f"{tuple(input.shape)}")
    n, c = input.shape[:2]
    for what, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None:
            _floating_tensor(t, "instance_norm", what)
            if tuple(t.shape) != (c,):
                raise ValueError(f"instance_norm: {what} has shape {tuple(t.shape)}, expected ({c},) for an input "
                                 f"with {c} channels")
    bshape = (1, c) + (1,) * (input.ndim - 2)
    x = input.to(compute_dtype(input.dtype))
    if use_input_stats:
        spatial = input.numel() // max(n * c, 1)
        if spatial == 1:
            raise ValueError(f"instance_norm: expected more than 1 spatial element when training, got input of "
                             f"shape {tuple(input.shape)}")
        axes = tuple(range(2, input.ndim))
        mean = x.mean(dim=axes, keepdim=True)
        var = x.var(dim=axes, keepdim=True, correction=0)
        if running_mean is not None and running_var is not None and input.numel():
            with no_grad():
                m = float(momentum)
                unbiased = var.detach() * (spatial / (spatial - 1))
                running_mean._assign("instance_norm", running_mean * (1 - m)
                                     + mean.detach().reshape(n, c).mean(0).to(running_mean.dtype) * m)
                running_var._assign("instance_norm", running_var * (1 - m)
                                    + unbiased.reshape(n, c).mean(0).to(running_var.dtype) * m)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and running_var")
        mean, var = running_mean.reshape(bshape), running_var.reshape(bshape)
    y = (x - mean) * (var + eps).rsqrt()
    return scale_shift(y, weight, bias, bshape, input.dtype)


# ---------------------------------------------------------------- local_response_norm
@register("local_response_norm", functional=True, composite=True)
def local_response_norm(ctx, input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over a window of ``size`` channels around it)^beta, on (N, C, *).

    The window runs from size // 2 channels before to (size - 1) // 2 after, zeros beyond the edges, and the
    mean divides by size (the edges too), as torch."""
    _floating_tensor(input, "local_response_norm")
    if input.ndim < 3:
        raise ValueError(f"local_response_norm: expected an input of 3 or more dims (N, C, *), got shape "
                         f"{tuple(input.shape)}")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"local_response_norm: size must be a positive int, got {size!r}")
    if input.numel() == 0:
        return input
    x = input.to(compute_dtype(input.dtype))
    sq = x * x
    c = input.shape[1]
    before, after = size // 2, (size - 1) // 2

    def edge(width):
        return zeros(input.shape[0], width, *input.shape[2:], dtype=x.dtype, device=x.device)
    padded = cat([t for t in (edge(before) if before else None, sq, edge(after) if after else None)
                  if t is not None], dim=1)
    window = padded.narrow(1, 0, c)
    for i in range(1, size):
        window = window + padded.narrow(1, i, c)
    out = x / (window * (alpha / size) + k) ** beta
    return out if out.dtype == input.dtype else out.to(input.dtype)


# ---------------------------------------------------------------- gaussian_nll_loss
@register("gaussian_nll_loss", functional=True, composite=True)
def gaussian_nll_loss(ctx, input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(var) + (input - target)^2 / var) (+ 0.5 log(2 pi) with full), var clamped to at least eps.

    var has input's shape, or one dim of size 1 (or the last dim missing): one variance shared along it. The
    clamp is not differentiated (the gradient reaches var as if unclamped), as torch's."""
    _floating_tensor(input, "gaussian_nll_loss")
    _floating_tensor(target, "gaussian_nll_loss", "target")
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError("gaussian_nll_loss: var has negative entries")
        var = zeros(*input.shape, dtype=input.dtype, device=input.device) + var
    _floating_tensor(var, "gaussian_nll_loss", "var")
    if bool((var < 0).any()):
        raise ValueError("gaussian_nll_loss: var has negative entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (var.ndim == input.ndim
                  and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError(f"gaussian_nll_loss: var of shape {tuple(var.shape)} is of incorrect size for an input "
                             f"of shape {tuple(input.shape)} (expected the same shape, one dim of size 1, or the "
                             "last dim missing)")
    reduction = _reduction("gaussian_nll_loss", None, None, reduction)
    out = _dt.promote(_dt.promote(input.dtype, target.dtype), var.dtype)  # (the three promote, as in torch)
    work = compute_dtype(out)
    x, t, v = input.to(work), target.to(work), var.to(work)
    v = v + where(v < eps, eps - v, 0.0).detach()  # clamped value, gradient of the unclamped one (inf stays inf)
    loss = ((v.log() + (x - t) ** 2 / v)) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    loss = _reduce(loss, reduction)
    return loss if loss.dtype == out else loss.to(out)


# ---------------------------------------------------------------- triplet_margin_with_distance_loss
@register("triplet_margin_with_distance_loss", functional=True, composite=True)
def triplet_margin_with_distance_loss(ctx, anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """max(margin + d(anchor, positive) - d(anchor, negative), 0) for any distance function d (default
    pairwise_distance); swap uses min(d(anchor, negative), d(positive, negative)) as the negative distance."""
    reduction = _reduction("triplet_margin_with_distance_loss", None, None, reduction)
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}")
    dims = [t.ndim if isinstance(t, Tensor) else None for t in (anchor, positive, negative)]
    if None in dims or len(set(dims)) != 1:
        raise RuntimeError(f"triplet_margin_with_distance_loss: anchor, positive and negative must be tensors with "
                           f"the same number of dims, got {dims}")
    d = pairwise_distance if distance_function is None else distance_function
    positive_distance, negative_distance = d(anchor, positive), d(anchor, negative)
    if swap:
        negative_distance = negative_distance.minimum(d(positive, negative))
    return _reduce((positive_distance - negative_distance + margin).clamp(min=0), reduction)


# ---------------------------------------------------------------- linear_cross_entropy
@register("linear_cross_entropy", functional=True, composite=True)
def linear_cross_entropy(ctx, input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...): input (in,) or (N, in), weight
    (C, in) or (C, d_1, ..., d_K, in) for a K-dimensional loss. ``options`` (torch's chunking strategy, a memory
    saving with the same result) is accepted and ignored: mixprec computes the unchunked form."""
    for what, t in (("input", input), ("linear_weight", linear_weight)):
        _floating_tensor(t, "linear_cross_entropy", what)
    if input.ndim not in (1, 2) or linear_weight.ndim < 2 or input.shape[-1] != linear_weight.shape[-1]:
        raise RuntimeError(f"linear_cross_entropy: expected input (in,) or (N, in) and linear_weight (C, ..., in) "
                           f"with the same in, got {tuple(input.shape)} and {tuple(linear_weight.shape)}")
    classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if out_features and input.ndim == 1:
        raise RuntimeError("linear_cross_entropy: a K-dimensional loss (linear_weight of more than 2 dims) needs a "
                           "batched (N, in) input")
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise RuntimeError(f"linear_cross_entropy: expected linear_bias of shape {(classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    logits = (input @ linear_weight.reshape(-1, input.shape[-1]).mT).reshape(*input.shape[:-1], classes,
                                                                            *out_features)
    if linear_bias is not None:
        logits = logits + linear_bias
    probabilities = tuple(target.shape) == tuple(logits.shape)
    if probabilities and ignore_index is not None:
        raise RuntimeError("linear_cross_entropy: ignore_index cannot be given when target holds probabilities")
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=-100 if ignore_index is None else ignore_index, label_smoothing=label_smoothing)
