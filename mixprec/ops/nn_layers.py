"""Layer ops the nn modules need: dropout, batch_norm, embedding, max_pool2d, avg_pool2d.

None of them is on an autocast list (the reference tables name only the 3-D
pools), so they run in the dtype of their input. Half-precision inputs are
computed in float32 and rounded once, as GPU kernels do.

Pools gather their windows with one strided slice per kernel offset, so the
work is vectorised over the batch, channels and output positions and a 2x2
pool costs four slices, on NumPy and CuPy alike.
"""
from __future__ import annotations

import numpy as np

from .. import backend as _be
from .. import dtypes as _dt
from ..backend import array_module
from .opmath import compute_dtype
from .registry import register


def _wrap(array):
    from ..tensor import Tensor
    return Tensor._wrap(array)


def _work(a):
    """The array to compute on: float32 for float16/bfloat16, else as is (rounded once at the end)."""
    return a.astype(compute_dtype(a.dtype), copy=False)


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
    from ..tensor import _rng_state
    gen = _rng_state["np"]
    if input.device.type == "cuda":
        uniform = _be.uniform_on_device(input.shape, input.device, int(gen.integers(2 ** 63)))
    else:
        uniform = gen.random(input.shape, dtype=np.float32)
    keep = uniform >= np.float32(p)
    work = compute_dtype(input.dtype)  # float32 for halves (scaled in float32, rounded once), float64 stays
    mask = keep.astype(work) * work.type(1.0 / (1.0 - p) if p < 1 else 0.0)
    mask = _wrap(_be.to_device(mask, input.device))
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
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of shape (N, C, ...) with at least 2 dims, "
                         f"got shape {tuple(input.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"batch_norm: expected a floating-point input, got {input.dtype.name}")
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
            from ..autograd.grad_mode import no_grad
            with no_grad():
                m = float(momentum)
                running_mean._assign("batch_norm", running_mean * (1 - m) + mean.detach().reshape(c) * m)
                running_var._assign("batch_norm",
                                    running_var * (1 - m) + var.detach().reshape(c) * (m * n / (n - 1)))
        y = (x - mean) * (var + eps).rsqrt()
    else:
        y = (x - running_mean.reshape(bshape)) * (running_var.reshape(bshape) + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(bshape)
    if bias is not None:
        y = y + bias.reshape(bshape)
    return y if y.dtype == input.dtype else y.to(input.dtype)


# ---------------------------------------------------------------- embedding
@register("embedding", functional=True, promote=(1,), linear=True)
def embedding(ctx, input, weight, padding_idx=None):
    """Rows of ``weight`` picked by the integer tensor ``input``: shape input.shape + (dim,).

    The row at padding_idx gets no gradient (it stays what it is, zeros by default).
    """
    if input.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be an integer tensor, got {input.dtype.name}")
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {tuple(weight.shape)}")
    num = weight.shape[0]
    _be.check((input < 0) | (input >= num), IndexError, f"embedding: index out of range for a table of {num} rows",
              culprit=lambda: f"indices spanning [{int(input.min())}, {int(input.max())}]")
    ctx.padding_idx = _padding_idx(padding_idx, num)
    ctx.num = num
    return weight[input]


def _padding_idx(padding_idx, num):
    if padding_idx is None:
        return None
    if not -num <= padding_idx < num:
        raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for {num} embeddings")
    return padding_idx % num


@embedding.grad
def _(ctx, g):
    from .shape import index_put
    idx = ctx.inputs[0].data.reshape(-1)
    dim = g.shape[-1]
    xp = array_module(g.data)
    gw = index_put(_wrap(xp.zeros((ctx.num, dim), dtype=g.dtype)), (idx,), g.reshape(idx.size, dim),
                   accumulate=True)
    if ctx.padding_idx is not None:
        gw = index_put(gw, (ctx.padding_idx,), 0.0)
    return None, gw


# ---------------------------------------------------------------- pooling
def _pair(value, what, name, minimum):
    v = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(v) != 2 or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v) \
            or min(v) < minimum:
        raise ValueError(f"{name}: {what} must be an int >= {minimum} or a pair of them, got {value!r}")
    return int(v[0]), int(v[1])


def _out_size(name, size, k, s, p, d, ceil_mode):
    """torch's pooling output size, ceil_mode windows that start inside the input or left padding only."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    if out < 1:
        raise ValueError(f"{name}: the input is too small: size {size} with padding {p} gives no window of "
                         f"size {d * (k - 1) + 1}")
    return out


def _geometry(name, shape, kernel_size, stride, padding, dilation, ceil_mode):
    if len(shape) not in (3, 4):
        raise ValueError(f"{name}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {tuple(shape)}")
    k = _pair(kernel_size, "kernel_size", name, 1)
    s = _pair(stride if stride is not None and stride != () else kernel_size, "stride", name, 1)
    p = _pair(padding, "padding", name, 0)
    d = _pair(dilation, "dilation", name, 1)
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{name}: padding {p} must be at most half the kernel size {k}")
    h, w = shape[-2:]
    out = (_out_size(name, h, k[0], s[0], p[0], d[0], ceil_mode),
           _out_size(name, w, k[1], s[1], p[1], d[1], ceil_mode))
    return k, s, p, d, out


def _padded(x, p, k, s, d, out, fill):
    """x (N, C, H, W) padded with ``fill`` so every window of every output position fits."""
    xp = array_module(x)
    n, c, h, w = x.shape
    hp = max((out[0] - 1) * s[0] + d[0] * (k[0] - 1) + 1, h + p[0])
    wp = max((out[1] - 1) * s[1] + d[1] * (k[1] - 1) + 1, w + p[1])
    buf = xp.full((n, c, hp, wp), fill, dtype=x.dtype)
    buf[:, :, p[0]:p[0] + h, p[1]:p[1] + w] = x
    return buf


def _window(a, i, j, s, d, out):
    """The (N, C, OH, OW) view of padded ``a`` at kernel offset (i, j)."""
    return a[:, :, i * d[0]:i * d[0] + s[0] * (out[0] - 1) + 1:s[0],
             j * d[1]:j * d[1] + s[1] * (out[1] - 1) + 1:s[1]]


def _batched(x):
    return (x[None], True) if x.ndim == 3 else (x, False)


@register("max_pool2d", functional=True)
def max_pool2d(ctx, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Maximum over each kernel_size window (stride defaults to kernel_size); NaN propagates."""
    k, s, p, d, out = _geometry("max_pool2d", input.shape, kernel_size, stride, padding, dilation, ceil_mode)
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"max_pool2d: expected a floating-point input, got {input.dtype.name}")
    x, unbatched = _batched(input)
    xp = array_module(x)
    n, c, h, w = x.shape
    padded = _padded(_work(x), p, k, s, d, out, -np.inf)
    stacked = xp.stack([_window(padded, i, j, s, d, out) for i in range(k[0]) for j in range(k[1])])
    best = stacked.argmax(axis=0)
    result = xp.take_along_axis(stacked, best[None], axis=0)[0]
    ki, kj = best // k[1], best % k[1]
    rows = xp.arange(out[0]).reshape(-1, 1) * s[0] - p[0] + ki * d[0]
    cols = xp.arange(out[1]).reshape(1, -1) * s[1] - p[1] + kj * d[1]
    ctx.index = (rows * w + cols).reshape(n, c, -1)  # flat position in each (H, W) plane
    ctx.in_shape = input.shape
    result = result.astype(input.dtype, copy=False)
    return result[0] if unbatched else result


@max_pool2d.grad
def _(ctx, g):
    # Each output's gradient goes to the position that won its window; scatter_add
    # sums where overlapping windows chose the same element, and its own backward
    # (a gather) makes this differentiable again.
    shape = ctx.in_shape
    n, c = (1, shape[0]) if len(shape) == 3 else shape[:2]
    xp = array_module(g.data)
    zeros = _wrap(xp.zeros((n, c, shape[-2] * shape[-1]), dtype=g.dtype))
    gx = zeros.scatter_add(2, _wrap(ctx.index), g.reshape(n, c, -1))
    return gx.reshape(shape),


@max_pool2d.jvp
def _(ctx, t, *_):
    # each output moves with the element that won its window
    shape = ctx.in_shape
    n, c = (1, shape[0]) if len(shape) == 3 else shape[:2]
    return t.reshape(n, c, -1).gather(2, _wrap(ctx.index)).reshape(ctx.output.shape)


def _avg_divisor(size, out, k, s, p, count_include_pad):
    """Per-output-position divisor along one dim: the window's length inside the (padded) input."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    length = end - start
    if not count_include_pad:
        length = np.minimum(end, size) - np.maximum(start, 0)
    return length


@register("avg_pool2d", functional=True, linear=True)
def avg_pool2d(ctx, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over each kernel_size window (stride defaults to kernel_size).

    Padding counts as zeros in the mean unless count_include_pad=False;
    divisor_override replaces the window size as the divisor.
    """
    k, s, p, d, out = _geometry("avg_pool2d", input.shape, kernel_size, stride, padding, 1, ceil_mode)
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"avg_pool2d: expected a floating-point input, got {input.dtype.name}")
    if divisor_override is not None and (not isinstance(divisor_override, (int, np.integer)) or divisor_override <= 0):
        raise ValueError(f"avg_pool2d: divisor_override must be a positive int, got {divisor_override!r}")
    x, unbatched = _batched(input)
    xp = array_module(x)
    geo = (k, s, p, out, x.shape[-2:])
    div = _divisor(xp, geo, count_include_pad, divisor_override, _work(x).dtype)
    padded = _padded(_work(x), p, k, s, d, out, 0)
    acc = sum(_window(padded, i, j, s, d, out) for i in range(k[0]) for j in range(k[1]))
    result = (acc / div).astype(input.dtype, copy=False)
    ctx.params = dict(kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                      count_include_pad=count_include_pad, divisor_override=divisor_override)
    ctx.geo = geo
    ctx.div = div
    return result[0] if unbatched else result


def _divisor(xp, geo, count_include_pad, divisor_override, dtype):
    k, s, p, out, (h, w) = geo
    if divisor_override is not None:
        return dtype.type(divisor_override)
    rows = _avg_divisor(h, out[0], k[0], s[0], p[0], count_include_pad)
    cols = _avg_divisor(w, out[1], k[1], s[1], p[1], count_include_pad)
    return xp.asarray(np.outer(rows, cols).astype(dtype))


@avg_pool2d.grad
def _(ctx, g):
    return _avg_pool2d_backward(g, ctx.geo, ctx.div, ctx.params),


@register("_avg_pool2d_backward", linear=True,
          doc="The adjoint of avg_pool2d: spread each output's gradient over its window.")
def _avg_pool2d_backward(ctx, grad, geo, div, params):
    k, s, p, out, (h, w) = geo
    g, unbatched = _batched(grad)
    xp = array_module(g)
    gw = _work(g) / div
    ctx.params = params
    d = (1, 1)
    n, c = g.shape[:2]
    buf = xp.zeros((n, c, max((out[0] - 1) * s[0] + k[0], h + p[0]), max((out[1] - 1) * s[1] + k[1], w + p[1])),
                   dtype=gw.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            _window(buf, i, j, s, d, out)[...] += gw
    result = buf[:, :, p[0]:p[0] + h, p[1]:p[1] + w].astype(grad.dtype)
    return result[0] if unbatched else result


@_avg_pool2d_backward.grad
def _(ctx, gg):
    # avg_pool2d is linear, so the adjoint of its adjoint is avg_pool2d itself.
    return avg_pool2d(gg, **ctx.params), None, None, None
