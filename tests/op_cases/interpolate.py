"""Cases for mixprec/ops/interpolate.py (references: the resampling formulas, one dim at a time, in NumPy)."""
from __future__ import annotations

import warnings

import numpy as np

import mixprec.nn.functional as F

from .case import Case, rnd


def _linear_along(a, axis, n_out, align_corners):
    n_in = a.shape[axis]
    if align_corners:
        src = np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        src = np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0)
    lo = np.minimum(np.floor(src).astype(int), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    shape = [1] * a.ndim
    shape[axis] = -1
    f = (src - lo).reshape(shape)
    return np.take(a, lo, axis) * (1 - f) + np.take(a, hi, axis) * f


def _nearest_along(a, axis, n_out):
    return np.take(a, np.minimum(np.arange(n_out) * a.shape[axis] // n_out, a.shape[axis] - 1), axis)


def _quiet(fn):
    def run(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
    return run


CASES = [
    Case("interpolate-nearest", "interpolate", [rnd(1, 2, 3, 4)], lambda a: F.interpolate(a, size=(5, 2)),
         lambda a: _nearest_along(_nearest_along(a, 2, 5), 3, 2)),
    Case("interpolate-linear", "interpolate", [rnd(2, 1, 5)], lambda a: F.interpolate(a, size=8, mode="linear"),
         lambda a: _linear_along(a, 2, 8, False), lowp_ulps=2, lowp_spread=1),
    Case("interpolate-bilinear-corners", "interpolate", [rnd(1, 2, 3, 4)],
         lambda a: F.interpolate(a, size=(4, 7), mode="bilinear", align_corners=True),
         lambda a: _linear_along(_linear_along(a, 2, 4, True), 3, 7, True), lowp_ulps=2, lowp_spread=2),
    Case("interpolate-trilinear", "interpolate", [rnd(1, 1, 2, 3, 2)],
         lambda a: F.interpolate(a, scale_factor=2, mode="trilinear"),
         lambda a: _linear_along(_linear_along(_linear_along(a, 2, 4, False), 3, 6, False), 4, 4, False),
         lowp_ulps=2, lowp_spread=2),
    Case("interpolate-area", "interpolate", [rnd(1, 2, 4, 6)], lambda a: F.interpolate(a, size=(2, 3), mode="area"),
         lambda a: a.reshape(1, 2, 2, 2, 3, 2).mean((3, 5)), lowp_ulps=2, lowp_spread=1),
    Case("upsample", "upsample", [rnd(1, 1, 3)], _quiet(lambda a: F.upsample(a, scale_factor=2)),
         lambda a: np.repeat(a, 2, axis=2)),
    Case("upsample_nearest", "upsample_nearest", [rnd(1, 1, 2, 3)],
         _quiet(lambda a: F.upsample_nearest(a, scale_factor=2)), lambda a: np.repeat(np.repeat(a, 2, 2), 2, 3)),
    Case("upsample_bilinear", "upsample_bilinear", [rnd(1, 2, 2, 3)], _quiet(lambda a: F.upsample_bilinear(a, 4)),
         lambda a: _linear_along(_linear_along(a, 2, 4, True), 3, 4, True), lowp_ulps=2, lowp_spread=2),
]
