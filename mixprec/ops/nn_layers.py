"""Layer ops the nn modules need: dropout, batch_norm, embedding, prelu, bilinear (pools: pooling.py).

dropout, batch_norm and embedding are on no autocast list, so they run in the
dtype of their input; prelu is lower precision on both devices, bilinear promotes
on CUDA. Half-precision inputs are computed in float32 and rounded once, as GPU
kernels do.
"""
from __future__ import annotations

import numpy as np

from ..backend import array_module, curand, device_checks, devices
from .. import dtypes as _dt
from ..random import _rng_state
from ..tensor import Tensor
from ..creation import zeros_like
from .elementwise import where
from .opmath import compute_dtype, opmath
from .registry import register
from ..autograd.grad_mode import no_grad
from .shape import index_put


# ---------------------------------------------------------------- dropout
@register("dropout", functional=True, composite=True)
def dropout(ctx, input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only).

    The mask comes from mixprec's generator, so mp.manual_seed makes it
    reproducible. On a GPU the mask is drawn there (cuRAND, seeded by one draw
    from that generator) so the host never waits: GPU masks differ from CPU
    masks, as in torch. inplace=True writes into ``input`` and so only works
    on tensors outside autograd.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be a probability between 0 and 1, got {p!r}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"dropout: expected a floating-point input, got {input.dtype.name}")
    if not training or p == 0:
        return input
    gen = _rng_state["np"]
    if input.device.type == "cuda":
        uniform = curand.uniform_on_device(input.shape, input.device, int(gen.integers(2 ** 63)))
    else:
        uniform = gen.random(input.shape, dtype=np.float32)
    keep = uniform >= np.float32(p)
    work = compute_dtype(input.dtype)  # float32 for halves (scaled in float32, rounded once), float64 stays
    mask = keep.astype(work) * work.type(1.0 / (1.0 - p) if p < 1 else 0.0)
    mask = Tensor._wrap(devices.to_device(mask, input.device))
    out = input * mask  # float32 mask: half inputs are scaled in float32 and rounded once
    if out.dtype != input.dtype:
        out = out.to(input.dtype)
    return input.copy_(out) if inplace else out


# ---------------------------------------------------------------- batch_norm
@register("batch_norm", functional=True, composite=True)
def batch_norm(ctx, input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    """Normalise each channel (dim 1) to zero mean and unit variance, then scale and shift.

    training=True uses the batch's statistics and, when running stats are given,
    updates them in place: running = (1 - momentum) * running + momentum * batch
    (the variance unbiased). training=False uses the running statistics.
    Half-precision inputs are normalised in float32; the output has the input's dtype.
    """
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"batch_norm: expected a floating-point input, got {input.dtype.name}")
    if input.ndim == 1 and input.numel() == 0 and weight is None and bias is None:
        return input.clone()  # torch: an empty 1-D input has nothing to normalise, whatever the stats hold
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of shape (N, C, ...) with at least 2 dims (or an "
                         f"empty 1-D input without weight and bias), got shape {tuple(input.shape)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ValueError(f"batch_norm: {name} has shape {tuple(t.shape)}, expected ({c},) for an input "
                             f"with {c} channels (shape {tuple(input.shape)})")
        if t is not None and not _dt.is_floating(t.dtype):
            raise TypeError(f"batch_norm: expected a floating-point {name}, got {t.dtype.name}")
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm: training=False needs running_mean and running_var")
    axes = (0,) + tuple(range(2, input.ndim))
    bshape = (1, c) + (1,) * (input.ndim - 2)
    x = input.to(compute_dtype(input.dtype))  # half inputs are normalised in float32
    if training and input.numel() == 0:  # an empty batch: an empty output, running stats untouched (torch)
        y = x
    elif training:
        n = input.numel() // c
        if n == 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input "
                             f"of shape {tuple(input.shape)}")
        mean = x.mean(dim=axes, keepdim=True)
        var = x.var(dim=axes, keepdim=True, correction=0)
        if running_mean is not None and running_var is not None:
            with no_grad():
                m = float(momentum)
                running_mean._assign("batch_norm", running_mean * (1 - m) + mean.detach().reshape(c) * m)
                running_var._assign("batch_norm",
                                    running_var * (1 - m) + var.detach().reshape(c) * (m * n / (n - 1)))
        y = (x - mean) * (var + eps).rsqrt()
    else:
        y = (x - running_mean.reshape(bshape)) * (running_var.reshape(bshape) + eps).rsqrt()
    return scale_shift(y, weight, bias, bshape, input.dtype)


def scale_shift(y, weight, bias, bshape, dtype):
    """A normalisation's per-channel affine step (weight and bias reshaped to ``bshape``), then back to the input's
    ``dtype`` (the statistics ran in float32 for half inputs)."""
    if weight is not None:
        y = y * weight.reshape(bshape)
    if bias is not None:
        y = y + bias.reshape(bshape)
    return y if y.dtype == dtype else y.to(dtype)


# ---------------------------------------------------------------- embedding
@register("embedding", functional=True, composite=True)
def embedding(ctx, input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` picked by the integer tensor ``input``: shape input.shape + (dim,).

    The row at padding_idx gets no gradient (it stays what it is, zeros by default). max_norm first scales,
    in place and outside autograd, each referenced row whose norm_type-norm exceeds it down to max_norm (as
    torch does to ``weight``); scale_grad_by_freq divides each row's gradient by how often its index occurs
    in ``input``. sparse=True is accepted and gives a dense gradient (mixprec has no sparse tensors).
    """
    if max_norm is not None:
        renorm_rows_(weight, input, max_norm, norm_type, "embedding")
    return _embedding(input, weight, padding_idx, bool(scale_grad_by_freq))


def renorm_rows_(weight, indices, max_norm, norm_type, name):
    """Scale, in place and outside autograd, each row of ``weight`` that ``indices`` reference and whose
    norm_type-norm exceeds max_norm to norm max_norm (torch's embedding_renorm_: by max_norm / (norm + 1e-7))."""
    if not isinstance(weight, Tensor) or not _dt.is_floating(weight.dtype) or weight.ndim != 2:
        raise TypeError(f"{name}: max_norm needs a 2-D floating-point weight tensor")
    if not isinstance(indices, Tensor) or indices.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be an integer tensor")
    rows = np.unique(devices.to_host(indices._array).reshape(-1))
    if rows.size == 0:
        return
    if rows[0] < -weight.shape[0] or rows[-1] >= weight.shape[0]:
        raise IndexError(f"{name}: index out of range for a table of {weight.shape[0]} rows; got indices spanning "
                         f"[{rows[0]}, {rows[-1]}]")
    with no_grad():
        where = Tensor._wrap(devices.to_device(rows, weight.device))
        picked = weight[where]
        norms = picked.norm(p=float(norm_type), dim=1, keepdim=True)
        weight[where] = picked * (max_norm / (norms + 1e-7)).clamp(max=1.0)


@register("_embedding", promote=(1,), linear=True, saves=("input",))
def _embedding(ctx, input, weight, padding_idx=None, scale_grad_by_freq=False):
    """embedding's rows, on arrays (see embedding)."""
    if input.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be an integer tensor, got {input.dtype.name}")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {tuple(weight.shape)}")
    num = weight.shape[0]
    device_checks.check((input < 0) | (input >= num), IndexError,
                        f"embedding: index out of range for a table of {num} rows",
                        culprit=lambda: f"indices spanning [{int(input.min())}, {int(input.max())}]")
    ctx.padding_idx = _padding_idx(padding_idx, num)
    ctx.num, ctx.scale_grad_by_freq = num, scale_grad_by_freq
    return weight[input]


def _padding_idx(padding_idx, num):
    if padding_idx is None:
        return None
    if not -num <= padding_idx < num:
        raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for {num} embeddings")
    return padding_idx % num


@_embedding.grad
def _(ctx, g):
    idx = ctx.inputs[0]._array.reshape(-1)
    dim = g.shape[-1]
    xp = array_module(g._array)
    rows = g.reshape(idx.size, dim)
    if ctx.scale_grad_by_freq:  # each row's gradient over how often its index occurs
        counts = xp.bincount(idx, minlength=ctx.num)[idx].astype(g._array.dtype)
        rows = rows / Tensor._wrap(counts.reshape(-1, 1))
    gw = index_put(Tensor._wrap(xp.zeros((ctx.num, dim), dtype=g.dtype)), (idx,), rows, accumulate=True)
    if ctx.padding_idx is not None:
        gw = index_put(gw, (ctx.padding_idx,), 0.0)
    return None, gw, None, None


# ---------------------------------------------------------------- prelu
@register("prelu", functional=True, promote=(0, 1), same_dtype=True)
def prelu(ctx, input, weight):
    """x where x > 0, else weight * x; weight holds one slope, or one per channel (dim 1). Lower precision under
    autocast."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: expected weight to be a scalar or 1-D tensor, got shape {tuple(weight.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"prelu: expected a floating-point input, got {input.dtype.name}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.size not in (1, channels):
        raise RuntimeError(f"prelu: weight has {weight.size} slopes, but the input of shape {tuple(input.shape)} has "
                           f"{channels} channels (dim 1; expected 1 or {channels} slopes)")
    xp = array_module(input)
    return opmath(lambda x, w: xp.where(x > 0, x, w * x), input, _channel_shaped(weight, input.ndim))


def _channel_shaped(w, ndim):
    """A per-channel weight reshaped to broadcast along dim 1 of an ndim input (one slope: a scalar shape)."""
    if w.shape in ((), (1,)):
        return w.reshape(())
    return w.reshape((1, -1) + (1,) * (ndim - 2))


@prelu.grad
def _(ctx, g):
    x, w = ctx.inputs
    positive = x > 0
    wb = _channel_shaped(w, x.ndim)
    gx = where(positive, g, g * wb)
    per_element = where(positive, zeros_like(g), g * x)
    if w.numel() == 1:
        return gx, per_element.sum().reshape(w.shape)
    return gx, per_element.sum(dim=tuple(d for d in range(x.ndim) if d != 1))


@prelu.jvp
def _(ctx, tx, tw):
    x, w = ctx.inputs
    return where(x > 0, tx, tx * _channel_shaped(w, x.ndim) + x * _channel_shaped(tw, x.ndim))


# ---------------------------------------------------------------- bilinear
@register("bilinear", functional=True, promote=(0, 1, 2, 3), same_dtype=True)
def bilinear(ctx, input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o].

    Half inputs compute in float32 and round once. Promote under CUDA autocast.
    """
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear: expected a 3-D weight (out, in1, in2), got shape {tuple(weight.shape)}")
    o, i, j = weight.shape
    for what, x, n in (("input1", input1, i), ("input2", input2, j)):
        if x.ndim == 0 or x.shape[-1] != n:
            raise RuntimeError(f"bilinear: {what} of shape {tuple(x.shape)} does not fit weight of shape "
                               f"{tuple(weight.shape)} (expected {what}[..., {n}])")
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear: input1 and input2 must have the same batch dims, got shapes "
                           f"{tuple(input1.shape)} and {tuple(input2.shape)}")
    if bias is not None and tuple(bias.shape) != (o,):
        raise RuntimeError(f"bilinear: bias of shape {tuple(bias.shape)} does not fit {o} outputs")
    lead = input1.shape[:-1]
    n = int(np.prod(lead))  # (B spelled out, not -1: an empty batch or weight leaves -1 undetermined)

    def compute(a, b, w, *bias_):
        t = a.reshape(n, i) @ w.transpose(1, 0, 2).reshape(i, o * j)          # (B, O * J)
        y = (t.reshape(n, o, j) * b.reshape(n, 1, j)).sum(-1)                   # (B, O)
        return (y + bias_[0] if bias_ else y).reshape(lead + (o,))
    return opmath(compute, input1, input2, weight, *(() if bias is None else (bias,)))


@bilinear.grad
def _(ctx, g):
    a, b, w = ctx.inputs[:3]
    o, i, j = w.shape
    n = int(np.prod(a.shape[:-1]))
    a2, b2, g2 = a.reshape(n, i), b.reshape(n, j), g.reshape(n, o)
    gw_in = (g2 @ w.reshape(o, i * j)).reshape(n, i, j)                         # sum_o g[., o] W[o]
    ga = (gw_in * b2.unsqueeze(1)).sum(-1).reshape(a.shape)
    gb = (gw_in * a2.unsqueeze(2)).sum(1).reshape(b.shape)
    gw = (g2.mT @ (a2.unsqueeze(2) * b2.unsqueeze(1)).reshape(n, i * j)).reshape(o, i, j)
    return ga, gb, gw, (g2.sum(0) if len(ctx.inputs) > 3 and ctx.inputs[3] is not None else None)


@bilinear.jvp
def _(ctx, ta, tb, tw, tbias=None):
    a, b, w = ctx.inputs[:3]  # linear in each of a, b and w: the product rule, term by term
    out = bilinear(ta, b, w) + bilinear(a, tb, w) + bilinear(a, b, tw)
    return out if tbias is None else out + tbias
