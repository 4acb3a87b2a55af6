"""softmax and log_softmax: the normalisations autocast keeps in float32 on CUDA."""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from .registry import register
from .shape import dim_index


def _prepare(ctx, input, dim, dtype, name):
    if dim is None:
        raise TypeError(f"{name}: pass dim= explicitly: it says which axis sums to one")
    if dtype is not None:
        input = input.astype(_dt.as_dtype(dtype))
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: needs a floating input, got {input.dtype.name}; pass dtype= or cast first")
    ctx.dim = dim = dim_index(dim, input.ndim, name)
    out_dtype = input.dtype
    work = input.astype(np.float32) if out_dtype in _dt.LOW_PRECISION else input
    return work, out_dtype


@register("softmax", methods=("softmax",), functional=True, cuda="fp32")
def softmax(ctx, input, dim=None, dtype=None):
    """exp(x) / sum(exp(x)) along dim, computed stably (max subtracted)."""
    x, out_dtype = _prepare(ctx, input, dim, dtype, "softmax")
    xp = array_module(x)
    e = xp.exp(x - x.max(axis=dim, keepdims=True))
    return (e / e.sum(axis=dim, keepdims=True)).astype(out_dtype, copy=False)


@softmax.grad
def _(ctx, g):
    y = ctx.output
    g = g.to(y.dtype)
    return y * (g - (g * y).sum(dim=ctx.dim, keepdim=True, dtype=y.dtype)),


@register("log_softmax", methods=("log_softmax",), functional=True, cuda="fp32")
def log_softmax(ctx, input, dim=None, dtype=None):
    """x - logsumexp(x) along dim."""
    x, out_dtype = _prepare(ctx, input, dim, dtype, "log_softmax")
    xp = array_module(x)
    shifted = x - x.max(axis=dim, keepdims=True)
    return (shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))).astype(out_dtype, copy=False)


@log_softmax.grad
def _(ctx, g):
    y = ctx.output
    g = g.to(y.dtype)
    return g - y.exp() * g.sum(dim=ctx.dim, keepdim=True, dtype=y.dtype),
