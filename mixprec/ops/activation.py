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


@register("softmax", methods=("softmax",), functional=True, saves=("output",))
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


@register("log_softmax", methods=("log_softmax",), functional=True, saves=("output",))
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
    return _log_softmax_backward(g.to(y.dtype), y, ctx.dim),


@register("_log_softmax_backward", promote=(0, 1), saves=("grad", "output"))
def _log_softmax_backward(ctx, grad, output, dim):
    """log_softmax's input gradient, grad - exp(output) * sum(grad), as one op (torch's _log_softmax_backward_data):
    one dispatch and one rounding instead of four; ``output`` is log_softmax's output along ``dim``."""
    if grad.shape != output.shape:
        raise RuntimeError(f"_log_softmax_backward: grad of shape {tuple(grad.shape)} does not match the output's "
                           f"{tuple(output.shape)}")
    if not _dt.is_floating(output.dtype):
        raise TypeError(f"_log_softmax_backward: needs floating tensors, got {output.dtype.name}")
    ctx.dim = dim_index(dim, output.ndim, "_log_softmax_backward")

    def f(g, y):
        return g - array_module(y).exp(y) * g.sum(axis=ctx.dim, keepdims=True)
    return opmath(f, grad, output)


@_log_softmax_backward.grad
def _(ctx, v):  # out = g - e * S(g), e = exp(y), S: the sum along dim (kept)
    g, y = ctx.inputs[:2]
    needs = ctx.needs_input_grad
    e = y.exp()
    gg = v - (v * e).sum(dim=ctx.dim, keepdim=True) if needs[0] else None
    gy = -(v * e * g.sum(dim=ctx.dim, keepdim=True)) if needs[1] else None
    return gg, gy, None


@_log_softmax_backward.jvp
def _(ctx, tg, ty, *_):
    g, y = ctx.inputs[:2]
    e = y.exp()
    out = None
    if tg is not None:
        out = tg - e * tg.sum(dim=ctx.dim, keepdim=True)
    if ty is not None:
        term = -(ty * e * g.sum(dim=ctx.dim, keepdim=True))
        out = term if out is None else out + term
    return out


@log_softmax.jvp
def _(ctx, t, *_):
    y = ctx.output
    t = t.to(y.dtype)
    return t - (y.exp() * t).sum(dim=ctx.dim, keepdim=True)
