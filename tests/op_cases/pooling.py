"""Cases for the ops of mixprec/ops/pooling.py: max, average, adaptive and fractional pools and max_unpool."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, const, distinct, grad_wrt_first, rnd
from .refs import avg_pool_grad_ref, ref_pool
from .refs_spatial import adaptive_pool_ref, fractional_max_pool_ref, max_unpool_ref, pool_ref

# samples exact in every dtype, for window starts that do not depend on rounding
SAMPLES_2D = np.array([[[0.25, 0.75], [0.5, 0.125]]])
SAMPLES_3D = np.array([[[0.25, 0.75, 0.5]]])


def _pooled_indices(shape, kernel, **kw):
    """The indices a max pool of a fixed array of ``shape`` returns (max_unpool's input), from the reference."""
    values = np.random.default_rng(5).permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)
    return pool_ref(values, "max", kernel, **kw)[1]


UNPOOL_1D = _pooled_indices((2, 2, 7), 2)
UNPOOL_2D = _pooled_indices((1, 2, 5, 6), 2)  # windows that do not overlap: no repeated index
UNPOOL_3D = _pooled_indices((1, 1, 4, 4, 4), 2)


def _max_pool_grad_ref(x, g, *args, **kw):
    """d sum(g * max_pool(x)) / dx: each window's gradient added at its maximum (the reference pool's index)."""
    n, c = x.shape[:2]
    index = pool_ref(x, "max", *args, **kw)[1].reshape(n, c, -1)
    out = np.zeros((n, c, x[0, 0].size))
    np.add.at(out, (np.arange(n)[:, None, None], np.arange(c)[None, :, None], index), g.reshape(n, c, -1))
    return out.reshape(x.shape)


CASES = [
    # max_pool: values and the flat index of each maximum (return_indices)
    Case("max_pool1d-ceil-indices", "max_pool1d", [distinct(2, 3, 9)],
         lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
         lambda x: pool_ref(x, "max", 3, 2, 1, ceil_mode=True)),
    Case("max_pool2d", "max_pool2d", [distinct(2, 2, 5, 5)], lambda x: F.max_pool2d(x, 3, 2, 1),
         lambda x: ref_pool(x, 3, 2, 1, 1, False, "max")),
    Case("max_pool2d-unbatched-dilated", "max_pool2d", [distinct(2, 6, 5)],
         lambda x: F.max_pool2d(x, 2, 1, dilation=2), lambda x: ref_pool(x[None], 2, 1, 0, 2, False, "max")[0]),
    Case("max_pool3d-indices", "max_pool3d", [distinct(1, 2, 5, 4, 5)],
         lambda x: F.max_pool3d(x, (2, 3, 2), (2, 1, 2), (1, 1, 0), (1, 1, 2), return_indices=True),
         lambda x: pool_ref(x, "max", (2, 3, 2), (2, 1, 2), (1, 1, 0), (1, 1, 2))),
    # their gradient, _max_pool_backward: windows that cannot overlap (each element gets one gradient at most, added
    # in the gradient's dtype) and windows that do (summed; half ones in float32, rounded once)
    Case("max_pool2d-grad-disjoint", "_max_pool_backward", [distinct(1, 2, 6, 6), rnd(1, 2, 3, 3)],
         grad_wrt_first(lambda x: F.max_pool2d(x, 2)), lambda x, g: _max_pool_grad_ref(x, g, 2)),
    Case("max_pool2d-grad-overlapping", "_max_pool_backward", [distinct(1, 2, 5, 5), rnd(1, 2, 3, 3)],
         grad_wrt_first(lambda x: F.max_pool2d(x, 3, 1)), lambda x, g: _max_pool_grad_ref(x, g, 3, 1)),
    Case("max_pool1d-grad-dilated-disjoint", "_max_pool_backward", [distinct(2, 2, 8), rnd(2, 2, 4)],
         grad_wrt_first(lambda x: F.max_pool1d(x, 2, 1, dilation=4)),
         lambda x, g: _max_pool_grad_ref(x, g, 2, 1, dilation=4)),
    # avg_pool: a composite of _im2col, so its gradient is _col2im
    Case("avg_pool1d", "avg_pool1d", [rnd(2, 3, 8)], lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True),
         lambda x: pool_ref(x, "avg", 3, 2, 1, ceil_mode=True), lowp_ulps=2),
    Case("avg_pool2d", "avg_pool2d", [rnd(2, 2, 5, 6)], lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
         lambda x: ref_pool(x, 3, 2, 1, 1, False, "avg", False), lowp_ulps=2),
    Case("avg_pool2d-grad", "avg_pool2d", [rnd(1, 2, 4, 4), rnd(1, 2, 2, 2)],
         grad_wrt_first(lambda x: F.avg_pool2d(x, 2)), lambda x, g: avg_pool_grad_ref(g, x.shape, 2)),
    Case("avg_pool3d-no-pad-count", "avg_pool3d", [rnd(1, 2, 4, 5, 3)],
         lambda x: F.avg_pool3d(x, (2, 3, 2), (2, 2, 1), (1, 1, 0), ceil_mode=True, count_include_pad=False),
         lambda x: pool_ref(x, "avg", (2, 3, 2), (2, 2, 1), (1, 1, 0), ceil_mode=True, count_include_pad=False),
         lowp_ulps=2),
    Case("avg_pool3d-unbatched-divisor", "avg_pool3d", [rnd(2, 4, 4, 4)],
         lambda x: F.avg_pool3d(x, 2, divisor_override=3),
         lambda x: pool_ref(x[None], "avg", 2, divisor_override=3)[0], lowp_ulps=2),
    # adaptive pools: windows from floor(o L / O) to ceil((o + 1) L / O)
    Case("adaptive_avg_pool1d", "adaptive_avg_pool1d", [rnd(2, 3, 7)], lambda x: F.adaptive_avg_pool1d(x, 3),
         lambda x: adaptive_pool_ref(x, "avg", (3,)), lowp_ulps=2),
    Case("adaptive_avg_pool2d", "adaptive_avg_pool2d", [rnd(2, 2, 5, 7)],
         lambda x: F.adaptive_avg_pool2d(x, (3, None)), lambda x: adaptive_pool_ref(x, "avg", (3, 7)), lowp_ulps=2),
    Case("adaptive_avg_pool3d-unbatched", "adaptive_avg_pool3d", [rnd(2, 3, 5, 4)],
         lambda x: F.adaptive_avg_pool3d(x, (2, 3, 1)), lambda x: adaptive_pool_ref(x[None], "avg", (2, 3, 1))[0],
         lowp_ulps=2),
    Case("adaptive_max_pool1d-indices", "adaptive_max_pool1d", [distinct(2, 3, 7)],
         lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), lambda x: adaptive_pool_ref(x, "max", (4,))),
    Case("adaptive_max_pool2d", "adaptive_max_pool2d", [distinct(1, 2, 5, 6)],
         lambda x: F.adaptive_max_pool2d(x, (3, 4)), lambda x: adaptive_pool_ref(x, "max", (3, 4))[0]),
    Case("adaptive_max_pool3d-indices", "adaptive_max_pool3d", [distinct(1, 2, 4, 5, 3)],
         lambda x: F.adaptive_max_pool3d(x, (3, 2, 2), return_indices=True),
         lambda x: adaptive_pool_ref(x, "max", (3, 2, 2))),
    # fractional: fixed samples, so the case is one function (the random draw is tested in test_nn_spatial)
    Case("fractional_max_pool2d", "fractional_max_pool2d", [distinct(1, 2, 7, 6)],
         lambda x: F.fractional_max_pool2d(x, (2, 3), output_size=(3, 2), return_indices=True,
                                           _random_samples=mp.tensor(SAMPLES_2D, dtype=x.dtype, device=x.device)),
         lambda x: fractional_max_pool_ref(x, (2, 3), (3, 2), SAMPLES_2D)),
    Case("fractional_max_pool3d-ratio", "fractional_max_pool3d", [distinct(1, 1, 6, 5, 7)],
         lambda x: F.fractional_max_pool3d(x, 2, output_ratio=(0.5, 0.6, 0.5),
                                           _random_samples=mp.tensor(SAMPLES_3D, dtype=x.dtype, device=x.device)),
         lambda x: fractional_max_pool_ref(x, (2, 2, 2), (3, 3, 3), SAMPLES_3D)[0]),
    # max_unpool: values back at the indices a max pool returned
    Case("max_unpool1d", "max_unpool1d", [rnd(*UNPOOL_1D.shape), const(UNPOOL_1D)],
         lambda x, i: F.max_unpool1d(x, i, 2), lambda x, i: max_unpool_ref(x, i, (6,))),
    Case("max_unpool2d-output-size", "max_unpool2d", [rnd(*UNPOOL_2D.shape), const(UNPOOL_2D)],
         lambda x, i: F.max_unpool2d(x, i, 2, output_size=(5, 6)), lambda x, i: max_unpool_ref(x, i, (5, 6))),
    Case("max_unpool3d-unbatched", "max_unpool3d", [rnd(*UNPOOL_3D.shape[1:]), const(UNPOOL_3D[0])],
         lambda x, i: F.max_unpool3d(x, i, 2), lambda x, i: max_unpool_ref(x[None], i[None], (4, 4, 4))[0]),
]
