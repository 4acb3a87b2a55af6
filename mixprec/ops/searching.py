"""Searching and set ops: unique, unique_consecutive, searchsorted, bucketize, isin, nonzero, nonzero_static,
argwhere. Their results are indices, counts and masks (or values picked without a gradient, as torch's
unique): none is differentiable.
"""
from __future__ import annotations

import numpy as np

from ..backend import array_module
from ..tensor import Tensor
from .registry import register
from .shape import dim_index


def _slices(name, input, dim):
    """input as rows: (rows (n, -1), rebuild) where rebuild(rows) restores the other dims; dim None: flat."""
    xp = array_module(input)
    if dim is None:
        return input.reshape(-1, 1), lambda rows: rows.reshape(-1)
    d = dim_index(dim, input.ndim, name)
    empty = [i for i, n in enumerate(input.shape) if n == 0]
    if len(empty) > 1 or (empty and empty[0] != d):  # (as torch: slices of no elements cannot be told apart)
        raise RuntimeError(f"{name}: input of shape {tuple(input.shape)} has a 0-size dim other than dim={dim}; "
                           "unique slices need every other dim non-empty")
    moved = xp.moveaxis(input, d, 0)
    rest = moved.shape[1:]
    return moved.reshape(moved.shape[0], int(np.prod(rest))), lambda rows: xp.moveaxis(rows.reshape((rows.shape[0],) + rest), 0, d)


def _outputs(values, inverse, counts, return_inverse, return_counts):
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


@register("unique", methods=("unique",), differentiable=False)
def unique(ctx, input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of input in ascending order (always sorted, as torch on the CPU), or the distinct
    slices along dim; with the inverse (where each element went) and the counts when asked."""
    xp = array_module(input)
    if input.dtype.kind == "c":
        raise NotImplementedError("unique: complex input is not supported (complex numbers have no order)")
    if dim is None:
        flat = input.reshape(-1)
        values, inverse, counts = xp.unique(flat, return_inverse=True, return_counts=True)
        return _outputs(values, inverse.reshape(input.shape).astype(np.int64), counts.astype(np.int64),
                        return_inverse, return_counts)
    rows, rebuild = _slices("unique", input, dim)
    if rows.shape[0] == 0:
        empty = xp.zeros(0, dtype=np.int64)
        return _outputs(input, empty, empty, return_inverse, return_counts)
    order = xp.lexsort(xp.flip(rows, 1).T) if rows.shape[1] else xp.zeros(rows.shape[0], dtype=np.int64)
    ranked = rows[order]
    starts = _run_starts(ranked)
    group = xp.cumsum(starts) - 1
    inverse = xp.empty_like(group)
    inverse[order] = group
    return _outputs(rebuild(ranked[starts]), inverse.astype(np.int64), _counts(starts), return_inverse,
                    return_counts)


def _run_starts(rows):
    """A bool per row: whether it differs from the row before (the first row always does)."""
    xp = array_module(rows)
    change = (rows[1:] != rows[:-1]).any(axis=1) if rows.shape[1] else xp.zeros(rows.shape[0] - 1, dtype=bool)
    return xp.concatenate([xp.ones(1, dtype=bool), change])


def _counts(starts):
    xp = array_module(starts)
    at = xp.flatnonzero(starts)
    return xp.diff(xp.concatenate([at, xp.asarray([starts.shape[0]], dtype=at.dtype)])).astype(np.int64)


@register("unique_consecutive", methods=("unique_consecutive",), differentiable=False)
def unique_consecutive(ctx, input, return_inverse=False, return_counts=False, dim=None):
    """input with each run of equal consecutive elements (slices along dim) kept once; with the inverse and
    the run lengths when asked."""
    xp = array_module(input)
    rows, rebuild = _slices("unique_consecutive", input, dim)
    if rows.shape[0] == 0:
        empty = xp.zeros(0, dtype=np.int64)
        return _outputs(input.reshape(-1) if dim is None else input, empty.reshape(input.shape) if dim is None
                        else empty, empty, return_inverse, return_counts)
    starts = _run_starts(rows)
    inverse = (xp.cumsum(starts) - 1).astype(np.int64)
    return _outputs(rebuild(rows[starts]), inverse.reshape(input.shape) if dim is None else inverse,
                    _counts(starts), return_inverse, return_counts)


def _side(name, right, side):
    if side is not None and side not in ("left", "right"):
        raise RuntimeError(f"{name}: side must be 'left' or 'right', got {side!r}")
    if side == "left" and right:
        raise RuntimeError(f"{name}: side='left' and right=True contradict each other; pass one of them")
    return "right" if right or side == "right" else "left"


@register("searchsorted", promote=(0, 1), differentiable=False)
def searchsorted(ctx, sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Where each value of input would go in sorted_sequence (sorted along its last dim) to keep it sorted:
    before equal elements (side 'left'), or after them (right=True / side='right'). An N-D sequence
    searches each of its rows with the row of input in the same place."""
    xp = array_module(sorted_sequence)
    how = _side("searchsorted", right, side)
    seq = sorted_sequence
    if isinstance(sorter, Tensor):  # (a keyword argument: not unwrapped by dispatch)
        sorter = sorter._array
    if sorter is not None:
        if sorter.shape != seq.shape or sorter.dtype.kind not in "iu":
            raise RuntimeError(f"searchsorted: sorter must be an integer tensor of the sequence's shape "
                               f"{tuple(seq.shape)}, got {sorter.dtype.name} {tuple(sorter.shape)}")
        seq = xp.take_along_axis(seq, sorter.astype(np.int64), -1) if seq.ndim else seq
    if seq.ndim == 0:
        raise RuntimeError("searchsorted: the sorted sequence must have at least one dimension, got a 0-d tensor")
    if seq.ndim > 1 and (input.ndim != seq.ndim or input.shape[:-1] != seq.shape[:-1]):
        raise RuntimeError(f"searchsorted: an N-D sequence {tuple(seq.shape)} needs input with the same leading "
                           f"dims, got {tuple(input.shape)}")
    dtype = np.int32 if out_int32 else np.int64
    values = xp.asarray(input)
    lead = int(np.prod(seq.shape[:-1]))
    values = values.reshape((lead, values.shape[-1]) if seq.ndim > 1 else (1, -1))
    out = _binary_search(seq.reshape(lead, seq.shape[-1]), values, how == "right")
    return out.reshape(np.shape(input)).astype(dtype)


def _binary_search(rows, values, right):
    """For each value (lead, m) its place in the row of ``rows`` (lead or 1, n) in the same place: the first
    position whose element is >= the value (> with ``right``), found by bisection with plain comparisons, as
    torch searches. A NaN compares false, so where NaNs sit in the sequence or the values, the result is the
    one that bisection reaches (NumPy's searchsorted orders NaN as the largest value instead)."""
    xp = array_module(rows)
    n = rows.shape[-1]
    lo = xp.zeros(values.shape, dtype=np.int64)
    hi = xp.full(values.shape, n, dtype=np.int64)
    for _ in range(n.bit_length()):  # (each halving leaves at most half of [lo, hi))
        active = lo < hi
        mid = (lo + hi) // 2
        at = xp.take_along_axis(rows, xp.minimum(mid, n - 1), -1)
        below = ~(at > values) if right else ~(at >= values)
        lo = xp.where(active & below, mid + 1, lo)
        hi = xp.where(active & ~below, mid, hi)
    return lo


@register("bucketize", promote=(0, 1), differentiable=False)
def bucketize(ctx, input, boundaries, *, out_int32=False, right=False):
    """The bucket of each element of input among the sorted 1-D boundaries: i with boundaries[i-1] < x <=
    boundaries[i] (boundaries[i-1] <= x < boundaries[i] with right=True)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"bucketize: boundaries must be 1-D, got shape {tuple(boundaries.shape)}")
    values = array_module(boundaries).asarray(input)
    out = _binary_search(boundaries.reshape(1, -1), values.reshape(1, -1), right).reshape(values.shape)
    return out.astype(np.int32 if out_int32 else np.int64)


@register("isin", promote=(0, 1), differentiable=False)
def isin(ctx, elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of elements is among test_elements (is not, with invert=True)."""
    xp = array_module(test_elements if np.ndim(elements) == 0 and not hasattr(elements, "shape") else elements)
    return xp.isin(elements, test_elements, invert=invert).reshape(np.shape(elements))


def _nonzero(input):
    xp = array_module(input)
    if input.ndim == 0:
        return xp.zeros((int(input != 0), 0), dtype=np.int64)
    return xp.stack(xp.nonzero(input), axis=1).astype(np.int64)


@register("nonzero", methods=("nonzero",), differentiable=False)
def nonzero(ctx, input, *, as_tuple=False):
    """The indices of the non-zero elements, one row each, (n, ndim); as_tuple: one 1-D tensor per dim."""
    if as_tuple:
        xp = array_module(input)
        return tuple(i.astype(np.int64) for i in xp.nonzero(input.reshape(1) if input.ndim == 0 else input))
    return _nonzero(input)


@register("argwhere", methods=("argwhere",), differentiable=False)
def argwhere(ctx, input):
    """nonzero(input): the indices of the non-zero elements, (n, ndim)."""
    return _nonzero(input)


@register("nonzero_static", methods=("nonzero_static",), differentiable=False)
def nonzero_static(ctx, input, *, size, fill_value=-1):
    """nonzero with exactly ``size`` rows: cut short, or padded with fill_value."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise RuntimeError(f"nonzero_static: size must be a non-negative int, got {size!r}")
    found = _nonzero(input)[:size]
    xp = array_module(input)
    pad = xp.full((size - found.shape[0], found.shape[1]), fill_value, dtype=np.int64)
    return xp.concatenate([found, pad])
