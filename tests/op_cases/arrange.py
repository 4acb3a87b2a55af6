"""Cases for the ops of mixprec/ops/arrange.py (NumPy's own functions as references)."""
from __future__ import annotations

import itertools

import numpy as np

import mixprec as mp

from .case import Case, const, rnd


def _block_diag_ref(*blocks):
    blocks = [np.atleast_2d(b) for b in blocks]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def _sum_to_ref(x, size):
    lead = x.ndim - len(size)
    x = x.sum(axis=tuple(range(lead)))
    return x.sum(axis=tuple(i for i, n in enumerate(size) if n == 1), keepdims=True)


CASES = [
    Case("view_as", "view_as", [rnd(2, 6), rnd(3, 4)], lambda a, b: a.view_as(b), lambda a, b: a.reshape(3, 4)),
    Case("reshape_as-transposed", "reshape_as", [rnd(3, 4), rnd(2, 6)], lambda a, b: a.T.reshape_as(b),
         lambda a, b: a.T.reshape(2, 6)),
    Case("expand_as", "expand_as", [rnd(3, 1), rnd(2, 3, 4)], lambda a, b: a.expand_as(b),
         lambda a, b: np.broadcast_to(a, (2, 3, 4))),
    Case("ravel-transposed", "ravel", [rnd(3, 4)], lambda a: mp.ravel(a.T), lambda a: a.T.ravel()),
    Case("movedim", "movedim", [rnd(2, 3, 4, 5)], lambda a: mp.movedim(a, (0, -1), (2, 0)),
         lambda a: np.moveaxis(a, (0, -1), (2, 0))),
    Case("movedim-int", "movedim", [rnd(2, 3, 4)], lambda a: a.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
    Case("unflatten", "unflatten", [rnd(2, 12)], lambda a: a.unflatten(1, (3, -1, 2)), lambda a: a.reshape(2, 3, 2, 2)),
    Case("broadcast_to", "broadcast_to", [rnd(3, 1)], lambda a: mp.broadcast_to(a, (2, 3, 4)),
         lambda a: np.broadcast_to(a, (2, 3, 4))),
    Case("broadcast_tensors", "broadcast_tensors", [rnd(3, 1), rnd(4), rnd(2, 1, 1)],
         lambda a, b, c: mp.broadcast_tensors(a, b, c), lambda a, b, c: np.broadcast_arrays(a, b, c)),
    Case("atleast_1d", "atleast_1d", [rnd(), rnd(2, 3)], lambda a, b: mp.atleast_1d(a, b),
         lambda a, b: np.atleast_1d(a, b)),
    Case("atleast_2d", "atleast_2d", [rnd(3), rnd()], lambda a, b: mp.atleast_2d([a, b]),
         lambda a, b: np.atleast_2d(a, b)),
    Case("atleast_3d", "atleast_3d", [rnd(3), rnd(2, 3)], lambda a, b: mp.atleast_3d((a, b)),
         lambda a, b: np.atleast_3d(a, b)),
    Case("atleast_3d-one", "atleast_3d", [rnd()], mp.atleast_3d, np.atleast_3d),
    Case("fliplr", "fliplr", [rnd(3, 4, 2)], mp.fliplr, np.fliplr),
    Case("flipud", "flipud", [rnd(3, 4)], lambda a: a.flipud(), np.flipud),
    Case("roll", "roll", [rnd(3, 4)], lambda a: mp.roll(a, (1, -5), (0, 1)), lambda a: np.roll(a, (1, -5), (0, 1))),
    Case("roll-flat", "roll", [rnd(3, 4)], lambda a: a.roll(5), lambda a: np.roll(a, 5)),
    Case("rot90", "rot90", [rnd(2, 3, 4)], lambda a: mp.rot90(a, 1, (1, 2)), lambda a: np.rot90(a, 1, (1, 2))),
    Case("rot90-k2", "rot90", [rnd(3, 4)], lambda a: a.rot90(2), lambda a: np.rot90(a, 2)),
    Case("rot90-k-1", "rot90", [rnd(3, 4)], lambda a: a.rot90(-1, (0, 1)), lambda a: np.rot90(a, -1)),
    Case("repeat", "repeat", [rnd(2, 3)], lambda a: a.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3))),
    Case("tile", "tile", [rnd(2, 3)], lambda a: mp.tile(a, (2,)), lambda a: np.tile(a, 2)),
    Case("repeat_interleave", "repeat_interleave", [rnd(2, 3)], lambda a: a.repeat_interleave(2),
         lambda a: np.repeat(a, 2)),
    Case("repeat_interleave-counts-dim", "repeat_interleave", [rnd(3, 2), const(np.array([2, 0, 1]))],
         lambda a, r: mp.repeat_interleave(a, r, 0), lambda a, r: np.repeat(a, r, 0)),
    Case("repeat_interleave-indices", "repeat_interleave", [const(np.array([1, 0, 3]))], mp.repeat_interleave,
         lambda r: np.repeat(np.arange(3), r), grad=False, lowp=False),
    Case("diag-vector", "diag", [rnd(3)], lambda a: mp.diag(a, 1), lambda a: np.diag(a, 1)),
    Case("diag-matrix", "diag", [rnd(3, 4)], lambda a: a.diag(-1), lambda a: np.diag(a, -1)),
    Case("diagflat", "diagflat", [rnd(2, 2)], lambda a: mp.diagflat(a, -1), lambda a: np.diagflat(a, -1)),
    Case("outer", "outer", [rnd(3), rnd(4)], mp.outer, np.outer),
    Case("inner", "inner", [rnd(2, 3, 4), rnd(5, 4)], mp.inner, np.inner, lowp_spread=2),
    Case("inner-0d", "inner", [rnd(), rnd(2, 3)], lambda a, b: a.inner(b), np.inner),
    Case("kron", "kron", [rnd(2, 3), rnd(3, 1, 2)], mp.kron, np.kron),
    Case("block_diag", "block_diag", [rnd(2, 3), rnd(), rnd(2)], mp.block_diag, _block_diag_ref),
    Case("slice", "slice", [rnd(4, 7)], lambda a: mp.slice(a, 1, 1, -1, 2), lambda a: a[:, 1:-1:2]),
    Case("tensor_split-sections", "tensor_split", [rnd(7, 2)], lambda a: a.tensor_split(3),
         lambda a: np.array_split(a, 3)),
    Case("tensor_split-indices", "tensor_split", [rnd(2, 7)], lambda a: mp.tensor_split(a, [1, -2], dim=1),
         lambda a: np.split(a, [1, 5], axis=1)),
    Case("hsplit", "hsplit", [rnd(2, 6)], lambda a: mp.hsplit(a, 3), lambda a: np.hsplit(a, 3)),
    Case("vsplit", "vsplit", [rnd(4, 2)], lambda a: a.vsplit([1]), lambda a: np.vsplit(a, [1])),
    Case("dsplit", "dsplit", [rnd(1, 2, 4)], lambda a: mp.dsplit(a, 2), lambda a: np.dsplit(a, 2)),
    Case("split_with_sizes", "split_with_sizes", [rnd(5, 2)], lambda a: a.split_with_sizes([3, 2]),
         lambda a: np.split(a, [3])),
    Case("unsafe_split", "unsafe_split", [rnd(5)], lambda a: mp.unsafe_split(a, 2), lambda a: np.split(a, [2, 4])),
    Case("unsafe_chunk", "unsafe_chunk", [rnd(2, 5)], lambda a: a.unsafe_chunk(2, 1),
         lambda a: np.split(a, [3], axis=1)),
    Case("hstack", "hstack", [rnd(2, 1), rnd(2, 3)], lambda a, b: mp.hstack([a, b]), lambda a, b: np.hstack([a, b])),
    Case("hstack-1d", "hstack", [rnd(2), rnd()], lambda a, b: mp.hstack((a, b)), lambda a, b: np.hstack([a, b])),
    Case("vstack", "vstack", [rnd(3), rnd(2, 3)], lambda a, b: mp.vstack([a, b]), lambda a, b: np.vstack([a, b])),
    Case("dstack", "dstack", [rnd(3), rnd(1, 3)], lambda a, b: mp.dstack([a, b]), lambda a, b: np.dstack([a, b])),
    Case("column_stack", "column_stack", [rnd(3), rnd(3, 2), rnd()], lambda a, b, c: mp.column_stack([a, b, c * a]),
         lambda a, b, c: np.column_stack([a, b, c * a])),
    Case("meshgrid-ij", "meshgrid", [rnd(2), rnd(3), rnd()], lambda a, b, c: mp.meshgrid(a, b, c, indexing="ij"),
         lambda a, b, c: np.meshgrid(a, b, c, indexing="ij")),
    Case("meshgrid-xy-list", "meshgrid", [rnd(2), rnd(3), rnd(4)], lambda a, b, c: mp.meshgrid([a, b, c], indexing="xy"),
         lambda a, b, c: np.meshgrid(a, b, c, indexing="xy")),
    Case("cartesian_prod", "cartesian_prod", [rnd(2), rnd(3)], mp.cartesian_prod,
         lambda a, b: np.array(list(itertools.product(a, b)))),
    Case("combinations", "combinations", [rnd(4)], lambda a: mp.combinations(a, 3),
         lambda a: np.array(list(itertools.combinations(a, 3)))),
    Case("combinations-replacement", "combinations", [rnd(3)], lambda a: mp.combinations(a, with_replacement=True),
         lambda a: np.array(list(itertools.combinations_with_replacement(a, 2)))),
    Case("sum_to_size", "sum_to_size", [rnd(2, 3, 4)], lambda a: a.sum_to_size(3, 1), lambda a: _sum_to_ref(a, (3, 1)),
         lowp_spread=2),
]
