"""Ops that move values into a new arrangement: one_hot, pixel_shuffle, pixel_unshuffle, channel_shuffle, and
unfold with its adjoint fold (registered by aten's names, im2col and col2im: Tensor.unfold is another op;
mp.nn.functional gives them torch's names).

The shuffles are reshapes and a permutation; unfold reads every (kernel offset, output position) pixel of the
zero-padded image with one gather, fold adds the columns back with one scatter_add at the same flat indices.
All are composites of linear ops, so both modes of autograd come from those; none is on an autocast list.
"""
from __future__ import annotations

import numpy as np

from ..backend import array_module, device_checks, devices
from ..tensor import Tensor
from .padding import pad
from .registry import register


def _tensor(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a Tensor input, got {type(x).__name__}")


def _positive(value, name, what):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name}: {what} must be a positive int, got {value!r}")
    return value


# ---------------------------------------------------------------- one_hot
@register("one_hot", functional=True, promote=(), differentiable=False)
def one_hot(ctx, input, num_classes=-1):
    """An int64 tensor of shape input.shape + (num_classes,): 1 at each index, 0 elsewhere.

    num_classes=-1 takes the largest index plus one (reading the data, as torch does)."""
    if input.dtype != np.int64:
        raise TypeError(f"one_hot: expected an int64 index tensor, got {input.dtype.name}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < -1:
        raise ValueError(f"one_hot: num_classes must be a non-negative int or -1, got {num_classes!r}")
    xp = array_module(input)
    if num_classes == -1:
        if input.size == 0:
            raise RuntimeError("one_hot: cannot infer the number of classes from an empty tensor; pass num_classes")
        num_classes = int(input.max()) + 1
    device_checks.check(input < 0, RuntimeError, "one_hot: class values must be non-negative",
                        culprit=lambda: f"the smallest {int(input.min())}")
    device_checks.check(input >= num_classes, RuntimeError,
                        f"one_hot: class values must be smaller than num_classes ({num_classes})",
                        culprit=lambda: f"the largest {int(input.max())}")
    return (input[..., None] == xp.arange(num_classes, dtype=np.int64)).astype(np.int64)


# ---------------------------------------------------------------- shuffles
@register("pixel_shuffle", functional=True, composite=True)
def pixel_shuffle(ctx, input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r): each group of r^2 channels becomes an r x r block of pixels."""
    _tensor(input, "pixel_shuffle")
    r = _positive(upscale_factor, "pixel_shuffle", "upscale_factor")
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle: expected an input of shape (*, C * {r * r}, H, W) (channels divisible "
                           f"by upscale_factor squared), got shape {tuple(input.shape)}")
    *batch, c, h, w = input.shape
    nb = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(nb), nb, nb + 3, nb + 1, nb + 4, nb + 2)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


@register("pixel_unshuffle", functional=True, composite=True)
def pixel_unshuffle(ctx, input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W): pixel_shuffle's inverse."""
    _tensor(input, "pixel_unshuffle")
    r = _positive(downscale_factor, "pixel_unshuffle", "downscale_factor")
    if input.ndim < 3 or input.shape[-2] % r or input.shape[-1] % r:
        raise RuntimeError(f"pixel_unshuffle: expected an input of shape (*, C, H, W) with H and W divisible by "
                           f"downscale_factor {r}, got shape {tuple(input.shape)}")
    *batch, c, h, w = input.shape
    nb = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(nb), nb, nb + 2, nb + 4, nb + 1, nb + 3)
    return x.reshape(*batch, c * r * r, h // r, w // r)


@register("channel_shuffle", functional=True, composite=True, aliases=("native_channel_shuffle",))
def channel_shuffle(ctx, input, groups):
    """(N, C, *) with C = g k: channel i k + j moves to j g + i (the groups interleaved)."""
    _tensor(input, "channel_shuffle")
    g = _positive(groups, "channel_shuffle", "groups")
    if input.ndim < 3 or input.shape[1] % g:
        raise RuntimeError(f"channel_shuffle: expected an input of shape (N, C, *) with at least 3 dims and C "
                           f"divisible by groups {g}, got shape {tuple(input.shape)}")
    n, c, *rest = input.shape
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(tuple(input.shape))


# ---------------------------------------------------------------- unfold, fold
def _pair(value, name, what, least):
    pair = tuple(value) if isinstance(value, (tuple, list)) else (value, value)
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < least for v in pair):
        raise ValueError(f"{name}: {what} must be an int or a pair of ints >= {least}, got {value!r}")
    return pair


def _geometry(name, size, kernel_size, dilation, padding, stride):
    """(kernel, dilation, padding, stride pairs, padded size, blocks per dim) for a spatial size (H, W)."""
    k, d = _pair(kernel_size, name, "kernel_size", 1), _pair(dilation, name, "dilation", 1)
    p, s = _pair(padding, name, "padding", 0), _pair(stride, name, "stride", 1)
    padded = tuple(n + 2 * q for n, q in zip(size, p))
    blocks = tuple((n - dd * (kk - 1) - 1) // ss + 1 for n, kk, dd, ss in zip(padded, k, d, s))
    if any(b <= 0 for b in blocks):
        raise RuntimeError(f"{name}: the kernel {k} with dilation {d} does not fit the padded size {padded} "
                           f"(spatial size {tuple(size)}, padding {p})")
    return k, d, p, s, padded, blocks


def _flat_index(k, d, s, padded, blocks, device):
    """The flat (row * padded width + column) index of each (kernel offset, block) pixel: shape (K * L,)."""
    rows = (np.arange(k[0]) * d[0]).reshape(-1, 1, 1, 1) + (np.arange(blocks[0]) * s[0]).reshape(1, 1, -1, 1)
    cols = (np.arange(k[1]) * d[1]).reshape(1, -1, 1, 1) + (np.arange(blocks[1]) * s[1]).reshape(1, 1, 1, -1)
    flat = (rows * padded[1] + cols).reshape(-1)  # ordered (kernel row, kernel column, block row, block column)
    return devices.to_device(flat.astype(np.int64), device)


def _blocks_input(name, input, batched):
    """unfold's and fold's input rules, torch's: no integer dtype (floating, complex and bool are taken), and no
    empty dim except the batch dim of a batched (``batched``-D) input."""
    if input.dtype.kind in "iu":
        raise NotImplementedError(f"{name}: not implemented for integer tensors (as in torch), got "
                                  f"{input.dtype.name}; it takes floating-point, complex or bool tensors")
    if 0 in input.shape[input.ndim == batched:]:
        raise RuntimeError(f"{name}: expected an input whose dims are non-zero (only the batch dim of a "
                           f"{batched}-D input may be 0), got shape {tuple(input.shape)}")


@register("im2col", functional=True, composite=True)
def im2col(ctx, input, kernel_size, dilation=1, padding=0, stride=1):
    """F.unfold: sliding blocks of an (N, C, H, W) or (C, H, W) input as columns: (N, C * kh * kw, L), L the blocks."""
    _tensor(input, "unfold")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"unfold: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                           f"{tuple(input.shape)}")
    _blocks_input("unfold", input, batched=4)
    if input.ndim == 3:
        return im2col(input.unsqueeze(0), kernel_size, dilation, padding, stride).squeeze(0)
    n, c, h, w = input.shape
    k, d, p, s, padded, blocks = _geometry("unfold", (h, w), kernel_size, dilation, padding, stride)
    x = pad(input, (p[1], p[1], p[0], p[0])) if any(p) else input
    flat = _flat_index(k, d, s, padded, blocks, input.device)
    index = Tensor._wrap(array_module(flat).broadcast_to(flat, (n, c, flat.size)))
    cols = x.reshape(n, c, padded[0] * padded[1]).gather(2, index)
    return cols.reshape(n, c * k[0] * k[1], blocks[0] * blocks[1])


@register("col2im", functional=True, composite=True)
def col2im(ctx, input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """F.fold, unfold's adjoint: columns (N, C * kh * kw, L) or (C * kh * kw, L) summed back into (N, C, H, W)."""
    _tensor(input, "fold")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"fold: expected a 2-D (C * kh * kw, L) or 3-D (N, C * kh * kw, L) input, got shape "
                           f"{tuple(input.shape)}")
    _blocks_input("fold", input, batched=3)
    if input.ndim == 2:
        return col2im(input.unsqueeze(0), output_size, kernel_size, dilation, padding, stride).squeeze(0)
    size = _pair(output_size, "fold", "output_size", 1)
    k, d, p, s, padded, blocks = _geometry("fold", size, kernel_size, dilation, padding, stride)
    n, ck, length = input.shape
    if ck % (k[0] * k[1]) or length != blocks[0] * blocks[1]:
        raise RuntimeError(f"fold: expected an input of shape (N, C * {k[0] * k[1]}, {blocks[0] * blocks[1]}) for "
                           f"output_size {size}, kernel_size {k}, dilation {d}, padding {p}, stride {s}; got shape "
                           f"{tuple(input.shape)}")
    c = ck // (k[0] * k[1])
    flat = _flat_index(k, d, s, padded, blocks, input.device)
    xp = array_module(flat)
    index = Tensor._wrap(xp.broadcast_to(flat, (n, c, flat.size)))
    base = Tensor._wrap(xp.zeros((n, c, padded[0] * padded[1]), dtype=input.dtype))
    out = base.scatter_add(2, index, input.reshape(n, c, flat.size)).reshape(n, c, *padded)
    return out[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]

