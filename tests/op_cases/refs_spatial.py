"""NumPy float64 references for convolutions, pools, pads and grid sampling, in any number of spatial dims.

Written from the definitions, one output element (or one input element) at a
time, independently of mixprec's im2col and window tables.
"""
from __future__ import annotations

import itertools
import math

import numpy as np


def _positions(shape):
    return itertools.product(*map(range, shape))


def conv_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation of x (N, C, *size) with w (O, C/groups, *kernel); padding an int, or (low, high) per dim."""
    nd = x.ndim - 2
    stride, dilation = _per_dim(stride, nd), _per_dim(dilation, nd)
    pads = [(p, p) if isinstance(p, int) else tuple(p) for p in _per_dim(padding, nd)]
    x = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    o, cg, *kernel = w.shape
    out_size = [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(x.shape[2:], kernel, stride, dilation)]
    out = np.zeros((x.shape[0], o, *out_size))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        for pos in _positions(out_size):
            window = tuple(slice(p * s, p * s + d * (k - 1) + 1, d)
                           for p, s, d, k in zip(pos, stride, dilation, kernel))
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + window]
            out[(slice(None), oc) + pos] = (patch * w[oc]).reshape(x.shape[0], w[oc].size).sum(1)
    return out if b is None else out + b.reshape((1, -1) + (1,) * nd)


def conv_transpose_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """x (N, C, *size) scattered through w (C, O/groups, *kernel): each input element adds w * x at
    in * stride - padding + tap * dilation (the definition, not the adjoint of conv_ref)."""
    nd = x.ndim - 2
    stride, padding, dilation = _per_dim(stride, nd), _per_dim(padding, nd), _per_dim(dilation, nd)
    output_padding = _per_dim(output_padding, nd)
    c, og, *kernel = w.shape
    out_size = [(n - 1) * s - 2 * p + d * (k - 1) + e + 1
                for n, s, p, d, k, e in zip(x.shape[2:], stride, padding, dilation, kernel, output_padding)]
    out = np.zeros((x.shape[0], og * groups, *out_size))
    per_group = c // groups
    for ic in range(c):
        g = ic // per_group
        for pos in _positions(x.shape[2:]):
            for tap in _positions(kernel):
                target = [p * s - pd + t * d for p, s, pd, t, d in zip(pos, stride, padding, tap, dilation)]
                if all(0 <= t < n for t, n in zip(target, out_size)):
                    out[(slice(None), slice(g * og, (g + 1) * og)) + tuple(target)] += \
                        x[(slice(None), ic) + pos][:, None] * w[(ic, slice(None)) + tap]
    return out if b is None else out + b.reshape((1, -1) + (1,) * nd)


def conv_weight_grad_ref(x, g, kernel, stride=1, padding=0, dilation=1, groups=1):
    """d sum(g * conv(x, w)) / dw for w of spatial ``kernel``: each tap's weight met every input element it
    multiplied, x[n, c, out * stride - padding + tap * dilation], times that output's gradient g[n, o, out].
    A tap over the padding multiplied a zero: it adds g * 0, so a nan or inf gradient reaches it (as torch's)."""
    nd = x.ndim - 2
    stride, padding, dilation = _per_dim(stride, nd), _per_dim(padding, nd), _per_dim(dilation, nd)
    o, cg = g.shape[1], x.shape[1] // groups
    out = np.zeros((o, cg, *kernel))
    per_group = o // groups
    for oc in range(o):
        first = oc // per_group * cg
        for tap in _positions(kernel):
            for pos in _positions(g.shape[2:]):
                source = [p * s - pd + t * d for p, s, pd, t, d in zip(pos, stride, padding, tap, dilation)]
                if all(0 <= i < n for i, n in zip(source, x.shape[2:])):
                    patch = x[(slice(None), slice(first, first + cg)) + tuple(source)]   # (N, C/G)
                else:
                    patch = np.zeros((x.shape[0], cg))                                    # the padding
                out[(oc, slice(None)) + tap] += g[(slice(None), oc) + pos] @ patch
    return out


def _per_dim(v, nd):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd


def pool_ref(x, kind, kernel, stride=None, padding=0, dilation=1, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    """max/avg pool of x (N, C, *size): values (and for max the flat input-plane index of each maximum)."""
    nd = x.ndim - 2
    size = x.shape[2:]
    k, p, d = _per_dim(kernel, nd), _per_dim(padding, nd), _per_dim(dilation, nd)
    s = k if stride is None else _per_dim(stride, nd)
    out_size = []
    for n, ki, si, pi, di in zip(size, k, s, p, d):
        o = (n + 2 * pi - di * (ki - 1) - 1 + (si - 1 if ceil_mode else 0)) // si + 1
        if ceil_mode and (o - 1) * si >= n + pi:
            o -= 1
        out_size.append(o)
    out = np.zeros(x.shape[:2] + tuple(out_size))
    index = np.zeros(out.shape, dtype=np.int64)
    for pos in _positions(out_size):
        starts = [o * si - pi for o, si, pi in zip(pos, s, p)]
        taps = [[st + t * di for t in range(ki)] for st, ki, di in zip(starts, k, d)]
        inside = [tap for tap in itertools.product(*taps) if all(0 <= t < n for t, n in zip(tap, size))]
        values = np.stack([x[(slice(None), slice(None)) + tap] for tap in inside], -1)
        if kind == "max":
            best = values.argmax(-1)
            out[(Ellipsis,) + pos] = values.max(-1)
            flat = np.array([np.ravel_multi_index(tap, size) for tap in inside])
            index[(Ellipsis,) + pos] = flat[best]
        else:
            if divisor_override:
                divisor = divisor_override
            elif count_include_pad:
                divisor = math.prod(min(st + ki, n + pi) - st for st, ki, n, pi in zip(starts, k, size, p))
            else:
                divisor = len(inside)
            out[(Ellipsis,) + pos] = values.sum(-1) / divisor
    return (out, index) if kind == "max" else out


def adaptive_pool_ref(x, kind, output_size):
    """Adaptive max/avg pool: window o along a dim of size L spans floor(o L / O) to ceil((o + 1) L / O)."""
    size = x.shape[2:]
    out = np.zeros(x.shape[:2] + tuple(output_size))
    index = np.zeros(out.shape, dtype=np.int64)
    for pos in _positions(output_size):
        ranges = [range(o * n // on, -(-(o + 1) * n // on)) for o, n, on in zip(pos, size, output_size)]
        taps = list(itertools.product(*ranges))
        values = np.stack([x[(slice(None), slice(None)) + tap] for tap in taps], -1)
        if kind == "max":
            out[(Ellipsis,) + pos] = values.max(-1)
            index[(Ellipsis,) + pos] = np.array([np.ravel_multi_index(t, size) for t in taps])[values.argmax(-1)]
        else:
            out[(Ellipsis,) + pos] = values.mean(-1)
    return (out, index) if kind == "max" else out


def fractional_starts_ref(u, size, out, k):
    """The pseudo-random window starts (Graham's fractional max pooling, as torch computes them)."""
    if out == 1:
        return [size - k]
    alpha = (size - k) / (out - 1)
    return [int((i + u) * alpha) - int(u * alpha) for i in range(out - 1)] + [size - k]


def fractional_max_pool_ref(x, kernel, output_size, samples):
    """samples (N, C, nd): per plane, the sample of each dim in torch's order ((W, H) in 2-D, (T, H, W) in 3-D)."""
    nd = x.ndim - 2
    order = (1, 0) if nd == 2 else (0, 1, 2)
    out = np.zeros(x.shape[:2] + tuple(output_size))
    index = np.zeros(out.shape, dtype=np.int64)
    for n, c in _positions(x.shape[:2]):
        starts = [fractional_starts_ref(samples[n, c, order[d]], x.shape[2 + d], output_size[d], kernel[d])
                  for d in range(nd)]
        for pos in _positions(output_size):
            taps = list(itertools.product(*[range(st[o], st[o] + k) for st, o, k in zip(starts, pos, kernel)]))
            values = np.array([x[(n, c) + t] for t in taps])
            out[(n, c) + pos] = values.max()
            index[(n, c) + pos] = np.ravel_multi_index(taps[values.argmax()], x.shape[2:])
    return out, index


def max_unpool_ref(x, indices, output_size):
    out = np.zeros(x.shape[:2] + (math.prod(output_size),))
    for pos in _positions(x.shape):
        out[pos[:2] + (indices[pos],)] = x[pos]
    return out.reshape(x.shape[:2] + tuple(output_size))


def pad_ref(x, pad, mode, value=0.0):
    """F.pad with non-negative pads: pad lists (low, high) from the last dim backwards."""
    pairs = [(pad[i], pad[i + 1]) for i in range(0, len(pad), 2)][::-1]
    widths = [(0, 0)] * (x.ndim - len(pairs)) + pairs
    numpy_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    kw = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x, widths, mode=numpy_mode, **kw)


def _keys(d, a=-0.75):
    """Keys' cubic convolution kernel at distance d."""
    d = abs(d)
    if d <= 1:
        return (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1
    return a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a if d < 2 else 0.0


def grid_sample_ref(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """Sample x (N, C, *size) at each grid point (N, *out, nd), coordinates ordered (x, y[, z]), point by point."""
    nd = x.ndim - 2
    size = x.shape[2:]
    out = np.zeros(x.shape[:2] + grid.shape[1:-1])

    def source(c, n, fold=True):
        c = (c + 1) / 2 * (n - 1) if align_corners else ((c + 1) * n - 1) / 2
        return folded(c, n) if fold else c

    def folded(c, n):
        if padding_mode == "reflection":
            low, high = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
            span = high - low
            if span == 0:
                c = 0.0
            else:
                dist = abs(c - low)
                flips, extra = divmod(dist, span)
                c = low + extra if flips % 2 == 0 else high - extra
        if padding_mode in ("border", "reflection"):
            c = min(max(c, 0.0), n - 1.0)
        return c

    def read(b, ch, idx):
        return x[(b, ch) + idx] if all(0 <= i < n for i, n in zip(idx, size)) else 0.0

    for b in range(x.shape[0]):
        for pos in _positions(grid.shape[1:-1]):
            coords = [source(grid[(b,) + pos][nd - 1 - d], size[d], mode != "bicubic") for d in range(nd)]
            for ch in range(x.shape[1]):
                if mode == "bicubic":  # 4 x 4 neighbours, each index folded by padding_mode on its own
                    lows = [math.floor(c) for c in coords]
                    total = 0.0
                    for offs in itertools.product(range(-1, 3), repeat=nd):
                        weight = math.prod(_keys(c - lo - o) for c, lo, o in zip(coords, lows, offs))
                        idx = tuple(lo + o for lo, o in zip(lows, offs))
                        idx = tuple(int(folded(i, n)) for i, n in zip(idx, size))
                        total += weight * read(b, ch, idx)
                    out[(b, ch) + pos] = total
                    continue
                if mode == "nearest":
                    out[(b, ch) + pos] = read(b, ch, tuple(int(np.rint(c)) for c in coords))
                    continue
                total = 0.0
                lows = [math.floor(c) for c in coords]
                for corner in itertools.product((0, 1), repeat=nd):
                    weight = math.prod((c - lo) if bit else (lo + 1 - c) for c, lo, bit in zip(coords, lows, corner))
                    total += weight * read(b, ch, tuple(lo + bit for lo, bit in zip(lows, corner)))
                out[(b, ch) + pos] = total
    return out
