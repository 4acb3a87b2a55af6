"""Gradient clipping, in place on ``.grad``, outside autograd (like an optimizer step).

With a GradScaler, clip after ``scaler.unscale_(optimizer)``: before it the
gradients are multiplied by the loss scale and the threshold means nothing.
Neither function reads anything back from the device (no host sync), unless
error_if_nonfinite=True asks to look at the norm.

mp.nn.utils.rnn (pad_sequence, PackedSequence, pack_padded_sequence, ...) holds
the helpers for batches of sequences of different lengths.
"""
from __future__ import annotations

import math

import numpy as np

from ... import backend as _be
from ...backend import devices
from ... import dtypes as _dt
from ...tensor import Tensor, tensor


def _grads(parameters, name):
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{name}: expected Tensors (parameters), got {type(p).__name__}")
    return [p.grad for p in params if p.grad is not None]


def _scale_in_place(g, factor):
    """g *= factor with one rounding (half gradients are scaled in float32)."""
    xp = _be.array_module(g._array)
    factor = devices.to_device(factor, g.device)
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 -> nan, as in PyTorch
        if g.dtype in _dt.LOW_PRECISION:
            g._array[...] = (g._array.astype(np.float32) * factor.astype(np.float32)).astype(g.dtype)
        else:
            xp.multiply(g._array, factor.astype(g.dtype), out=g._array)
    g._bump_version()


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False):
    """Scale all gradients together so their combined norm is at most max_norm; returns that norm (before clipping).

    The total norm is the norm of the per-gradient norms (PyTorch's
    definition), accumulated in float32 (float64 if a gradient is float64).
    Gradients are multiplied by min(1, max_norm / (total + 1e-6)).
    """
    grads = _grads(parameters, "clip_grad_norm_")
    max_norm, norm_type = float(max_norm), float(norm_type)
    if max_norm < 0 or math.isnan(max_norm):
        raise ValueError(f"clip_grad_norm_: max_norm must be >= 0, got {max_norm}")
    if norm_type <= 0 or math.isnan(norm_type):
        raise ValueError(f"clip_grad_norm_: norm_type must be positive (or inf), got {norm_type}")
    if not grads:
        return tensor(0.0)
    device = grads[0].device
    acc = np.float64 if any(g.dtype == _dt.float64 for g in grads) else np.float32
    norms = []
    for g in grads:
        xp = _be.array_module(g._array)
        a = xp.abs(g._array.astype(acc))
        if math.isinf(norm_type):
            n = a.max() if a.size else xp.zeros((), dtype=acc)
        else:
            n = (a ** acc(norm_type)).sum() ** acc(1 / norm_type)
        norms.append(devices.to_device(xp.asarray(n, dtype=acc).reshape(1), device))
    xp = _be.xp_of(device)
    with devices.on_device(device):
        stacked = xp.concatenate(norms)
        if math.isinf(norm_type):
            total = stacked.max()
        else:
            total = (stacked ** acc(norm_type)).sum() ** acc(1 / norm_type)
        total = xp.asarray(total, dtype=acc)
        if error_if_nonfinite and not bool(xp.isfinite(total)):
            raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                               f"non-finite ({float(total)}), so it cannot be clipped; pass "
                               "error_if_nonfinite=False to scale the gradients by it anyway")
        coef = xp.minimum(acc(max_norm) / (total + acc(1e-6)), acc(1.0))
    for g in grads:
        _scale_in_place(g, coef)
    return Tensor._wrap(total)


def clip_grad_value_(parameters, clip_value: float):
    """Clamp every gradient element into [-clip_value, clip_value]."""
    grads = _grads(parameters, "clip_grad_value_")
    clip_value = float(clip_value)
    if not clip_value >= 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    for g in grads:
        xp = _be.array_module(g._array)
        t = g.dtype.type
        g._array[...] = xp.clip(g._array, t(-clip_value), t(clip_value))
        g._bump_version()


from . import rnn  # noqa: E402,F401  (mp.nn.utils.rnn, as torch.nn.utils.rnn)
