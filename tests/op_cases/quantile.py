"""Cases for the ops of mixprec/ops/quantile.py (quantile, nanquantile) against np.quantile / np.nanquantile.

Inputs have no ties (``distinct``), so the answer is differentiable in the
input, and in q (the interpolation weight) for "linear"; both are checked.
"""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, distinct, uni

WITH_NAN = np.array([[0.3, np.nan, -1.2, 2.5, 0.7], [1.1, -0.4, 0.9, -2.0, 0.05]])

CASES = [
    Case("quantile", "quantile", [distinct(3, 7), uni(3, lo=0.1, hi=0.9)], lambda x, q: x.quantile(q, dim=1),
         lambda x, q: np.quantile(x, q, axis=1), lowp=False),
    Case("quantile-all-keepdim", "quantile", [distinct(2, 5)], lambda x: mp.quantile(x, 0.3, keepdim=True),
         lambda x: np.quantile(x, 0.3, keepdims=True), lowp=False),
    Case("quantile-modes", "quantile", [distinct(4, 6)],
         lambda x: [mp.quantile(x, 0.4, dim=0, interpolation=m) for m in ("lower", "higher", "midpoint", "nearest")],
         lambda x: [np.quantile(x, 0.4, axis=0, method=m) for m in ("lower", "higher", "midpoint", "nearest")],
         lowp=False),
    Case("quantile-nan", "quantile", [const(WITH_NAN)], lambda x: mp.quantile(x, 0.5, dim=-1),
         lambda x: np.quantile(x, 0.5, axis=-1), grad=False, lowp=False),
    Case("nanquantile", "nanquantile", [const(WITH_NAN), uni(2, lo=0.1, hi=0.9)],
         lambda x, q: x.nanquantile(q, dim=1, keepdim=True), lambda x, q: np.nanquantile(x, q, axis=1, keepdims=True),
         lowp=False),
]
