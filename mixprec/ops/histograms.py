"""Histograms: histc, histogram, histogramdd and bincount. Counts are not differentiable (torch gives
none); the bins follow torch's: equal-width bins between the limits, the last closed on the right.
"""
from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor
from .opmath import compute_dtype
from .registry import register

histogram_result = namedtuple("histogram", ["hist", "bin_edges"])  # torch.return_types.histogram
histogramdd_result = namedtuple("histogramdd", ["hist", "bin_edges"])


def _floating(name, input):
    if not _dt.is_floating(input.dtype):
        raise NotImplementedError(f"{name}: needs a floating input (as torch), got {input.dtype.name}")
    return input.astype(compute_dtype(input.dtype), copy=False)


def _limits(name, a, lo, hi):
    """torch's bin range: (lo, hi) as given; both 0 (or equal): the data's min and max (so a NaN or an infinity
    in the data makes it non-finite, refused), widened by 1 each way where those are equal too."""
    if lo > hi:
        raise RuntimeError(f"{name}: the range's min ({lo}) must not exceed its max ({hi})")
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"{name}: the range [{lo}, {hi}] must be finite")
    return lo, hi


@register("histc", methods=("histc",), differentiable=False)
def histc(ctx, input, bins=100, min=0, max=0):
    """The counts of input's elements in ``bins`` equal bins over [min, max] (the data's range when both are
    equal); elements outside, and NaN, are not counted. The counts have the input's dtype."""
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins <= 0:
        raise RuntimeError(f"histc: bins must be a positive int, got {bins!r}")
    a = _floating("histc", input).reshape(-1)
    lo, hi = _limits("histc", a, float(min), float(max))
    xp = array_module(a)
    a = a[(a >= lo) & (a <= hi)]
    return xp.histogram(a, bins=bins, range=(lo, hi))[0].astype(input.dtype)


def _same_dtypes(name, input, bins, weight):
    """torch bins with the input's own dtype: edges given as tensors and weights must have it."""
    for what, other in [*(("bins", b) for b in bins), ("weight", weight)]:
        if isinstance(other, Tensor) and other.dtype != input.dtype:
            raise RuntimeError(f"{name}: {what} must have the input's dtype {input.dtype.name}, got "
                               f"{other.dtype.name}")


def _edges(name, a, bins, range_, dtype, dim=0):
    """The bin edges: given (a 1-D tensor), or ``bins`` equal bins over range (the data's range when None)."""
    xp = array_module(a)
    if isinstance(bins, Tensor):
        bins = bins._array
    if hasattr(bins, "ndim"):  # (a tensor argument reaches the forward as its array)
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise RuntimeError(f"{name}: bins as edges must be a 1-D tensor of at least one edge, got shape "
                               f"{tuple(bins.shape)}")
        return bins.astype(dtype)
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins <= 0:
        raise RuntimeError(f"{name}: bins must be a positive int or a 1-D tensor of edges, got {bins!r}")
    if range_ is None:
        lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 1.0)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise RuntimeError(f"{name}: the data's range [{lo}, {hi}] along dim {dim} is not finite; pass range= "
                               "or the bin edges")
    else:
        lo, hi = (float(r) for r in range_)
    if lo > hi:
        raise RuntimeError(f"{name}: the range's min ({lo}) must not exceed its max ({hi})")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return xp.linspace(lo, hi, int(bins) + 1, dtype=dtype)


@register("histogram", methods=("histogram",), composite=True)
def histogram(ctx, input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges): the (weighted) counts of input's elements in the bins (an int: that many equal bins
    over range, the data's range by default; a 1-D tensor: the edges), normalised to a density when asked.
    (A composite only to return torch's named tuple: the counts are computed on the arrays, without gradient.)"""
    for other in (bins, weight):
        if isinstance(other, Tensor) and other.device != input.device:
            raise RuntimeError(f"histogram: expected all tensors on one device, got {input.device} and "
                               f"{other.device}")
    a = _floating("histogram", input._array).reshape(-1)
    _same_dtypes("histogram", input, [bins], weight)
    input = input._array
    xp = array_module(a)
    edges = _edges("histogram", a, bins, range, a.dtype)
    if isinstance(weight, Tensor):
        weight = weight._array
    if weight is not None and weight.shape != input.shape:
        raise RuntimeError(f"histogram: weight must have the input's shape {tuple(input.shape)}, got "
                           f"{tuple(weight.shape)}")
    w = None if weight is None else weight.reshape(-1).astype(np.float64)  # (summed exactly, rounded once)
    if not bool(xp.isfinite(edges).all()) or bool((edges[1:] < edges[:-1]).any()):
        raise RuntimeError("histogram: bin edges must be finite and never decrease")
    hist = _bin_counts(a.reshape(-1, 1), [edges], w).astype(a.dtype)  # (each weight in its own bin only)
    if density:
        with np.errstate(invalid="ignore", divide="ignore"):  # (an inf weight: inf / inf is NaN, as in torch)
            hist = hist / (hist.sum() * xp.diff(edges))
    return histogram_result(Tensor._wrap(hist.astype(input.dtype)), Tensor._wrap(edges.astype(input.dtype)))


@register("bincount", methods=("bincount",), differentiable=False)
def bincount(ctx, input, weights=None, minlength=0):
    """How often each value 0, 1, ... occurs in the 1-D non-negative integer input (the sum of weights there,
    given weights); at least minlength bins."""
    if input.dtype.kind not in "iu":
        raise NotImplementedError(f"bincount: input must hold integers, got {input.dtype.name}")
    if input.ndim != 1:
        raise RuntimeError(f"bincount: input must be a 1-D integer tensor, got {input.dtype.name} of shape "
                           f"{tuple(input.shape)}")
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)) or minlength < 0:
        raise RuntimeError(f"bincount: minlength must be a non-negative int, got {minlength!r}")
    xp = array_module(input)
    if input.size and bool((input < 0).any()):
        raise RuntimeError("bincount: input must be non-negative")
    if weights is not None and weights.shape != input.shape:
        raise RuntimeError(f"bincount: weights must have the input's shape {tuple(input.shape)}, got "
                           f"{tuple(weights.shape)}")
    out = xp.bincount(input, weights=None if weights is None else weights.astype(np.float64), minlength=minlength)
    if weights is None:
        return out.astype(np.int64)
    return out.astype(weights.dtype if _dt.is_floating(weights.dtype) else np.float64)


def _bin_counts(points, edges, weights):
    """The (weighted) count of points (N, D) in each cell of the bins the edges of each dim make: a point
    counts in bin i of a dim where edges[i] <= x < edges[i + 1] (the last bin closed on the right); a point
    outside [edges[0], edges[-1]] of any dim is not counted. Summed in float64."""
    xp = array_module(points)
    sizes = [e.shape[0] - 1 for e in edges]
    keep = xp.ones(points.shape[0], dtype=bool)
    cell = xp.zeros(points.shape[0], dtype=np.int64)
    for j, e in enumerate(edges):
        x = points[:, j]
        keep &= (x >= e[0]) & (x <= e[-1])
        pos = xp.searchsorted(e, x, side="right") - 1
        pos = xp.clip(xp.where(pos == sizes[j], sizes[j] - 1, pos), 0, max(sizes[j] - 1, 0))
        cell = cell * sizes[j] + pos
    w = xp.ones(points.shape[0]) if weights is None else weights
    total = int(np.prod(sizes))
    counts = xp.bincount(cell[keep], weights=w[keep], minlength=total) if total else xp.zeros(0)
    return counts.reshape(sizes)


@register("histogramdd", composite=True)
def histogramdd(ctx, input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges): the D-dimensional histogram of the points in input's rows (shape (..., D)); bins is an
    int, one int per dim, or one 1-D tensor of edges per dim; range is [min_0, max_0, min_1, max_1, ...].
    (A composite only to return torch's named tuple: the counts have no gradient.)"""
    for other in (weight, *(bins if isinstance(bins, (list, tuple)) else ())):
        if isinstance(other, Tensor) and other.device != input.device:
            raise RuntimeError(f"histogramdd: expected all tensors on one device, got {input.device} and "
                               f"{other.device}")
    if input.ndim < 1:
        raise RuntimeError("histogramdd: input must have at least one dim (the last holds each point's coordinates)")
    a = _floating("histogramdd", input._array)
    _same_dtypes("histogramdd", input, bins if isinstance(bins, (list, tuple)) else [bins], weight)
    d = a.shape[-1]
    if d == 0:
        raise RuntimeError("histogramdd: the last dim holds each point's coordinates, and it is empty")
    points = a.reshape(-1, d)
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    if len(per_dim) != d:
        raise RuntimeError(f"histogramdd: expected bins for each of the {d} dims, got {len(per_dim)}")
    if range is not None and len(range) != 2 * d:
        raise RuntimeError(f"histogramdd: range must hold a (min, max) pair for each of the {d} dims, got "
                           f"{len(range)} numbers")
    edges = [_edges("histogramdd", points[:, j], b, None if range is None else range[2 * j:2 * j + 2], a.dtype,
                    j) for j, b in enumerate(per_dim)]
    w = None
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape[:-1]):
            raise RuntimeError(f"histogramdd: weight must have the shape of input without its last dim "
                               f"{tuple(input.shape[:-1])}, got {tuple(weight.shape)}")
        w = weight._array.reshape(-1).astype(np.float64)
    hist = _bin_counts(points, edges, w)
    if density:
        xp = array_module(hist)
        volume = 1.0
        for j, e in enumerate(edges):
            volume = volume * xp.diff(e).reshape([-1 if k == j else 1 for k in builtins.range(d)])  # (range: an argument here)
        hist = hist / (hist.sum() * volume)
    return histogramdd_result(Tensor._wrap(hist.astype(input.dtype)), [Tensor._wrap(e.astype(input.dtype))
                                                                       for e in edges])
