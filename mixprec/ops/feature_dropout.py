"""Dropout's relatives: channel-wise dropout (dropout1d/2d/3d) and alpha dropout (alpha_dropout,
feature_alpha_dropout), which keeps a SELU network's mean and variance.

Channel-wise dropout zeroes whole channels: one keep-or-drop draw per (sample, channel), broadcast over the
spatial dims, the kept ones scaled by 1/(1-p). Alpha dropout sets a dropped element to SELU's negative
saturation value and then applies the affine map a * x + b that restores zero mean and unit variance
(a = ((1 - p) (1 + p alpha'^2))^-1/2 with alpha' = 1.7581, SELU's scale times alpha); feature_alpha_dropout
drops whole channels that way.

The draws come from mixprec's generator (on the host, then moved to the tensor's device), so mp.manual_seed
makes them reproducible on every device; they differ from torch's generator's. The output is the input times
a constant mask (plus a constant): the gradient is the mask. Half inputs are computed in float32 and rounded
once. None of these is on an autocast list.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dt
from ..backend import devices
from ..random import _rng_state
from ..tensor import Tensor
from .inplace import apply
from .opmath import compute_dtype
from .registry import register

_ALPHA = 1.7580993408473766  # SELU's scale * alpha: the negative saturation value is -_ALPHA


def _check(input, p, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: expected a Tensor input, got {type(input).__name__}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: p must be a probability between 0 and 1, got {p!r}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: expected a floating-point input, got {input.dtype.name}")


def _keep(input, p, per_channel, name):
    """A float mask in the compute dtype, 1 where kept (probability 1 - p): one draw per element, or per
    (sample, channel) broadcast over the rest."""
    if per_channel and input.ndim < 2:
        raise RuntimeError(f"{name}: channel-wise dropout needs an input of at least 2 dims (N, C, ...), got shape "
                           f"{tuple(input.shape)}")
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if per_channel else tuple(input.shape)
    keep = _rng_state["np"].random(shape, dtype=np.float32) >= np.float32(p)
    return Tensor._wrap(devices.to_device(keep.astype(compute_dtype(input.dtype)), input.device))


def _apply(input, inplace, name, compute):
    if inplace:
        return apply(input, name + "_", compute, others=[])
    return compute(input)


def _scaled(mask, scale, shift=None):
    """x -> x * mask * scale (+ shift), computed in mask's dtype and rounded once to x's."""
    def compute(x):
        out = x.to(mask.dtype) * (mask * scale)
        if shift is not None:
            out = out + shift
        return out if out.dtype == x.dtype else out.to(x.dtype)
    return compute


def _feature_dropout(input, p, training, inplace, name):
    _check(input, p, name)
    if not training or p == 0:
        return input
    mask = _keep(input, p, True, name)
    return _apply(input, inplace, name, _scaled(mask, 1.0 / (1.0 - p) if p < 1 else 0.0))


def _unbatched(input, batched_ndim, name, fn):
    """fn on input, with a leading batch dim added for the call when input has batched_ndim - 1 dims."""
    if input.ndim == batched_ndim - 1:
        return fn(input.unsqueeze(0)).squeeze(0)
    return fn(input)


@register("dropout1d", functional=True, composite=True)
def dropout1d(ctx, input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) input with probability p; scale the rest by 1/(1-p)."""
    _check(input, p, "dropout1d")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got shape "
                           f"{tuple(input.shape)}")
    if inplace and input.ndim == 2:
        raise RuntimeError("dropout1d: inplace=True needs a batched (N, C, L) input in mixprec")
    return _unbatched(input, 3, "dropout1d", lambda x: _feature_dropout(x, p, training, inplace, "dropout1d"))


@register("dropout2d", functional=True, composite=True)
def dropout2d(ctx, input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) input with probability p; scale the rest by 1/(1-p).

    As torch, a 3-D input is read as (N, C, L) (one-dimensional channels), with torch's warning."""
    _check(input, p, "dropout2d")
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: a {input.ndim}-D input is deprecated (dropout2d is for 3-D or 4-D inputs); use "
                      "dropout", UserWarning, stacklevel=3)
    if input.ndim == 3:
        warnings.warn("dropout2d: a 3-D input is read as (N, C, L), channel-wise 1-D dropout, as torch does; use "
                      "dropout1d for that", UserWarning, stacklevel=3)
    return _feature_dropout(input, p, training, inplace, "dropout2d")


@register("dropout3d", functional=True, composite=True)
def dropout3d(ctx, input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability p; scale the rest."""
    _check(input, p, "dropout3d")
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: a {input.ndim}-D input is deprecated (dropout3d is for 4-D or 5-D inputs); use "
                      "dropout", UserWarning, stacklevel=3)
    if inplace and input.ndim == 4:
        raise RuntimeError("dropout3d: inplace=True needs a batched (N, C, D, H, W) input in mixprec")
    return _unbatched(input, 5, "dropout3d", lambda x: _feature_dropout(x, p, training, inplace, "dropout3d"))


def _alpha_dropout(input, p, training, inplace, per_channel, name):
    _check(input, p, name)
    if not training or p == 0:
        return input
    if p == 1:  # everything dropped: torch returns zeros
        return _apply(input, inplace, name, lambda x: x * 0)
    mask = _keep(input, p, per_channel, name)
    a = 1.0 / math.sqrt((_ALPHA ** 2 * p + 1) * (1 - p))
    shift = (mask - 1) * (_ALPHA * a) + _ALPHA * a * p  # a * (-_ALPHA) + b where dropped, b where kept
    return _apply(input, inplace, name, _scaled(mask, a, shift))


@register("alpha_dropout", functional=True, composite=True)
def alpha_dropout(ctx, input, p=0.5, training=False, inplace=False):
    """Alpha dropout (see the module docstring): keeps zero mean and unit variance under SELU."""
    return _alpha_dropout(input, p, training, inplace, False, "alpha_dropout")


@register("feature_alpha_dropout", functional=True, composite=True)
def feature_alpha_dropout(ctx, input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (one draw per (sample, channel))."""
    return _alpha_dropout(input, p, training, inplace, True, "feature_alpha_dropout")
