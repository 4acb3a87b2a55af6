"""Cases for the ops of mixprec/ops/rounding.py: inputs kept away from the jumps (where the zero gradient
would disagree with finite differences), ties in cases of their own."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const

_AWAY = const(np.array([[0.3, -1.7, 2.2], [-0.6, 5.4, -3.2]]))
_TIES = const(np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.0, -0.0]))

CASES = [
    Case("floor", "floor", [_AWAY], mp.floor, np.floor),
    Case("ceil", "ceil", [_AWAY], lambda a: a.ceil(), np.ceil),
    Case("trunc", "trunc", [_AWAY], mp.trunc, np.trunc),
    Case("round", "round", [_AWAY], lambda a: a.round(), np.round),
    Case("round-ties-to-even", "round", [_TIES], mp.round, np.round, grad=False),
    Case("round-decimals", "round", [const(np.array([0.1234, -2.5678, 12.3456, -0.0004]))],
         lambda a: mp.round(a, decimals=2), lambda a: np.round(a, 2), lowp_ulps=2),
    Case("round-negative-decimals", "round", [const(np.array([1234.5, -2567.0, 149.0, 51.0]))],
         lambda a: a.round(decimals=-2), lambda a: np.round(a, -2)),
    Case("frac", "frac", [_AWAY], mp.frac, lambda a: a - np.trunc(a), lowp_spread=1),
    Case("floor-ints", "floor", [const(np.array([3, -4, 0]))], lambda a: (a.floor(), a.ceil(), a.trunc(), a.round()),
         lambda a: (a, a, a, a), grad=False),
]
