"""Tests of values: isposinf, isneginf, isreal, isclose (bool tensors, no gradient) and the two whole-tensor
answers built on them, allclose and equal (Python bools, as torch's).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor
from .registry import register


def _real(name, input):
    if input.dtype.kind == "c":
        raise RuntimeError(f"{name}: does not support complex inputs (as in torch)")


@register("isposinf", methods=("isposinf",), differentiable=False)
def isposinf(ctx, input):
    """Where input is +inf (never, for an integer or bool tensor)."""
    _real("isposinf", input)
    return input == np.inf if input.dtype.kind not in "biu" else array_module(input).zeros(input.shape, np.bool_)


@register("isneginf", methods=("isneginf",), differentiable=False)
def isneginf(ctx, input):
    """Where input is -inf (never, for an integer or bool tensor)."""
    _real("isneginf", input)
    return input == -np.inf if input.dtype.kind not in "biu" else array_module(input).zeros(input.shape, np.bool_)


@register("isreal", methods=("isreal",), differentiable=False)
def isreal(ctx, input):
    """Where the imaginary part is 0: everywhere, for a real tensor."""
    xp = array_module(input)
    return input.imag == 0 if input.dtype.kind == "c" else xp.ones(input.shape, np.bool_)


@register("isclose", methods=("isclose",), promote=(0, 1), same_dtype=True, broadcast=True, differentiable=False)
def isclose(ctx, input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise (equal values, infinities included, are close; a nan is
    close to a nan only with equal_nan). Integers subtract in their own dtype, the smaller from the larger."""
    for name, v in (("rtol", rtol), ("atol", atol)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"isclose: {name} must be a number, got {type(v).__name__}")
        if v < 0:
            raise RuntimeError(f"isclose: {name} must be greater than or equal to zero, got {v}")
    xp = array_module(input)
    if input.dtype == np.bool_:  # (bools subtract as numbers; torch computes them in its default float dtype)
        input, other = input.astype(np.float32), other.astype(np.float32)
    elif input.dtype in _dt.LOW_PRECISION:
        input, other = input.astype(np.float32), other.astype(np.float32)
    close = input == other
    if equal_nan and input.dtype.kind in "fc":
        close = close | (xp.isnan(input) & xp.isnan(other))
    diff = xp.maximum(input, other) - xp.minimum(input, other) if input.dtype.kind in "iu" else xp.abs(input - other)
    allowed = atol + xp.abs(other * (np.float32(rtol) if input.dtype.kind in "iu" else rtol))
    if input.dtype.kind in "fc":
        return close | (xp.isfinite(diff) & (diff <= allowed))
    return close | (diff <= allowed)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """Whether every element of input is close to other's (isclose), as a Python bool."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other) -> bool:
    """Whether the two tensors have the same shape and the same values (a nan equals nothing), as a Python bool."""
    for name, t in (("input", input), ("other", other)):
        if not isinstance(t, Tensor):
            raise TypeError(f"equal: {name} must be a Tensor, got {type(t).__name__}")
    return tuple(input.shape) == tuple(other.shape) and bool((input == other).all())


Tensor.allclose, Tensor.equal = allclose, equal
