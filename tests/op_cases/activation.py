"""Cases for the ops of mixprec/ops/activation.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, rnd
from .refs import softmax_ref

CASES = [
    Case("softmax", "softmax", [rnd(2, 4)], lambda a: F.softmax(a, dim=-1), lambda a: softmax_ref(a, -1)),
    Case("softmax-dim0", "softmax", [rnd(3, 2)], lambda a: a.softmax(0), lambda a: softmax_ref(a, 0)),
    Case("log_softmax", "log_softmax", [rnd(2, 4)], lambda a: F.log_softmax(a, dim=1),
         lambda a: np.log(softmax_ref(a, 1))),
    Case("log_softmax-3d", "log_softmax", [rnd(2, 3, 2)], lambda a: mp.log_softmax(a, 1),
         lambda a: np.log(softmax_ref(a, 1))),
    Case("_log_softmax_backward", "_log_softmax_backward", [rnd(3, 4), rnd(3, 4)],
         lambda g, y: mp.ops.get("_log_softmax_backward")(g, y, 1),
         lambda g, y: g - np.exp(y) * g.sum(1, keepdims=True), second_order=True, lowp_ulps=4, lowp_spread=4),
    Case("_log_softmax_backward-dim0-3d", "_log_softmax_backward", [rnd(2, 3, 2), rnd(2, 3, 2)],
         lambda g, y: mp.ops.get("_log_softmax_backward")(g, y, 0),
         lambda g, y: g - np.exp(y) * g.sum(0, keepdims=True), lowp_ulps=4, lowp_spread=4),
]
