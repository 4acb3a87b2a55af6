"""Cases for mixprec/ops/einsum.py (NumPy's einsum is the float64 reference)."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, rnd

CASES = [
    Case("einsum-batched-matmul", "einsum", [rnd(2, 3, 4), rnd(2, 4, 5)], lambda a, b: mp.einsum("bij,bjk->bik", a, b),
         lambda a, b: np.einsum("bij,bjk->bik", a, b), second_order=True),
    Case("einsum-diagonal", "einsum", [rnd(3, 3)], lambda a: mp.einsum("ii->i", a), lambda a: np.einsum("ii->i", a)),
    Case("einsum-trace-implicit", "einsum", [rnd(3, 3)], lambda a: mp.einsum("ii", a), np.trace),
    Case("einsum-repeated-and-summed", "einsum", [rnd(2, 3, 2, 4)], lambda a: mp.einsum("iji k->k", a),
         lambda a: np.einsum("ijik->k", a)),
    Case("einsum-ellipsis-broadcast", "einsum", [rnd(5, 2, 3), rnd(3, 4)], lambda a, b: mp.einsum("...ij,...jk", a, b),
         lambda a, b: a @ b),
    Case("einsum-size-one-broadcast", "einsum", [rnd(1, 3), rnd(2, 1)], lambda a, b: mp.einsum("ij,ij->ij", a, b),
         lambda a, b: a * b),
    Case("einsum-outer-implicit-order", "einsum", [rnd(3), rnd(2)], lambda a, b: mp.einsum("b,a", a, b),
         lambda a, b: np.einsum("b,a", a, b)),
    Case("einsum-three-operands", "einsum", [rnd(3, 3, 4), rnd(4, 2), rnd(2)],
         lambda a, b, c: mp.einsum("iij,jk,k->ik", a, b, c), lambda a, b, c: np.einsum("iij,jk,k->ik", a, b, c),
         lowp_ulps=2, lowp_spread=2),
    Case("einsum-heads", "einsum", [rnd(2, 2, 3, 4), rnd(2, 2, 5, 4)],
         lambda q, k: mp.einsum("bhld,bhsd->bhls", q, k), lambda q, k: np.einsum("bhld,bhsd->bhls", q, k)),
    Case("einsum-sublist-list", "einsum", [rnd(2, 3), rnd(3, 4)],
         lambda a, b: (mp.einsum(a, [0, 1], b, [1, 2], [0, 2]), mp.einsum("ij,jk->", [a, b])),
         lambda a, b: (a @ b, (a @ b).sum()), lowp_ulps=2, lowp_spread=2),
]
