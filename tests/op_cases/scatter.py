"""Cases for the ops of mixprec/ops/scatter.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, distinct, rnd


def _scatter_reduce_ref(x, dim, index, src, how, include_self=True):
    """Each place's values listed (input's first when included), then reduced: the definition, place by place."""
    groups = {}
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        groups.setdefault(tuple(target), []).append(src[pos])
    out = x.copy()
    reduce = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[how]
    for target, values in groups.items():
        out[target] = reduce(([x[target]] if include_self else []) + values)
    return out


def _scatter_ref(x, dim, index, src):
    out = x.copy()
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        out[tuple(target)] = src[pos]
    return out


def _index_reduce_ref(x, dim, index, source, how, include_self=True):
    spread = np.broadcast_to(index.reshape((-1,) + (1,) * (x.ndim - dim - 1)), source.shape)
    return _scatter_reduce_ref(x, dim, spread, source, how, include_self)


def _masked_scatter_ref(x, mask, source):
    out = np.broadcast_to(x, np.broadcast_shapes(x.shape, mask.shape)).copy()
    m = np.broadcast_to(mask, out.shape)
    out[m] = source.reshape(-1)[:m.sum()]
    return out


def _put_ref(x, index, source, accumulate):
    out = x.copy().reshape(-1)
    if accumulate:
        np.add.at(out, index.reshape(-1), source.reshape(-1))
    else:
        out[index.reshape(-1)] = source.reshape(-1)
    return out.reshape(x.shape)


def _as_strided_scatter_ref(x, s):
    """Size (2, 2), stride (1, 3), offset 1: element (i, j) of the view is flat element 1 + i + 3 j."""
    out = x.copy().reshape(-1)
    for i, j in np.ndindex(2, 2):
        out[1 + i + 3 * j] = s[i, j]
    return out.reshape(3, 3)


def _chunk_cat_ref(tensors, dim, n):
    parts = []
    for t in tensors:
        size = -(-t.shape[dim] // n)
        pad = [(0, 0)] * t.ndim
        pad[dim] = (0, size * n - t.shape[dim])
        parts.append(np.pad(t, pad).reshape(t.shape[:dim] + (n, -1)))
    return np.concatenate(parts, axis=dim + 1)


MASK = const(np.array([[True, False, True], [False, False, True]]))
IDX = const(np.array([[0, 2, 0], [3, 0, 2]]))  # repeats within columns 0 and 2 (dim 0, input of 4 rows)

CASES = [
    Case("masked_fill", "masked_fill", [rnd(2, 3), MASK], lambda x, m: x.masked_fill(m, -2.5),
         lambda x, m: np.where(m, -2.5, x)),
    Case("masked_fill-tensor-value-broadcast", "masked_fill", [rnd(3), rnd(), MASK],
         lambda x, v, m: mp.masked_fill(x, m, v), lambda x, v, m: np.where(m, v, x)),
    Case("masked_select", "masked_select", [rnd(3), MASK], mp.masked_select,
         lambda x, m: np.broadcast_to(x, m.shape)[m]),
    Case("masked_scatter", "masked_scatter", [rnd(2, 3), MASK, rnd(5)], lambda x, m, s: x.masked_scatter(m, s),
         _masked_scatter_ref),
    Case("take", "take", [rnd(3, 4), const(np.array([[0, -1], [5, 5]]))], mp.take,
         lambda x, i: x.reshape(-1)[i]),
    Case("take_along_dim", "take_along_dim", [rnd(3, 4), const(np.array([[0], [3], [-1]]))],
         lambda x, i: x.take_along_dim(i, 1), lambda x, i: np.take_along_axis(x, i % 4, 1)),
    Case("take_along_dim-broadcast", "take_along_dim", [rnd(1, 4), const(np.array([[0], [3], [1]]))],
         lambda x, i: mp.take_along_dim(x, i, 1), lambda x, i: np.take_along_axis(np.broadcast_to(x, (3, 4)), i, 1)),
    Case("take_along_dim-flat", "take_along_dim", [rnd(2, 3), const(np.array([5, 0, 0]))], mp.take_along_dim,
         lambda x, i: x.reshape(-1)[i]),
    Case("put", "put", [rnd(2, 3), const(np.array([4, 0])), rnd(2)], lambda x, i, s: x.put(i, s),
         lambda x, i, s: _put_ref(x, i, s, False)),
    Case("put-accumulate", "put", [rnd(2, 3), const(np.array([[4, 1], [4, 4]])), rnd(2, 2)],
         lambda x, i, s: mp.put(x, i, s, accumulate=True), lambda x, i, s: _put_ref(x, i, s, True)),
    Case("index_fill", "index_fill", [rnd(3, 4), const(np.array([0, -1]))], lambda x, i: x.index_fill(1, i, 0.5),
         lambda x, i: np.where(np.isin(np.arange(4), i % 4), 0.5, x)),
    Case("index_fill-tensor-value", "index_fill", [rnd(3, 2), rnd(), const(np.array([1]))],
         lambda x, v, i: mp.index_fill(x, 0, i, v), lambda x, v, i: np.where(np.arange(3)[:, None] == 1, v, x)),
    Case("select_scatter", "select_scatter", [rnd(3, 4), rnd(3)], lambda x, s: mp.select_scatter(x, s, 1, -2),
         lambda x, s: np.concatenate([x[:, :2], s[:, None], x[:, 3:]], 1)),
    Case("slice_scatter", "slice_scatter", [rnd(5, 2), rnd(2, 2)], lambda x, s: mp.slice_scatter(x, s, 0, 1, None, 2),
         lambda x, s: np.stack([x[0], s[0], x[2], s[1], x[4]])),
    Case("as_strided_scatter", "as_strided_scatter", [rnd(3, 3), rnd(2, 2)],
         lambda x, s: mp.as_strided_scatter(x, s, (2, 2), (1, 3), 1),
         _as_strided_scatter_ref),
    Case("scatter", "scatter", [rnd(4, 3), IDX, rnd(2, 3)],
         lambda x, i, s: x.scatter(0, i[:1], s), lambda x, i, s: _scatter_ref(x, 0, i[:1], s)),
    Case("scatter-src-larger", "scatter", [rnd(3, 4), const(np.array([[3, 0], [1, 2]])), rnd(3, 3)],
         lambda x, i, s: mp.scatter(x, 1, i, s), lambda x, i, s: _scatter_ref(x, 1, i, s)),
    Case("scatter-value", "scatter", [rnd(4, 3), IDX], lambda x, i: x.scatter(0, i, value=2.0),
         lambda x, i: _scatter_ref(x, 0, i, np.full(i.shape, 2.0))),
    Case("scatter-reduce-add", "scatter", [rnd(4, 3), IDX, rnd(2, 3)], lambda x, i, s: x.scatter(0, i, s, reduce="add"),
         lambda x, i, s: _scatter_reduce_ref(x, 0, i, s, "sum")),
    Case("scatter-0d", "scatter", [rnd(), const(np.array(0)), rnd()], lambda x, i, s: mp.scatter(x, 0, i, s),
         lambda x, i, s: s),
]
for _how in ("sum", "prod", "mean", "amax", "amin"):
    for _include in (True, False):
        CASES.append(Case(f"scatter_reduce-{_how}-include_self={_include}", "scatter_reduce",
                          [distinct(4, 3), IDX, distinct(2, 3)],
                          lambda x, i, s, h=_how, inc=_include: x.scatter_reduce(0, i, s, h, include_self=inc),
                          lambda x, i, s, h=_how, inc=_include: _scatter_reduce_ref(x, 0, i, s, h, inc),
                          lowp_ulps=2))
CASES += [
    Case("scatter_reduce-prod-zeros", "scatter_reduce",
         [rnd(4, 3), IDX, const(np.array([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0]]))],
         lambda x, i, s: mp.scatter_reduce(x, 0, i, s, "prod"), lambda x, i, s: _scatter_reduce_ref(x, 0, i, s, "prod"),
         lowp_ulps=2),
    Case("scatter_reduce-0d", "scatter_reduce", [rnd(), const(np.array(0)), rnd()],
         lambda x, i, s: mp.scatter_reduce(x, 0, i, s, "amax"), lambda x, i, s: np.maximum(x, s)),
    Case("index_reduce-prod", "index_reduce", [rnd(3, 4), const(np.array([2, 0, 2])), rnd(3, 3)],
         lambda x, i, s: x.index_reduce(1, i, s, "prod"), lambda x, i, s: _index_reduce_ref(x, 1, i, s, "prod"),
         lowp_ulps=2),
    Case("index_reduce-mean-exclude", "index_reduce", [rnd(4, 2), const(np.array([3, 0, 3])), rnd(3, 2)],
         lambda x, i, s: mp.index_reduce(x, 0, i, s, "mean", include_self=False),
         lambda x, i, s: _index_reduce_ref(x, 0, i, s, "mean", False), lowp_ulps=2),
    Case("index_reduce-amin", "index_reduce", [distinct(4, 2), const(np.array([1, 0])), distinct(2, 2)],
         lambda x, i, s: mp.index_reduce(x, 0, i, s, "amin"), lambda x, i, s: _index_reduce_ref(x, 0, i, s, "amin")),
    Case("_unsafe_masked_index", "_unsafe_masked_index", [rnd(3, 4), MASK, const(np.array([[0, 5, 2], [-1, 9, 1]]))],
         lambda x, m, i: mp.ops.get("_unsafe_masked_index")(x, m, [None, i], 0.5),
         lambda x, m, i: np.where(m, x[:, np.clip(i, -4, 3)], 0.5)),
    Case("_unsafe_masked_index_put_accumulate", "_unsafe_masked_index_put_accumulate",
         [rnd(3), MASK, const(np.array([[0, 7, 2], [0, 1, 2]])), rnd(2, 3)],
         lambda x, m, i, v: mp.ops.get("_unsafe_masked_index_put_accumulate")(x, m, [i], v),
         lambda x, m, i, v: _put_ref(x, np.clip(i, -3, 2), np.where(m, v, 0.0), True)),
    Case("_chunk_cat", "_chunk_cat", [rnd(2, 5, 2), rnd(2, 3)],
         lambda a, b: mp.ops.get("_chunk_cat")([a, b], 1, 2), lambda a, b: _chunk_cat_ref([a, b], 1, 2)),
]
