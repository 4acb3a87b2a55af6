"""softmax and log_softmax: the normalisations autocast keeps in float32 on CUDA."""
from __future__ import annotations

from .. import dtypes as _dt
from ..backend import array_module
from .opmath import opmath
from .registry import register
from .shape import dim_index


def _prepare(ctx, input, dim, dtype, name):
    if dim is None:
        raise TypeError(f"{name}: pass dim= explicitly: it says which axis sums to one")
    if dtype is not None:
        input = input.astype(_dt.as_dtype(dtype))
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: needs a floating input, got {input.dtype.name}; pass dtype= or cast first")
    ctx.dim = dim_index(dim, input.ndim, name)
    return input


@register("softmax", methods=("softmax",), functional=True, cuda="fp32", saves=("output",))
def softmax(ctx, input, dim=None, dtype=None):
    """exp(x) / sum(exp(x)) along dim, computed stably (max subtracted)."""
    input = _prepare(ctx, input, dim, dtype, "softmax")
    if input.size == 0:
        return input.copy()

    def f(x):
        e = array_module(x).exp(x - x.max(axis=ctx.dim, keepdims=True))
        return e / e.sum(axis=ctx.dim, keepdims=True)
    return opmath(f, input)


@softmax.grad
def _(ctx, g):
    y = ctx.output
    g = g.to(y.dtype)
    return y * (g - (g * y).sum(dim=ctx.dim, keepdim=True, dtype=y.dtype)),


@softmax.jvp
def _(ctx, t, *_):
    y = ctx.output
    t = t.to(y.dtype)
    return y * (t - (t * y).sum(dim=ctx.dim, keepdim=True))


@register("log_softmax", methods=("log_softmax",), functional=True, cuda="fp32", saves=("output",))
def log_softmax(ctx, input, dim=None, dtype=None):
    """x - logsumexp(x) along dim."""
    input = _prepare(ctx, input, dim, dtype, "log_softmax")
    if input.size == 0:
        return input.copy()

    def f(x):
        xp = array_module(x)
        shifted = x - x.max(axis=ctx.dim, keepdims=True)
        return shifted - xp.log(xp.exp(shifted).sum(axis=ctx.dim, keepdims=True))
    return opmath(f, input)


@log_softmax.grad
def _(ctx, g):
    y = ctx.output
    g = g.to(y.dtype)
    return g - y.exp() * g.sum(dim=ctx.dim, keepdim=True, dtype=y.dtype),


@log_softmax.jvp
def _(ctx, t, *_):
    y = ctx.output
    t = t.to(y.dtype)
    return t - (y.exp() * t).sum(dim=ctx.dim, keepdim=True)
