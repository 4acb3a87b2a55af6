"""Cases for the ops of mixprec/ops/conv.py: convolutions and transposed convolutions in 1-3 dims."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, grad_wrt_first, rnd
from .refs import conv1d_ref, conv2d_input_grad_ref, conv2d_ref
from .refs_spatial import conv_ref, conv_transpose_ref, conv_weight_grad_ref

# A convolution is one op that computes half inputs in float32 and rounds once: within an ulp of float64 on the
# rounded inputs, plus float32's summation error where the sum cancels to near 0 (1/64 ulp of the largest output)
_HALF = dict(lowp_ulps=1, lowp_spread=1 / 64)

CASES = [
    Case("conv2d", "conv2d", [rnd(2, 3, 5, 6), rnd(4, 3, 3, 2), rnd(4)], F.conv2d, conv2d_ref, **_HALF),
    Case("conv2d-stride-pad", "conv2d", [rnd(1, 2, 5, 5), rnd(3, 2, 3, 3)],
         lambda x, w: F.conv2d(x, w, stride=2, padding=1),
         lambda x, w: conv2d_ref(x, w, None, (2, 2), ((1, 1), (1, 1))), **_HALF, second_order=True),
    Case("conv2d-dilation-asym", "conv2d", [rnd(1, 2, 6, 5), rnd(2, 2, 2, 2), rnd(2)],
         lambda x, w, b: mp.conv2d(x, w, b, stride=(1, 2), padding=(2, 1), dilation=(2, 1)),
         lambda x, w, b: conv2d_ref(x, w, b, (1, 2), ((2, 2), (1, 1)), (2, 1)), **_HALF),
    Case("conv2d-groups", "conv2d", [rnd(2, 4, 4, 4), rnd(6, 2, 3, 3)],
         lambda x, w: F.conv2d(x, w, groups=2, padding=1),
         lambda x, w: conv2d_ref(x, w, None, (1, 1), ((1, 1), (1, 1)), groups=2), **_HALF),
    Case("conv2d-same-even-kernel", "conv2d", [rnd(1, 1, 4, 5), rnd(2, 1, 2, 4)],
         lambda x, w: F.conv2d(x, w, padding="same"), lambda x, w: conv2d_ref(x, w, None, (1, 1), ((0, 1), (1, 2))),
         **_HALF),
    Case("conv2d-unbatched", "conv2d", [rnd(2, 4, 4), rnd(3, 2, 2, 2)], F.conv2d,
         lambda x, w: conv2d_ref(x[None], w)[0], **_HALF),
    Case("conv1d", "conv1d", [rnd(2, 3, 7), rnd(4, 3, 3), rnd(4)],
         lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), lambda x, w, b: conv1d_ref(x, w, b, 2, 1),
         **_HALF),
    Case("conv1d-dilation-groups", "conv1d", [rnd(1, 4, 9), rnd(2, 2, 2)],
         lambda x, w: mp.conv1d(x, w, dilation=3, groups=2), lambda x, w: conv1d_ref(x, w, dilation=3, groups=2),
         **_HALF),
]

# N-d convolutions, transposed convolutions and aten's internal names (references: refs_spatial, from the definitions)
CASES += [
    Case("conv3d", "conv3d", [rnd(2, 4, 4, 5, 3), rnd(4, 2, 2, 3, 2), rnd(4)],
         lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2), groups=2),
         lambda x, w, b: conv_ref(x, w, b, (1, 2, 1), (1, 0, 1), (1, 1, 2), 2), **_HALF),
    Case("conv3d-unbatched-same", "conv3d", [rnd(2, 3, 4, 3), rnd(2, 2, 2, 3, 2)],
         lambda x, w: mp.conv3d(x, w, padding="same"),
         lambda x, w: conv_ref(x[None], w, padding=((0, 1), (1, 1), (0, 1)))[0], **_HALF),
    Case("conv_transpose1d", "conv_transpose1d", [rnd(2, 4, 5), rnd(4, 3, 3), rnd(3)],
         lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1, output_padding=1),
         lambda x, w, b: conv_transpose_ref(x, w, b, 2, 1, 1), second_order=True, **_HALF),
    Case("conv_transpose2d-groups-dilation", "conv_transpose2d", [rnd(1, 4, 3, 4), rnd(4, 2, 3, 2), rnd(4)],
         lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2,
                                            dilation=(1, 2)),
         lambda x, w, b: conv_transpose_ref(x, w, b, (2, 1), (1, 0), (1, 0), 2, (1, 2)), **_HALF),
    Case("conv_transpose2d-unbatched", "conv_transpose2d", [rnd(2, 3, 3), rnd(2, 3, 2, 2)], F.conv_transpose2d,
         lambda x, w: conv_transpose_ref(x[None], w)[0], **_HALF),
    Case("conv_transpose2d-output-padding-below-dilation", "conv_transpose2d", [rnd(1, 2, 3, 3), rnd(2, 1, 2, 2)],
         lambda x, w: F.conv_transpose2d(x, w, output_padding=1, dilation=2),
         lambda x, w: conv_transpose_ref(x, w, output_padding=1, dilation=2), **_HALF),
    Case("conv_transpose3d", "conv_transpose3d", [rnd(1, 2, 3, 2, 3), rnd(2, 2, 2, 3, 2), rnd(2)],
         lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=(0, 1, 0), output_padding=(1, 0, 1)),
         lambda x, w, b: conv_transpose_ref(x, w, b, 2, (0, 1, 0), (1, 0, 1)), **_HALF),
    Case("_convolution", "_convolution", [rnd(2, 2, 5, 4), rnd(3, 2, 2, 2), rnd(3)],
         lambda x, w, b: mp.ops.get("_convolution")(x, w, b, (2, 1), (1, 0), (1, 2), False, (0, 0), 1),
         lambda x, w, b: conv_ref(x, w, b, (2, 1), (1, 0), (1, 2)), **_HALF),
    Case("_convolution-transposed", "_convolution", [rnd(2, 2, 5), rnd(2, 3, 3)],
         lambda x, w: mp.ops.get("_convolution")(x, w, None, 2, 1, 1, True, 1, 1, False, False, True, True),
         lambda x, w: conv_transpose_ref(x, w, None, 2, 1, 1), **_HALF),
    # a convolution's gradients are one op, _conv_backward, computed as _conv_transpose_nd (input) and
    # _conv_weight_grad (weight) are (the latter is also the transposed convolution's weight gradient), each
    # in float32 and rounded once: in half precision within an ulp of float64 (the output gradient reaches
    # them unrounded: d sum(g * y) / dy = g)
    Case("conv2d-input-grad", "_conv_backward", [rnd(1, 2, 4, 5), rnd(1, 3, 3, 3), rnd(3, 2, 2, 3)],
         grad_wrt_first(lambda x, w: F.conv2d(x, w)), lambda x, g, w: conv2d_input_grad_ref(x.shape, w, g),
         **_HALF),
    Case("conv2d-weight-grad", "_conv_backward", [rnd(4, 2, 3, 2), rnd(2, 4, 3, 3), rnd(2, 4, 5, 5)],
         grad_wrt_first(lambda w, x: F.conv2d(x, w, stride=2, padding=1, groups=2)),
         lambda w, g, x: conv_weight_grad_ref(x, g, w.shape[2:], 2, 1, groups=2), **_HALF),
    Case("conv3d-weight-grad-dilation", "_conv_backward", [rnd(2, 1, 2, 2, 2), rnd(1, 2, 3, 4, 5),
                                                           rnd(1, 1, 4, 4, 5)],
         grad_wrt_first(lambda w, x: F.conv3d(x, w, padding=(0, 1, 1), dilation=(1, 2, 2))),
         lambda w, g, x: conv_weight_grad_ref(x, g, w.shape[2:], 1, (0, 1, 1), (1, 2, 2)), **_HALF),
    Case("conv_transpose2d-weight-grad", "_conv_weight_grad", [rnd(2, 3, 2, 3), rnd(1, 3, 6, 9), rnd(1, 2, 3, 4)],
         grad_wrt_first(lambda w, x: F.conv_transpose2d(x, w, stride=2)),
         lambda w, g, x: conv_weight_grad_ref(g, x, w.shape[2:], 2), **_HALF),
    Case("conv_tbc", "conv_tbc", [rnd(5, 2, 3), rnd(3, 3, 4), rnd(4)], lambda x, w, b: mp.conv_tbc(x, w, b, 1),
         lambda x, w, b: conv_ref(x.transpose(1, 2, 0), w.transpose(2, 1, 0), b, padding=1).transpose(2, 0, 1),
         **_HALF),
]
