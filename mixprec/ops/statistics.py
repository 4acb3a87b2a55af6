"""Statistics and scans beyond reduce.py: var_mean/std_mean, the NaN-skipping sums, count_nonzero, aminmax,
cummax/cummin and logcumsumexp.

Most are composites of differentiable ops, so both modes of autograd come from their parts. cummax and
cummin find their indices on the raw data and read the values with ``gather``: the gradient goes to the
element each index names, as torch's does.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor, tensor
from .elementwise import where
from .reduce import _axes, amax, amin, correction_of, logsumexp, mean, std, var
from .registry import register
from .shape import dim_index

aminmax_result = namedtuple("aminmax", ["min", "max"])  # torch.return_types.aminmax
cummax_result = namedtuple("cummax", ["values", "indices"])
cummin_result = namedtuple("cummin", ["values", "indices"])


def _with_mean(name, spread, input, dim, unbiased, keepdim, correction):
    dim, correction = correction_of(name, dim, unbiased, correction)
    return spread(input, dim, keepdim=keepdim, correction=correction), mean(input, dim, keepdim)


@register("var_mean", composite=True)
def var_mean(ctx, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over dim, with var's arguments."""
    return _with_mean("var_mean", var, input, dim, unbiased, keepdim, correction)


@register("std_mean", composite=True)
def std_mean(ctx, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over dim, with std's arguments."""
    return _with_mean("std_mean", std, input, dim, unbiased, keepdim, correction)


def _without_nans(input):
    return where(input.isnan(), 0.0, input) if _dt.is_floating(input.dtype) else input


@register("nansum", methods=("nansum",), composite=True)
def nansum(ctx, input, dim=None, keepdim=False, *, dtype=None):
    """sum treating NaN as zero (a NaN passes no gradient)."""
    if input.dtype.kind == "c":
        raise TypeError("nansum: complex input is not supported (as in torch)")
    return _without_nans(input).sum(dim, keepdim, dtype=dtype)


@register("nanmean", methods=("nanmean",), composite=True)
def nanmean(ctx, input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the elements that are not NaN (NaN where a slice has none)."""
    if not _dt.is_floating(input.dtype):
        raise RuntimeError(f"nanmean: needs a floating input (as torch), got {input.dtype.name}")
    x = input if dtype is None else input.to(dtype)
    return _without_nans(x).sum(dim, keepdim) / x.isnan().logical_not().sum(dim, keepdim)


@register("count_nonzero", methods=("count_nonzero",), differentiable=False)
def count_nonzero(ctx, input, dim=None):
    """The number of non-zero elements over dim (an int or a tuple of ints; all when None), as int64."""
    axes = _axes(dim, input.ndim, "count_nonzero")
    return (input != 0).sum(axis=axes, dtype=np.int64)


@register("aminmax", methods=("aminmax",), composite=True)
def aminmax(ctx, input, *, dim=None, keepdim=False):
    """(min, max) over dim (all of it when None), as amin and amax give them."""
    if dim is None and input.numel() == 0:
        raise RuntimeError(f"aminmax: cannot reduce all of an empty input (shape {tuple(input.shape)}): there is "
                           "no min or max; pass a dim whose size is not 0")
    if dim is None and keepdim:  # the whole tensor, kept as a 1 in every dim
        keep = (1,) * input.ndim
        return aminmax_result(amin(input).reshape(keep), amax(input).reshape(keep))
    return aminmax_result(amin(input, dim, keepdim), amax(input, dim, keepdim))


def _running_index(name, x, d, better):
    """For each position along axis d, the index of the extreme so far: a later tie wins, and a NaN wins over
    anything (the last NaN seen, once there is one)."""
    xp = array_module(x)
    moved = xp.moveaxis(x, d, -1)
    idx = xp.zeros(moved.shape, dtype=np.int64)
    best, at = moved[..., 0], xp.zeros(moved.shape[:-1], dtype=np.int64)
    for i in range(moved.shape[-1]):
        v = moved[..., i]
        take = better(v, best) | (v != v)
        best, at = xp.where(take, v, best), xp.where(take, i, at)
        idx[..., i] = at
    return xp.moveaxis(idx, -1, d)


def _cumulative_extreme(name, better, result):
    def forward(ctx, input, dim):
        d = dim_index(dim, input.ndim, name)
        x = input.reshape(1) if input.ndim == 0 else input
        if x.shape[d] == 0:
            return result(x.clone(), Tensor._wrap(array_module(x._array).zeros(x.shape, dtype=np.int64)))
        idx = Tensor._wrap(_running_index(name, x._array, d, better))
        values = x.gather(d, idx)
        if input.ndim == 0:
            return result(values.reshape(()), idx.reshape(()))
        return result(values, idx)
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = (f"(values, indices): the running {name[3:]} along dim and where it was found (the later "
                       "of ties; a NaN, once met, stays); the gradient goes to the element each index names.")
    return register(name, methods=(name,), composite=True)(forward)


cummax = _cumulative_extreme("cummax", lambda v, best: v >= best, cummax_result)
cummin = _cumulative_extreme("cummin", lambda v, best: v <= best, cummin_result)


@register("logcumsumexp", methods=("logcumsumexp",), composite=True)
def logcumsumexp(ctx, input, dim):
    """log(cumsum(exp(input))) along dim, stably: position j is the logsumexp of positions 0..j (an n x n
    masked logsumexp per slice, so both modes of autograd come from logsumexp)."""
    if not _dt.is_floating(input.dtype):
        raise NotImplementedError(f"logcumsumexp: needs a floating input (as torch), got {input.dtype.name}")
    d = dim_index(dim, input.ndim, "logcumsumexp")
    x = input.transpose(d, -1) if input.ndim else input.reshape(1)
    n = x.shape[-1]
    later = tensor(np.triu(np.ones((n, n), dtype=bool), 1), device=x.device)  # [j, k]: k comes after j
    out = logsumexp(where(later, float("-inf"), x.unsqueeze(-2)), -1)
    return out.reshape(()) if input.ndim == 0 else out.transpose(d, -1)


@register("cov", methods=("cov",), composite=True)
def cov(ctx, input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (observations in columns; a 1-D input is one
    variable), with integer frequency weights and/or observation weights; correction 1 is Bessel's."""
    if input.ndim > 2:
        raise RuntimeError(f"cov: expected a 1-D or 2-D input, got {input.ndim} dims")
    if input.dtype == _dt.bool_:
        raise RuntimeError("cov: bool input is not supported (as torch); convert it to a number dtype first")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not _dt.is_differentiable(x.dtype):
        x = x.to(_dt.float32)
    n = x.shape[1]
    w = None
    for name, weights in (("fweights", fweights), ("aweights", aweights)):
        if weights is None:
            continue
        if weights.ndim > 1 or weights.numel() != n:
            raise RuntimeError(f"cov: {name} must be 1-D with one weight per observation ({n}), got shape "
                               f"{tuple(weights.shape)}")
        if name == "fweights" and weights.dtype.kind not in "iu":
            raise RuntimeError(f"cov: fweights must be integers, got {weights.dtype.name}")
        if name == "aweights" and not _dt.is_floating(weights.dtype):
            raise RuntimeError(f"cov: aweights must have a floating dtype, got {weights.dtype.name}")
        if not bool((weights >= 0).all()):  # (a NaN weight is refused with the negative ones, as torch)
            raise RuntimeError(f"cov: {name} cannot be negative (or NaN)")
        w = weights if w is None else w * weights
    if w is None:
        avg, total = x.mean(1), n
        norm = n - correction
    else:
        total = w.sum()
        if bool(total == 0):
            raise RuntimeError("cov: the weights sum to zero, so they cannot normalise the covariance")
        avg = (x * w).sum(1) / total
        norm = total - (correction if aweights is None else correction * (w * aweights).sum() / total)
    if not isinstance(norm, Tensor):
        norm = max(norm, 0)
    elif bool(norm <= 0):
        norm = 0
    centred = x - avg.unsqueeze(1)
    weighted = centred if w is None else centred * w
    out = (weighted @ centred.mT.conj()) / norm
    return out.reshape(()) if x.shape[0] == 1 else out  # (one variable: its variance, 0-d, as torch)


@register("corrcoef", methods=("corrcoef",), composite=True)
def corrcoef(ctx, input):
    """The Pearson correlation coefficients of the variables in input's rows (cov normalised by the standard
    deviations; real values clamped to [-1, 1])."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.unsqueeze(1) / std.unsqueeze(0)
    return c.clamp(-1, 1) if c.dtype.kind != "c" else c
