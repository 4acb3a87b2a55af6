"""Cases for the ops of mixprec/ops/math_ops.py."""
from __future__ import annotations

import math

import numpy as np
from scipy.special import erfinv as _erfinv_ref

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, away, const, distinct, rnd, uni
from .refs import cdist_ref, cos_sim_ref, log_softmax_ref, lp_norm_ref, pdist_ref, renorm_ref

CASES = [
    Case("cosine_similarity", "cosine_similarity", [rnd(3, 5), rnd(1, 5)], F.cosine_similarity, cos_sim_ref,
         lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("cosine_similarity-dim0", "cosine_similarity", [rnd(4, 2), rnd(4, 2)],
         lambda a, b: mp.cosine_similarity(a, b, dim=0), lambda a, b: cos_sim_ref(a, b, 0), lowp_ulps=8,
         lowp_spread=8),
    Case("normalize", "normalize", [rnd(3, 4)], lambda x: F.normalize(x, p=3.0, dim=0),
         lambda x: x / lp_norm_ref(x, 3.0, 0, True), lowp_ulps=8, lowp_spread=8),
    Case("log2", "log2", [uni(2, 3, lo=0.2, hi=3)], mp.log2, np.log2, lowp_ulps=2, lowp_spread=2),
    Case("log10", "log10", [uni(2, 3, lo=0.2, hi=3)], lambda a: a.log10(), np.log10, lowp_ulps=2, lowp_spread=2),
    Case("exp2", "exp2", [rnd(5)], mp.exp2, np.exp2, lowp_ulps=2, lowp_spread=2),
    Case("sinh", "sinh", [rnd(5)], mp.sinh, np.sinh, lowp_ulps=2, lowp_spread=2),
    Case("cosh", "cosh", [rnd(5)], lambda a: a.cosh(), np.cosh, lowp_ulps=2, lowp_spread=2),
    Case("tan", "tan", [uni(5, lo=-1.2, hi=1.2)], mp.tan, np.tan, lowp_ulps=8, lowp_spread=8),
    Case("asin", "asin", [uni(5, lo=-0.9, hi=0.9)], mp.asin, np.arcsin, lowp_ulps=4, lowp_spread=4),
    Case("acos", "acos", [uni(5, lo=-0.9, hi=0.9)], lambda a: a.acos(), np.arccos, lowp_ulps=4, lowp_spread=4),
    Case("erfinv", "erfinv", [uni(6, lo=-0.95, hi=0.95)], mp.erfinv, _erfinv_ref, lowp_ulps=16, lowp_spread=16,
         second_order=True),
    Case("atan2", "atan2", [rnd(2, 3), rnd(3)], mp.atan2, np.arctan2, lowp_ulps=4, lowp_spread=4, second_order=True),
    Case("addcmul", "addcmul", [rnd(2, 3), rnd(2, 3), rnd(3)], lambda a, b, c: mp.addcmul(a, b, c, value=-0.5),
         lambda a, b, c: a - 0.5 * b * c, lowp_ulps=2, lowp_spread=2),
    Case("addcdiv", "addcdiv", [rnd(2, 3), rnd(2, 3), uni(3, lo=0.5, hi=2)], lambda a, b, c: a.addcdiv(b, c, value=2),
         lambda a, b, c: a + 2 * b / c, lowp_ulps=2, lowp_spread=2),
    Case("norm-fro", "norm", [rnd(3, 4)], mp.norm, lambda x: np.sqrt((x * x).sum()), lowp_ulps=4, lowp_spread=4),
    Case("norm-p1-dim", "norm", [rnd(3, 4)], lambda x: x.norm(1, dim=1), lambda x: np.abs(x).sum(1), lowp_ulps=8,
         lowp_spread=8),
    Case("norm-p3-keepdim", "norm", [rnd(3, 4)], lambda x: mp.norm(x, 3, dim=0, keepdim=True),
         lambda x: lp_norm_ref(x, 3, 0, True), lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("norm-inf", "norm", [const(np.array([[0.5, -2.0, 1.0], [3.0, 0.1, -0.2]]))],
         lambda x: mp.norm(x, math.inf, 1), lambda x: np.abs(x).max(1), lowp_ulps=2, lowp_spread=2),
    Case("norm-minus-inf", "norm", [const(np.array([[0.5, -2.0, 1.0], [3.0, 0.1, -0.2]]))],
         lambda x: mp.norm(x, -math.inf), lambda x: np.abs(x).min(), lowp_ulps=2, lowp_spread=2),
    Case("dist", "dist", [rnd(2, 3), rnd(3)], lambda a, b: mp.dist(a, b, 3), lambda a, b: lp_norm_ref(a - b, 3),
         lowp_ulps=8, lowp_spread=8),
    Case("tensordot", "tensordot", [rnd(2, 3, 4), rnd(3, 4, 2)], mp.tensordot, lambda a, b: np.tensordot(a, b, 2),
         lowp_ulps=8, lowp_spread=8),
    Case("tensordot-dims-lists", "tensordot", [rnd(2, 3, 4), rnd(4, 3, 5)],
         lambda a, b: mp.tensordot(a, b, dims=([1, 2], [1, 0])), lambda a, b: np.tensordot(a, b, ([1, 2], [1, 0])),
         lowp_ulps=8, lowp_spread=8),
    Case("tensordot-outer", "tensordot", [rnd(2), rnd(3)], lambda a, b: mp.tensordot(a, b, 0),
         lambda a, b: np.tensordot(a, b, 0), lowp_ulps=2, lowp_spread=2),
    Case("cdist", "cdist", [rnd(4, 3), rnd(5, 3)], mp.cdist, cdist_ref, lowp_ulps=2, lowp_spread=2,
         second_order=True),
    Case("cdist-matrix-product-path", "cdist", [rnd(30, 3), rnd(4, 3)], mp.cdist, cdist_ref, rtol64=1e-10,
         lowp_ulps=2, lowp_spread=2),
    Case("cdist-p1-batch-broadcast", "cdist", [away(2, 3, 2), rnd(1, 4, 2)], lambda a, b: mp.cdist(a, b, p=1),
         lambda a, b: cdist_ref(a, b, 1), lowp_ulps=2, lowp_spread=2),
    Case("cdist-p3-no-matrix-product", "cdist", [rnd(30, 2), rnd(2, 2)],
         lambda a, b: mp.cdist(a, b, 3.0, compute_mode="donot_use_mm_for_euclid_dist"),
         lambda a, b: cdist_ref(a, b, 3), lowp_ulps=4, lowp_spread=4),
    Case("cdist-inf", "cdist", [distinct(3, 4), distinct(2, 4)], lambda a, b: mp.cdist(a, b, math.inf),
         lambda a, b: cdist_ref(a, b, math.inf), lowp_ulps=2, lowp_spread=2),
    Case("cdist-p0", "cdist", [rnd(3, 4), rnd(2, 4)], lambda a, b: mp.cdist(a, b, 0),
         lambda a, b: cdist_ref(a, b, 0)),
    Case("pdist", "pdist", [rnd(5, 3)], F.pdist, pdist_ref, lowp_ulps=4, lowp_spread=4),
    Case("pdist-p1.5", "pdist", [rnd(4, 2)], lambda x: F.pdist(x, 1.5), lambda x: pdist_ref(x, 1.5), lowp_ulps=8,
         lowp_spread=8),
    Case("pairwise_distance", "pairwise_distance", [rnd(3, 4), rnd(4)], F.pairwise_distance,
         lambda a, b: lp_norm_ref(a - b + 1e-6, 2, -1), lowp_ulps=8, lowp_spread=8),
    Case("cross", "cross", [rnd(4, 3), rnd(4, 3)], lambda a, b: mp.cross(a, b, dim=1),
         lambda a, b: np.cross(a, b, axis=1), lowp_ulps=4, lowp_spread=4, second_order=True),
    Case("cross-broadcast-dim0", "cross", [rnd(3, 1, 2), rnd(3, 4, 2)], lambda a, b: a.cross(b, 0),
         lambda a, b: np.cross(a, b, axis=0), lowp_ulps=4, lowp_spread=4),
    Case("renorm", "renorm", [rnd(4, 3)], lambda x: x.renorm(2, 0, 1.5), lambda x: renorm_ref(x, 2, 0, 1.5),
         lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("renorm-p1-dim1", "renorm", [rnd(2, 3, 2)], lambda x: mp.renorm(x, 1, 1, 2.0),
         lambda x: renorm_ref(x, 1, 1, 2.0), lowp_ulps=8, lowp_spread=8),
    Case("softmin", "softmin", [rnd(3, 4)], lambda x: F.softmin(x, dim=1), lambda x: np.exp(log_softmax_ref(-x, 1)),
         lowp_ulps=2, lowp_spread=2),
]
