"""Reductions. float16/bfloat16 inputs accumulate in float32 and round once at the end.

A differentiable reduction's rules come from the partial derivative of its
result with respect to each input element (``_reduction_rules``): backward
broadcasts the output's gradient over the input and multiplies by it; forward
mode sums tangent times partial over the reduced dims.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..autograd import grad_mode
from ..tensor import Tensor, tensor
from ..creation import ones_like
from . import elementwise
from .elementwise import where
from .opmath import compute_dtype, opmath
from .registry import register
from .shape import _zeros_of, cat


def _axes(dim, ndim, name):
    """Normalise dim (None, int or sequence) to a sorted tuple of non-negative axes."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    n = max(ndim, 1)  # (a 0-d tensor takes dim 0 and -1)
    out = []
    for d in dims:
        if not -n <= d < n:
            raise IndexError(f"{name}: dim {d} is out of range for a tensor with {ndim} dimensions")
        out.append(d % n)
    return tuple(sorted(set(out))) if ndim else ()


def _expand_back(ctx, g):
    """Broadcast a reduced gradient back over the input's shape."""
    shape = ctx.in_shape
    if not ctx.keepdim:
        kept = tuple(1 if i in ctx.axes else n for i, n in enumerate(shape))
        g = g.reshape(kept)
    return g.expand(shape)


def _reduction_rules(op, partial):
    """Set both rules of a reduction from partial(ctx): d out / d input, shaped like the input."""
    op.grad(lambda ctx, g: (_expand_back(ctx, g) * partial(ctx),))
    op.jvp(lambda ctx, t, *_: (t * partial(ctx)).sum(dim=ctx.axes, keepdim=ctx.keepdim))


def _reduction(ctx, x, dim, keepdim, name):
    ctx.axes = _axes(dim, x.ndim, name)
    ctx.keepdim = keepdim
    ctx.in_shape = x.shape
    return ctx.axes


def _add_reduce(x, axes, keepdim, acc):
    """Sum in the accumulation dtype. On NumPy the ufunc is called directly (not np.sum), so
    the inf/NaN RuntimeWarnings that loss scaling expects come from mixprec code, where
    mixprec/__init__.py silences them, rather than from NumPy's Python wrappers."""
    xp = array_module(x)
    if xp is np:
        return np.add.reduce(x, axis=axes, keepdims=keepdim, dtype=acc)
    return xp.sum(x, axis=axes, keepdims=keepdim, dtype=acc)


def _out_dtype(x, dtype):
    if dtype is not None:
        return _dt.as_dtype(dtype)
    if x.dtype.kind in "biu":  # integer sums count in int64, as torch does
        return np.dtype(np.int64)
    return x.dtype


@register("sum", methods=("sum",), linear=True)
def sum(ctx, input, dim=None, keepdim=False, dtype=None):
    """Sum over dim (all dims when None); float32 under CUDA autocast."""
    axes = _reduction(ctx, input, dim, keepdim, "sum")
    out_dtype = _out_dtype(input, dtype)
    acc = compute_dtype(out_dtype, ints="keep")
    return _add_reduce(input, axes, keepdim, acc).astype(out_dtype, copy=False)


sum.grad(lambda ctx, g: (_expand_back(ctx, g),))


@register("mean", methods=("mean",), linear=True)
def mean(ctx, input, dim=None, keepdim=False, dtype=None):
    if not _dt.is_differentiable(input.dtype) and dtype is None:  # (floating or complex)
        raise TypeError(f"mean: needs a floating input, got {input.dtype.name}; pass dtype= or cast first")
    axes = _reduction(ctx, input, dim, keepdim, "mean")
    out_dtype = _out_dtype(input, dtype)
    ctx.count = int(np.prod([input.shape[a] for a in axes])) if axes else 1
    acc = compute_dtype(out_dtype, ints="keep")
    total = _add_reduce(input, axes, keepdim, acc)
    if ctx.count == 0:  # the mean of nothing is NaN (0 / 0), as in torch, without NumPy's warning
        return array_module(input).full(np.shape(total), np.nan, dtype=out_dtype)
    return (total / np.dtype(acc).type(ctx.count)).astype(out_dtype, copy=False)


mean.grad(lambda ctx, g: (_expand_back(ctx, g) / ctx.count,))


@register("prod", methods=("prod",), saves=("input", "output"))
def prod(ctx, input, dim=None, keepdim=False, dtype=None):
    """Product over one dim or all; float32 under autocast on both devices."""
    axes = _reduction(ctx, input, dim, keepdim, "prod")
    out_dtype = _out_dtype(input, dtype)
    return array_module(input).prod(input, axis=axes, keepdims=keepdim,
                                    dtype=compute_dtype(out_dtype, ints="keep")).astype(out_dtype, copy=False)


def _prod_partial(ctx):
    """d prod / d x_i is the product of the other elements: out / x_i in a group without zeros (as torch),
    else multiplied out (no division by a zero, and a nan or inf among the others still reaches x_i)."""
    x = ctx.inputs[0]
    if not ctx.axes:
        return ones_like(x)
    has_zero = (x == 0).any(dim=ctx.axes, keepdim=True)
    divided = _expand_back(ctx, ctx.output) / where(has_zero, 1.0, x)
    return where(has_zero, _product_of_the_others(x, ctx.axes), divided)


def _product_of_the_others(x, axes):
    """For each element, the product of the others of its group along ``axes``: the running product of
    those before it times that of those after it (Tensor ops: it differentiates again)."""
    kept = [d for d in range(x.ndim) if d not in axes]
    moved = x.permute(*kept, *axes)
    lead = moved.shape[:len(kept)]
    flat = moved.reshape(*lead, int(np.prod(moved.shape[len(kept):])))
    one = ones_like(flat[..., :1])
    before = cat([one, flat[..., :-1]], -1).cumprod(-1)
    after = cat([flat[..., 1:], one], -1).flip(-1).cumprod(-1).flip(-1)
    back = np.argsort(kept + list(axes)).tolist()
    return (before * after).reshape(moved.shape).permute(*back)


_reduction_rules(prod, _prod_partial)


def check_nonempty(name, x, axes, error=IndexError):
    """Refuse a reduction without an identity (max, min, argmax, the inf-norm) over an empty dim, as torch."""
    if x.size == 0:
        for a in axes:
            if x.shape[a] == 0:
                raise error(f"{name}: cannot reduce over dim {a} of size 0 of an input of shape {tuple(x.shape)} "
                            "(the reduction has no identity); reduce over non-empty dims only")


def _extreme(name, fn, methods=None, partial=None):
    def forward(ctx, input, dim=None, keepdim=False):
        axes = _reduction(ctx, input, dim, keepdim, name)
        check_nonempty(name, input, axes)
        return fn(array_module(input), input, axes, keepdim)
    forward.__name__ = name.replace(".", "_")
    op = register(name, methods=(name,) if methods is None else methods, saves=("input", "output"))(forward)
    op.__doc__ = f"{name} over dim; the gradient is split evenly between tied elements."
    _reduction_rules(op, partial or _extreme_partial)
    return op


def _extreme_partial(ctx):
    """1/k at each of the k elements that equal the extreme of their group, 0 elsewhere (a nan extreme equals
    nothing: its whole group gets nan, as torch's amax/amin)."""
    out = _expand_back(ctx, ctx.output)
    mask = (ctx.inputs[0] == out).to(out.dtype)
    return mask / mask.sum(dim=ctx.axes, keepdim=True)


def _evenly_partial(ctx):
    """max()/min() of all elements, torch's evenly_distribute_backward: 1/k at each of the k elements that equal
    the extreme, or, when the extreme is a nan, at each nan (the nan that made it gets the gradient)."""
    x, out = ctx.inputs[0], ctx.output
    mask = where(out.isnan(), x.isnan(), x == out).to(out.dtype)
    return mask / mask.sum()


amax = _extreme("amax", lambda xp, a, axes, keep: xp.amax(a, axis=axes, keepdims=keep))
amin = _extreme("amin", lambda xp, a, axes, keep: xp.amin(a, axis=axes, keepdims=keep))
max_all = _extreme("max.all", lambda xp, a, axes, keep: xp.amax(a, axis=axes, keepdims=keep), (), _evenly_partial)
min_all = _extreme("min.all", lambda xp, a, axes, keep: xp.amin(a, axis=axes, keepdims=keep), (), _evenly_partial)


@register("logsumexp", methods=("logsumexp",), saves=("input", "output"))
def logsumexp(ctx, input, dim, keepdim=False):
    """log(sum(exp(input))) over dim, stably: the max is taken out first, so no exp overflows.

    An infinite max is not taken out (all -inf stays -inf, +inf stays +inf); an
    empty reduction gives -inf (the log of an empty sum). Integer inputs give
    float32; float16/bfloat16 compute in float32 and round once.
    """
    axes = _reduction(ctx, input, dim, keepdim, "logsumexp")

    def f(x):
        xp = array_module(x)
        if 0 in [x.shape[a] for a in axes]:  # (any and sum are ops in this module)
            kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
            out = xp.full(kept, -np.inf, dtype=x.dtype)
        else:
            m = xp.amax(x, axis=axes, keepdims=True)
            m = xp.where(xp.isinf(m), x.dtype.type(0), m)
            out = xp.log(xp.exp(x - m).sum(axis=axes, keepdims=True)) + m
        return out if keepdim else out.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))
    return opmath(f, input)


_reduction_rules(logsumexp, lambda ctx: (ctx.inputs[0] - _expand_back(ctx, ctx.output)).exp())


def correction_of(name, dim, unbiased, correction):
    """(dim, correction) from torch's overloads of var/std: (x, unbiased), (x, dim, unbiased, keepdim) and
    (x, dim, *, correction, keepdim); a bool where dim goes is the unbiased flag, and correction=None means 1."""
    if isinstance(dim, bool):
        if unbiased is not None:
            raise TypeError(f"{name}: got unbiased={dim} in dim's place and unbiased={unbiased}; pass one of them")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}: pass correction or unbiased, not both")
    return dim, (1 if unbiased else 0) if unbiased is not None else (1 if correction is None else correction)


def _variance(ctx, name, input, dim, unbiased, keepdim, correction):
    """The variance (in the accumulation dtype) of var and std; ctx.denom is the count less the correction."""
    dim, correction = correction_of(name, dim, unbiased, correction)
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: needs a floating input, got {input.dtype.name}")
    axes = _reduction(ctx, input, dim, keepdim, name)
    n = int(np.prod([input.shape[a] for a in axes])) if axes else 1
    ctx.denom = max(n - correction, 0)
    return array_module(input).var(input.astype(compute_dtype(input.dtype), copy=False), axis=axes,
                                   keepdims=keepdim, ddof=correction)


@register("var", methods=("var",))
def var(ctx, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over dim with Bessel's correction (correction=1) by default; torch's overloads (correction_of)."""
    return _variance(ctx, "var", input, dim, unbiased, keepdim, correction).astype(input.dtype, copy=False)


def _var_partial(ctx):
    x = ctx.inputs[0]
    return (x - x.mean(dim=ctx.axes, keepdim=True)) * (2.0 / ctx.denom if ctx.denom else float("nan"))


_reduction_rules(var, _var_partial)


@register("std", methods=("std",), saves=("input", "output"))
def std(ctx, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over dim: the square root of var (same arguments); a zero std passes no gradient."""
    xp = array_module(input)
    return xp.sqrt(_variance(ctx, "std", input, dim, unbiased, keepdim, correction)).astype(input.dtype, copy=False)


def _std_partial(ctx):
    x, out = ctx.inputs[0], _expand_back(ctx, ctx.output)
    centred = x - x.mean(dim=ctx.axes, keepdim=True)
    if not ctx.denom:
        return centred * float("nan")
    return where(out == 0, 0.0, centred / (out * ctx.denom))


_reduction_rules(std, _std_partial)


def _scan(name, ctx, input, dim, dtype):
    """cumsum / cumprod along dim, accumulating in float32 for half inputs (in int64 for integers)."""
    ctx.dim = _axes(dim, input.ndim, name)[0] if input.ndim else 0
    out_dtype = _out_dtype(input, dtype)
    scan = getattr(array_module(input), name)
    return scan(input, axis=ctx.dim if input.ndim else None, dtype=compute_dtype(out_dtype, ints="keep")) \
        .astype(out_dtype, copy=False).reshape(input.shape)


def _reverse_cumsum(t, d):
    """The sums from each position to the end along d: cumsum's gradient."""
    return t.flip(d).cumsum(d).flip(d)


@register("cumsum", methods=("cumsum",), linear=True)
def cumsum(ctx, input, dim, dtype=None):
    """Running sum along dim; float32 under CUDA autocast."""
    return _scan("cumsum", ctx, input, dim, dtype)


cumsum.grad(lambda ctx, g: (_reverse_cumsum(g, ctx.dim) if g.ndim else g,))


@register("cumprod", methods=("cumprod",), saves=("input", "output"))
def cumprod(ctx, input, dim, dtype=None):
    """Running product along dim; float32 under CUDA autocast."""
    return _scan("cumprod", ctx, input, dim, dtype)


def _cumprod_parts(ctx):
    """What both rules of cumprod need, exact also where the input has zeros.

    dy_j / dx_k (k <= j) is the product of x_0..x_j without x_k. Before the first
    zero of a slice that is y_j / x_k. At the first zero z it is y'_j, the running
    product with x_z replaced by 1; after z it is 0. Returns (before, first, y'):
    masks of the positions before / at the first zero, and y'.
    """
    x, d = ctx.inputs[0], ctx.dim
    zeros_so_far = (x == 0).cumsum(d)
    before = zeros_so_far == 0
    first = (zeros_so_far == 1).logical_and(x == 0)
    return before, first, where(first, 1.0, x).cumprod(d)


def _cumprod_jacobian_grad(ctx, g):
    """The gradient from the whole Jacobian J[k, j] = prod_{i <= j, i != k} x_i (j >= k), built by one cumprod.

    n x n per slice, but free of divisions and of masks that depend on x, so its
    own derivatives are right at zeros too: the backward create_graph records.
    """
    d = ctx.dim
    x = ctx.inputs[0].transpose(d, -1)  # the scanned dim last: (..., n)
    n = x.shape[-1]
    diagonal, upper = (tensor(m, device=x.device) for m in (np.eye(n, dtype=bool), np.triu(np.ones((n, n), bool))))
    jac = where(diagonal, 1.0, x.unsqueeze(-2)).cumprod(-1)  # row k: the running product without x_k
    return (where(upper, jac, 0.0) * g.transpose(d, -1).unsqueeze(-2)).sum(-1).transpose(d, -1)


@cumprod.grad
def _(ctx, g):
    if g.ndim == 0:
        return g,
    if grad_mode.is_grad_enabled():  # create_graph=True: a gradient that differentiates again, zeros included
        return _cumprod_jacobian_grad(ctx, g),
    x, y, d = ctx.inputs[0], ctx.output, ctx.dim
    before, first, y_skip = _cumprod_parts(ctx)
    at_first = _reverse_cumsum(g * y_skip, d)  # sum over j >= z of g_j y'_j
    return where(before, _reverse_cumsum(g * y, d) / where(before, x, 1.0), where(first, at_first, 0.0)),


@cumprod.jvp
def _(ctx, t, *_):
    if t.ndim == 0:
        return t
    x, y, d = ctx.inputs[0], ctx.output, ctx.dim
    before, first, y_skip = _cumprod_parts(ctx)
    t_first = where(first, t, 0.0).sum(d, keepdim=True)  # the tangent at the first zero
    return where(before, y * where(before, t / where(before, x, 1.0), 0.0).cumsum(d), t_first * y_skip)


def _arg_extreme(name):
    def forward(ctx, input, dim=None, keepdim=False):
        if input.dtype == np.bool_:
            raise TypeError(f"{name}: bool input is not supported (as in torch); convert it first: mask.to(dtype)")
        axes = _axes(dim, input.ndim, name)
        check_nonempty(name, input, axes)
        axis = None if dim is None or input.ndim == 0 else axes[0]
        return getattr(array_module(input), name)(input, axis=axis, keepdims=keepdim)
    forward.__name__ = name
    op = register(name, methods=(name,), differentiable=False)(forward)
    op.__doc__ = f"The index of the {name[3:]} along dim (of the flattened input when dim is None); a nan wins."
    return op


argmax = _arg_extreme("argmax")
argmin = _arg_extreme("argmin")


@register("all", methods=("all",), differentiable=False)
def all(ctx, input, dim=None, keepdim=False):
    return array_module(input).all(input, axis=dim, keepdims=keepdim)


@register("any", methods=("any",), differentiable=False)
def any(ctx, input, dim=None, keepdim=False):
    return array_module(input).any(input, axis=dim, keepdims=keepdim)


# ---------------------------------------------------------------- max / min: the value, or (values, indices) on a dim
max_result = namedtuple("max", ["values", "indices"])  # torch.return_types.max
min_result = namedtuple("min", ["values", "indices"])


def _selection_along(name, pick):
    """A several-output op: (values, indices) of the extreme along ``dim``. Indices are int64 and not
    differentiable; the gradient goes to the one element each index names (torch's rule: the first
    extreme in a tie, a NaN when there is one)."""
    def forward(ctx, input, dim, keepdim=False):
        xp = array_module(input)
        d = _axes(dim, input.ndim, name)[0] if input.ndim else 0
        if input.ndim and input.shape[d] == 0:
            raise IndexError(f"{name}: cannot take the extreme of an empty dim {dim} (input of shape {input.shape})")
        work = input.astype(compute_dtype(input.dtype), copy=False) if input.dtype.kind == "f" or \
            input.dtype == _dt.bfloat16 else input
        flat = input.reshape(1) if input.ndim == 0 else input
        idx = pick(xp, work.reshape(1) if input.ndim == 0 else work, d)
        values = xp.take_along_axis(flat, idx, axis=d)
        ctx.dim, ctx.keepdim, ctx.scalar, ctx.in_shape = d, keepdim, input.ndim == 0, input.shape
        if input.ndim == 0:
            return values.reshape(()), idx.reshape(()).astype(np.int64)
        if not keepdim:
            values, idx = values.squeeze(d), idx.squeeze(d)
        return values, idx.astype(np.int64, copy=False)
    forward.__name__ = forward.__qualname__ = name.replace(".", "_")
    op = register(name, saves=("output1",))(forward)

    def kept(ctx, t):  # values/indices with the reduced dim in place (length 1)
        return t.reshape(1) if ctx.scalar else t if ctx.keepdim else t.unsqueeze(ctx.dim)

    @op.grad
    def _(ctx, g, _):
        indices = ctx.outputs[1]
        shape = (1,) if ctx.scalar else ctx.in_shape
        gx = _zeros_of(g, shape).scatter_add(ctx.dim, kept(ctx, indices), kept(ctx, g))
        return gx.reshape(ctx.in_shape) if ctx.scalar else gx,

    @op.jvp
    def _(ctx, t, *_):
        indices = ctx.outputs[1]
        picked = (t.reshape(1) if ctx.scalar else t).gather(ctx.dim, kept(ctx, indices))
        return (picked.reshape(()) if ctx.scalar else picked if ctx.keepdim else picked.squeeze(ctx.dim)), None

    return op


max_dim = _selection_along("max.dim", lambda xp, a, d: xp.argmax(a, axis=d, keepdims=True))
min_dim = _selection_along("min.dim", lambda xp, a, d: xp.argmin(a, axis=d, keepdims=True))


def _max_or_min(name, along, whole, elementwise, result):
    def forward(ctx, input, dim=None, keepdim=False):
        if isinstance(dim, Tensor):  # max(input, other): the elementwise maximum
            return elementwise(input, dim)
        if dim is None:
            if input.numel() == 0:
                raise RuntimeError(f"{name}(): expected a dim to reduce for an empty input (shape {input.shape})")
            return whole(input)
        return result(*along(input, dim, keepdim))
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = (f"{name}(input): the {name} of all elements (the gradient shared by ties); {name}(input, dim, "
                       f"keepdim=False): (values, indices) along dim; {name}(input, other): elementwise.")
    return register(name, methods=(name,), composite=True)(forward)


def _elementwise(name):
    def call(a, b):
        return getattr(elementwise, name)(a, b)
    return call


max_op = _max_or_min("max", max_dim, max_all, _elementwise("maximum"), max_result)  # (not named max: the builtin
min_op = _max_or_min("min", min_dim, min_all, _elementwise("minimum"), min_result)  # is used above)
