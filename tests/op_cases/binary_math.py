"""Cases for the ops of mixprec/ops/binary_math.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, away, const, distinct, rnd, uni

CASES = [
    Case("hypot", "hypot", [away(2, 3), away(3)], mp.hypot, np.hypot, lowp_ulps=2),
    Case("copysign", "copysign", [away(2, 3), away(2, 3)], mp.copysign, np.copysign),
    Case("copysign-scalar", "copysign", [away(4)], lambda a: a.copysign(-1.0), lambda a: np.copysign(a, -1.0)),
    Case("fmax", "fmax", [distinct(2, 3), distinct(3)], mp.fmax, np.fmax),
    Case("fmin", "fmin", [distinct(3, 1), distinct(1, 4)], lambda a, b: a.fmin(b), np.fmin),
    Case("fmax-nan", "fmax", [const(np.array([np.nan, 1.0, np.nan])), const(np.array([2.0, np.nan, np.nan]))],
         lambda a, b: (mp.fmax(a, b), mp.fmin(a, b)), lambda a, b: (np.fmax(a, b), np.fmin(a, b)), grad=False, lowp=False),
    Case("logaddexp", "logaddexp", [rnd(2, 3), rnd(3)], mp.logaddexp, np.logaddexp, lowp_ulps=2, lowp_spread=1),
    Case("logaddexp-complex", "logaddexp", [rnd(4), rnd(4), rnd(4), rnd(4)],
         lambda ar, ai, br, bi: (lambda z: (z.real, z.imag))(mp.logaddexp(mp.complex(ar, ai), mp.complex(br, bi))),
         lambda ar, ai, br, bi: (lambda z: (z.real, z.imag))(np.log(np.exp(ar + 1j * ai) + np.exp(br + 1j * bi))),
         lowp=False),
    Case("logaddexp2", "logaddexp2", [rnd(2, 3), rnd(2, 3)], lambda a, b: a.logaddexp2(b), np.logaddexp2,
         lowp_ulps=2, lowp_spread=1),
    Case("lerp", "lerp", [rnd(2, 3), rnd(3)], lambda a, b: mp.lerp(a, b, 0.3), lambda a, b: a + 0.3 * (b - a),
         lowp_ulps=2, lowp_spread=2),
    Case("lerp-tensor-weight", "lerp", [rnd(2, 3), rnd(2, 3), uni(2, 3, lo=-0.2, hi=1.2)], mp.lerp,
         lambda a, b, w: a + w * (b - a), lowp_ulps=2, lowp_spread=2),
    Case("float_power", "float_power", [uni(2, 3, lo=0.5, hi=2.0), rnd(3)], mp.float_power, np.power, lowp=False),
    Case("float_power-scalar", "float_power", [uni(4, lo=0.5, hi=2.0)], lambda a: a.float_power(2.5),
         lambda a: a ** 2.5, lowp=False),
    Case("ldexp", "ldexp", [rnd(2, 3), const(np.array([2, 0, 3]))], mp.ldexp, np.ldexp),
    Case("ldexp-float-exponent", "ldexp", [rnd(4), uni(4, lo=-2, hi=2)], lambda a, b: a.ldexp(b),
         lambda a, b: a * 2.0 ** b, lowp_ulps=2),
    Case("heaviside", "heaviside", [const(np.array([-1.5, 0.0, 2.0, 0.0])), const(np.array([0.5, 0.25, 0.5, 0.75]))],
         mp.heaviside, np.heaviside, grad=False),
    Case("nextafter", "nextafter", [rnd(2, 3), rnd(2, 3)], mp.nextafter, np.nextafter, lowp=False),
    # (the exponent is int32, as torch's; the drivers compare integers as int64)
    Case("frexp", "frexp", [away(5, lo=0.1, hi=40.0)], lambda a: (lambda m, e: (m, e.long()))(*mp.frexp(a)),
         np.frexp),
    Case("gcd-lcm", "gcd", [const(np.array([12, -18, 0, 7])), const(np.array([8, 12, 5, 0]))],
         lambda a, b: (mp.gcd(a, b), a.lcm(b)), lambda a, b: (np.gcd(a, b), np.lcm(a, b)), grad=False),
    Case("lcm", "lcm", [const(np.array([4, 6]))], lambda a: mp.lcm(a, 10), lambda a: np.lcm(a, 10), grad=False),
]
