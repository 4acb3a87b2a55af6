"""layer_norm and group_norm (float32 under CUDA autocast, untouched by CPU autocast) and rms_norm (on no list).

Forward computes the statistics in float32 for half inputs and rounds once, as
GPU kernels do. Backward and the tangent rule are written with Tensor ops (in
float32 for half inputs), so they can be differentiated again. Both rest on one
fact: the Jacobian of xhat = normalize(x) is symmetric, so the same map
(``_normalize_grad``; ``_rms_grad`` for rms_norm) takes an output gradient back and a tangent forward.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from .opmath import compute_dtype, opmath
from .registry import register


def _normalize_array(x, axes, eps):
    """(x - mean) / sqrt(var + eps) over axes, on an array (biased variance, as torch)."""
    xp = array_module(x)
    mu = x.mean(axis=axes, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=axes, keepdims=True)
    return xc / xp.sqrt(var + x.dtype.type(eps))


def _normalize_grad(x, gxhat, axes, eps):
    """J^T gxhat (= J gxhat: J is symmetric) for xhat = normalize(x), and xhat itself (Tensors)."""
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
    """Tensors in the dtype the rules compute in: float32 for halves, else their own."""
    return [None if t is None else t.to(compute_dtype(t.dtype)) for t in tensors]


def _check_affine(name, t, what, shape):
    if t is not None and tuple(t.shape) != tuple(shape):
        raise RuntimeError(f"{name}: {what} of shape {tuple(t.shape)} does not match the expected shape {tuple(shape)}")
    if t is not None and not _dt.is_floating(t.dtype):
        raise TypeError(f"{name}: expected a floating-point {what}, got {t.dtype.name}")


def _grouped(x, groups):
    """(N, C, *) as (N, groups, C / groups * spatial) (sizes spelled out: -1 is ambiguous for an empty batch)."""
    n = x.shape[0]
    return x.reshape(n, groups, int(np.prod(x.shape[1:])) // groups)


def _trailing_axes(name, input, normalized_shape):
    """normalized_shape as a tuple, checked against the input's trailing dims, and those dims' axes."""
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"{name}: normalized_shape {shape} does not match the trailing dims of an input "
                           f"of shape {tuple(input.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: expected a floating input, got {input.dtype.name}")
    return shape, tuple(range(input.ndim - k, input.ndim))


@register("layer_norm", functional=True, promote=(0, 2, 3), saves=("input", "weight"))
def layer_norm(ctx, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing dims ``normalized_shape``, then scale by weight and shift by bias."""
    shape, ctx.axes = _trailing_axes("layer_norm", input, normalized_shape)
    _check_affine("layer_norm", weight, "weight", shape)
    _check_affine("layer_norm", bias, "bias", shape)
    ctx.eps = eps

    def f(x, w, b):
        y = _normalize_array(x, ctx.axes, eps)
        y = y if w is None else y * w
        return y if b is None else y + b
    return opmath(f, input, weight, bias)


@layer_norm.grad
def _(ctx, g):
    x, w, b = _data_args(ctx)
    x, g, w = _work(x, g, w)
    gx, xhat = _normalize_grad(x, g * w if w is not None else g, ctx.axes, ctx.eps)
    batch = tuple(range(x.ndim - len(ctx.axes)))
    gw = (g * xhat).sum(dim=batch) if w is not None else None
    gb = g.sum(dim=batch) if b is not None else None
    return gx, None, gw, gb


@layer_norm.jvp
def _(ctx, tx, _, tw=None, tb=None):
    x, w, b = _data_args(ctx)
    x, tx, w, tw, tb = _work(x, tx, w, tw, tb)
    dxhat, xhat = _normalize_grad(x, tx, ctx.axes, ctx.eps)
    ty = dxhat if w is None else dxhat * w + xhat * tw
    return ty if tb is None else ty + tb


@register("group_norm", functional=True, promote=(0, 2, 3), saves=("input", "weight"))
def group_norm(ctx, input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise (N, C, *) over each group of C/num_groups channels (and all spatial positions),
    then scale and shift per channel."""
    if input.ndim < 2:
        raise RuntimeError(f"group_norm: expected an input of shape (N, C, *), got {tuple(input.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"group_norm: expected a floating input, got {input.dtype.name}")
    c = input.shape[1]
    if not isinstance(num_groups, (int, np.integer)) or num_groups < 1 or c % num_groups:
        raise RuntimeError(f"group_norm: the {c} channels cannot be split into num_groups={num_groups!r} groups")
    _check_affine("group_norm", weight, "weight", (c,))
    _check_affine("group_norm", bias, "bias", (c,))
    ctx.groups, ctx.eps = int(num_groups), eps
    per_channel = (1, c) + (1,) * (input.ndim - 2)

    def f(x, w, b):
        y = _normalize_array(_grouped(x, num_groups), (2,), eps).reshape(x.shape)
        y = y if w is None else y * w.reshape(per_channel)
        return y if b is None else y + b.reshape(per_channel)
    return opmath(f, input, weight, bias)


@group_norm.grad
def _(ctx, g):
    x, w, b = _data_args(ctx)
    x, g, w = _work(x, g, w)
    shape = x.shape
    c = shape[1]
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    gxhat = g * w.reshape(per_channel) if w is not None else g
    gx, xhat = _normalize_grad(_grouped(x, ctx.groups), _grouped(gxhat, ctx.groups), (2,), ctx.eps)
    not_channel = (0,) + tuple(range(2, x.ndim))
    gw = (g * xhat.reshape(shape)).sum(dim=not_channel) if w is not None else None
    gb = g.sum(dim=not_channel) if b is not None else None
    return gx.reshape(shape), None, gw, gb


@group_norm.jvp
def _(ctx, tx, _, tw=None, tb=None):
    x, w, b = _data_args(ctx)
    x, tx, w, tw, tb = _work(x, tx, w, tw, tb)
    c = x.shape[1]
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    dxhat, xhat = _normalize_grad(_grouped(x, ctx.groups), _grouped(tx, ctx.groups), (2,), ctx.eps)
    dxhat, xhat = dxhat.reshape(x.shape), xhat.reshape(x.shape)
    ty = dxhat if w is None else dxhat * w.reshape(per_channel) + xhat * tw.reshape(per_channel)
    return ty if tb is None else ty + tb.reshape(per_channel)


# ---------------------------------------------------------------- rms_norm
def _rms_grad(x, gy, axes, eps):
    """J^T gy (= J gy: symmetric, as normalize's) for y = x * r with r = 1/sqrt(mean(x^2) + eps), and x * r."""
    r = ((x * x).mean(dim=axes, keepdim=True) + eps).rsqrt()
    return r * (gy - x * (r * r) * (gy * x).mean(dim=axes, keepdim=True)), x * r


def _rms_args(ctx):
    """input and weight (None when not passed) of an rms_norm call."""
    args = tuple(ctx.inputs) + (None,)
    return args[0], args[2] if len(args) > 3 else None


@register("rms_norm", functional=True, promote=(0,))
def rms_norm(ctx, input, normalized_shape, weight=None, eps=None):
    """input / sqrt(mean(input^2 over the trailing normalized_shape dims) + eps), times weight.

    eps defaults to the machine epsilon of the dtype the math runs in (float32's
    for float16/bfloat16 inputs), as torch's. The output has the input's dtype
    whatever the weight's; half inputs are computed in float32 and rounded once.
    """
    shape, ctx.axes = _trailing_axes("rms_norm", input, normalized_shape)
    _check_affine("rms_norm", weight, "weight", shape)
    work = compute_dtype(input.dtype)
    ctx.eps = float(np.finfo(work).eps) if eps is None else float(eps)
    x = input.astype(work, copy=False)
    y = x * (1 / array_module(x).sqrt((x * x).mean(axis=ctx.axes, keepdims=True) + work.type(ctx.eps)))
    if weight is not None:
        y = y * weight.astype(work, copy=False)
    return y.astype(input.dtype, copy=False)


@rms_norm.grad
def _(ctx, g):
    x, w = _rms_args(ctx)
    x, g, w = _work(x, g, w)
    gx, xhat = _rms_grad(x, g * w if w is not None else g, ctx.axes, ctx.eps)
    gw = (g * xhat).sum(dim=tuple(range(x.ndim - len(ctx.axes)))) if w is not None else None
    return gx, None, gw


@rms_norm.jvp
def _(ctx, tx, _=None, tw=None, *__):
    x, w = _rms_args(ctx)
    x, tx, w, tw = _work(x, tx, w, tw)
    dy, xhat = _rms_grad(x, tx, ctx.axes, ctx.eps)
    return dy if w is None else dy * w + xhat * tw
