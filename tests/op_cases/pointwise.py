"""Cases for the ops of mixprec/ops/pointwise.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, away, const, rnd, uni

CASES = [
    Case("sgn", "sgn", [away(2, 3)], mp.sgn, np.sign),
    Case("sgn-complex", "sgn", [rnd(4), rnd(4)], lambda re, im: mp.complex(re, im).sgn().real,
         lambda re, im: np.real((re + 1j * im) / np.abs(re + 1j * im)), lowp=False),
    Case("signbit", "signbit", [const(np.array([1.0, -2.0, 0.0, -0.0, np.inf, -np.inf]))], mp.signbit, np.signbit,
         grad=False),
    Case("square", "square", [rnd(2, 3)], mp.square, np.square),
    Case("square-bool", "square", [const(np.array([True, False]))], lambda a: a.square(),
         lambda a: a.astype(np.int64), grad=False),
    Case("clamp_min", "clamp_min", [away(2, 3), away(3)], mp.clamp_min, np.maximum),
    Case("clamp_max", "clamp_max", [away(2, 3)], lambda a: a.clamp_max(0.5), lambda a: np.minimum(a, 0.5)),
    Case("rsub", "rsub", [rnd(2, 3), rnd(3)], lambda a, b: mp.rsub(a, b, alpha=2), lambda a, b: b - 2 * a,
         lowp_spread=2),
    Case("rsub-scalar", "rsub", [rnd(4)], lambda a: mp.rsub(a, 3), lambda a: 3 - a, lowp_spread=1),
    Case("deg2rad", "deg2rad", [rnd(5)], mp.deg2rad, np.deg2rad),
    Case("rad2deg", "rad2deg", [rnd(5)], lambda a: a.rad2deg(), np.rad2deg),
    Case("nan_to_num", "nan_to_num", [rnd(5)], mp.nan_to_num, np.nan_to_num),
    Case("nan_to_num-specials", "nan_to_num", [const(np.array([np.nan, np.inf, -np.inf, 1.5]))],
         lambda a: mp.nan_to_num(a, nan=2.0, posinf=10.0, neginf=-10.0),
         lambda a: np.nan_to_num(a, nan=2.0, posinf=10.0, neginf=-10.0), grad=False),
    Case("atan", "atan", [rnd(5)], mp.atan, np.arctan, lowp_ulps=2),
    Case("asinh", "asinh", [rnd(5)], lambda a: a.asinh(), np.arcsinh, lowp_ulps=2),
    Case("acosh", "acosh", [uni(5, lo=1.2, hi=4.0)], mp.acosh, np.arccosh, lowp_ulps=2),
    Case("atanh", "atanh", [uni(5, lo=-0.9, hi=0.9)], mp.atanh, np.arctanh, lowp_ulps=2),
]
