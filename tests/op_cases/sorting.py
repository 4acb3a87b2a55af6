"""Cases for the ops of mixprec/ops/sorting.py against NumPy's sorts (a stable argsort)."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, distinct

TIES = np.array([[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [0.5, -1.0, 0.5, 0.5, -1.0, 2.0]])
WITH_NAN = np.array([[1.0, np.nan, 0.0, np.nan, 5.0], [0.25, -1.0, 3.0, 2.0, 0.75], [np.nan] * 5])


def _sort(a, axis, descending=False):
    if descending:  # stable, equal elements in their original order
        idx = np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)
        idx = a.shape[axis] - 1 - idx
    else:
        idx = np.argsort(a, axis=axis, kind="stable")
    return np.take_along_axis(a, idx, axis), idx


def _lower_median(a, axis, skip_nan=False):
    """Values and indices of the lower median along axis, by a stable argsort; NaN handling as torch's."""
    vals, idx = _sort(a, axis)
    nan = np.isnan(a).sum(axis, keepdims=True)
    n = a.shape[axis]
    pos = np.maximum((n - nan - 1) // 2, 0) if skip_nan else np.where(nan > 0, n - nan, (n - 1) // 2)
    return (np.take_along_axis(vals, pos, axis).squeeze(axis), np.take_along_axis(idx, pos, axis).squeeze(axis))


def _whole_nanmedian(a):
    """The lower median of a's values that are not NaN (NaN when there are none)."""
    kept = np.sort(a[~np.isnan(a)])
    return np.array(kept[(kept.size - 1) // 2] if kept.size else np.nan)


def _mode(a):
    """Along the last dim: the most frequent value (the smallest of ties) and its last index."""
    vals, idx = [], []
    for row in a.reshape(-1, a.shape[-1]):
        counts = {v: int((row == v).sum()) for v in row}
        value = min(v for v, c in counts.items() if c == max(counts.values()))
        vals.append(value)
        idx.append(int(np.flatnonzero(row == value)[-1]))
    return np.array(vals).reshape(a.shape[:-1]), np.array(idx).reshape(a.shape[:-1])


CASES = [
    Case("sort", "sort", [distinct(3, 5)], lambda a: tuple(a.sort()), lambda a: _sort(a, -1)),
    Case("sort-desc-dim0", "sort", [distinct(4, 3)], lambda a: tuple(mp.sort(a, 0, descending=True)),
         lambda a: _sort(a, 0, True)),
    Case("sort-nan-half", "sort", [const(WITH_NAN[:2])], lambda a: a.to(mp.bfloat16).sort()[1],
         lambda a: _sort(a, -1)[1], grad=False),
    Case("sort-ties-nan", "sort", [const(np.concatenate([TIES[:, :5], WITH_NAN[:2]]))],
         lambda a: (*a.sort(stable=True), *a.sort(descending=True)),
         lambda a: (*_sort(a, -1), *_sort(a, -1, True)), grad=False, lowp=False),
    Case("argsort", "argsort", [const(TIES)], lambda a: (a.argsort(), mp.argsort(a, 1, descending=True)),
         lambda a: (_sort(a, -1)[1], _sort(a, 1, True)[1]), grad=False),
    Case("msort", "msort", [distinct(4, 3)], lambda a: a.msort(), lambda a: np.sort(a, 0)),
    Case("topk", "topk", [distinct(3, 6)], lambda a: tuple(a.topk(3)),
         lambda a: tuple(x[:, :3] for x in _sort(a, -1, True))),
    Case("topk-smallest-dim0", "topk", [distinct(5, 2)], lambda a: tuple(mp.topk(a, 2, 0, largest=False)),
         lambda a: tuple(x[:2] for x in _sort(a, 0))),
    Case("kthvalue", "kthvalue", [distinct(3, 5)], lambda a: tuple(a.kthvalue(2)),
         lambda a: tuple(x[:, 1] for x in _sort(a, -1))),
    Case("kthvalue-dim0-keepdim", "kthvalue", [distinct(4, 3)], lambda a: tuple(mp.kthvalue(a, 4, 0, True)),
         lambda a: tuple(x[3:] for x in _sort(a, 0))),
    Case("median", "median", [distinct(3, 4)], lambda a: (a.median(), *mp.median(a, 1)),
         lambda a: (np.sort(a.ravel())[5], *_lower_median(a, 1))),
    Case("median-ties", "median", [const(TIES)], lambda a: a.median(), lambda a: np.array(1.0)),
    Case("median-nan", "median", [const(WITH_NAN)], lambda a: tuple(a.median(1)), lambda a: _lower_median(a, 1),
         grad=False, lowp=False),
    Case("nanmedian", "nanmedian", [const(WITH_NAN)], lambda a: (*a.nanmedian(-1), mp.nanmedian(a)),
         lambda a: (*_lower_median(a, -1, True), _whole_nanmedian(a)), grad=False, lowp=False),
    Case("nanmedian-dim0", "nanmedian", [distinct(5, 2)], lambda a: tuple(mp.nanmedian(a, 0, keepdim=True)),
         lambda a: tuple(x[None] for x in _lower_median(a, 0, True))),
    Case("mode", "mode", [const(TIES)], lambda a: tuple(a.mode()), _mode, grad=False),  # (ties)
]
