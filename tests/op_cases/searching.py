"""Cases for the ops of mixprec/ops/searching.py against NumPy (no gradients: none is differentiable)."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, classes, const

INTS = np.array([[3, 1, 2, 1], [1, 3, 3, 0], [3, 1, 2, 1]])
RUNS = np.array([1.0, 1.0, 2.0, 2.0, 3.0, 1.0, 1.0])
SEQ = np.array([1.0, 3.0, 5.0, 7.0])
ROWS = np.array([[0.0, 2.0, 4.0], [1.0, 1.0, 6.0]])


def _consecutive(a):
    starts = np.concatenate([[True], a[1:] != a[:-1]])
    return a[starts], np.cumsum(starts) - 1, np.diff(np.append(np.flatnonzero(starts), len(a)))


CASES = [
    Case("unique", "unique", [const(INTS)], lambda x: (mp.unique(x), *x.unique(return_inverse=True,
                                                                                  return_counts=True)),
         lambda x: (np.unique(x), *np.unique(x, return_inverse=True, return_counts=True)), grad=False),
    Case("unique-dim", "unique", [const(INTS)], lambda x: mp.unique(x, dim=0, return_inverse=True, return_counts=True),
         lambda x: np.unique(x, axis=0, return_inverse=True, return_counts=True)[:3], grad=False),
    Case("unique-consecutive", "unique_consecutive", [const(RUNS)],
         lambda x: x.unique_consecutive(return_inverse=True, return_counts=True), _consecutive, grad=False),
    Case("unique-consecutive-dim", "unique_consecutive", [const(INTS.T.copy())],
         lambda x: mp.unique_consecutive(x, dim=1), lambda x: x[:, [0, 1, 2]], grad=False),
    Case("searchsorted", "searchsorted", [const(SEQ), const(np.array([[0.5, 3.0], [7.0, 9.0]]))],
         lambda s, v: (mp.searchsorted(s, v), mp.searchsorted(s, v, right=True), mp.searchsorted(s, 3.0, side="right")),
         lambda s, v: (np.searchsorted(s, v), np.searchsorted(s, v, "right"), np.searchsorted(s, 3.0, "right")),
         grad=False),
    Case("searchsorted-rows-sorter", "searchsorted",
         [const(ROWS[:, ::-1].copy()), const(np.array([[1.0], [1.0]])), const(np.array([[2, 1, 0], [2, 1, 0]]))],
         lambda s, v, order: mp.searchsorted(s, v, sorter=order), lambda s, v, order: np.array([[1], [0]]),
         grad=False),
    Case("bucketize", "bucketize", [const(np.array([0.5, 3.0, 4.0, 9.0])), const(SEQ)],
         lambda x, b: (mp.bucketize(x, b), mp.bucketize(x, b, right=True)),
         lambda x, b: (np.searchsorted(b, x), np.searchsorted(b, x, "right")), grad=False),
    Case("isin", "isin", [const(INTS), const(np.array([1, 2]))],
         lambda x, t: (mp.isin(x, t), mp.isin(x, t, invert=True), mp.isin(x, 3)),
         lambda x, t: (np.isin(x, t), ~np.isin(x, t), x == 3), grad=False),
    Case("nonzero", "nonzero", [classes(2, 3, 4)], lambda m: (mp.nonzero(m), *m.nonzero(as_tuple=True)),
         lambda m: (np.argwhere(m), *np.nonzero(m)), grad=False),
    Case("argwhere", "argwhere", [const(np.array([[0.0, 1.5], [2.0, 0.0]]))], lambda x: x.argwhere(), np.argwhere,
         grad=False),
    Case("nonzero-static", "nonzero_static", [const(np.array([0.0, 1.5, 2.0, 0.0, 3.0]))],
         lambda x: (mp.nonzero_static(x, size=5), x.nonzero_static(size=2, fill_value=7)),
         lambda x: (np.array([[1], [2], [4], [-1], [-1]]), np.array([[1], [2]])), grad=False),
]
