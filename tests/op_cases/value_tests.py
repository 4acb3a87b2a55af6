"""Cases for the ops of mixprec/ops/value_tests.py (exact bool results, no gradient)."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const

_SPECIALS = const(np.array([1.0, np.inf, -np.inf, np.nan, -0.0]))

CASES = [
    Case("isposinf-isneginf", "isposinf", [_SPECIALS], lambda x: (mp.isposinf(x), x.isneginf()),
         lambda x: (np.isposinf(x), np.isneginf(x)), grad=False),
    Case("isneginf-ints", "isneginf", [const(np.array([-3, 0, 7]))], mp.isneginf, lambda x: x < -10, grad=False),
    Case("isreal", "isreal", [const(np.array([1.0, 2.0]))], lambda x: (x.isreal(), mp.complex(x, x - 1).isreal()),
         lambda x: (np.ones(2, bool), x - 1 == 0), grad=False, lowp=False),
    Case("isclose", "isclose", [const(np.array([1.0, 1.001, np.nan, np.inf, 2.0])),
                                const(np.array([1.0, 1.0, np.nan, np.inf, -np.inf]))],
         lambda a, b: (mp.isclose(a, b, rtol=1e-2), a.isclose(b, equal_nan=True)),
         lambda a, b: (np.isclose(a, b, rtol=1e-2), np.isclose(a, b, equal_nan=True)), grad=False),
    Case("isclose-ints", "isclose", [const(np.array([1, 3, 0, 5])), const(np.array([3, 1, 0, 6]))],
         lambda a, b: (mp.isclose(a.byte(), b.byte(), atol=2), mp.isclose(a, b, rtol=0.2)),
         lambda a, b: (np.abs(a - b) <= 2, np.abs(a - b) <= 0.2 * np.abs(b)), grad=False),
]
