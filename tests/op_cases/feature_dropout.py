"""Cases for the ops of mixprec/ops/feature_dropout.py: the masks replayed from a seeded NumPy generator (mixprec
draws them from one, float32 uniforms kept where >= p)."""
from __future__ import annotations

import math

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, rnd

ALPHA = 1.7580993408473766


def _keep(seed, shape, p):
    return (np.random.default_rng(seed).random(shape, dtype=np.float32) >= np.float32(p)).astype(np.float64)


def _seeded(seed, fn):
    def run(*args):
        mp.manual_seed(seed)
        return fn(*args)
    return run


def _channel_dropout_ref(seed, p):
    return lambda a: a * _keep(seed, a.shape[:2] + (1,) * (a.ndim - 2), p) / (1 - p)


def _alpha_ref(seed, p, per_channel):
    def ref(a):
        keep = _keep(seed, a.shape[:2] + (1,) * (a.ndim - 2) if per_channel else a.shape, p)
        scale = 1 / math.sqrt((ALPHA ** 2 * p + 1) * (1 - p))
        # a kept unit is a, a dropped one -ALPHA: a * keep + (keep - 1) * ALPHA, so a dropped NaN or inf stays
        # non-finite (a * 0), as the documented affine form has it
        return (a * keep + (keep - 1) * ALPHA) * scale + ALPHA * scale * p
    return ref


CASES = [
    Case("dropout1d", "dropout1d", [rnd(3, 4, 5)], _seeded(1, lambda a: F.dropout1d(a, 0.4)),
         _channel_dropout_ref(1, 0.4)),
    Case("dropout1d-unbatched", "dropout1d", [rnd(6, 5)], _seeded(2, lambda a: F.dropout1d(a, 0.5)),
         lambda a: _channel_dropout_ref(2, 0.5)(a[None])[0]),
    Case("dropout2d", "dropout2d", [rnd(2, 5, 3, 3)], _seeded(3, lambda a: F.dropout2d(a, 0.3)),
         _channel_dropout_ref(3, 0.3)),
    Case("dropout3d", "dropout3d", [rnd(2, 4, 2, 2, 2)], _seeded(4, lambda a: F.dropout3d(a, 0.5)),
         _channel_dropout_ref(4, 0.5)),
    Case("dropout2d-eval", "dropout2d", [rnd(2, 3, 2, 2)], lambda a: F.dropout2d(a, 0.5, training=False),
         lambda a: a),
    Case("alpha_dropout", "alpha_dropout", [rnd(4, 5)], _seeded(5, lambda a: F.alpha_dropout(a, 0.2, True)),
         _alpha_ref(5, 0.2, False), lowp_ulps=2, lowp_spread=1),
    Case("feature_alpha_dropout", "feature_alpha_dropout", [rnd(3, 4, 2)],
         _seeded(6, lambda a: F.feature_alpha_dropout(a, 0.5, True)), _alpha_ref(6, 0.5, True), lowp_ulps=2,
         lowp_spread=1),
]
