"""Cases for the ops of mixprec/ops/matmul.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, grad_wrt_first, rnd
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
    Case("addbmm", "addbmm", [rnd(2, 4), rnd(3, 2, 5), rnd(3, 5, 4)], mp.addbmm,
         lambda c, a, b: c + np.einsum("bnk,bkm->nm", a, b)),
    Case("addbmm-broadcast-beta-alpha", "addbmm", [rnd(4), rnd(2, 3, 2), rnd(2, 2, 4)],
         lambda c, a, b: c.addbmm(a, b, beta=0.5, alpha=-2.0), lambda c, a, b: 0.5 * c - 2.0 * (a @ b).sum(0)),
    Case("addmv", "addmv", [rnd(3), rnd(3, 4), rnd(4)], mp.addmv, lambda c, m, v: c + m @ v),
    Case("addmv-broadcast-beta-alpha", "addmv", [rnd(1), rnd(3, 4), rnd(4)],
         lambda c, m, v: c.addmv(m, v, beta=2.0, alpha=0.5), lambda c, m, v: 2.0 * c + 0.5 * (m @ v)),
    Case("addr", "addr", [rnd(3, 4), rnd(3), rnd(4)], mp.addr, lambda c, u, v: c + np.outer(u, v)),
    Case("addr-broadcast-beta0", "addr", [rnd(4), rnd(3), rnd(4)], lambda c, u, v: c.addr(u, v, beta=0, alpha=1.5),
         lambda c, u, v: 0 * c + 1.5 * np.outer(u, v)),
    Case("vdot", "vdot", [rnd(5), rnd(5)], lambda a, b: a.vdot(b), np.vdot),
    Case("multi_dot", "linalg_multi_dot", [rnd(2, 3), rnd(3, 6), rnd(6, 2), rnd(2, 4)], lambda *m: mp.linalg.multi_dot(list(m)),
         lambda a, b, c, d: a @ b @ c @ d, lowp_ulps=4, lowp_spread=4),
    Case("multi_dot-vector-ends", "linalg_multi_dot", [rnd(3), rnd(3, 4), rnd(4, 2), rnd(2)],
         lambda *m: mp.linalg.multi_dot(m), lambda a, b, c, d: a @ b @ c @ d, lowp_ulps=4, lowp_spread=4),
    Case("chain_matmul", "chain_matmul", [rnd(2, 3), rnd(3, 4), rnd(4, 2)], mp.chain_matmul,
         lambda a, b, c: a @ b @ c, lowp_ulps=4, lowp_spread=4),
    Case("chain_matmul-one", "chain_matmul", [rnd(2, 3)], mp.chain_matmul, lambda a: a.copy()),
    Case("linear", "linear", [rnd(3, 4), rnd(2, 4), rnd(2)], F.linear, lambda x, w, b: x @ w.T + b),
    Case("linear-no-bias-3d", "linear", [rnd(2, 2, 3), rnd(4, 3)], mp.linear, lambda x, w: x @ w.T),
    # linear's gradients are one op, _linear_backward: g @ w, g^T @ x and the batch sum of g (each batch flattened
    # to rows), in float32 and rounded once for half inputs
    Case("linear-input-grad", "_linear_backward", [rnd(3, 4), rnd(3, 2), rnd(2, 4)],
         grad_wrt_first(lambda x, w: F.linear(x, w)), lambda x, g, w: g @ w, lowp_ulps=2, lowp_spread=2),
    Case("linear-weight-grad-3d", "_linear_backward", [rnd(4, 3), rnd(2, 2, 4), rnd(2, 2, 3)],
         grad_wrt_first(lambda w, x: F.linear(x, w)), lambda w, g, x: g.reshape(-1, 4).T @ x.reshape(-1, 3),
         lowp_ulps=2, lowp_spread=2),
    Case("linear-bias-grad", "_linear_backward", [rnd(2), rnd(3, 2), rnd(3, 4), rnd(2, 4)],
         grad_wrt_first(lambda b, x, w: F.linear(x, w, b)), lambda b, g, x, w: g.sum(0), lowp_ulps=2,
         lowp_spread=2),
    # a product of two matrices sends its gradients through one op, _mm_backward: g @ b^T and a^T @ g
    Case("_mm_backward-both", "_mm_backward", [rnd(3, 2), rnd(3, 4), rnd(4, 2)],
         lambda g, a, b: mp.ops.get("_mm_backward")(g, a, b, (True, True)), lambda g, a, b: (g @ b.T, a.T @ g),
         second_order=True),
    Case("_mm_backward-mat2", "_mm_backward", [rnd(2, 5), rnd(2, 3), rnd(3, 5)],
         lambda g, a, b: mp.ops.get("_mm_backward")(g, a, b, (False, True)), lambda g, a, b: a.T @ g),
    Case("_linear_backward-all", "_linear_backward", [rnd(2, 3, 2), rnd(2, 3, 4), rnd(2, 4)],
         lambda g, x, w: mp.ops.get("_linear_backward")(g, x, w, (True, True, True)),
         lambda g, x, w: (g @ w, g.reshape(-1, 2).T @ x.reshape(-1, 4), g.reshape(-1, 2).sum(0)),
         second_order=True, lowp_ulps=2, lowp_spread=2),
]
