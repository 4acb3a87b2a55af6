"""Convolutions in 1, 2 and 3 dims, each one op: im2col + GEMM + bias, computed in float32 for half inputs.

A convolution copies every receptive field of the zero-padded input into a column
(im2col: a single strided view plus one copy), so it is ``weight @ columns`` (one
GEMM per image and group) plus the bias. ``_conv_nd`` does all of it as ONE op, the
way torch's autocast table and a cuDNN kernel see a convolution: float16/bfloat16
columns keep their dtype (they are copies), the GEMM accumulates in float32 and hands
its product over unrounded (ops/gemm.py: widened operands on the CPU, cuBLAS's compute
type on a GPU), the bias joins in float32 and the output is rounded once. (Built from
``_im2col`` and ``matmul``, the product would be rounded and the bias added and
rounded again: two roundings.)

Its gradients are convolutions too, each again one op that computes in float32 and
rounds once: with respect to the input, the transposed convolution
``_conv_transpose_nd`` (``col2im(weight^T @ g)``, the adjoint of im2col); with respect
to the weight, ``_conv_weight_grad``, the correlation of the input with g (summed over
the images in float32, rounded once); with respect to the bias, g summed. The three
ops are bilinear and each one's gradients are made of the three, so convolutions
differentiate any number of times, in both modes. A public transposed convolution is
``_conv_transpose_nd`` itself.

Columns are laid out per image, (N, C * prod(kernel), prod(out)), and the products
are batched over the images: one GEMM per image and group, each small enough that
BLAS runs it on one thread. (One large GEMM over the whole batch is a little faster
on one thread, but OpenBLAS splits it across threads that spin-wait: on a busy 2-core
machine that cost a digits-sized training step 1.7x its CPU time, and single
convolutions up to 6x.)

``_im2col`` and ``_col2im`` remain as ops of their own (linear, each the other's
gradient) for the average pools, which sum the taps im2col lays out.

Internal and backend names from the autocast tables map onto these:
``_convolution`` (aten's convolution with all its backend flags) is a composite
that calls the same code. ``conv_tbc`` (time, batch, channel layout) is a composite
of per-tap matmuls, as torch's own kernel: it never multiplies the padding.
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor
from . import fp8_gemms as _fp8
from . import gemm
from .gemm import in_places, wanted_only
from .autocast import suspended
from .opmath import compute_dtype, opmath
from .padding import constant_pad_nd
from .reduce import _add_reduce
from .registry import register


# ---------------------------------------------------------------- geometry
class Geometry(NamedTuple):
    """Where the windows of a convolution (or pool) lie along each spatial dim."""
    kernel: tuple     # window size
    stride: tuple     # step between windows
    padding: tuple    # ((low, high), ...): zeros added before and after
    dilation: tuple   # step between the taps of one window
    out: tuple        # number of windows (output positions)

    def extent(self, size):
        """Per dim: the padded length the windows need (at least the input plus its padding)."""
        return tuple(max(lo + n + hi, (o - 1) * s + d * (k - 1) + 1)
                     for n, (lo, hi), k, s, d, o in zip(size, self.padding, self.kernel, self.stride, self.dilation,
                                                       self.out))

    def inside(self, size):
        """The index of the input (of spatial ``size``) within an array of this extent."""
        return (slice(None), slice(None)) + tuple(slice(lo, lo + n) for (lo, _), n in zip(self.padding, size))

    def window(self, offsets):
        """The index of the view (over a padded array) that holds kernel tap ``offsets`` of every window."""
        return (slice(None), slice(None)) + tuple(slice(i * d, i * d + s * (o - 1) + 1, s) for i, s, d, o in
                                                  zip(offsets, self.stride, self.dilation, self.out))


def out_size(size, k, stride, pad_lo, pad_hi, dilation):
    """How many windows of k taps (dilated) fit a padded length, stepping by ``stride``."""
    return (size + pad_lo + pad_hi - dilation * (k - 1) - 1) // stride + 1


def ntuple(name, what, value, n, minimum):
    """``value`` (an int, or a sequence of n ints) as a tuple of n ints >= minimum, or a ValueError naming it."""
    values = (value,) * n if isinstance(value, (int, np.integer)) else value
    try:
        values = tuple(values)
    except TypeError:
        values = None
    if values is None or len(values) != n or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                     for v in values) or min(values, default=minimum) < minimum:
        raise ValueError(f"{name}: {what} must be an int >= {minimum} or a tuple of {n} of them, got {value!r}")
    return tuple(int(v) for v in values)


def _padded(xp, x, geometry):
    """x (N, C, *size) inside zeros of the extent the windows need (x itself if it needs none)."""
    extent = geometry.extent(x.shape[2:])
    if extent == tuple(x.shape[2:]):
        return x
    buf = xp.zeros(x.shape[:2] + extent, dtype=x.dtype)
    buf[geometry.inside(x.shape[2:])] = x
    return buf


def _window_view(xp, padded, geometry):
    """A strided view (N, C, *kernel, *out) of every window of padded (N, C, *extent): no copy is made.

    Element [n, c, i..., o...] is padded[n, c, o * stride + i * dilation ...].
    """
    st = padded.strides
    nd = len(geometry.kernel)
    taps = tuple(st[2 + d] * geometry.dilation[d] for d in range(nd))
    steps = tuple(st[2 + d] * geometry.stride[d] for d in range(nd))
    return xp.lib.stride_tricks.as_strided(padded, padded.shape[:2] + geometry.kernel + geometry.out,
                                           st[:2] + taps + steps)


def _columns(xp, x, geometry):
    """im2col on arrays: (N, C, *size) -> (N, C * prod(kernel), prod(out)), zero padding outside the input."""
    n, c = x.shape[:2]
    view = _window_view(xp, _padded(xp, x, geometry), geometry)
    return view.reshape(n, c * math.prod(geometry.kernel), math.prod(geometry.out))  # the one copy


def _add_columns(xp, cols, shape, geometry):
    """col2im on arrays, in cols' dtype: each column added onto the receptive field it came from, (N, C, *size) =
    ``shape`` (a view into the padded sum: the caller copies)."""
    n, c, *size = shape
    buf = xp.zeros((n, c) + geometry.extent(size), dtype=cols.dtype)
    if cols.size:
        blocks = cols.reshape(n, c, *geometry.kernel, *geometry.out)
        for offsets in itertools.product(*map(range, geometry.kernel)):
            buf[geometry.window(offsets)] += blocks[(slice(None), slice(None)) + offsets]
    return buf[geometry.inside(size)]


# ---------------------------------------------------------------- the two linear maps (for the average pools)
@register("_im2col", promote=(), linear=True)
def _im2col(ctx, input, geometry):
    """(N, C, *size) -> columns (N, C * prod(kernel), prod(out)), zero padding outside the input."""
    ctx.shape = input.shape
    return _columns(array_module(input), input, geometry)


@_im2col.grad
def _(ctx, g):
    return _col2im(g, ctx.shape, ctx.inputs[1]),


@register("_col2im", promote=(), linear=True)
def _col2im(ctx, cols, shape, geometry):
    """The adjoint of _im2col: add each column onto the receptive field it came from, (N, C, *size) = ``shape``.

    Half columns are widened once and their overlaps add up in float32, rounded once."""
    xp = array_module(cols)
    return xp.ascontiguousarray(opmath(lambda c: _add_columns(xp, c, shape, geometry), cols))


@_col2im.grad
def _(ctx, g):
    return _im2col(g, ctx.inputs[2]), None, None


# ---------------------------------------------------------------- convolution as one op, and its gradients
def _gemm_operands(*arrays):
    """A convolution's GEMM operands: on the CPU half ones are widened to float32 first (NumPy multiplies in
    float32 anyway, and widening the input once is cheaper than widening its im2col columns, which hold each
    value up to prod(kernel) times); on a GPU they stay half (cuBLAS reads half and accumulates in float32)."""
    if isinstance(arrays[0], np.ndarray) and arrays[0].dtype in _dt.LOW_PRECISION:
        return tuple(None if a is None else a.astype(np.float32) for a in arrays)
    return arrays


def _widened(a):
    """An operand that joins the float32 arithmetic of half inputs (a bias), widened; None stays None."""
    return None if a is None else a.astype(compute_dtype(a.dtype), copy=False)


def _stored(y, dtype):
    """A result computed in float32 for half inputs, rounded once to their dtype (others stay as computed)."""
    return y.astype(dtype, copy=False) if dtype in _dt.LOW_PRECISION else y


def _with_bias(y, b):
    """y (N, O, *out) plus the bias (O,) along the channels, in place (y is a fresh product)."""
    if b is not None:
        y += b.reshape(b.shape + (1,) * (y.ndim - 2))
    return y


def _bias_grad(ctx, g, bias):
    """g summed over the images and positions, for a bias that needs it (else None)."""
    if bias is None or not ctx.needs_input_grad[2]:
        return None
    return g.sum(dim=(0, *range(2, g.ndim)))


def _convolved(xp, x, w, geometry, groups):
    """weight @ im2col(x) per image and group, on arrays: x (N, C, *size), w (O, C/G, *kernel) -> (N, O, *out),
    in the compute dtype (float32 for half inputs: the GEMMs accumulate there and do not round)."""
    n, c = x.shape[:2]
    out_c = w.shape[0]
    cols = _columns(xp, x, geometry).reshape(n, groups, c // groups * math.prod(geometry.kernel),
                                             math.prod(geometry.out))                   # (N, G, C/G * K, L)
    y = gemm.product(w.reshape(groups, out_c // groups, cols.shape[2]), cols,          # (G, O/G, C/G * K) @
                     compute_dtype(x.dtype))
    return y.reshape(n, out_c, *geometry.out)


def _transposed(xp, x, w, shape, geometry, groups):
    """col2im(weight^T @ x) per image and group, on arrays: x (N, C, *out), w (C, O/G, *kernel) -> ``shape``."""
    n, c = x.shape[:2]
    out_c, taps, positions = shape[1], math.prod(geometry.kernel), math.prod(geometry.out)
    xs = x.reshape(n, groups, c // groups, positions)                                   # (N, G, C/G, L)
    wt = xp.swapaxes(w.reshape(groups, c // groups, out_c // groups * taps), -1, -2)    # (G, O/G * K, C/G)
    cols = gemm.product(wt, xs, compute_dtype(x.dtype)).reshape(n, out_c * taps, positions)  # (N, O * K, L)
    return xp.ascontiguousarray(_add_columns(xp, cols, shape, geometry))


def _correlated(xp, x, g, geometry, groups):
    """g @ im2col(x)^T per image and group, summed over the images, on arrays: x (N, C, *size), g (N, O, *out)
    -> (O, C/G, *kernel)."""
    n, c = x.shape[:2]
    out_c, positions = g.shape[1], math.prod(geometry.out)
    cols = _columns(xp, x, geometry).reshape(n, groups, c // groups * math.prod(geometry.kernel), positions)
    per_image = gemm.product(g.reshape(n, groups, out_c // groups, positions), xp.swapaxes(cols, -1, -2),
                             compute_dtype(x.dtype))
    return _add_reduce(per_image, 0, False, per_image.dtype).reshape(out_c, c // groups, *geometry.kernel)


@register("_conv_nd", promote=(0, 1, 2), saves=("input", "weight"))
def conv_nd(ctx, input, weight, bias, geometry, groups):
    """The convolution, one op: weight @ im2col(input) + bias, per image and group.

    input (N, C, *size), weight (O, C/groups, *kernel), bias (O,) or None -> (N, O, *geometry.out).
    float16/bfloat16: the product accumulates in float32 and comes out unrounded, the bias joins in float32
    and the output is rounded once, as a cuDNN kernel does."""
    xp = array_module(input)
    x, w = _gemm_operands(input, weight)
    return _stored(_with_bias(_convolved(xp, x, w, geometry, groups), _widened(bias)), input.dtype)


@conv_nd.grad
def _(ctx, g):
    x, w, bias, geometry, groups = ctx.inputs
    needs = ctx.needs_input_grad
    wanted = (needs[0], needs[1], bias is not None and needs[2])
    return in_places(wanted, conv_backward(g, x, w, geometry, groups, wanted) if any(wanted) else ()) + (None, None)


@conv_nd.jvp
def _(ctx, tx, tw, tb, *_):
    x, w, _b, geometry, groups = ctx.inputs  # bilinear in (input, weight), linear in bias
    return conv_nd(tx, w, tb, geometry, groups) + conv_nd(x, tw, None, geometry, groups)


@register("_conv_backward", promote=(0, 1, 2), saves=("grad", "input", "weight"))
def conv_backward(ctx, grad, input, weight, geometry, groups, wanted):
    """The gradients of _conv_nd that ``wanted`` (three bools) asks for, in the order (input, weight, bias): one
    op, as torch's convolution_backward.

    They are _conv_transpose_nd(grad, weight), _conv_weight_grad(input, grad) and grad summed over the images
    and positions, computed as those do; for float16/bfloat16 each is computed in float32 (on the CPU from
    operands widened once for all three) and rounded once."""
    xp = array_module(grad)
    axes = (0, *range(2, grad.ndim))
    g, x, w = _gemm_operands(grad, input if wanted[1] else None, weight if wanted[0] else None)
    return wanted_only(wanted, (
        lambda: _stored(_transposed(xp, g, w, input.shape, geometry, groups), grad.dtype),
        lambda: _stored(_correlated(xp, x, g, geometry, groups), grad.dtype),
        lambda: _stored(_add_reduce(g, axes, False, compute_dtype(g.dtype)), grad.dtype)))


@conv_backward.grad
def _(ctx, *cotangents):
    # gx = T(g, w), gw = W(x, g) and gb = sum(g) are bilinear/linear: each cotangent goes back through convolutions
    g, x, w, geometry, groups, wanted = ctx.inputs
    cx, cw, cb = in_places(wanted, cotangents)
    terms = []
    if cx is not None or cb is not None:  # <cx, T(g, w)> = <conv(cx, w), g>; <cb, sum(g)> = <cb broadcast, g>
        terms.append(conv_nd(cx, w, cb, geometry, groups) if cx is not None
                     else cb.reshape(cb.shape + (1,) * (g.ndim - 2)).expand(g.shape))
    if cw is not None:                    # <cw, W(x, g)> = <conv(x, cw), g> = <T(g, cw), x>
        terms.append(conv_nd(x, cw, None, geometry, groups))
    needs = ctx.needs_input_grad
    gg = (terms[0] + terms[1] if len(terms) == 2 else terms[0]) if terms and needs[0] else None
    gx = conv_transpose_nd(g, cw, None, tuple(x.shape), geometry, groups) if cw is not None and needs[1] else None
    gw = conv_weight_grad(cx, g, geometry, groups) if cx is not None and needs[2] else None
    return gg, gx, gw, None, None, None


@conv_backward.jvp
def _(ctx, tg, tx, tw, *_):
    g, x, w, geometry, groups, wanted = ctx.inputs
    return wanted_only(wanted, (
        lambda: conv_transpose_nd(tg, w, None, tuple(x.shape), geometry, groups)
        + conv_transpose_nd(g, tw, None, tuple(x.shape), geometry, groups),
        lambda: conv_weight_grad(tx, g, geometry, groups) + conv_weight_grad(x, tg, geometry, groups),
        lambda: tg.sum(dim=(0, *range(2, tg.ndim)))))


@register("_conv_transpose_nd", promote=(0, 1, 2), saves=("input", "weight"))
def conv_transpose_nd(ctx, input, weight, bias, shape, geometry, groups):
    """The transposed convolution, one op: col2im(weight^T @ input) + bias, the adjoint of _conv_nd in its input.

    input (N, C, *geometry.out), weight (C, O/groups, *kernel), bias (O,) or None -> ``shape`` = (N, O, *size).
    float16/bfloat16: product, overlapping sums and bias are float32, rounded once."""
    xp = array_module(input)
    x, w = _gemm_operands(input, weight)
    return _stored(_with_bias(_transposed(xp, x, w, shape, geometry, groups), _widened(bias)), input.dtype)


@conv_transpose_nd.grad
def _(ctx, g):
    y, w, bias, shape, geometry, groups = ctx.inputs
    gy = conv_nd(g, w, None, geometry, groups) if ctx.needs_input_grad[0] else None
    gw = conv_weight_grad(g, y, geometry, groups) if ctx.needs_input_grad[1] else None
    return gy, gw, _bias_grad(ctx, g, bias), None, None, None


@conv_transpose_nd.jvp
def _(ctx, ty, tw, tb, *_):
    y, w, _b, shape, geometry, groups = ctx.inputs
    return conv_transpose_nd(ty, w, tb, shape, geometry, groups) + conv_transpose_nd(y, tw, None, shape, geometry,
                                                                                     groups)


@register("_conv_weight_grad", promote=(0, 1), saves=("input", "grad"))
def conv_weight_grad(ctx, input, grad, geometry, groups):
    """The gradient of _conv_nd in its weight, one op: the correlation of the input with the output's gradient.

    input (N, C, *size), grad (N, O, *geometry.out) -> (O, C/groups, *kernel): grad @ im2col(input)^T per image
    and group, summed over the images. float16/bfloat16: all of it in float32, rounded once."""
    xp = array_module(input)
    x, g = _gemm_operands(input, grad)
    return _stored(_correlated(xp, x, g, geometry, groups), input.dtype)


@conv_weight_grad.grad
def _(ctx, gw):
    x, g, geometry, groups = ctx.inputs
    gx = conv_transpose_nd(g, gw, None, tuple(x.shape), geometry, groups) if ctx.needs_input_grad[0] else None
    gg = conv_nd(x, gw, None, geometry, groups) if ctx.needs_input_grad[1] else None
    return gx, gg, None, None


@conv_weight_grad.jvp
def _(ctx, tx, tg, *_):
    x, g, geometry, groups = ctx.inputs
    return conv_weight_grad(tx, g, geometry, groups) + conv_weight_grad(x, tg, geometry, groups)


# ---------------------------------------------------------------- argument checks
def _check_tensors(name, nd, input, weight, bias, weight_layout):
    for what, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
    if bias is not None and not isinstance(bias, Tensor):
        raise TypeError(f"{name}: bias must be a Tensor or None, got {type(bias).__name__}")
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, "
                           f"got shape {tuple(input.shape)}")
    if weight.ndim != nd + 2:
        raise RuntimeError(f"{name}: expected a {nd + 2}-D weight {weight_layout}, got shape {tuple(weight.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: expected a floating input, got {input.dtype.name}")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype != input.dtype:
            raise TypeError(f"{name}: input type ({input.dtype.name}) and {what} type ({t.dtype.name}) should be "
                            "the same (cast them, or run under mp.autocast)")
    if any(s == 0 for s in weight.shape[2:]):
        raise RuntimeError(f"{name}: the weight of shape {tuple(weight.shape)} has an empty kernel")
    x = input.unsqueeze(0) if input.ndim == nd + 1 else input
    if any(s == 0 for s in x.shape[2:]):
        raise RuntimeError(f"{name}: expected an input with non-empty spatial dims, got shape {tuple(input.shape)}")
    return x


def _check_group_count(name, groups, weight):
    """groups is a positive int, and the weight's first dim (its channels: out for a convolution, in for a
    transposed one) holds at least one per group, as torch requires (an empty weight is refused, not summed)."""
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    if weight.shape[0] == 0:  # (a non-empty one that does not fit the groups gets the divisibility error)
        raise RuntimeError(f"{name}: with groups={groups}, expected the weight's dim 0 to be at least {groups}, got "
                           f"a weight of shape {tuple(weight.shape)}")


def _check_groups(name, groups, in_channels, in_per_group, out_channels, weight):
    _check_group_count(name, groups, weight)
    if in_channels != in_per_group * groups:
        raise RuntimeError(f"{name}: input has {in_channels} channels, but weight of shape {tuple(weight.shape)} "
                           f"with groups={groups} expects {in_per_group * groups}")
    if out_channels % groups:
        raise RuntimeError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")


def _check_bias(name, bias, channels):
    if bias is not None and tuple(bias.shape) != (channels,):
        raise RuntimeError(f"{name}: bias of shape {tuple(bias.shape)} does not fit {channels} output channels")


def _conv_padding(name, padding, kernel, dilation, stride, nd):
    """Per-dim (low, high) padding; 'same' puts the odd extra pixel at the end, as torch does."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * nd
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            return tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation))
        raise ValueError(f"{name}: padding must be 'valid', 'same', an int or a tuple, got {padding!r}")
    return tuple((p, p) for p in ntuple(name, "padding", padding, nd, 0))


# ---------------------------------------------------------------- convolution
def _conv(name, nd, input, weight, bias, stride, padding, dilation, groups):
    """An nd-dim convolution on Tensors: the arguments checked, then the one op _conv_nd."""
    x = _check_tensors(name, nd, input, weight, bias, "(out_channels, in_channels/groups, *kernel)")
    n, c, *size = x.shape
    out_c, in_per_group, *kernel = weight.shape
    _check_groups(name, groups, c, in_per_group, out_c, weight)
    _check_bias(name, bias, out_c)
    stride = ntuple(name, "stride", stride, nd, 1)
    dilation = ntuple(name, "dilation", dilation, nd, 1)
    pads = _conv_padding(name, padding, kernel, dilation, stride, nd)
    out = tuple(out_size(s, k, st, lo, hi, d) for s, k, st, (lo, hi), d in zip(size, kernel, stride, pads, dilation))
    if any(o < 1 for o in out):
        raise RuntimeError(f"{name}: the (padded) input of spatial size {tuple(size)} is smaller than the "
                           f"dilated kernel {tuple(kernel)}: the output would be empty")
    geometry = Geometry(tuple(kernel), stride, pads, dilation, out)
    y = None
    if _fp8.entered:  # in an mp.amp.fp8_autocast region: FP8 operands if it quantizes functional GEMMs
        y = _fp8.conv(name, lambda a, b: conv_nd(a, b, None, geometry, groups), x, weight, bias)
    if y is None:
        y = conv_nd(x, weight, bias, geometry, groups)
    return y if input.ndim == nd + 2 else y.squeeze(0)


def _register_conv(nd):
    name = f"conv{nd}d"

    def forward(ctx, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return _conv(name, nd, input, weight, bias, stride, padding, dilation, groups)
    forward.__doc__ = (f"{nd}-D convolution (cross-correlation, as torch) of (N, C, *{nd} dims) with a weight "
                       f"(O, C/groups, *kernel).\n\npadding: an int, a tuple, 'valid' or 'same' (stride 1). "
                       "Lower precision under autocast; one op (_conv_nd): float16/bfloat16 computed in float32 "
                       "(im2col, GEMM, bias) and rounded once.")
    return register(name, functional=True, promote=(0, 1, 2), composite=True)(forward)


conv1d, conv2d, conv3d = (_register_conv(nd) for nd in (1, 2, 3))


# ---------------------------------------------------------------- transposed convolution
def _conv_transpose(name, nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    """The adjoint of _conv with respect to its input: the arguments checked, then the one op _conv_transpose_nd."""
    x = _check_tensors(name, nd, input, weight, bias, "(in_channels, out_channels/groups, *kernel)")
    n, c, *size = x.shape
    in_c, out_per_group, *kernel = weight.shape
    _check_group_count(name, groups, weight)
    if c != in_c:
        raise RuntimeError(f"{name}: input has {c} channels, but weight of shape {tuple(weight.shape)} expects "
                           f"{in_c} (weight is (in_channels, out_channels/groups, *kernel))")
    if in_c % groups:
        raise RuntimeError(f"{name}: in_channels ({in_c}) must be divisible by groups ({groups})")
    out_c = out_per_group * groups
    _check_bias(name, bias, out_c)
    stride = ntuple(name, "stride", stride, nd, 1)
    dilation = ntuple(name, "dilation", dilation, nd, 1)
    if isinstance(padding, str):
        raise ValueError(f"{name}: padding must be an int or a tuple of {nd} ints, got {padding!r}")
    pad = ntuple(name, "padding", padding, nd, 0)
    extra = ntuple(name, "output_padding", output_padding, nd, 0)
    if any(e >= s and e >= d for e, s, d in zip(extra, stride, dilation)):
        raise ValueError(f"{name}: output_padding {extra} must be smaller than either stride {stride} or "
                         f"dilation {dilation} in each dim")
    out = tuple((s - 1) * st - 2 * p + d * (k - 1) + e + 1
                for s, st, p, d, k, e in zip(size, stride, pad, dilation, kernel, extra))
    if any(o < 1 for o in out):
        raise RuntimeError(f"{name}: padding {pad} removes the whole output (its size would be {out})")
    geometry = Geometry(tuple(kernel), stride, tuple((p, p) for p in pad), dilation, tuple(size))
    shape = (n, out_c, *out)
    y = None
    if _fp8.entered:  # in an mp.amp.fp8_autocast region: FP8 operands if it quantizes functional GEMMs
        y = _fp8.conv(name, lambda a, b: conv_transpose_nd(a, b, None, shape, geometry, groups), x, weight, bias)
    if y is None:
        y = conv_transpose_nd(x, weight, bias, shape, geometry, groups)
    return y if input.ndim == nd + 2 else y.squeeze(0)


def _register_conv_transpose(nd):
    name = f"conv_transpose{nd}d"

    def forward(ctx, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return _conv_transpose(name, nd, input, weight, bias, stride, padding, output_padding, groups, dilation)
    forward.__doc__ = (f"{nd}-D transposed convolution (the gradient of conv{nd}d with respect to its input) of "
                       f"(N, C, *{nd} dims) with a weight (C, O/groups, *kernel).\n\nEach output dim is "
                       "(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1. "
                       "Lower precision under autocast; one op (_conv_transpose_nd): float16/bfloat16 computed "
                       "in float32 (GEMM, col2im, bias) and rounded once.")
    return register(name, functional=True, promote=(0, 1, 2), composite=True)(forward)


conv_transpose1d, conv_transpose2d, conv_transpose3d = (_register_conv_transpose(nd) for nd in (1, 2, 3))


# ---------------------------------------------------------------- aten's internal names
@register("_convolution", promote=(0, 1, 2), composite=True)
def _convolution(ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
                 benchmark=False, deterministic=False, cudnn_enabled=True, allow_tf32=True):
    """aten's convolution entry point: conv{N}d, or conv_transpose{N}d when ``transposed``, N from weight.

    The backend flags (benchmark, deterministic, cudnn_enabled, allow_tf32) choose
    among cuDNN/MKLDNN kernels in torch; mixprec has one implementation, so they
    are accepted and ignored. Lower precision under CPU autocast, as in torch's table.
    """
    nd = weight.ndim - 2 if isinstance(weight, Tensor) else 0
    if nd not in (1, 2, 3):
        raise RuntimeError(f"_convolution: expected a 3-D, 4-D or 5-D weight, got "
                           f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}")
    if transposed:
        return _conv_transpose("_convolution", nd, input, weight, bias, stride, padding, output_padding, groups,
                               dilation)
    return _conv("_convolution", nd, input, weight, bias, stride, padding, dilation, groups)


@register("conv_tbc", promote=(0, 1, 2), composite=True)
def conv_tbc(ctx, input, weight, bias, pad=0):
    """1-D convolution in (time, batch, channel) layout: input (T, B, C), weight (K, C, O), bias (O,).

    Output (T + 2 * pad - K + 1, B, O). As torch's own kernel (not its conv1d), it is the bias plus, for each
    tap k, ``input[t + k - pad] @ weight[k]`` over the steps t where that row exists: the padding is never
    multiplied, so a nan or inf weight reaches only the outputs its tap met, and a 0-tap kernel gives the bias.
    float16/bfloat16 are computed in float32 and rounded once. Lower precision under CPU autocast.
    """
    for what, t, nd in (("input", input, 3), ("weight", weight, 3), ("bias", bias, 1)):
        if not isinstance(t, Tensor) or t.ndim != nd:
            got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise RuntimeError(f"conv_tbc: {what} must be a {nd}-D tensor, got {got}")
    if not _dt.is_floating(input.dtype) or weight.dtype != input.dtype or bias.dtype != input.dtype:
        raise TypeError(f"conv_tbc: expected floating input, weight and bias of one dtype, got {input.dtype.name}, "
                        f"{weight.dtype.name} and {bias.dtype.name}")
    steps, batch, channels = input.shape
    taps, _, out_c = weight.shape
    if channels != weight.shape[1]:
        raise RuntimeError(f"conv_tbc: input has {channels} channels, weight of shape {tuple(weight.shape)} "
                           f"expects {weight.shape[1]} (weight is (kernel, in_channels, out_channels))")
    _check_bias("conv_tbc", bias, out_c)
    (pad,) = ntuple("conv_tbc", "pad", pad, 1, 0)
    out_steps = steps + 2 * pad - taps + 1
    if out_steps < 0:
        raise RuntimeError(f"conv_tbc: a kernel of {taps} taps is longer than the padded input ({steps} steps with "
                           f"pad {pad} on each side)")
    work = compute_dtype(input.dtype)
    with suspended():  # one kernel: autocast decided its inputs (CPU) or left them (CUDA), not its matmuls
        x, w = input.to(work), weight.to(work)
        y = bias.to(work).expand(out_steps, batch, out_c)
        for k in range(taps):
            lo, hi = max(0, pad - k), min(out_steps, steps + pad - k)  # the steps whose row t + k - pad exists
            if hi > lo:
                part = x[lo + k - pad:hi + k - pad].matmul(w[k])
                y = y + constant_pad_nd(part, (0, 0, 0, 0, lo, out_steps - hi))
        return y.to(input.dtype)
