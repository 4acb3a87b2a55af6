"""Pooling in 1, 2 and 3 dims: max, average, adaptive and fractional pools, and max_unpool.

Every max pool is one mechanism. Each pooled dim gets a table of window taps —
which input index each tap of each output window reads, -1 for padding — the
taps of all windows are gathered in one ``take``, one argmax finds each window's
maximum, and its flat position in the input plane is kept as the index (torch's
``return_indices``). The gradient goes back to those positions (_max_pool_backward,
a scatter-add), the tangent is gathered from them. Only the tables differ:

    max_pool             o * stride - padding + tap * dilation (ceil_mode may add a window)
    adaptive_max_pool    floor(o * L / O) + tap, the window ending at ceil((o + 1) * L / O)
    fractional_max_pool  pseudo-random starts, from mixprec's generator (or _random_samples)

Average pools are linear composites. avg_pool sums the taps that _im2col (conv.py)
lays out, so its gradient is _col2im; adaptive_avg_pool gathers the taps of the
same window tables as adaptive_max_pool and averages those inside each window
(selected with where, so a NaN or inf reaches only the windows that hold it).
Both average half-precision inputs in float32 and round once. max_unpool puts
each value back at its index, and its gradient gathers from there (so where
overlapping windows returned one index twice, each gets the gradient, as torch's).

Only the 3-D pools, max_unpool and fractional_max_pool are on an autocast list
(CPU, float32); the others run in the dtype of their input.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend as _be
from ..backend import array_module, capture, device_checks, devices
from .. import dtypes as _dt
from ..random import _rng_state
from ..tensor import Tensor
from ..creation import zeros_like
from . import halfbits
from .elementwise import where
from .conv import Geometry, _im2col, ntuple
from .opmath import compute_dtype
from .registry import register


def _with_batch(name, input, nd, empty_channels=False):
    """``input`` (C, *size) or (N, C, *size) -> (the batched input, whether it was unbatched), checked as torch
    does: a floating tensor whose dims other than the batch are non-empty (``empty_channels``: C may be 0)."""
    if input.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{name}: expected a {nd + 1}-D (C, *size) or {nd + 2}-D (N, C, *size) input, got shape "
                         f"{tuple(input.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: expected a floating-point input, got {input.dtype.name}")
    unbatched = input.ndim == nd + 1
    dims = input.shape if unbatched else input.shape[1:]
    if any(s == 0 for s in dims[1 if empty_channels else 0:]):
        raise ValueError(f"{name}: expected non-empty dims besides the batch dim, got an input of shape "
                         f"{tuple(input.shape)}")
    x = input[None] if unbatched else input
    return x, unbatched


def _unbatch(arrays, unbatched):
    return tuple(a[0] for a in arrays) if unbatched else arrays


# ---------------------------------------------------------------- window tables: the one mechanism
_TABLES: dict = {}  # (device, dtype, shape, bytes) -> a host-built table on that device
_PINNED: set = set()  # the keys of tables a CUDA-graph capture used: its replays read them
_TABLE_LIMIT = 512


def _table(like, host):
    """A host-built table (window positions, which taps are inside, divisors) as an array on ``like``'s device.

    On a GPU each table is uploaded once and reused: no host-to-device copy per call, and none inside a
    CUDA-graph capture (run the code once before capturing). Tables a capture used are never dropped."""
    if isinstance(like, np.ndarray):
        return host
    device = devices.device_of_array(like)
    key = (device.index, host.dtype.str, host.shape, host.tobytes())
    table = _TABLES.get(key)
    if table is None:
        if len(_TABLES) >= _TABLE_LIMIT:  # many distinct geometries: keep only what graphs still read
            for old in [k for k in _TABLES if k not in _PINNED]:
                del _TABLES[old]
        table = _TABLES[key] = devices.to_device(np.ascontiguousarray(host), device)
    if capture.is_capturing():
        _PINNED.add(key)
    return table


def _flat_windows(taps, size):
    """One table of input-plane positions from per-dim tap tables, and which taps lie inside the input.

    taps[d] is an int array (O_d, K_d) of indices along dim d shared by every plane
    (NumPy, built on the host; -1 marks a tap outside the input), or (N, C, O_d, K_d)
    per plane (on the input's device, all inside). Returns flat (lead..., K, L) with
    K = prod(K_d) taps per window, L = prod(O_d) windows, lead () or (N, C), and
    valid (K, L), or None when every tap is inside.
    """
    nd = len(size)
    lead = taps[0].shape[:-2]
    out, kernel = tuple(t.shape[-2] for t in taps), tuple(t.shape[-1] for t in taps)
    flat, valid = 0, True
    for d, t in enumerate(taps):  # each table broadcast to lead + (K_1..K_nd) + (O_1..O_nd)
        shape = list(lead) + [1] * (2 * nd)
        shape[len(lead) + nd + d], shape[len(lead) + d] = out[d], kernel[d]
        t = t.swapaxes(-1, -2).reshape(shape)
        flat = flat + t * math.prod(size[d + 1:])
        valid = valid & (t >= 0)
    table = lead + (math.prod(kernel), math.prod(out))
    flat = array_module(flat).broadcast_to(flat, lead + kernel + out).reshape(table)
    if lead or valid.all():
        return flat, None
    valid = np.broadcast_to(valid, kernel + out).reshape(table)
    return np.where(valid, flat, 0), valid


def _first_max(xp, values, maxima):
    """Along axis 0: the index of the first value equal to its maximum (or of the first NaN), as argmax.

    NumPy's argmax over a short axis is slow (it loops window by window); one
    comparison per tap over every window at once is not. Long windows use argmax.
    """
    if values.shape[0] > 16:
        return values.argmax(axis=0)
    best = xp.zeros(maxima.shape, dtype=np.int64)
    for k in range(values.shape[0] - 1, -1, -1):  # the first hit is written last
        v = values[k]
        best = xp.where((v == maxima) | (v != v), k, best)
    return best


def _max_over_windows(ctx, x, taps, return_indices, unbatched):
    """Max of each window of x (N, C, *size) given by ``taps`` (see _flat_windows), and its flat index."""
    xp = array_module(x)
    n, c, *size = x.shape
    plane = math.prod(size)
    out = tuple(t.shape[-2] for t in taps)
    flat, valid = _flat_windows(taps, size)
    k, windows = flat.shape[-2:]
    # planes last, (P, N * C): each tap of each window is then one contiguous row over all planes
    columns = xp.ascontiguousarray(x.reshape(n * c, plane).T)
    # float16 compares as int16 keys in its order (halfbits.py), unless a NaN or -0 needs float32's rules
    keyed = halfbits.applies(columns) and not halfbits.has_nan_or_negative_zero(halfbits.bits(columns))
    columns = halfbits.ordered(halfbits.bits(columns)) if keyed else columns.astype(compute_dtype(x.dtype),
                                                                                     copy=False)
    if flat.ndim == 4:  # a table per plane
        flat = xp.moveaxis(flat.reshape(n * c, k, windows), 0, -1)                          # (K, L, N * C)
        values = xp.take_along_axis(columns, flat.reshape(k * windows, n * c), axis=0).reshape(flat.shape)
    else:
        flat = _table(x, flat)
        values = xp.take(columns, flat, axis=0)                                             # (K, L, N * C)
    if valid is not None:
        padding = halfbits.NEGATIVE_INF_KEY if keyed else values.dtype.type(-np.inf)
        values = xp.where(_table(x, valid)[..., None], values, padding)
    if keyed:
        best, maxima = halfbits.first_max(values)
        maxima = halfbits.from_ordered(maxima)
    else:
        maxima = values.max(axis=0)                                                         # NaN propagates
        best = _first_max(xp, values, maxima)
    if flat.ndim == 3:
        index = xp.take_along_axis(flat, best[None], axis=0)[0]
    else:
        index = flat[best, xp.arange(windows)[:, None]]
    result = maxima.T.reshape(n, c, *out).astype(x.dtype, copy=False)
    index = xp.ascontiguousarray(index.T).astype(np.int64, copy=False).reshape(n, c, windows)
    ctx.index, ctx.in_shape, ctx.return_indices = index, (n, c, plane, *size), return_indices
    ctx.unbatched, ctx.disjoint = unbatched, _disjoint(taps)
    result, index = _unbatch((result, index.reshape(n, c, *out)), unbatched)
    return (result, index) if return_indices else result


def _disjoint(taps):
    """Whether no input element lies in two windows (so none can win two): every dim's taps are distinct."""
    if any(t.ndim != 2 for t in taps):  # per-plane tables (fractional pools): not worth checking
        return False
    return all(not (t >= 0).any() or np.bincount(t[t >= 0]).max() <= 1 for t in taps)


@register("_max_pool_backward", promote=(), linear=True, saves=("index",))
def _max_pool_backward(ctx, grad, index, plane, disjoint):
    """The gradient a max pool sends its input: each window's gradient added at the element that won it.

    grad and index (N, C, L) -> (N, C, plane). Where windows overlap an element may win several, and
    their gradients add up (half ones in float32, rounded once: backend.scatter_add). Where they cannot
    (``disjoint``) each element receives one at most, and adding it to zero in its own dtype is that same
    single rounding, without widening and rounding the whole plane (float16: on the bit patterns).
    """
    xp = array_module(grad)
    n, c, _ = index.shape
    out = xp.zeros((n, c, plane), dtype=grad.dtype)
    if disjoint and xp is np:
        rows = np.arange(0, n * c * plane, plane).reshape(n, c, 1)  # where each plane starts in the flat out
        at = (index + rows).reshape(-1)
        if halfbits.applies(grad):
            out.reshape(-1)[at] = halfbits.plus_zero(grad).reshape(-1)
        else:
            out.reshape(-1)[at] += grad.reshape(-1)
    else:
        grids = _be.open_grid(xp, index.shape)
        _be.scatter_add(out, (grids[0], grids[1], index), grad)
    return out


@_max_pool_backward.grad
def _(ctx, g):
    return g.gather(2, ctx.inputs[1]), None, None, None


def _max_pool_grad(ctx, g, *_):
    # Each output's gradient goes to the position that won its window (_max_pool_backward, whose own
    # backward, a gather, makes this differentiable again).
    n, c, plane, *size = ctx.in_shape
    g = g.unsqueeze(0) if ctx.unbatched else g
    gx = _max_pool_backward(g.reshape(ctx.index.shape), Tensor._wrap(ctx.index), plane, ctx.disjoint).reshape(n, c, *size)
    return (gx.squeeze(0) if ctx.unbatched else gx),


def _max_pool_tangent(ctx, t, *_):
    # each output moves with the element that won its window
    n, c, plane, *size = ctx.in_shape
    t = t.reshape(n, c, plane).gather(2, Tensor._wrap(ctx.index)).reshape(ctx.outputs[0].shape)
    return (t, None) if ctx.return_indices else t


def _max_pool_op(name, forward):
    op = register(name, functional=True)(forward)
    op.grad(_max_pool_grad)
    op.jvp(_max_pool_tangent)
    return op


# ---------------------------------------------------------------- fixed windows: geometry
def _pool_out_size(name, size, k, s, p, d, ceil_mode):
    """torch's pooling output size: with ceil_mode a last window counts if it starts inside the input or left
    padding."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    if out < 1:
        raise ValueError(f"{name}: the input is too small: size {size} with padding {p} gives no window of "
                         f"{d * (k - 1) + 1} elements (output size {out})")
    return out


def _pool_tuple(name, what, value, nd, minimum):
    """ntuple, where a pool also takes a one-element sequence for every dim (as torch's pools do)."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    return ntuple(name, what, value, nd, minimum)


def _pool_geometry(name, size, kernel_size, stride, padding, dilation, ceil_mode):
    nd = len(size)
    k = _pool_tuple(name, "kernel_size", kernel_size, nd, 1)
    no_stride = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if no_stride else _pool_tuple(name, "stride", stride, nd, 1)
    p = _pool_tuple(name, "padding", padding, nd, 0)
    d = _pool_tuple(name, "dilation", dilation, nd, 1)
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise ValueError(f"{name}: padding {p} should be at most half the kernel size {k}")
    out = tuple(_pool_out_size(name, n, *args, ceil_mode) for n, *args in zip(size, k, s, p, d))
    return Geometry(k, s, tuple((pi, pi) for pi in p), d, out)


# ---------------------------------------------------------------- max_pool
def _register_max_pool(nd):
    name = f"max_pool{nd}d"

    def forward(ctx, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        x, unbatched = _with_batch(name, input, nd)
        size = x.shape[2:]
        g = _pool_geometry(name, size, kernel_size, stride, padding, dilation, ceil_mode)
        taps = []
        for n, k, s, (p, _), d, o in zip(size, g.kernel, g.stride, g.padding, g.dilation, g.out):
            t = np.arange(o).reshape(-1, 1) * s - p + np.arange(k) * d
            taps.append(np.where((t >= 0) & (t < n), t, -1))
        return _max_over_windows(ctx, x, taps, return_indices, unbatched)
    forward.__doc__ = (f"Maximum over each kernel_size window of (N, C, *{nd} dims) (stride defaults to kernel_size); "
                       "NaN propagates. return_indices=True also returns each maximum's flat index in its input "
                       "plane (for max_unpool).")
    return _max_pool_op(name, forward)


max_pool1d, max_pool2d, max_pool3d = (_register_max_pool(nd) for nd in (1, 2, 3))


# ---------------------------------------------------------------- adaptive_max_pool
def _adaptive_output_size(name, output_size, size):
    """output_size as a tuple (None keeps that dim's input size)."""
    nd = len(size)
    values = (output_size,) * nd if output_size is None or isinstance(output_size, (int, np.integer)) \
        else tuple(output_size)
    values = tuple(n if v is None else v for v, n in zip(values, size)) if len(values) == nd else values
    return ntuple(name, "output_size", values, nd, 0)


def _adaptive_taps(size, out):
    """Per dim, the taps (O, K) of adaptive windows floor(o * L / O) to ceil((o + 1) * L / O); -1 pads the
    shorter windows to the longest."""
    taps = []
    for n, o in zip(size, out):
        start = np.arange(o) * n // max(o, 1)
        end = -(-(np.arange(o) + 1) * n // max(o, 1))
        t = start[:, None] + np.arange(max(int((end - start).max()) if o else 1, 1))
        taps.append(np.where(t < end[:, None], t, -1))
    return taps


def _register_adaptive_max_pool(nd):
    name = f"adaptive_max_pool{nd}d"

    def forward(ctx, input, output_size, return_indices=False):
        x, unbatched = _with_batch(name, input, nd)
        size = x.shape[2:]
        taps = _adaptive_taps(size, _adaptive_output_size(name, output_size, size))
        return _max_over_windows(ctx, x, taps, return_indices, unbatched)
    forward.__doc__ = (f"Maximum over {nd}-D windows sized so the output has output_size (an int, or a tuple with "
                       "None to keep a dim); return_indices as max_pool.")
    return _max_pool_op(name, forward)


adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d = (_register_adaptive_max_pool(nd) for nd in (1, 2, 3))


# ---------------------------------------------------------------- fractional_max_pool
def _fractional_starts(xp, samples, size, out, k):
    """torch's pseudo-random window starts along one dim, one sequence per sample: with alpha = (L - K) / (O - 1),
    start_o = int((o + u) * alpha) - int(u * alpha), and the last window ends at the input's end."""
    o = xp.arange(out, dtype=samples.dtype)
    if out > 1:
        alpha = samples.dtype.type(size - k) / samples.dtype.type(out - 1)  # in the samples' dtype, as torch
        u = samples[..., None]
        starts = ((o + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    else:
        starts = xp.zeros(samples.shape + (out,), dtype=np.int64)
    starts[..., -1:] = size - k
    return starts


def _register_fractional_max_pool(nd):
    name = f"fractional_max_pool{nd}d"
    # torch's sample order: (W, H) in 2-D, (T, H, W) in 3-D
    sample_of_dim = (1, 0) if nd == 2 else (0, 1, 2)

    def forward(ctx, input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                _random_samples=None):
        x, unbatched = _with_batch(name, input, nd)
        n, c, *size = x.shape
        k = ntuple(name, "kernel_size", kernel_size, nd, 1)
        if (output_size is None) == (output_ratio is None):
            raise ValueError(f"{name}: give exactly one of output_size and output_ratio, got output_size="
                             f"{output_size!r} and output_ratio={output_ratio!r}")
        if output_size is None:
            ratio = (output_ratio,) * nd if isinstance(output_ratio, (int, float)) else tuple(output_ratio)
            if len(ratio) != nd or not all(isinstance(r, (int, float)) and 0 < r < 1 for r in ratio):
                raise ValueError(f"{name}: output_ratio must be a number in (0, 1) or a tuple of {nd} of them, got "
                                 f"{output_ratio!r}")
            output_size = tuple(int(s * r) for s, r in zip(size, ratio))
        out = ntuple(name, "output_size", output_size, nd, 1)
        for d, (s, o, kk) in enumerate(zip(size, out, k)):
            # torch's limit: output_size + kernel_size - 1 <= input size, strictly below it in 3-D
            if o + kk - 1 > s or (nd == 3 and o + kk - 1 == s):
                raise ValueError(f"{name}: output size {o} with kernel size {kk} is too large for an input of "
                                 f"size {s} in spatial dim {d} (needs output_size + kernel_size - 1 "
                                 f"{'<' if nd == 3 else '<='} input size, as torch)")
        xp = array_module(x)
        work = compute_dtype(x.dtype)
        if _random_samples is None:  # drawn on the host (mixprec's one generator), in the dtype the starts use
            samples = devices.to_device(_rng_state["np"].random((n, c, nd), dtype=np.dtype(work).type),
                                        devices.device_of_array(x))
        else:
            samples = _random_samples
            if (samples.ndim != 3 or samples.shape[0] < n or tuple(samples.shape[1:]) != (c, nd)
                    or not _dt.is_floating(samples.dtype)):
                raise ValueError(f"{name}: _random_samples must be a floating tensor of shape {(n, c, nd)} "
                                 f"(batch, channels, {nd}; a larger batch is allowed, its first {n} are read), got "
                                 f"{samples.dtype.name} of shape {tuple(samples.shape)}")
            samples = samples[:n]
        samples = samples.astype(work, copy=False)
        taps = [_fractional_starts(xp, samples[..., sample_of_dim[d]], s, o, kk)[..., None] + xp.arange(kk)
                for d, (s, o, kk) in enumerate(zip(size, out, k))]
        return _max_over_windows(ctx, x, taps, return_indices, unbatched)
    forward.__doc__ = (f"Max pool over {nd}-D kernel_size windows at pseudo-random positions (Graham, 2014), so "
                       "the output has output_size (or input size * output_ratio). The positions come from "
                       "mixprec's generator (mp.manual_seed) unless _random_samples (N, C, "
                       f"{nd}) gives them; return_indices as max_pool.")
    return _max_pool_op(name, forward)


fractional_max_pool2d, fractional_max_pool3d = (_register_fractional_max_pool(nd) for nd in (2, 3))


# ---------------------------------------------------------------- max_unpool
def _unpool_output_size(name, size, k, s, p, output_size):
    """The default (in - 1) * stride - 2 * padding + kernel, or output_size if it is within a stride of it."""
    nd = len(size)
    default = tuple((n - 1) * si - 2 * pi + ki for n, ki, si, pi in zip(size, k, s, p))
    if output_size is None:
        out = default
    else:
        given = tuple(output_size)
        given = given[2:] if len(given) == nd + 2 else given
        out = ntuple(name, "output_size", given, nd, 0)
        for d, (o, dflt, si) in enumerate(zip(out, default, s)):
            if not dflt - si < o < dflt + si:
                raise ValueError(f"{name}: invalid output_size {tuple(output_size)} (dim {d} must be between "
                                 f"{dflt - si} and {dflt + si}, exclusive)")
    if any(o < 1 for o in out):
        raise ValueError(f"{name}: the output would be empty (size {out})")
    return out


def _register_max_unpool(nd):
    name = f"max_unpool{nd}d"

    def forward(ctx, input, indices, kernel_size, stride=None, padding=0, output_size=None):
        if not _dt.is_floating(input.dtype):
            raise TypeError(f"{name}: expected a floating-point input, got {input.dtype.name}")
        if input.ndim not in (nd + 1, nd + 2):
            raise ValueError(f"{name}: expected a {nd + 1}-D or {nd + 2}-D input, got shape {tuple(input.shape)}")
        if indices.dtype != np.int64 or tuple(indices.shape) != tuple(input.shape):
            raise ValueError(f"{name}: indices must be an int64 tensor of the input's shape {tuple(input.shape)}, "
                             f"got {indices.dtype.name} of shape {tuple(indices.shape)}")
        unbatched = input.ndim == nd + 1
        x = input[None] if unbatched else input
        idx = indices[None] if unbatched else indices
        n, c, *size = x.shape
        k = ntuple(name, "kernel_size", kernel_size, nd, 1)
        no_stride = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
        s = k if no_stride else ntuple(name, "stride", stride, nd, 1)
        p = ntuple(name, "padding", padding, nd, 0)
        out = _unpool_output_size(name, size, k, s, p, output_size)
        plane = math.prod(out)
        flat = idx.reshape(n, c, math.prod(size))
        device_checks.check((flat < 0) | (flat >= plane), IndexError,
                  f"{name}: an index is out of range for an output plane of {'x'.join(map(str, out))} = {plane} "
                  f"elements (valid: 0 to {plane - 1})",
                  culprit=lambda: f"indices spanning [{int(flat.min())}, {int(flat.max())}]")
        xp = array_module(x)
        result = xp.zeros((n, c, plane), dtype=x.dtype)
        grids = _be.open_grid(xp, flat.shape)
        result[grids[0], grids[1], flat] = x.reshape(flat.shape)
        ctx.in_shape, ctx.plane = input.shape, plane
        result = result.reshape(n, c, *out)
        return result[0] if unbatched else result
    forward.__doc__ = (f"The inverse of max_pool{nd}d: each value put back at its index (from return_indices) in "
                       "a zero output of size (in - 1) * stride - 2 * padding + kernel_size, or output_size.")
    op = register(name, functional=True, linear=True, saves=("indices",))(forward)

    @op.grad
    def _(ctx, g):
        indices = ctx.inputs[1]  # (version-checked: an index changed in place since forward is an error)
        n, c = (1, indices.shape[0]) if len(ctx.in_shape) == nd + 1 else indices.shape[:2]
        positions = math.prod(indices.shape[-nd:])  # (not -1: it is ambiguous when n or c is 0)
        gx = g.reshape(n, c, ctx.plane).gather(2, indices.reshape(n, c, positions)).reshape(ctx.in_shape)
        return gx, None
    return op


max_unpool2d, max_unpool3d = (_register_max_unpool(nd) for nd in (2, 3))


@register("max_unpool1d", functional=True, composite=True)
def max_unpool1d(ctx, input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d, run as max_unpool2d over a height-1 plane (as torch does)."""
    for what, t in (("input", input), ("indices", indices)):
        if not isinstance(t, Tensor) or t.ndim not in (2, 3):
            raise ValueError(f"max_unpool1d: expected a 2-D or 3-D {what}, got "
                             f"{tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__}")
    k = ntuple("max_unpool1d", "kernel_size", kernel_size, 1, 1)
    s = k if stride is None else ntuple("max_unpool1d", "stride", stride, 1, 1)
    p = ntuple("max_unpool1d", "padding", padding, 1, 0)
    size = None if output_size is None else (1, tuple(output_size)[-1])
    out = max_unpool2d(input.unsqueeze(-2), indices.unsqueeze(-2), (1,) + k, (1,) + s, (0,) + p, size)
    return out.squeeze(-2)


# ---------------------------------------------------------------- avg_pool
def _avg_divisor(size, out, k, s, p, count_include_pad):
    """Per output position along one dim: the window's length inside the input (and its padding)."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    if not count_include_pad:
        return np.minimum(end, size) - np.maximum(start, 0)
    return end - start


def _avg_pool(name, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """Mean over each window: the taps laid out by _im2col, summed and divided in float32, rounded once."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
    x, unbatched = _with_batch(name, input, nd)
    n, c, *size = x.shape
    g = _pool_geometry(name, size, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and (isinstance(divisor_override, bool) or not isinstance(
            divisor_override, (int, np.integer)) or divisor_override == 0):
        raise ValueError(f"{name}: divisor_override must be a non-zero int (a negative one divides by it, as torch), "
                         f"got {divisor_override!r}")
    work = compute_dtype(x.dtype)
    if divisor_override is not None:
        divisor = float(divisor_override)
    else:
        lengths = [_avg_divisor(sz, o, k, s, p, count_include_pad)
                   for sz, o, k, s, (p, _), in zip(size, g.out, g.kernel, g.stride, g.padding)]
        divisor = Tensor._wrap(_table(x._array, math.prod(np.ix_(*lengths)).astype(work)))
    taps = math.prod(g.kernel)
    sums = _im2col(x.to(work), g).reshape(n, c, taps, *g.out).sum(2)   # (N, C, *out)
    y = (sums / divisor).to(x.dtype)
    return y.squeeze(0) if unbatched else y


def _register_avg_pool(nd):
    name = f"avg_pool{nd}d"
    if nd == 1:  # torch's avg_pool1d has no divisor_override
        def forward(ctx, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
            return _avg_pool(name, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)
    else:
        def forward(ctx, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                    divisor_override=None):
            return _avg_pool(name, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                             divisor_override)
    forward.__doc__ = (f"Mean over each kernel_size window of (N, C, *{nd} dims) (stride defaults to kernel_size). "
                       "Padding counts as zeros in the mean unless count_include_pad=False"
                       + ("; divisor_override replaces the window size as the divisor." if nd > 1 else "."))
    return register(name, functional=True, composite=True)(forward)


avg_pool1d, avg_pool2d, avg_pool3d = (_register_avg_pool(nd) for nd in (1, 2, 3))


# ---------------------------------------------------------------- adaptive_avg_pool
def _register_adaptive_avg_pool(nd):
    name = f"adaptive_avg_pool{nd}d"

    def forward(ctx, input, output_size):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
        x, unbatched = _with_batch(name, input, nd, empty_channels=True)
        n, c, *size = x.shape
        out = _adaptive_output_size(name, output_size, size)
        flat, valid = _flat_windows(_adaptive_taps(size, out), size)    # (K, L): gather, then mean of the valid
        index = Tensor._wrap(_table(x._array, flat.reshape(1, 1, flat.size))).expand(n, c, flat.size)
        values = x.to(compute_dtype(x.dtype)).reshape(n, c, math.prod(size)).gather(2, index)
        values = values.reshape(n, c, *flat.shape)
        counts = flat.shape[0] if valid is None else valid.sum(0)
        if valid is not None:  # where, not a product: a NaN or inf elsewhere must not leak in
            values = where(Tensor._wrap(_table(x._array, valid)), values, zeros_like(values))
        y = (values.sum(2) / Tensor._wrap(_table(x._array, np.asarray(counts, dtype=values.dtype)))).reshape(n, c, *out)
        y = y.to(x.dtype)
        return y.squeeze(0) if unbatched else y
    forward.__doc__ = (f"Mean over {nd}-D windows sized so the output has output_size (an int, or a tuple with "
                       "None to keep a dim); output_size 1 is global average pooling.")
    return register(name, functional=True, composite=True)(forward)


adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d = (_register_adaptive_avg_pool(nd) for nd in (1, 2, 3))
