"""Cases for the ops of mixprec/ops/norm_ops.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, rnd
from .refs import group_norm_ref, norm_ref


def _rms_ref(x, axes, eps):
    return x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)


CASES = [
    Case("layer_norm", "layer_norm", [rnd(3, 4, 5), rnd(4, 5), rnd(4, 5)],
         lambda x, w, b: F.layer_norm(x, (4, 5), w, b), lambda x, w, b: norm_ref(x, (1, 2)) * w + b, lowp_ulps=16,
         lowp_spread=16, second_order=True),
    Case("layer_norm-no-affine", "layer_norm", [rnd(2, 6)], lambda x: mp.layer_norm(x, 6, eps=1e-3),
         lambda x: norm_ref(x, (1,), 1e-3), lowp_ulps=16, lowp_spread=16),
    Case("layer_norm-weight-only", "layer_norm", [rnd(2, 3, 4), rnd(4)], lambda x, w: F.layer_norm(x, [4], w),
         lambda x, w: norm_ref(x, (2,)) * w, lowp_ulps=16, lowp_spread=16),
    Case("rms_norm", "rms_norm", [rnd(3, 4, 5), rnd(4, 5)], lambda x, w: F.rms_norm(x, (4, 5), w),
         lambda x, w: _rms_ref(x, (1, 2), np.finfo(np.float64).eps) * w, lowp_ulps=2, second_order=True),
    Case("rms_norm-no-weight-eps", "rms_norm", [rnd(2, 6)], lambda x: mp.rms_norm(x, 6, eps=1e-2),
         lambda x: _rms_ref(x, (1,), 1e-2), lowp_ulps=2),
    Case("group_norm", "group_norm", [rnd(2, 6, 3), rnd(6), rnd(6)], lambda x, w, b: F.group_norm(x, 3, w, b),
         lambda x, w, b: group_norm_ref(x, 3, w, b), lowp_ulps=16, lowp_spread=16, second_order=True),
    Case("group_norm-4d-no-affine", "group_norm", [rnd(2, 4, 2, 3)], lambda x: mp.group_norm(x, 2),
         lambda x: group_norm_ref(x, 2), lowp_ulps=16, lowp_spread=16),
]
