"""Cases for the ops of mixprec/ops/nn_rearrange.py (references by explicit loops over the definitions)."""
from __future__ import annotations

import numpy as np

import mixprec.nn.functional as F

from .case import Case, classes, rnd


def _one_hot_ref(idx, n):
    out = np.zeros(idx.shape + (n,), dtype=np.int64)
    for pos in np.ndindex(idx.shape):
        out[pos + (idx[pos],)] = 1
    return out


def _pixel_shuffle_ref(a, r):
    *b, c, h, w = a.shape
    out = np.zeros((*b, c // (r * r), h * r, w * r))
    for ch in range(c // (r * r)):
        for i in range(r):
            for j in range(r):
                out[..., ch, i::r, j::r] = a[..., ch * r * r + i * r + j, :, :]
    return out


def _pixel_unshuffle_ref(a, r):
    *b, c, h, w = a.shape
    out = np.zeros((*b, c * r * r, h // r, w // r))
    for ch in range(c):
        for i in range(r):
            for j in range(r):
                out[..., ch * r * r + i * r + j, :, :] = a[..., ch, i::r, j::r]
    return out


def _channel_shuffle_ref(a, g):
    c = a.shape[1]
    k = c // g
    out = np.empty_like(a)
    for i in range(g):
        for j in range(k):
            out[:, j * g + i] = a[:, i * k + j]
    return out


def _blocks(h, w, k, d, p, s):
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    return oh, ow


def _unfold_ref(a, k, d, p, s):
    n, c, h, w = a.shape
    padded = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]))
    padded[:, :, p[0]:p[0] + h, p[1]:p[1] + w] = a
    oh, ow = _blocks(h, w, k, d, p, s)
    out = np.zeros((n, c, k[0], k[1], oh, ow))
    for i in range(k[0]):
        for j in range(k[1]):
            for y in range(oh):
                for x in range(ow):
                    out[:, :, i, j, y, x] = padded[:, :, y * s[0] + i * d[0], x * s[1] + j * d[1]]
    return out.reshape(n, c * k[0] * k[1], oh * ow)


def _fold_ref(cols, size, k, d, p, s):
    n = cols.shape[0]
    c = cols.shape[1] // (k[0] * k[1])
    oh, ow = _blocks(size[0], size[1], k, d, p, s)
    blocks = cols.reshape(n, c, k[0], k[1], oh, ow)
    padded = np.zeros((n, c, size[0] + 2 * p[0], size[1] + 2 * p[1]))
    for i in range(k[0]):
        for j in range(k[1]):
            for y in range(oh):
                for x in range(ow):
                    padded[:, :, y * s[0] + i * d[0], x * s[1] + j * d[1]] += blocks[:, :, i, j, y, x]
    return padded[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]


CASES = [
    Case("one_hot", "one_hot", [classes(5, 2, 3)], lambda i: F.one_hot(i, 6), lambda i: _one_hot_ref(i, 6),
         grad=False, lowp=False),
    Case("one_hot-inferred", "one_hot", [classes(4, 7)], F.one_hot, lambda i: _one_hot_ref(i, int(i.max()) + 1),
         grad=False, lowp=False),
    Case("pixel_shuffle", "pixel_shuffle", [rnd(2, 8, 2, 3)], lambda a: F.pixel_shuffle(a, 2),
         lambda a: _pixel_shuffle_ref(a, 2)),
    Case("pixel_shuffle-batch", "pixel_shuffle", [rnd(2, 1, 9, 2, 2)], lambda a: F.pixel_shuffle(a, 3),
         lambda a: _pixel_shuffle_ref(a, 3)),
    Case("pixel_unshuffle", "pixel_unshuffle", [rnd(2, 2, 4, 6)], lambda a: F.pixel_unshuffle(a, 2),
         lambda a: _pixel_unshuffle_ref(a, 2)),
    Case("channel_shuffle", "channel_shuffle", [rnd(2, 6, 3)], lambda a: F.channel_shuffle(a, 3),
         lambda a: _channel_shuffle_ref(a, 3)),
    Case("unfold", "im2col", [rnd(2, 3, 5, 4)], lambda a: F.unfold(a, (2, 3)),
         lambda a: _unfold_ref(a, (2, 3), (1, 1), (0, 0), (1, 1))),
    Case("unfold-strided-padded", "im2col", [rnd(1, 2, 6, 7)],
         lambda a: F.unfold(a, 2, dilation=(2, 1), padding=1, stride=(2, 3)),
         lambda a: _unfold_ref(a, (2, 2), (2, 1), (1, 1), (2, 3))),
    Case("unfold-unbatched", "im2col", [rnd(2, 4, 4)], lambda a: F.unfold(a, 3, padding=1),
         lambda a: _unfold_ref(a[None], (3, 3), (1, 1), (1, 1), (1, 1))[0]),
    Case("fold", "col2im", [rnd(2, 12, 9)], lambda a: F.fold(a, (4, 5), (2, 3)),
         lambda a: _fold_ref(a, (4, 5), (2, 3), (1, 1), (0, 0), (1, 1)), lowp_ulps=2, lowp_spread=2),
    Case("fold-strided-padded", "col2im", [rnd(1, 8, 9)],
         lambda a: F.fold(a, (6, 7), 2, dilation=(2, 1), padding=1, stride=(2, 3)),
         lambda a: _fold_ref(a, (6, 7), (2, 2), (2, 1), (1, 1), (2, 3))),
]
