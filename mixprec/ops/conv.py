"""Convolutions as im2col + one matrix product (lower precision under autocast on both devices).

``_im2col`` copies every receptive field of the (padded) input into a column, so
the convolution becomes ``weight @ columns``: one GEMM, which is what autocast
wants to run in float16/bfloat16. ``_col2im`` is its adjoint (it scatters columns
back, adding overlaps); each op's gradient is the other, so convolutions can be
differentiated any number of times. conv2d/conv1d are composites of these and
matmul, so their gradients come from those ops.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from .registry import register

LP = "lower_precision_fp"


def _out_size(size, k, stride, pad_lo, pad_hi, dilation):
    return (size + pad_lo + pad_hi - dilation * (k - 1) - 1) // stride + 1


@register("_im2col", promote=(), linear=True)
def _im2col(ctx, input, kernel_size, stride, padding, dilation):
    """(N, C, H, W) -> (N, C*kh*kw, Ho*Wo); padding is (top, bottom, left, right)."""
    (kh, kw), (sh, sw), (pt, pb, pl, pr), (dh, dw) = kernel_size, stride, padding, dilation
    n, c, h, w = input.shape
    ho, wo = _out_size(h, kh, sh, pt, pb, dh), _out_size(w, kw, sw, pl, pr, dw)
    ctx.geometry = (input.shape, kernel_size, stride, padding, dilation)
    xp = array_module(input)
    x = xp.pad(input, ((0, 0), (0, 0), (pt, pb), (pl, pr))) if any(padding) else input
    cols = xp.empty((n, c, kh, kw, ho, wo), dtype=input.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = x[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
    return cols.reshape(n, c * kh * kw, ho * wo)


@_im2col.grad
def _(ctx, g):
    shape, *geometry = ctx.geometry
    return _col2im(g, shape, *geometry),


@register("_col2im", promote=(), linear=True)
def _col2im(ctx, cols, shape, kernel_size, stride, padding, dilation):
    """The adjoint of _im2col: add each column back onto the receptive field it came from."""
    (kh, kw), (sh, sw), (pt, pb, pl, pr), (dh, dw) = kernel_size, stride, padding, dilation
    n, c, h, w = shape
    ho, wo = _out_size(h, kh, sh, pt, pb, dh), _out_size(w, kw, sw, pl, pr, dw)
    ctx.geometry = (kernel_size, stride, padding, dilation)
    xp = array_module(cols)
    acc = np.float32 if cols.dtype in _dt.LOW_PRECISION else cols.dtype  # overlaps add up in float32
    blocks = cols.reshape(n, c, kh, kw, ho, wo)
    out = xp.zeros((n, c, h + pt + pb, w + pl + pr), dtype=acc)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw] += blocks[:, :, i, j]
    return xp.ascontiguousarray(out[:, :, pt:pt + h, pl:pl + w]).astype(cols.dtype, copy=False)


@_col2im.grad
def _(ctx, g):
    return _im2col(g, *ctx.geometry), None


def _pair(name, value, what, n):
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError(f"{name}: {what} must be an int or a tuple of {n} ints, got {value}")
    return value


def _padding(name, padding, kernel, dilation, stride, n):
    """Per-dim (low, high) padding; 'same' puts the odd extra pixel at the end, as torch does."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            out = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                out.append((total // 2, total - total // 2))
            return tuple(out)
        raise ValueError(f"{name}: padding must be 'valid', 'same', an int or a tuple, got {padding!r}")
    pads = _pair(name, padding, "padding", n)
    if any(p < 0 for p in pads):
        raise ValueError(f"{name}: padding must be non-negative, got {pads}")
    return tuple((p, p) for p in pads)


def _conv(name, nd, input, weight, bias, stride, padding, dilation, groups):
    """An nd-dim (1 or 2) convolution on Tensors, through the 2-D im2col path."""
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, "
                           f"got shape {tuple(input.shape)}")
    if weight.ndim != nd + 2:
        raise RuntimeError(f"{name}: expected a {nd + 2}-D weight (out_channels, in_channels/groups, kernel...), "
                           f"got shape {tuple(weight.shape)}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype != input.dtype:
            raise TypeError(f"{name}: input type ({input.dtype.name}) and {what} type ({t.dtype.name}) should be "
                            "the same (cast them, or run under mp.autocast)")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: expected a floating input, got {input.dtype.name}")
    unbatched = input.ndim == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    out_c, in_per_group, *kernel = weight.shape
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    if x.shape[1] != in_per_group * groups:
        raise RuntimeError(f"{name}: input has {x.shape[1]} channels, but weight of shape {tuple(weight.shape)} "
                           f"with groups={groups} expects {in_per_group * groups}")
    if out_c % groups:
        raise RuntimeError(f"{name}: out_channels ({out_c}) must be divisible by groups ({groups})")
    if bias is not None and tuple(bias.shape) != (out_c,):
        raise RuntimeError(f"{name}: bias of shape {tuple(bias.shape)} does not fit {out_c} output channels")
    stride = _pair(name, stride, "stride", nd)
    dilation = _pair(name, dilation, "dilation", nd)
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation):
        raise ValueError(f"{name}: stride and dilation must be positive, got {stride} and {dilation}")
    pads = _padding(name, padding, kernel, dilation, stride, nd)
    if nd == 1:  # a 1-D convolution is a 2-D one over a height-1 image
        x = x.unsqueeze(2)
        kernel, stride, dilation, pads = [1] + kernel, (1,) + stride, (1,) + dilation, ((0, 0),) + pads
        weight = weight.unsqueeze(2)
    spatial = x.shape[2:]
    out_sizes = [_out_size(s, k, st, lo, hi, d) for s, k, st, (lo, hi), d in zip(spatial, kernel, stride, pads, dilation)]
    if any(o < 1 for o in out_sizes):
        raise RuntimeError(f"{name}: the (padded) input of spatial size {tuple(input.shape[-nd:])} is smaller than "
                           f"the dilated kernel {tuple(kernel[-nd:])}: the output would be empty")
    n = x.shape[0]
    cols = _im2col(x, tuple(kernel), stride, pads[0] + pads[1], dilation)   # (N, C*kh*kw, L)
    cols = cols.reshape(n, groups, -1, cols.shape[-1])                      # (N, G, C/G*kh*kw, L)
    w = weight.reshape(groups, out_c // groups, -1)                         # (G, O/G, C/G*kh*kw)
    out = (w @ cols).reshape(n, out_c, *out_sizes)
    if bias is not None:
        out = out + bias.reshape(1, out_c, 1, 1)
    if nd == 1:
        out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


@register("conv2d", functional=True, promote=(0, 1, 2), cuda=LP, cpu=LP, composite=True)
def conv2d(ctx, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation, as torch) of (N, C, H, W) with (O, C/groups, kh, kw).

    padding: an int, a pair, 'valid' or 'same' (stride 1). Lower precision under autocast.
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


@register("conv1d", functional=True, promote=(0, 1, 2), cuda=LP, cpu=LP, composite=True)
def conv1d(ctx, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of (N, C, L) with (O, C/groups, k). Lower precision under autocast."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)
