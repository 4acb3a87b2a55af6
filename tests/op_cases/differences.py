"""Cases for the ops of mixprec/ops/differences.py against NumPy's diff, gradient, trapezoid and SciPy's
cumulative trapezoid written out."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, rnd

COORDS = np.array([0.0, 0.5, 1.5, 1.75, 3.0])


def _cumulative_trapezoid(y, x=None, dx=1.0, axis=-1):
    y = np.moveaxis(y, axis, -1)
    steps = np.diff(x) if x is not None else dx
    out = np.cumsum(steps * (y[..., 1:] + y[..., :-1]) / 2, axis=-1)
    return np.moveaxis(out, -1, axis)


CASES = [
    Case("diff", "diff", [rnd(3, 5)], lambda a: a.diff(), lambda a: np.diff(a)),
    Case("diff-n2-dim0-pre-append", "diff", [rnd(4, 3), rnd(1, 3), rnd(2, 3)],
         lambda a, p, q: mp.diff(a, 2, 0, p, q), lambda a, p, q: np.diff(a, 2, 0, prepend=p, append=q),
         lowp_spread=4),
    Case("diff-bool", "diff", [const(np.array([True, False, False, True]))], lambda m: mp.diff(m),
         lambda m: np.diff(m), grad=False),
    Case("gradient", "gradient", [rnd(4, 5)], lambda a: mp.gradient(a), lambda a: tuple(np.gradient(a)),
         lowp_spread=4),
    Case("gradient-spacing-order2", "gradient", [rnd(5, 3)],
         lambda a: mp.gradient(a, spacing=[0.5], dim=0, edge_order=2), lambda a: np.gradient(a, 0.5, axis=0,
                                                                                             edge_order=2),
         lowp_spread=8),
    Case("gradient-coordinates", "gradient", [rnd(2, 5), const(COORDS)],
         lambda a, x: (*mp.gradient(a, spacing=[x], dim=1), *mp.gradient(a, spacing=[x], dim=[1], edge_order=2)),
         lambda a, x: (np.gradient(a, x, axis=1), np.gradient(a, x, axis=1, edge_order=2)), lowp=False),
    Case("trapezoid", "trapezoid", [rnd(3, 5)], lambda y: (mp.trapezoid(y), mp.trapezoid(y, dx=0.5, dim=0)),
         lambda y: (np.trapezoid(y), np.trapezoid(y, dx=0.5, axis=0)), lowp_spread=4),
    Case("trapezoid-x", "trapezoid", [rnd(2, 5), const(COORDS)], lambda y, x: mp.trapezoid(y, x),
         lambda y, x: np.trapezoid(y, x), lowp=False),
    Case("trapz", "trapz", [rnd(4, 3), rnd(4, 3)], lambda y, x: (mp.trapz(y, x, dim=0), mp.trapz(y, dx=2.0)),
         lambda y, x: (np.trapezoid(y, x, axis=0), np.trapezoid(y, dx=2.0)), lowp=False),
    Case("cumulative-trapezoid", "cumulative_trapezoid", [rnd(2, 5), const(COORDS)],
         lambda y, x: (mp.cumulative_trapezoid(y, x), mp.cumulative_trapezoid(y, dx=0.5, dim=0)),
         lambda y, x: (_cumulative_trapezoid(y, x), _cumulative_trapezoid(y, dx=0.5, axis=0)), lowp=False),
]
