"""Cases for the ops of mixprec/ops/bitwise.py (exact, no gradient: integer and bool results)."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const

INTS = const(np.array([[5, -6, 0, 127], [3, 12, -1, 64]]))
OTHER = const(np.array([3, 10, -7, 1]))
MASK = const(np.array([True, False, True, False]))
COUNTS = const(np.array([0, 1, 63, 64, -1]))  # 64 and -1: every bit shifted out (as torch defines it)

CASES = [
    Case("bitwise_and", "bitwise_and", [INTS, OTHER], lambda a, b: a & b, np.bitwise_and, grad=False),
    Case("bitwise_and-scalar", "bitwise_and", [INTS], lambda a: 3 & a, lambda a: 3 & a, grad=False),
    Case("bitwise_or", "bitwise_or", [INTS, OTHER], mp.bitwise_or, np.bitwise_or, grad=False),
    Case("bitwise_or-masks", "bitwise_or", [MASK, const(np.array([True, True, False, False]))],
         lambda a, b: a | b, np.logical_or, grad=False),
    Case("bitwise_xor", "bitwise_xor", [INTS, OTHER], lambda a, b: a.bitwise_xor(b), np.bitwise_xor, grad=False),
    Case("bitwise_xor-scalar", "bitwise_xor", [MASK], lambda m: m ^ True, np.logical_not, grad=False),
    Case("bitwise_not-mask", "bitwise_not", [MASK], lambda m: ~m, np.logical_not, grad=False),
    Case("bitwise_not-ints", "bitwise_not", [const(np.array([3, 0, -7]))], mp.bitwise_not, np.invert, grad=False),
    Case("bitwise_left_shift", "bitwise_left_shift", [const(np.array([1, -3, 5, 1, 1])), COUNTS],
         lambda a, b: a << b, lambda a, b: np.array([1, -6, -2 ** 63, 0, 0]), grad=False),
    Case("bitwise_left_shift-scalar", "bitwise_left_shift", [OTHER], lambda a: 2 << a.abs().clamp(max=8),
         lambda a: 2 << np.minimum(np.abs(a), 8), grad=False),
    Case("bitwise_right_shift", "bitwise_right_shift", [const(np.array([-64, 64, -1, -5, 5])), COUNTS],
         mp.bitwise_right_shift, lambda a, b: np.array([-64, 32, -1, -1, 0]), grad=False),
]
