"""Cases for the ops of mixprec/ops/linalg_lu_ldl.py (mp.linalg, part 4: LU's other faces, LDL^T).

References are SciPy's LAPACK LU and sytrf (float64). L and U of square, tall and wide matrices are checked
with their derivatives; the permutation is a constant. LDL^T has no derivative (as in torch): its cases check
values, with symmetric indefinite inputs whose Bunch-Kaufman pivoting takes 2 x 2 blocks.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack

import mixprec as mp

from .case import Case, const, rnd
from .linalg_lu_cholesky import lu_ref, wellcond, with_long


def plu(a):
    return tuple(np.stack(x) for x in zip(*[sla.lu(m) for m in a])) if a.ndim == 3 else sla.lu(a)


# symmetric, with a small diagonal: the first pivot is a 2 x 2 block
INDEFINITE = np.array([[0.01, 2.0, -1.0, 0.5], [2.0, 0.02, 0.3, 1.0], [-1.0, 0.3, -0.5, 2.0], [0.5, 1.0, 2.0, 0.1]])


def sytrf_ref(a):
    # SciPy's f2py wrapper does not check the shape: a non-square or empty matrix corrupts memory in LAPACK
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"sytrf: expected a square matrix, got shape {a.shape}")
    if a.size == 0:
        return a.copy(), np.zeros(0, dtype=np.int64), np.array(0, dtype=np.int64)
    ld, piv, info = lapack.dsytrf(np.asarray(a, dtype=np.float64), lower=1)
    return np.tril(ld), piv.astype(np.int64), np.array(info, dtype=np.int64)


CASES = [
    Case("linalg_lu-square-batched", "linalg_lu", [rnd(2, 4, 4)], lambda a: mp.linalg.lu(a), plu, lowp=False,
         rtol64=1e-10),
    Case("linalg_lu-tall", "linalg_lu", [rnd(5, 3)], lambda a: mp.linalg.lu(a), plu, lowp=False, rtol64=1e-10),
    Case("linalg_lu-wide", "linalg_lu", [rnd(3, 5)], lambda a: mp.linalg.lu(a), plu, lowp=False, rtol64=1e-10),
    Case("lu_factor_ex-tall", "linalg_lu_factor_ex", [rnd(5, 3)],
         lambda a: with_long(mp.linalg.lu_factor_ex(a), mp),
         lambda a: lu_ref(a) + (np.array(0, dtype=np.int64),), lowp=False, rtol64=1e-10),
    Case("torch-lu-infos", "lu", [rnd(3, 4)], lambda a: with_long(a.lu(get_infos=True), mp),
         lambda a: lu_ref(a) + (np.array(0, dtype=np.int64),), lowp=False, rtol64=1e-10),
    Case("lu_unpack", "lu_unpack", [rnd(4, 3)], lambda a: mp.lu_unpack(*mp.linalg.lu_factor(a)), sla.lu,
         lowp=False, rtol64=1e-10),
    Case("solve_ex", "linalg_solve_ex", [wellcond(2, 3, 3), rnd(2, 3, 2)],
         lambda a, b: with_long(mp.linalg.solve_ex(a, b), mp),
         lambda a, b: (np.linalg.solve(a, b), np.zeros(2, dtype=np.int64)), lowp=False, rtol64=1e-10),
    Case("ldl_factor_ex-indefinite", "linalg_ldl_factor_ex", [const(INDEFINITE)],
         lambda a: with_long(mp.linalg.ldl_factor_ex(a), mp), sytrf_ref, grad=False, lowp=False, rtol64=1e-12),
    Case("ldl_factor-batched", "linalg_ldl_factor", [rnd(2, 5, 5)],
         lambda a: with_long(mp.linalg.ldl_factor(a + a.mT), mp),
         lambda a: tuple(np.stack(x) for x in zip(*[sytrf_ref(m + m.T)[:2] for m in a])), grad=False, lowp=False,
         rtol64=1e-12),
    Case("ldl_solve", "linalg_ldl_solve", [const(INDEFINITE), rnd(2, 4, 3)],
         lambda a, b: mp.linalg.ldl_solve(*mp.linalg.ldl_factor(a), b), lambda a, b: np.linalg.solve(a, b),
         grad=False, lowp=False, rtol64=1e-10),
]
