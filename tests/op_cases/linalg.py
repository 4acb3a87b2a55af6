"""Cases for the ops of mixprec/ops/linalg.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, rnd
from .refs import matmul_ref

CASES = [
    Case("matmul", "matmul", [rnd(2, 3), rnd(3, 4)], lambda a, b: a @ b, matmul_ref),
    Case("matmul-1d-1d", "matmul", [rnd(4), rnd(4)], mp.matmul, matmul_ref),
    Case("matmul-1d-2d", "matmul", [rnd(3), rnd(3, 2)], lambda a, b: a @ b, matmul_ref),
    Case("matmul-2d-1d", "matmul", [rnd(2, 3), rnd(3)], lambda a, b: a.matmul(b), matmul_ref),
    Case("matmul-1d-3d", "matmul", [rnd(3), rnd(2, 3, 2)], mp.matmul, matmul_ref),
    Case("matmul-batch-broadcast", "matmul", [rnd(2, 1, 2, 3), rnd(3, 3, 2)], lambda a, b: a @ b, matmul_ref),
    Case("matmul-3d-2d", "matmul", [rnd(2, 2, 3), rnd(3, 2)], lambda a, b: a @ b, matmul_ref),
    Case("mm", "mm", [rnd(2, 3), rnd(3, 2)], mp.mm, matmul_ref),
    Case("bmm", "bmm", [rnd(2, 2, 3), rnd(2, 3, 2)], lambda a, b: a.bmm(b), matmul_ref),
    Case("mv", "mv", [rnd(2, 3), rnd(3)], mp.mv, matmul_ref),
    Case("dot", "dot", [rnd(5), rnd(5)], lambda a, b: a.dot(b), np.dot),
    Case("addmm", "addmm", [rnd(2, 2), rnd(2, 3), rnd(3, 2)], mp.addmm, lambda c, a, b: c + a @ b),
    Case("addmm-broadcast-beta-alpha", "addmm", [rnd(2), rnd(3, 3), rnd(3, 2)],
         lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2.0), lambda c, a, b: 0.5 * c + 2.0 * (a @ b)),
    Case("baddbmm", "baddbmm", [rnd(2, 2, 2), rnd(2, 2, 3), rnd(2, 3, 2)], mp.baddbmm, lambda c, a, b: c + a @ b),
    Case("baddbmm-beta-alpha", "baddbmm", [rnd(1, 2), rnd(2, 2, 3), rnd(2, 3, 2)],
         lambda c, a, b: mp.baddbmm(c, a, b, beta=-1.0, alpha=0.5), lambda c, a, b: -c + 0.5 * (a @ b)),
    Case("linear", "linear", [rnd(3, 4), rnd(2, 4), rnd(2)], F.linear, lambda x, w, b: x @ w.T + b),
    Case("linear-no-bias-3d", "linear", [rnd(2, 2, 3), rnd(4, 3)], mp.linear, lambda x, w: x @ w.T),
]
