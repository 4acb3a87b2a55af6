"""Cases for the ops of mixprec/ops/inplace.py: what in-place writes record in the graph."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, rnd

_overwrite = mp.ops.get("_overwrite")
_copy_slices = mp.ops.get("_copy_slices")


def _rows(t):
    return t[1:3]


def _column_of_transpose(t):
    return t.T[1]


def _copy_slices_ref(region):
    def ref(base, value):
        out = base.copy()
        region(out)[...] = value
        return out
    return ref


CASES = [
    Case("overwrite-broadcast", "_overwrite", [rnd(2, 3), rnd(3)], _overwrite,
         lambda a, b: np.broadcast_to(b, a.shape)),
    Case("overwrite-number", "_overwrite", [rnd(2, 2)], lambda a: _overwrite(a, 1.5),
         lambda a: np.full(a.shape, 1.5)),
    Case("copy-slices-rows", "_copy_slices", [rnd(4, 3), rnd(2, 3)], lambda b, v: _copy_slices(b, v, _rows),
         _copy_slices_ref(lambda a: a[1:3])),
    Case("copy-slices-view-of-view", "_copy_slices", [rnd(3, 4), rnd(3)],
         lambda b, v: _copy_slices(b, v, _column_of_transpose), _copy_slices_ref(lambda a: a.T[1])),
]
