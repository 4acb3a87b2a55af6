"""grid_sample: read an image (N, C, H, W) or volume (N, C, D, H, W) at arbitrary points of a grid.

The grid holds normalised coordinates, -1 and 1 at the input's edges (the centres
of the corner pixels with align_corners=True, their outer edges otherwise), the
last grid dim ordered (x, y[, z]) = (W, H[, D]). Each point is

  1. unnormalised to a pixel coordinate along each dim,
  2. folded into the input by padding_mode ("zeros": left outside, read as 0;
     "border": clipped to the edge; "reflection": mirrored at the edges, then clipped),
  3. sampled: "bilinear" mixes the 2 (4, 8) neighbours by their distances (trilinear
     for volumes), "nearest" reads the nearest pixel (halves round to even), "bicubic"
     (images only) mixes the 4 x 4 neighbours by Keys' cubic convolution with a = -0.75;
     there step 2 folds each neighbour's pixel index instead of the point.

It is a composite of Tensor ops (gather for the reads), so the gradients for the
input and for the grid, second derivatives and forward mode all come from those
ops; half-precision inputs are computed in float32 and rounded once. Clipping
has gradient 0 at the border itself, as torch's (a factor: a nan gradient stays
nan). A NaN coordinate gives a NaN output (bilinear) or reads nothing (nearest),
as torch's "zeros" mode does.

Names: ``grid_sample`` (torch.nn.functional's) promotes under CUDA autocast and
calls ``grid_sampler`` (aten's, with integer mode enums: 0 bilinear, 1 nearest,
2 bicubic; 0 zeros, 1 border, 2 reflection), which is float32 under CPU autocast;
``grid_sampler_2d`` and ``grid_sampler_3d`` are its names for 4-D and 5-D inputs.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor
from ..creation import zeros_like
from .elementwise import where
from .opmath import compute_dtype
from .registry import register

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING_MODES = ("zeros", "border", "reflection")


def _constant(like, array):
    return Tensor._wrap(array.astype(like._array.dtype, copy=False))


def _clip(coord, size):
    """Clip to [0, size - 1], gradient 1 strictly inside and 0 on or beyond the border (torch's rule).

    The gradient is the incoming one MULTIPLIED by that slope, as torch's backward does (a selection would
    turn a nan gradient, from a nan pixel, into 0 at the border): the clipped value plus (coord - coord) times
    the slope, with the difference taken on finite coordinates only (an infinite one is clipped, slope 0)."""
    xp = array_module(coord._array)
    inside = (coord > 0).logical_and(coord < size - 1)
    finite = where(Tensor._wrap(xp.isfinite(coord._array)), coord, zeros_like(coord))
    return coord.detach().clamp(0, size - 1) + (finite - finite.detach()) * inside.to(coord.dtype)


def _reflect(coord, twice_low, twice_high):
    """Mirror coord into [twice_low / 2, twice_high / 2] (torch's reflect_coordinates); slope +1 or -1."""
    if twice_low == twice_high:
        return coord * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    dist = (coord - low).abs()
    xp = array_module(dist._array)
    flips = xp.floor(dist._array / span)
    extra = dist - _constant(dist, flips * span)  # fmod(dist, span), with the gradient of dist
    even = Tensor._wrap(flips % 2 == 0)
    return where(even, extra + low, (extra * -1) + (span + low))


def _source_coordinate(coord, size, padding_mode, align_corners):
    """Normalised coordinate -> pixel coordinate along a dim of ``size``, folded in by padding_mode."""
    coord = (coord + 1) * ((size - 1) / 2) if align_corners else ((coord + 1) * size - 1) / 2
    if padding_mode == 1:
        coord = _clip(coord, size)
    elif padding_mode == 2:
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        coord = _clip(coord, size)
    return coord


def _cubic_weights(t, a=-0.75):
    """The weights of the neighbours at -1, 0, 1, 2 for a point a fraction t past neighbour 0 (Keys' kernel:
    (a+2)|d|^3 - (a+3)|d|^2 + 1 for |d| <= 1, a|d|^3 - 5a|d|^2 + 8a|d| - 4a for 1 < |d| < 2)."""
    def near(d):
        return ((d * (a + 2) - (a + 3)) * d) * d + 1

    def far(d):
        return ((d * a - 5 * a) * d + 8 * a) * d - 4 * a
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _fold_index(index, size, padding_mode, align_corners):
    """A neighbour's whole pixel index folded in by padding_mode (an array: the fold carries no gradient)."""
    if padding_mode == 2:
        twice = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        index = _reflect(Tensor._wrap(index), *twice)._array
    return array_module(index).clip(index, 0, size - 1) if padding_mode else index


def _sample(input, grid, interpolation_mode, padding_mode, align_corners):
    """The sampled (N, C, *grid spatial) in the compute dtype (see the module docstring)."""
    n, c, *size = input.shape
    nd = len(size)
    out_shape = tuple(grid.shape[1:-1])
    xp = array_module(input._array)
    points = int(np.prod(out_shape))
    planes = input.reshape(n, c, int(np.prod(size)))
    # coordinate d (first spatial dim first) is grid[..., nd - 1 - d]: the grid is ordered (x, y, z)
    point_padding = 0 if interpolation_mode == 2 else padding_mode  # bicubic folds its neighbours instead
    coords = [_source_coordinate(grid[..., nd - 1 - d].reshape(n, 1, points), s, point_padding, align_corners)
              for d, s in enumerate(size)]
    strides = [int(np.prod(size[d + 1:])) for d in range(nd)]

    def read(indices):
        """Each plane at pixel indices (N, 1, L) per dim (whole floats, maybe outside or NaN); 0 outside."""
        valid = xp.ones(indices[0].shape, dtype=bool)
        for i, s in zip(indices, size):
            valid &= (i >= 0) & (i < s)  # NaN compares False: never read
        flat = sum(xp.where(valid, i, 0).astype(np.int64) * st for i, st in zip(indices, strides))
        values = planes.gather(2, Tensor._wrap(xp.broadcast_to(flat, (n, c, flat.shape[-1]))))
        return where(Tensor._wrap(valid), values, zeros_like(values))

    if interpolation_mode == 1:  # nearest; rint rounds halves to even, as nearbyint
        out = read([xp.rint(t._array) for t in coords])
    elif interpolation_mode == 2:
        lows = [xp.floor(t._array) for t in coords]
        weights = [_cubic_weights(t - _constant(t, lo)) for t, lo in zip(coords, lows)]
        out = None
        for offsets in itertools.product(range(4), repeat=nd):
            term = read([_fold_index(lo + k - 1, s, padding_mode, align_corners)
                         for lo, k, s in zip(lows, offsets, size)])
            for k, w in zip(offsets, weights):
                term = term * w[k]
            out = term if out is None else out + term
    else:
        lows = [xp.floor(t._array) for t in coords]
        fractions = [t - _constant(t, lo) for t, lo in zip(coords, lows)]  # distance to the lower neighbour
        out = None
        for corner in itertools.product((0, 1), repeat=nd):
            term = read([lo + b for lo, b in zip(lows, corner)])
            for b, f in zip(corner, fractions):
                term = term * (f if b else 1 - f)
            out = term if out is None else out + term
    return out.reshape(n, c, *out_shape)


@register("grid_sampler", aliases=("grid_sampler_2d", "grid_sampler_3d"), promote=(0, 1),
          composite=True)
def grid_sampler(ctx, input, grid, interpolation_mode, padding_mode, align_corners):
    """aten's grid sampler (see the module docstring); mode and padding_mode are torch's integer enums.

    Float32 under CPU autocast (its names grid_sampler_2d/_3d are listed there).
    """
    for what, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"grid_sampler: {what} must be a Tensor, got {type(t).__name__}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"grid_sampler: expected a 4-D (N, C, H, W) or 5-D (N, C, D, H, W) input, got shape "
                           f"{tuple(input.shape)}")
    nd = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != nd or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler: expected a grid of shape (N, {'D_out, ' if nd == 3 else ''}H_out, W_out, "
                           f"{nd}) with N = {input.shape[0]} for an input of shape {tuple(input.shape)}, got shape "
                           f"{tuple(grid.shape)}")
    if not _dt.is_floating(input.dtype) or grid.dtype != input.dtype:
        raise TypeError(f"grid_sampler: expected a floating input and a grid of the same dtype, got "
                        f"{input.dtype.name} and {grid.dtype.name} (cast one, or run under mp.autocast)")
    if any(s == 0 for s in input.shape[2:]):
        raise RuntimeError(f"grid_sampler: expected an input with non-empty spatial dims, got shape "
                           f"{tuple(input.shape)}")
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise ValueError(f"grid_sampler: interpolation_mode and padding_mode must be 0, 1 or 2, got "
                         f"{interpolation_mode!r} and {padding_mode!r}")
    if interpolation_mode == 2 and nd == 3:
        raise RuntimeError("grid_sampler: bicubic interpolation only supports a 4-D input (N, C, H, W), got shape "
                           f"{tuple(input.shape)}")
    work = compute_dtype(input.dtype)
    out = _sample(input.to(work), grid.to(work), interpolation_mode, padding_mode, bool(align_corners))
    return out.to(input.dtype)


@register("grid_sample", functional=True, promote=(0, 1), composite=True)
def grid_sample(ctx, input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample input (N, C, H, W) or (N, C, D, H, W) at grid (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3).

    mode: "bilinear" (trilinear on volumes), "nearest" or "bicubic" (images only); padding_mode: "zeros",
    "border" or "reflection"; align_corners=None means False, with torch's
    warning. Promote under CUDA autocast. See mixprec/ops/sampling.py.
    """
    if mode not in _MODES:
        raise ValueError(f"grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got {padding_mode!r}")
    if align_corners is None:
        warnings.warn("grid_sample: the default align_corners=False has been torch's behaviour since 1.3.0; pass "
                      "align_corners=True for the old behaviour (or False to silence this)", UserWarning,
                      stacklevel=3)
        align_corners = False
    return grid_sampler(input, grid, _MODES.index(mode), _PADDING_MODES.index(padding_mode), align_corners)
