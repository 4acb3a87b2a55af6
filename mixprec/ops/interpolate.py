"""interpolate: resize the spatial dims of (N, C, *spatial) by nearest, (bi/tri)linear, bicubic or area
sampling; upsample, upsample_nearest and upsample_bilinear are its older spellings.

Every mode but area is separable: the output is built one spatial dim at a time, each output position along
that dim a fixed weighted sum of input positions (index_select of each tap, times its weight), so the weights
and indices are computed once on the host and both modes of autograd come from index_select, mul and add.
Where each output position reads from, torch's rules:

- scale along a dim: 1 / scale_factor when a scale_factor is given (and recompute_scale_factor is not True),
  else in / out; with align_corners=True, (in - 1) / (out - 1) (0 for out = 1).
- nearest: floor(dst * scale), nearest-exact: floor((dst + 0.5) * scale), both clipped to in - 1 and
  computed in float32 (as torch does, so the same source pixel is picked).
- linear: src = scale * dst (align_corners) or scale * (dst + 0.5) - 0.5 clipped below at 0; the two
  neighbours floor(src) and the next (not past the edge) weighted by their distance.
- bicubic: the same src unclipped, the four neighbours floor(src) - 1 ... + 2 (clipped to the edges) with
  Keys' cubic convolution weights (A = -0.75).
- area: adaptive average pooling to the output size.

The output size is floor(in * scale_factor) per dim, or ``size``. The linear modes leave a dim whose size
does not change as it is (torch's kernels copy it, whatever the scale factor); nearest and bicubic resample it
by the scale factor. (torch's nearest backward treats such a dim as a copy too, though its forward does not:
mixprec's gradient is the derivative of the forward.) Half inputs are computed in float32 and
rounded once. antialias=True is not implemented. None of these is on an autocast list.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dt
from ..backend import devices
from ..tensor import Tensor
from .opmath import compute_dtype
from .pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from .registry import register

_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_MODE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_CUBIC_A = -0.75


def _output_size(name, input, size, scale_factor, recompute_scale_factor):
    """(output spatial size, the scale factors the kernels use or None per dim)."""
    nd = input.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{name}: give exactly one of size and scale_factor")
    if size is not None:
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * nd
        if len(sizes) != nd or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in sizes):
            raise ValueError(f"{name}: size must be an int or {nd} non-negative ints for a {input.ndim}-D input, "
                             f"got {size!r}")
        if recompute_scale_factor:
            raise ValueError(f"{name}: recompute_scale_factor is only meaningful with scale_factor, not size")
        return sizes, [None] * nd
    scales = list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * nd
    if len(scales) != nd or any(isinstance(s, bool) or not isinstance(s, (int, float)) or s <= 0 for s in scales):
        raise ValueError(f"{name}: scale_factor must be a positive number or {nd} of them for a {input.ndim}-D "
                         f"input, got {scale_factor!r}")
    sizes = [math.floor(float(n) * s) for n, s in zip(input.shape[2:], scales)]
    return sizes, [None] * nd if recompute_scale_factor else [float(s) for s in scales]


def _scale(n_in, n_out, align_corners, scale_factor):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale_factor if scale_factor is not None and scale_factor > 0 else n_in / n_out


def _taps(mode, n_in, n_out, align_corners, scale_factor):
    """[(indices, weights)] per tap: output position j along the dim is sum over taps of x[indices[j]] *
    weights[j] (weights None: 1)."""
    dst = np.arange(n_out)
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(1.0 / scale_factor) if scale_factor is not None and scale_factor > 0 \
            else np.float32(n_in) / np.float32(n_out)
        offset = np.float32(0.5 if mode == "nearest-exact" else 0.0)
        src = np.floor((dst.astype(np.float32) + offset) * s).astype(np.int64)
        return [(np.minimum(src, n_in - 1), None)]
    s = _scale(n_in, n_out, align_corners, scale_factor)
    src = s * dst if align_corners else s * (dst + 0.5) - 0.5
    if mode == "bicubic":
        base = np.floor(src)
        t = src - base
        a = _CUBIC_A
        weights = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                   ((a + 2) * t - (a + 3)) * t * t + 1,
                   ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                   ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]
        return [(np.clip(base.astype(np.int64) + k, 0, n_in - 1), w) for k, w in zip((-1, 0, 1, 2), weights)]
    src = np.maximum(src, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    high = np.minimum(low + 1, n_in - 1)
    frac = src - low
    return [(low, 1.0 - frac), (high, frac)]


def _resize_dim(x, dim, taps):
    """x resampled along ``dim`` by its taps (see _taps)."""
    shape = [1] * x.ndim
    shape[dim] = -1
    out = None
    for index, weights in taps:
        picked = x.index_select(dim, Tensor._wrap(devices.to_device(index, x.device)))
        if weights is not None:
            w = devices.to_device(weights.astype(x.dtype).reshape(shape), x.device)
            picked = picked * Tensor._wrap(w)
        out = picked if out is None else out + picked
    return out


@register("interpolate", functional=True, composite=True)
def interpolate(ctx, input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of an (N, C, *spatial) input (see mixprec/ops/interpolate.py)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate: expected a Tensor input, got {type(input).__name__}")
    if mode not in _MODES:
        raise ValueError(f"interpolate: mode must be one of {', '.join(_MODES)}; got {mode!r}")
    if input.ndim not in (3, 4, 5):
        raise ValueError(f"interpolate: expected a 3-D, 4-D or 5-D input (N, C, *spatial), got shape "
                         f"{tuple(input.shape)}")
    nd = input.ndim - 2
    if mode in _MODE_DIMS and _MODE_DIMS[mode] != nd:
        raise NotImplementedError(f"interpolate: mode {mode!r} needs a {_MODE_DIMS[mode] + 2}-D input, got a "
                                  f"{input.ndim}-D one")
    if align_corners is not None and mode not in _MODE_DIMS:
        raise ValueError(f"interpolate: align_corners can only be set with the interpolating modes (linear, "
                         f"bilinear, bicubic, trilinear), not {mode!r}")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not implemented in mixprec")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"interpolate: expected a floating-point input, got {input.dtype.name}")
    sizes, scales = _output_size("interpolate", input, size, scale_factor, recompute_scale_factor)
    if any(s <= 0 for s in sizes) or any(s == 0 for s in input.shape[2:]):
        raise ValueError(f"interpolate: input spatial size {tuple(input.shape[2:])} and output size {tuple(sizes)} "
                         f"must both be non-empty")
    x = input.to(compute_dtype(input.dtype))
    if mode == "area":
        out = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[nd - 1](x, tuple(sizes))
    else:
        out = x
        for d, (n_out, s) in enumerate(zip(sizes, scales)):
            if n_out == input.shape[d + 2] and mode in ("linear", "bilinear", "trilinear"):
                continue  # torch's linear kernels copy a dim whose size does not change, whatever the scale
            out = _resize_dim(out, d + 2, _taps(mode, input.shape[d + 2], n_out, bool(align_corners), s))
    return out if out.dtype == input.dtype else out.to(input.dtype)


def _deprecated(name):
    warnings.warn(f"{name} is deprecated (as in torch); use interpolate", UserWarning, stacklevel=4)


@register("upsample", functional=True, composite=True)
def upsample(ctx, input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """interpolate, by its older name."""
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


@register("upsample_nearest", functional=True, composite=True)
def upsample_nearest(ctx, input, size=None, scale_factor=None):
    """interpolate(mode="nearest")."""
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, "nearest")


@register("upsample_bilinear", functional=True, composite=True)
def upsample_bilinear(ctx, input, size=None, scale_factor=None):
    """interpolate(mode="bilinear", align_corners=True)."""
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, "bilinear", True)
