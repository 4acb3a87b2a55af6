"""Cases for the ops of mixprec/ops/shape.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, rnd
from .refs import index_put_ref, scatter_add_ref, split_ref


def _index_add_ref(x, dim, index, source):
    out = np.moveaxis(x.copy(), dim, 0)
    np.add.at(out, index, np.moveaxis(source, dim, 0))
    return np.moveaxis(out, 0, dim)


def _index_copy_ref(x, dim, index, source):
    out = np.moveaxis(x.copy(), dim, 0)
    out[index] = np.moveaxis(source, dim, 0)
    return np.moveaxis(out, 0, dim)


CASES = [
    Case("reshape", "reshape", [rnd(2, 3)], lambda a: a.reshape(3, 2), lambda a: a.reshape(3, 2)),
    Case("reshape-infer", "reshape", [rnd(2, 3, 2)], lambda a: mp.reshape(a, (-1, 4)), lambda a: a.reshape(-1, 4)),
    Case("view", "view", [rnd(2, 6)], lambda a: a.view(3, 2, 2), lambda a: a.reshape(3, 2, 2)),
    Case("transpose", "transpose", [rnd(2, 3, 4)], lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2)),
    Case("transpose-T", "transpose", [rnd(2, 3)], lambda a: a.T * 1, lambda a: a.T),
    Case("permute", "permute", [rnd(2, 3, 4)], lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    Case("permute-neg", "permute", [rnd(2, 3, 4)], lambda a: mp.permute(a, (1, -1, 0)),
         lambda a: a.transpose(1, 2, 0)),
    Case("squeeze", "squeeze", [rnd(1, 3, 1)], lambda a: a.squeeze(), np.squeeze),
    Case("squeeze-dim", "squeeze", [rnd(1, 3, 1)], lambda a: a.squeeze(-1), lambda a: a.squeeze(-1)),
    Case("unsqueeze", "unsqueeze", [rnd(2, 3)], lambda a: a.unsqueeze(1), lambda a: a[:, None]),
    Case("unsqueeze-neg", "unsqueeze", [rnd(2, 3)], lambda a: mp.unsqueeze(a, -1), lambda a: a[..., None]),
    Case("expand", "expand", [rnd(3, 1)], lambda a: a.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4))),
    Case("expand-keep", "expand", [rnd(1, 3)], lambda a: a.expand(4, -1), lambda a: np.broadcast_to(a, (4, 3))),
    Case("flatten", "flatten", [rnd(2, 3, 2)], lambda a: a.flatten(), np.ravel),
    Case("flatten-range", "flatten", [rnd(2, 3, 2, 2)], lambda a: mp.flatten(a, 1, 2), lambda a: a.reshape(2, 6, 2)),
    Case("cat", "cat", [rnd(2, 1), rnd(2, 3), rnd(2, 2)], lambda a, b, c: mp.cat([a, b, c], dim=1),
         lambda a, b, c: np.concatenate([a, b, c], axis=1)),
    Case("cat-dim0", "cat", [rnd(1, 3), rnd(2, 3)], lambda a, b: mp.cat((a, b)), lambda a, b: np.concatenate([a, b])),
    Case("cat-skips-1d-empty", "cat", [rnd(2, 3), rnd(2, 1)],
         lambda a, b: mp.cat([a.new_zeros(0), a, b, b.new_zeros(0)], dim=1), lambda a, b: np.concatenate([a, b], axis=1)),
    Case("stack", "stack", [rnd(2, 3), rnd(2, 3)], lambda a, b: mp.stack([a, b]), lambda a, b: np.stack([a, b])),
    Case("stack-dim", "stack", [rnd(2, 3), rnd(2, 3), rnd(2, 3)], lambda a, b, c: mp.stack([a, b, c], dim=-1),
         lambda a, b, c: np.stack([a, b, c], axis=-1)),
    Case("split-size", "split", [rnd(5, 2)], lambda a: a.split(2), lambda a: split_ref(a, [2, 2, 1], 0)),
    Case("split-sections", "split", [rnd(2, 6)], lambda a: mp.split(a, [1, 3, 2], dim=1),
         lambda a: split_ref(a, [1, 3, 2], 1)),
    Case("getitem-int", "__getitem__", [rnd(3, 4)], lambda a: a[1], lambda a: a[1]),
    Case("getitem-slices", "__getitem__", [rnd(4, 5)], lambda a: a[1:, ::2], lambda a: a[1:, ::2]),
    Case("getitem-neg-step-none-ellipsis", "__getitem__", [rnd(2, 3, 4)], lambda a: a[..., None, -1, 1:3],
         lambda a: a[..., None, -1, 1:3]),
    Case("getitem-int-array", "__getitem__", [rnd(4, 3), const(np.array([2, 0, 2, 3]))], lambda a, i: a[i],
         lambda a, i: a[i]),
    Case("getitem-list", "__getitem__", [rnd(4, 3)], lambda a: a[[0, 0, 3]], lambda a: a[[0, 0, 3]]),
    Case("getitem-two-arrays", "__getitem__", [rnd(3, 4), const(np.array([0, 2, 0])), const(np.array([1, 3, 1]))],
         lambda a, i, j: a[i, j], lambda a, i, j: a[i, j]),
    Case("getitem-slice-and-array", "__getitem__", [rnd(3, 4), const(np.array([3, 0, 3]))], lambda a, i: a[1:, i],
         lambda a, i: a[1:, i]),
    Case("getitem-bool-mask", "__getitem__", [rnd(2, 3), const(np.array([[True, False, True], [False, True, True]]))],
         lambda a, m: a[m], lambda a, m: a[m]),
    Case("index_put", "index_put", [rnd(5), const(np.array([0, 3])), rnd(2)], lambda x, i, v: mp.index_put(x, (i,), v),
         lambda x, i, v: index_put_ref(x, (i,), v, False)),
    Case("index_put-accumulate-repeated", "index_put", [rnd(5), const(np.array([1, 3, 1, 1])), rnd(4)],
         lambda x, i, v: mp.index_put(x, (i,), v, accumulate=True), lambda x, i, v: index_put_ref(x, (i,), v, True)),
    Case("index_put-2d-broadcast-values", "index_put", [rnd(3, 4), const(np.array([0, 2])), rnd(4)],
         lambda x, i, v: mp.index_put(x, (i,), v), lambda x, i, v: index_put_ref(x, (i,), v, False)),
    Case("index_put-two-indices-accumulate", "index_put",
         [rnd(3, 3), const(np.array([0, 2, 0])), const(np.array([1, 1, 1])), rnd(3)],
         lambda x, i, j, v: mp.index_put(x, (i, j), v, accumulate=True),
         lambda x, i, j, v: index_put_ref(x, (i, j), v, True)),
    Case("gather", "gather", [rnd(3, 4), const(np.array([[3, 0], [1, 1], [0, 2]]))], lambda x, i: x.gather(1, i),
         lambda x, i: np.take_along_axis(x, i, axis=1)),
    Case("gather-index-smaller-outside-dim", "gather", [rnd(3, 4), const(np.array([[2, 0, 2]]))],
         lambda x, i: mp.gather(x, 0, i), lambda x, i: np.take_along_axis(x[:, :3], i, axis=0)),
    Case("scatter_add-repeated", "scatter_add", [rnd(4), const(np.array([0, 2, 0, 0, 3])), rnd(5)],
         lambda x, i, s: mp.scatter_add(x, 0, i, s), lambda x, i, s: scatter_add_ref(x, 0, i, s)),
    Case("scatter_add-0d", "scatter_add", [rnd(), const(np.array(0)), rnd()],
         lambda x, i, s: mp.scatter_add(x, 0, i, s), lambda x, i, s: x + s),
    Case("scatter_add-dim1", "scatter_add", [rnd(2, 3), const(np.array([[0, 0], [2, 1]])), rnd(2, 2)],
         lambda x, i, s: x.scatter_add(1, i, s), lambda x, i, s: scatter_add_ref(x, 1, i, s)),
    Case("scatter_add-src-larger", "scatter_add", [rnd(3, 2), const(np.array([[2, 0], [2, 1]])), rnd(3, 3)],
         lambda x, i, s: mp.scatter_add(x, 0, i, s), lambda x, i, s: scatter_add_ref(x, 0, i, s)),
    Case("index_select", "index_select", [rnd(4, 3), const(np.array([3, 0, 3]))], lambda x, i: x.index_select(0, i),
         lambda x, i: x[i]),
    Case("index_select-dim1-0d-index", "index_select", [rnd(2, 3), const(np.array(2))],
         lambda x, i: mp.index_select(x, -1, i), lambda x, i: x[:, [2]]),
    Case("index_add-repeated-alpha", "index_add", [rnd(3, 4), const(np.array([2, 0, 2])), rnd(3, 3)],
         lambda x, i, s: x.index_add(1, i, s, alpha=-1.5),
         lambda x, i, s: _index_add_ref(x, 1, i, -1.5 * s)),
    Case("index_copy", "index_copy", [rnd(4, 2), const(np.array([3, 1])), rnd(2, 2)],
         lambda x, i, s: x.index_copy(0, i, s), lambda x, i, s: _index_copy_ref(x, 0, i, s)),
    Case("clone-contiguous", "clone", [rnd(3, 2)], lambda a: a.T.contiguous().clone(), lambda a: a.T.copy()),
    Case("flip", "flip", [rnd(2, 3, 2)], lambda a: a.flip((0, 2)), lambda a: np.flip(a, (0, 2))),
    Case("chunk", "chunk", [rnd(5, 2)], lambda a: a.chunk(3), lambda a: split_ref(a, [2, 2, 1], 0)),
    Case("select", "select", [rnd(2, 3, 4)], lambda a: a.select(1, -1), lambda a: a[:, -1]),
    Case("narrow", "narrow", [rnd(3, 5)], lambda a: a.narrow(1, -4, 3), lambda a: a[:, 1:4]),
    Case("unfold-overlapping", "unfold", [rnd(2, 6)], lambda a: a.unfold(1, 3, 2),
         lambda a: np.stack([a[:, 0:3], a[:, 2:5]], 1)),
    Case("unfold-of-transposed", "unfold", [rnd(4, 3)], lambda a: a.t().unfold(1, 2, 1),
         lambda a: np.stack([a.T[:, i:i + 2] for i in range(3)], 1)),
    Case("as_strided-overlapping", "as_strided", [rnd(3, 4)], lambda a: a.as_strided((3, 3), (2, 1), 1),
         lambda a: np.stack([a.reshape(-1)[1 + 2 * i:4 + 2 * i] for i in range(3)])),
    Case("as_strided-of-a-view", "as_strided", [rnd(3, 4)], lambda a: (a * 1)[1:].as_strided((2, 2), (1, 4)),
         lambda a: np.stack([a[1:].reshape(-1)[[0, 4]], a[1:].reshape(-1)[[1, 5]]])),
    Case("unbind", "unbind", [rnd(2, 3, 4)], lambda a: a.unbind(1), lambda a: tuple(a[:, i] for i in range(3))),
    Case("unbind-partly-used", "unbind", [rnd(3, 2)], lambda a: tuple(t * 2 for t in mp.unbind(a)[1:]),
         lambda a: tuple(r * 2 for r in a[1:])),  # (all but the first: an empty input has none to pick)
]
