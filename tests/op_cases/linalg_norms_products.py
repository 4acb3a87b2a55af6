"""Cases for the ops of mixprec/ops/linalg_norms_products.py (mp.linalg, part 3: norms, products, matrix functions).

References are NumPy/SciPy float64; these ops are composites, so what the cases check is that their parts
compose into the right values and derivatives.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

import mixprec as mp

from .case import Case, away, rnd
from .linalg_lu_cholesky import wellcond


def vander_ref(x, n):
    return x[..., :, None] ** np.arange(n)


def nan_log(x):
    with np.errstate(invalid="ignore"):
        return np.log(x)


CASES = [
    Case("vector_norm-3-dims", "linalg_vector_norm", [rnd(2, 3, 4)], lambda x: mp.linalg.vector_norm(x, 3, (0, 2)),
         lambda x: (np.abs(x) ** 3).sum((0, 2)) ** (1 / 3), lowp_ulps=8, lowp_spread=4),
    Case("vector_norm-all-keepdim", "linalg_vector_norm", [rnd(3, 4)],
         lambda x: mp.linalg.vector_norm(x, keepdim=True), lambda x: np.sqrt((x * x).sum()).reshape(1, 1),
         lowp_ulps=4, lowp_spread=4),
    Case("linalg_norm-vector", "linalg_norm", [rnd(2, 5)], lambda x: mp.linalg.norm(x, 1, -1),
         lambda x: np.abs(x).sum(-1), lowp_ulps=8, lowp_spread=4),
    Case("linalg_norm-nuc", "linalg_norm", [rnd(4, 3)], lambda x: mp.linalg.norm(x, "nuc"),
         lambda x: np.linalg.norm(x, "nuc"), lowp=False, rtol64=1e-10),
    Case("linalg_norm-fro-dims", "linalg_norm", [rnd(3, 2, 4)], lambda x: mp.linalg.norm(x, dim=(0, 2)),
         lambda x: np.sqrt((x * x).sum((0, 2))), lowp_ulps=4, lowp_spread=4),
    Case("matrix_power-3", "linalg_matrix_power", [rnd(2, 3, 3)], lambda a: mp.linalg.matrix_power(a, 3),
         lambda a: a @ a @ a, lowp=False),  # (half precision refused, as torch's)
    Case("matrix_power-minus-2", "linalg_matrix_power", [wellcond(3, 3)], lambda a: a.matrix_power(-2),
         lambda a: np.linalg.matrix_power(a, -2), lowp=False, rtol64=1e-10),
    Case("linalg_cross-broadcast", "linalg_cross", [rnd(2, 3), rnd(4, 1, 3)], mp.linalg.cross,
         lambda a, b: np.cross(a, b), lowp_ulps=4, lowp_spread=4),
    Case("linalg_diagonal", "linalg_diagonal", [rnd(2, 3, 4)], lambda a: mp.linalg.diagonal(a, offset=1),
         lambda a: np.diagonal(a, 1, -2, -1)),
    Case("vander", "linalg_vander", [rnd(2, 3)], lambda x: mp.linalg.vander(x, N=4), lambda x: vander_ref(x, 4),
         lowp_ulps=4, lowp_spread=4),
    Case("matrix_exp", "matrix_exp", [rnd(2, 3, 3)], mp.matrix_exp,
         lambda a: np.stack([sla.expm(m) for m in a]), lowp_ulps=8, lowp_spread=8, rtol64=1e-10),
    Case("matrix_exp-scaled", "matrix_exp", [rnd(3, 3)], lambda a: mp.linalg.matrix_exp(a * 3),
         lambda a: sla.expm(a * 3), lowp=False, rtol64=1e-10),
    Case("logdet", "logdet", [wellcond(2, 3, 3)], lambda a: a.logdet(),
         lambda a: np.log(np.linalg.det(a)), lowp=False, rtol64=1e-10),
    Case("logdet-negative", "logdet", [away(3, 3)], lambda a: mp.logdet(a @ a.mT * mp.tensor([-1.0, 1.0, 1.0],
                                                                                               dtype=a.dtype,
                                                                                               device=a.device)),
         lambda a: nan_log(np.linalg.det(a @ a.T * np.array([-1.0, 1.0, 1.0]))), grad=False, lowp=False),
]
