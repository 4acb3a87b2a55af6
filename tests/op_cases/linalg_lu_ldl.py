"""Cases for the ops of mixprec/ops/linalg_lu_ldl.py (mp.linalg, part 4: LU's other faces, LDL^T).

References are SciPy's LAPACK LU (float64). L and U of square, tall and wide matrices are checked with their
derivatives; the permutation is a constant.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

import mixprec as mp

from .case import Case, rnd
from .linalg_lu_cholesky import lu_ref, wellcond, with_long


def plu(a):
    return tuple(np.stack(x) for x in zip(*[sla.lu(m) for m in a])) if a.ndim == 3 else sla.lu(a)


def info_long(result):
    return with_long(result, mp)


CASES = [
    Case("linalg_lu-square-batched", "linalg_lu", [rnd(2, 4, 4)], mp.linalg.lu, plu, lowp=False, rtol64=1e-10),
    Case("linalg_lu-tall", "linalg_lu", [rnd(5, 3)], mp.linalg.lu, plu, lowp=False, rtol64=1e-10),
    Case("linalg_lu-wide", "linalg_lu", [rnd(3, 5)], mp.linalg.lu, plu, lowp=False, rtol64=1e-10),
    Case("lu_factor_ex-tall", "linalg_lu_factor_ex", [rnd(5, 3)],
         lambda a: info_long(mp.linalg.lu_factor_ex(a)),
         lambda a: lu_ref(a) + (np.array(0, dtype=np.int64),), lowp=False, rtol64=1e-10),
    Case("torch-lu-infos", "lu", [rnd(3, 4)], lambda a: info_long(a.lu(get_infos=True)),
         lambda a: lu_ref(a) + (np.array(0, dtype=np.int64),), lowp=False, rtol64=1e-10),
    Case("lu_unpack", "lu_unpack", [rnd(4, 3)], lambda a: mp.lu_unpack(*mp.linalg.lu_factor(a)), sla.lu,
         lowp=False, rtol64=1e-10),
    Case("solve_ex", "linalg_solve_ex", [wellcond(2, 3, 3), rnd(2, 3, 2)],
         lambda a, b: info_long(mp.linalg.solve_ex(a, b)),
         lambda a, b: (np.linalg.solve(a, b), np.zeros(2, dtype=np.int64)), lowp=False, rtol64=1e-10),
]
