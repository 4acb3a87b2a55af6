"""layer_norm and group_norm: float32 under CUDA autocast, untouched by CPU autocast.

Forward computes the statistics in float32 for half inputs and rounds once, as
GPU kernels do. Backward is written with Tensor ops (in float32 for half
inputs), so it can be differentiated again.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from .registry import register


def _normalize_array(x, axes, eps):
    """(x - mean) / sqrt(var + eps) over axes, on an array (biased variance, as torch)."""
    xp = array_module(x)
    mu = x.mean(axis=axes, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=axes, keepdims=True)
    return xc / xp.sqrt(var + x.dtype.type(eps))


def _normalize_grad(x, gxhat, axes, eps):
    """Gradient w.r.t. x of xhat = normalize(x) given d loss / d xhat, and xhat itself (Tensors)."""
    mu = x.mean(dim=axes, keepdim=True)
    xc = x - mu
    rstd = ((xc * xc).mean(dim=axes, keepdim=True) + eps).rsqrt()
    xhat = xc * rstd
    gx = rstd * (gxhat - gxhat.mean(dim=axes, keepdim=True) - xhat * (gxhat * xhat).mean(dim=axes, keepdim=True))
    return gx, xhat


def _data_args(ctx):
    """input, weight, bias of a norm op (weight and bias None when they were not passed)."""
    args = tuple(ctx.inputs) + (None, None)
    return args[0], args[2], args[3]


def _work(*tensors):
    """Tensors in the dtype backward computes in: float32 for halves, else their own."""
    return [None if t is None else (t.float() if t.dtype in _dt.LOW_PRECISION else t) for t in tensors]


def _check_affine(name, t, what, shape):
    if t is not None and tuple(t.shape) != tuple(shape):
        raise RuntimeError(f"{name}: {what} of shape {tuple(t.shape)} does not match the expected shape {tuple(shape)}")


@register("layer_norm", functional=True, promote=(0, 2, 3), cuda="fp32")
def layer_norm(ctx, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing dims ``normalized_shape``, then scale by weight and shift by bias."""
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"layer_norm: normalized_shape {shape} does not match the trailing dims of an input "
                           f"of shape {tuple(input.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"layer_norm: expected a floating input, got {input.dtype.name}")
    _check_affine("layer_norm", weight, "weight", shape)
    _check_affine("layer_norm", bias, "bias", shape)
    ctx.axes = tuple(range(input.ndim - k, input.ndim))
    ctx.eps = eps
    x = input.astype(np.float32) if input.dtype in _dt.LOW_PRECISION else input
    y = _normalize_array(x, ctx.axes, eps)
    if weight is not None:
        y = y * weight.astype(y.dtype, copy=False)
    if bias is not None:
        y = y + bias.astype(y.dtype, copy=False)
    return y.astype(input.dtype, copy=False)


@layer_norm.grad
def _(ctx, g):
    x, w, b = _data_args(ctx)
    x, g, w = _work(x, g, w)
    gx, xhat = _normalize_grad(x, g * w if w is not None else g, ctx.axes, ctx.eps)
    batch = tuple(range(x.ndim - len(ctx.axes)))
    gw = (g * xhat).sum(dim=batch) if w is not None else None
    gb = g.sum(dim=batch) if b is not None else None
    return gx, None, gw, gb


@register("group_norm", functional=True, promote=(0, 2, 3), cuda="fp32")
def group_norm(ctx, input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise (N, C, *) over each group of C/num_groups channels (and all spatial positions),
    then scale and shift per channel."""
    if input.ndim < 2:
        raise RuntimeError(f"group_norm: expected an input of shape (N, C, *), got {tuple(input.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"group_norm: expected a floating input, got {input.dtype.name}")
    n, c = input.shape[:2]
    if not isinstance(num_groups, (int, np.integer)) or num_groups < 1 or c % num_groups:
        raise RuntimeError(f"group_norm: the {c} channels cannot be split into num_groups={num_groups!r} groups")
    _check_affine("group_norm", weight, "weight", (c,))
    _check_affine("group_norm", bias, "bias", (c,))
    ctx.groups, ctx.eps = int(num_groups), eps
    x = input.astype(np.float32) if input.dtype in _dt.LOW_PRECISION else input
    y = _normalize_array(x.reshape(n, num_groups, -1), (2,), eps).reshape(input.shape)
    per_channel = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.astype(y.dtype, copy=False).reshape(per_channel)
    if bias is not None:
        y = y + bias.astype(y.dtype, copy=False).reshape(per_channel)
    return y.astype(input.dtype, copy=False)


@group_norm.grad
def _(ctx, g):
    x, w, b = _data_args(ctx)
    x, g, w = _work(x, g, w)
    shape = x.shape
    n, c = shape[:2]
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    gxhat = g * w.reshape(per_channel) if w is not None else g
    gx, xhat = _normalize_grad(x.reshape(n, ctx.groups, -1), gxhat.reshape(n, ctx.groups, -1), (2,), ctx.eps)
    not_channel = (0,) + tuple(range(2, x.ndim))
    gw = (g * xhat.reshape(shape)).sum(dim=not_channel) if w is not None else None
    gb = g.sum(dim=not_channel) if b is not None else None
    return gx.reshape(shape), None, gw, gb
