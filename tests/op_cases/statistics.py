"""Cases for the ops of mixprec/ops/statistics.py, and std (mixprec/ops/reduce.py), against NumPy."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, distinct, rnd, uni

WITH_NAN = np.array([[0.3, np.nan, -1.2, 2.5], [1.1, -0.4, np.nan, np.nan], [0.7, 0.2, -2.0, 0.05]])
TIES = np.array([[0.5, 0.5, -1.0, 2.0, 2.0], [-0.25, 1.5, 1.5, -3.0, 1.5]])


def _running(a, axis, better):
    """Reference running extreme: values and the index of the latest tie."""
    a = np.moveaxis(a, axis, -1)
    vals, idx = np.empty_like(a), np.zeros(a.shape, np.int64)
    for pos in np.ndindex(a.shape[:-1]):
        best, at = a[pos][0], 0
        for i, v in enumerate(a[pos]):
            if better(v, best):
                best, at = v, i
            vals[pos][i], idx[pos][i] = best, at
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


def _logcumsumexp(a, axis):
    return np.log(np.cumsum(np.exp(a), axis=axis))


CASES = [
    Case("std", "std", [rnd(3, 5)], lambda a: a.std(), lambda a: np.std(a, ddof=1)),
    Case("std-dim-biased-keepdim", "std", [rnd(3, 4)], lambda a: mp.std(a, 1, keepdim=True, correction=0),
         lambda a: np.std(a, 1, keepdims=True)),
    Case("std-unbiased-flag", "std", [rnd(2, 3)], lambda a: mp.std(a, False), np.std),
    Case("var-mean", "var_mean", [rnd(3, 4)], lambda a: mp.var_mean(a, 0),
         lambda a: (np.var(a, 0, ddof=1), np.mean(a, 0))),
    Case("std-mean", "std_mean", [rnd(2, 3, 2)], lambda a: mp.std_mean(a, (0, 2), correction=0, keepdim=True),
         lambda a: (np.std(a, (0, 2), keepdims=True), np.mean(a, (0, 2), keepdims=True))),
    Case("nansum", "nansum", [const(WITH_NAN)], lambda a: (a.nansum(), mp.nansum(a, 1)),
         lambda a: (np.nansum(a), np.nansum(a, 1)), lowp_ulps=2),
    Case("nanmean", "nanmean", [const(WITH_NAN)], lambda a: (a.nanmean(0), mp.nanmean(a, 1, keepdim=True)),
         lambda a: (np.nanmean(a, 0), np.nanmean(a, 1, keepdims=True)), lowp_ulps=3),
    Case("count-nonzero", "count_nonzero", [const(np.array([[0.0, 1.5, 0.0], [2.0, -1.0, 0.0]]))],
         lambda a: (mp.count_nonzero(a), a.count_nonzero(0), mp.count_nonzero(a, (0, 1))),
         lambda a: (np.count_nonzero(a), np.count_nonzero(a, 0), np.count_nonzero(a, (0, 1))), grad=False),
    Case("aminmax", "aminmax", [distinct(3, 4)], lambda a: tuple(mp.aminmax(a, dim=1)),
         lambda a: (a.min(1), a.max(1))),
    Case("aminmax-all-keepdim", "aminmax", [distinct(2, 3)], lambda a: tuple(a.aminmax(keepdim=True)),
         lambda a: (a.min(keepdims=True), a.max(keepdims=True))),
    Case("cummax", "cummax", [distinct(3, 5)], lambda a: tuple(mp.cummax(a, 1)),
         lambda a: _running(a, 1, lambda v, b: v >= b)),
    Case("cummax-ties", "cummax", [const(TIES)], lambda a: tuple(mp.cummax(a, 1)),  # (not differentiable at ties)
         lambda a: _running(a, 1, lambda v, b: v >= b), grad=False),
    Case("cummin", "cummin", [distinct(4, 3)], lambda a: tuple(a.cummin(0)),
         lambda a: _running(a, 0, lambda v, b: v <= b)),
    Case("cummin-ties", "cummin", [const(TIES)], lambda a: tuple(a.cummin(-1)),
         lambda a: _running(a, 1, lambda v, b: v <= b), grad=False),
    Case("logcumsumexp", "logcumsumexp", [rnd(3, 5)], lambda a: a.logcumsumexp(1), lambda a: _logcumsumexp(a, 1),
         lowp_ulps=2),
    Case("logcumsumexp-dim0", "logcumsumexp", [rnd(4, 2)], lambda a: mp.logcumsumexp(a, 0),
         lambda a: _logcumsumexp(a, 0), lowp_ulps=2),
]

CASES += [
    Case("cov", "cov", [rnd(3, 6)], lambda a: a.cov(), np.cov, lowp_ulps=4, lowp_spread=4),
    Case("cov-weights", "cov", [rnd(2, 5), const(np.array([1, 2, 1, 3, 1])), uni(5, lo=0.5, hi=2.0)],
         lambda a, f, w: mp.cov(a, correction=0, fweights=f, aweights=w),
         lambda a, f, w: np.cov(a, ddof=0, fweights=f, aweights=w), lowp=False),
    Case("cov-1d", "cov", [rnd(6)], lambda a: mp.cov(a), lambda a: np.cov(a), lowp=False),
    Case("corrcoef", "corrcoef", [rnd(3, 7)], lambda a: a.corrcoef(), np.corrcoef, lowp=False),
]
