"""Sorting and selection: sort, argsort, msort, topk, kthvalue, median, nanmedian, mode.

Each finds its indices on the raw data (a stable sort, NaN ordered as the largest value, as torch) and
reads the values with ``gather``, a composite: the gradient goes to the element each index names, in
both modes of autograd. Between equal values the stable order decides (the earlier element first);
torch's selection algorithms (kthvalue, median, topk) may name another of the equal elements, with the
same value. median() and nanmedian() of a whole tensor share the gradient evenly between the elements
equal to the answer, as torch does.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor
from .elementwise import where
from .registry import register
from .shape import dim_index

sort_result = namedtuple("sort", ["values", "indices"])  # torch.return_types.sort, and so on
topk_result = namedtuple("topk", ["values", "indices"])
kthvalue_result = namedtuple("kthvalue", ["values", "indices"])
median_result = namedtuple("median", ["values", "indices"])
nanmedian_result = namedtuple("nanmedian", ["values", "indices"])
mode_result = namedtuple("mode", ["values", "indices"])


def _refuse_complex(name, input):
    if input.dtype.kind == "c":
        raise RuntimeError(f"{name}: complex input is not supported (complex numbers have no order), got "
                        f"{input.dtype.name}")


def _refuse_bool(name, input, error=NotImplementedError):
    """Selection has no bool kernel in torch (sort has): refused with torch's exception type."""
    if input.dtype == _dt.bool_:
        raise error(f"{name}: bool input is not supported; convert it to an integer or floating dtype first")


def stable_order(a, axis, descending=False):
    """The stable argsort of array ``a`` along ``axis`` (NaN as the largest value); descending keeps equal
    elements in their original order too."""
    if a.dtype == _dt.bfloat16:  # (NumPy's sort of this extension dtype misplaces NaN; float32 holds it exactly)
        a = a.astype(np.float32)
    if not descending:
        return _stable_argsort(a, axis)
    xp = array_module(a)
    return (a.shape[axis] - 1) - xp.flip(_stable_argsort(xp.flip(a, axis), axis), axis)


def _stable_argsort(a, axis):
    """NumPy's stable argsort; elsewhere (CuPy promises no order of equal elements) any argsort, then the
    equal elements put in index order by a second argsort of keys that are all distinct."""
    xp = array_module(a)
    if xp is np:
        return np.argsort(a, axis=axis, kind="stable")
    idx = xp.argsort(a, axis=axis)
    if a.ndim == 0 or a.shape[axis] <= 1:
        return idx
    s, i = (xp.moveaxis(v, axis, -1) for v in (xp.take_along_axis(a, idx, axis), idx))
    same_nan = (s[..., 1:] != s[..., 1:]) & (s[..., :-1] != s[..., :-1])
    group = xp.cumsum((s[..., 1:] != s[..., :-1]) & ~same_nan, axis=-1)  # the run of equal values, 0 first
    group = xp.concatenate([xp.zeros(group.shape[:-1] + (1,), dtype=group.dtype), group], axis=-1)
    order = xp.argsort(group.astype(np.int64) * s.shape[-1] + i, axis=-1)
    return xp.moveaxis(xp.take_along_axis(i, order, -1), -1, axis)


def _along(name, input, dim):
    """(x, d): input as at least 1-d, and dim as an index into it."""
    _refuse_complex(name, input)
    d = dim_index(dim, input.ndim, name)
    return (input.reshape(1) if input.ndim == 0 else input), d


def _result(result, input, values, idx):
    if input.ndim == 0:
        return result(values.reshape(()), idx.reshape(()))
    return result(values, idx)


@register("sort", methods=("sort",), composite=True)
def sort(ctx, input, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along dim; equal elements keep their order (the sort is always stable)."""
    if isinstance(dim, bool):  # sort(x, stable=...) given positionally: torch's sort(input, stable, dim, ...)
        raise TypeError("sort: dim must be an int, got a bool; pass stable= by keyword")
    x, d = _along("sort", input, dim)
    idx = Tensor._wrap(stable_order(x._array, d, descending))
    return _result(sort_result, input, x.gather(d, idx), idx)


@register("argsort", methods=("argsort",), differentiable=False)
def argsort(ctx, input, dim=-1, descending=False, stable=False):
    """The indices that sort input along dim (stably)."""
    d = dim_index(dim, input.ndim, "argsort")
    if input.dtype.kind == "c":
        raise RuntimeError(f"argsort: complex input is not supported (complex numbers have no order)")
    return stable_order(input.reshape(1), 0, descending).reshape(()) if input.ndim == 0 else \
        stable_order(input, d, descending)


@register("msort", methods=("msort",), composite=True)
def msort(ctx, input):
    """input sorted along its first dim (the values of sort(input, 0))."""
    return sort(input, 0).values


def _check_k(name, k, n, lowest):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"{name}: k must be an int, got {type(k).__name__}")
    if not lowest <= k <= n:
        raise RuntimeError(f"{name}: k={k} is out of range for a dim of size {n} (expected {lowest} <= k <= {n})")


@register("topk", methods=("topk",), composite=True)
def topk(ctx, input, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (smallest with largest=False) elements along dim, in order."""
    _refuse_bool("topk", input, RuntimeError)
    x, d = _along("topk", input, dim)
    _check_k("topk", k, x.shape[d], 0)
    order = stable_order(x._array, d, descending=largest)
    idx = Tensor._wrap(array_module(order).take(order, array_module(order).arange(k), axis=d))
    return _result(topk_result, input, x.gather(d, idx), idx)


def _select(x, d, position, keepdim):
    """(values, indices) at sorted ``position`` (an int array broadcasting along d, or an int) along d."""
    order = stable_order(x._array, d)
    xp = array_module(order)
    pos = xp.asarray(position, dtype=np.int64)
    pos = xp.broadcast_to(pos.reshape((1,) * x.ndim) if pos.ndim == 0 else pos,
                          tuple(1 if i == d else n for i, n in enumerate(x.shape)))
    idx = Tensor._wrap(xp.take_along_axis(order, pos, axis=d))
    values = x.gather(d, idx)
    return (values, idx) if keepdim else (values.squeeze(d), idx.squeeze(d))


@register("kthvalue", methods=("kthvalue",), composite=True)
def kthvalue(ctx, input, k, dim=-1, keepdim=False):
    """(values, indices) of the k-th smallest element (k from 1) along dim."""
    _refuse_bool("kthvalue", input)
    x, d = _along("kthvalue", input, dim)
    _check_k("kthvalue", k, x.shape[d], 1)
    return _result(kthvalue_result, input, *_select(x, d, k - 1, keepdim or input.ndim == 0))


def _median_position(x, d, skip_nan):
    """The sorted position of the lower median of each slice along d (kept as a length-1 dim): among the
    values that are not NaN for nanmedian; for median, the first NaN where a slice has one."""
    xp = array_module(x._array)
    nans = xp.isnan(x._array).sum(axis=d, keepdims=True) if _dt.is_floating(x.dtype) else \
        xp.zeros([1 if i == d else n for i, n in enumerate(x.shape)], dtype=np.int64)
    n = x.shape[d]
    if skip_nan:
        return xp.maximum((n - nans - 1) // 2, 0)  # a slice of NaNs only: its first NaN
    return xp.where(nans > 0, n - nans, (n - 1) // 2)


def _median(name, input, dim, keepdim, skip_nan, result):
    _refuse_complex(name, input)
    _refuse_bool(name, input)
    if dim is None:  # the whole tensor: the value only, its gradient shared by the elements equal to it
        if input.numel() == 0:  # (as torch: NaN, for a floating input)
            if not _dt.is_floating(input.dtype):
                raise RuntimeError(f"{name}: the median of an empty {input.dtype.name} tensor is not defined")
            return input.sum() * float("nan")
        x = input.reshape(-1)
        value = _select(x, 0, _median_position(x, 0, skip_nan), False)[0]
        if not _dt.is_floating(x.dtype):
            return value
        v = value.detach()
        same = x.isnan() if bool(v.isnan()) else x == v
        # v exactly, plus a sum that is zero in value and spreads the gradient over the elements equal to v
        return v + where(same, x - v, 0.0).sum() / same.sum()
    x, d = _along(name, input, dim)
    if x.shape[d] == 0:
        raise IndexError(f"{name}: cannot take the median of an empty dim {dim} (input of shape "
                         f"{tuple(input.shape)})")
    return _result(result, input, *_select(x, d, _median_position(x, d, skip_nan), keepdim or input.ndim == 0))


@register("median", methods=("median",), composite=True)
def median(ctx, input, dim=None, keepdim=False):
    """The lower median (the smaller of the middle two for an even count): of all elements (a value), or
    (values, indices) along dim. A slice with a NaN gives NaN (the index of its first NaN)."""
    return _median("median", input, dim, keepdim, False, median_result)


@register("nanmedian", methods=("nanmedian",), composite=True)
def nanmedian(ctx, input, dim=None, keepdim=False):
    """median ignoring NaN: NaN only where a slice is all NaN."""
    return _median("nanmedian", input, dim, keepdim, True, nanmedian_result)


def _mode_index(a, d):
    """For each slice along d: the index of the last occurrence of its most frequent value (the smallest of
    equally frequent ones; each NaN counts once), kept as a length-1 dim."""
    xp = array_module(a)
    moved = xp.moveaxis(a, d, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    n = rows.shape[-1]
    out = xp.zeros((rows.shape[0], 1), dtype=np.int64)
    for r in range(rows.shape[0]):
        values, counts = xp.unique(rows[r], return_counts=True)
        counts = xp.where(values != values, 1, counts)  # each NaN is a value of its own (as torch counts them)
        value = values[int(xp.argmax(counts))]
        same = (rows[r] == value) | ((rows[r] != rows[r]) & (value != value))  # (NaNs count as one value)
        out[r, 0] = n - 1 - int(xp.argmax(xp.flip(same, 0)))
    return xp.moveaxis(out.reshape(moved.shape[:-1] + (1,)), -1, d)


@register("mode", methods=("mode",), composite=True)
def mode(ctx, input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value along dim (the smallest of equally frequent ones) and the
    index of its last occurrence."""
    x, d = _along("mode", input, dim)
    if x.shape[d] == 0:
        raise IndexError(f"mode: cannot take the mode of an empty dim {dim} (input of shape {tuple(input.shape)})")
    idx = Tensor._wrap(_mode_index(x._array, d))
    values = x.gather(d, idx)
    if not keepdim and input.ndim:
        values, idx = values.squeeze(d), idx.squeeze(d)
    return _result(mode_result, input, values, idx)
