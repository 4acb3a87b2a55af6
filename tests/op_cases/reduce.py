"""Cases for the ops of mixprec/ops/reduce.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, distinct, pos, rnd, uni


def _logsumexp(a, axis, keepdims=False):
    m = a.max(axis=axis, keepdims=True)
    out = np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis)

CASES = [
    Case("sum", "sum", [rnd(2, 3)], lambda a: a.sum(), np.sum),
    Case("sum-dim", "sum", [rnd(2, 3, 4)], lambda a: mp.sum(a, 1), lambda a: a.sum(1)),
    Case("sum-dims-keepdim", "sum", [rnd(2, 3, 4)], lambda a: a.sum(dim=(0, -1), keepdim=True),
         lambda a: a.sum(axis=(0, 2), keepdims=True)),
    Case("mean", "mean", [rnd(2, 3)], mp.mean, np.mean),
    Case("mean-dim-keepdim", "mean", [rnd(2, 3, 4)], lambda a: a.mean(-1, keepdim=True),
         lambda a: a.mean(-1, keepdims=True)),
    Case("prod", "prod", [pos(2, 3)], lambda a: a.prod(), np.prod),
    Case("prod-dim", "prod", [rnd(3, 4)], lambda a: mp.prod(a, 1), lambda a: a.prod(1)),
    Case("prod-one-zero", "prod", [const(np.array([[0.0, 2.0, -1.5], [1.2, 0.7, 3.0]]))],
         lambda a: a.prod(dim=1, keepdim=True), lambda a: a.prod(1, keepdims=True), lowp=False),
    Case("prod-two-zeros", "prod", [const(np.array([[0.0, 2.0, 0.0], [1.2, 0.0, 3.0]]))], lambda a: a.prod(dim=1),
         lambda a: a.prod(1), lowp=False),
    Case("amax", "amax", [distinct(2, 3)], lambda a: a.amax(), np.max),
    Case("amax-dim", "amax", [distinct(3, 4)], lambda a: mp.amax(a, 1), lambda a: a.max(1)),
    Case("amin-dim-keepdim", "amin", [distinct(3, 4)], lambda a: a.amin(0, keepdim=True),
         lambda a: a.min(0, keepdims=True)),
    Case("amin-dims", "amin", [distinct(2, 3, 2)], lambda a: mp.amin(a, (0, 2)), lambda a: a.min((0, 2))),
    Case("logsumexp", "logsumexp", [rnd(2, 5)], lambda a: a.logsumexp(1), lambda a: _logsumexp(a, 1)),
    Case("logsumexp-dims-keepdim", "logsumexp", [rnd(2, 3, 4)], lambda a: mp.logsumexp(a, (0, -1), keepdim=True),
         lambda a: _logsumexp(a, (0, 2), keepdims=True)),
    Case("logsumexp-large", "logsumexp", [uni(3, 4, lo=500.0, hi=520.0)], lambda a: mp.logsumexp(a, 0),
         lambda a: _logsumexp(a, 0), lowp_ulps=2),
    Case("var", "var", [rnd(2, 5)], lambda a: a.var(), lambda a: np.var(a, ddof=1)),
    Case("var-dim-biased", "var", [rnd(3, 4)], lambda a: mp.var(a, 1, correction=0), lambda a: np.var(a, 1)),
    Case("var-keepdim", "var", [rnd(3, 4)], lambda a: a.var(0, keepdim=True),
         lambda a: np.var(a, 0, ddof=1, keepdims=True)),
    Case("cumsum", "cumsum", [rnd(5)], lambda a: a.cumsum(0), np.cumsum),
    Case("cumsum-dim", "cumsum", [rnd(2, 3, 2)], lambda a: mp.cumsum(a, dim=1), lambda a: np.cumsum(a, 1)),
    Case("cumsum-neg-dim", "cumsum", [rnd(3, 4)], lambda a: a.cumsum(-1), lambda a: np.cumsum(a, -1)),
    Case("cumprod", "cumprod", [rnd(5)], lambda a: a.cumprod(0), np.cumprod, lowp_ulps=4, lowp_spread=4,
         second_order=True),
    Case("cumprod-dim", "cumprod", [rnd(2, 4, 3)], lambda a: mp.cumprod(a, dim=1), lambda a: np.cumprod(a, 1),
         lowp_ulps=4, lowp_spread=4),
    Case("cumprod-zeros", "cumprod",  # rows: two zeros, one zero, none
         [const(np.array([[0.5, 0.0, 2.0, 0.0, 1.5], [1.25, -0.75, 0.0, 3.0, 0.5], [0.75, 1.5, -0.5, 1.25, 2.0]]))],
         lambda a: a.cumprod(-1), lambda a: np.cumprod(a, -1), lowp_ulps=4, lowp_spread=4, second_order=True),
    # ---- max / min: all elements, (values, indices) along a dim (the several-output ops), elementwise
    Case("max-all", "max", [distinct(2, 3)], lambda a: a.max(), np.max),
    Case("min-all", "min", [distinct(3, 2)], mp.min, np.min),
    Case("min-other", "min", [rnd(2, 3), rnd(3)], lambda a, b: mp.min(a, b), np.minimum),
    Case("max-dim", "max.dim", [distinct(3, 4)], lambda a: a.max(1), lambda a: (a.max(1), a.argmax(1))),
    Case("max-dim-keepdim-neg", "max.dim", [distinct(2, 3, 2)], lambda a: mp.max(a, -2, keepdim=True),
         lambda a: (a.max(-2, keepdims=True), a.argmax(-2)[:, None])),
    Case("min-dim", "min.dim", [distinct(4, 3)], lambda a: a.min(dim=0), lambda a: (a.min(0), a.argmin(0))),
    Case("min-dim-0d", "min.dim", [const(np.array(1.5))], lambda a: a.min(0), lambda a: (a, np.array(0))),
    # ---- index and boolean reductions: exact, no gradient
    Case("argmax-argmin", "argmax", [distinct(3, 4)], lambda a: (a.argmax(1), mp.argmin(a, 0)),
         lambda a: (a.argmax(1), a.argmin(0)), grad=False),
    Case("all-any", "all", [const(np.array([[True, False], [True, True]]))], lambda m: (m.all(1), m.any()),
         lambda m: (m.all(1), m.any()), grad=False),
]
