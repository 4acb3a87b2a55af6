"""Cases for the ops of mixprec/ops/conv.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, rnd
from .refs import conv1d_ref, conv2d_ref

CASES = [
    Case("conv2d", "conv2d", [rnd(2, 3, 5, 6), rnd(4, 3, 3, 2), rnd(4)], F.conv2d, conv2d_ref, lowp_ulps=8,
         lowp_spread=8),
    Case("conv2d-stride-pad", "conv2d", [rnd(1, 2, 5, 5), rnd(3, 2, 3, 3)],
         lambda x, w: F.conv2d(x, w, stride=2, padding=1),
         lambda x, w: conv2d_ref(x, w, None, (2, 2), ((1, 1), (1, 1))), lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("conv2d-dilation-asym", "conv2d", [rnd(1, 2, 6, 5), rnd(2, 2, 2, 2), rnd(2)],
         lambda x, w, b: mp.conv2d(x, w, b, stride=(1, 2), padding=(2, 1), dilation=(2, 1)),
         lambda x, w, b: conv2d_ref(x, w, b, (1, 2), ((2, 2), (1, 1)), (2, 1)), lowp_ulps=8, lowp_spread=8),
    Case("conv2d-groups", "conv2d", [rnd(2, 4, 4, 4), rnd(6, 2, 3, 3)],
         lambda x, w: F.conv2d(x, w, groups=2, padding=1),
         lambda x, w: conv2d_ref(x, w, None, (1, 1), ((1, 1), (1, 1)), groups=2), lowp_ulps=8, lowp_spread=8),
    Case("conv2d-same-even-kernel", "conv2d", [rnd(1, 1, 4, 5), rnd(2, 1, 2, 4)],
         lambda x, w: F.conv2d(x, w, padding="same"), lambda x, w: conv2d_ref(x, w, None, (1, 1), ((0, 1), (1, 2))),
         lowp_ulps=8, lowp_spread=8),
    Case("conv2d-unbatched", "conv2d", [rnd(2, 4, 4), rnd(3, 2, 2, 2)], F.conv2d,
         lambda x, w: conv2d_ref(x[None], w)[0], lowp_ulps=8, lowp_spread=8),
    Case("conv1d", "conv1d", [rnd(2, 3, 7), rnd(4, 3, 3), rnd(4)],
         lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), lambda x, w, b: conv1d_ref(x, w, b, 2, 1),
         lowp_ulps=8, lowp_spread=8),
    Case("conv1d-dilation-groups", "conv1d", [rnd(1, 4, 9), rnd(2, 2, 2)],
         lambda x, w: mp.conv1d(x, w, dilation=3, groups=2), lambda x, w: conv1d_ref(x, w, dilation=3, groups=2),
         lowp_ulps=8, lowp_spread=8),
]
