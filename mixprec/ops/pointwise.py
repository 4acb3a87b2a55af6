"""More elementwise math: sgn, signbit, square, one-sided clamps, angle units, nan_to_num, rsub, and the
inverse trigonometric and hyperbolic functions (atan, asinh, acosh, atanh).

Composites (sgn of complex numbers, square, clamp_min/clamp_max, rsub) are written with other ops, so
both modes of autograd come from those; the rest compute on arrays in opmath (opmath.py) with their
derivative given beside them.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor
from .inplace import _method as _in_place
from .complex_ops import complex_
from .elementwise import clamp, sign, sub, ufunc, unary, where
from .opmath import opmath
from .registry import register


# ---------------------------------------------------------------- signs
@register("sgn", methods=("sgn",), composite=True)
def sgn(ctx, input):
    """sign for real tensors; z / |z| for complex ones (0 at 0)."""
    if not input.is_complex():
        return sign(input)
    size = input.abs()
    zero = size == 0
    safe = where(zero, 1.0, size)  # (each part divided on its own: an infinite part gives 0 in the other, not nan)
    return where(zero, 0.0, complex_(input.real / safe, input.imag / safe))


@register("signbit", methods=("signbit",), differentiable=False)
def signbit(ctx, input):
    """Whether the sign bit is set (True at -0.0 and at a nan with its sign bit set); a bool tensor."""
    if input.dtype.kind == "c":
        raise RuntimeError("signbit: not implemented for complex tensors (as in torch)")
    xp = array_module(input)
    if input.dtype.kind in "biu":
        return input < 0 if input.dtype.kind == "i" else xp.zeros(input.shape, dtype=np.bool_)
    return xp.signbit(input.astype(np.float32) if input.dtype in _dt.LOW_PRECISION else input)


# ---------------------------------------------------------------- products and bounds
@register("square", methods=("square",), composite=True)
def square(ctx, input):
    """input * input; a bool tensor squares as int64 (torch's pow(x, 2))."""
    if input.dtype == np.bool_:
        input = input.to(_dt.int64)
    return input * input


@register("clamp_min", methods=("clamp_min",), composite=True)
def clamp_min(ctx, input, min):
    """clamp(input, min=min)."""
    return clamp(input, min, None)


@register("clamp_max", methods=("clamp_max",), composite=True)
def clamp_max(ctx, input, max):
    """clamp(input, max=max)."""
    return clamp(input, None, max)


@register("rsub", composite=True)
def rsub(ctx, input, other, alpha=1):
    """other - alpha * input (sub with its operands swapped)."""
    return sub(other, input, alpha=alpha)


# ---------------------------------------------------------------- angle units
_RAD_PER_DEG = math.pi / 180


def _scale(factor):
    return lambda a: a * a.dtype.type(factor)


deg2rad = unary("deg2rad", _scale(_RAD_PER_DEG), d_in=lambda x: _RAD_PER_DEG)
rad2deg = unary("rad2deg", _scale(1 / _RAD_PER_DEG), d_in=lambda x: 1 / _RAD_PER_DEG)


# ---------------------------------------------------------------- nan_to_num
@register("nan_to_num", methods=("nan_to_num",), saves=("input",))
def nan_to_num(ctx, input, nan=0.0, posinf=None, neginf=None):
    """nan, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default the dtype's largest and
    smallest finite values); integer and bool tensors are returned as a copy. Gradient: where finite."""
    for name, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating))):
            raise TypeError(f"nan_to_num: {name} must be a number or None, got {type(v).__name__}")
    if input.dtype.kind in "biu":
        return input.copy()
    if input.dtype.kind == "c":
        return _replace(input.real, nan, posinf, neginf) + 1j * _replace(input.imag, nan, posinf, neginf)
    return _replace(input, nan, posinf, neginf)


def _replace(a, nan, posinf, neginf):
    """nan_to_num of a real floating array. Half inputs are replaced in float32 with the default bounds taken
    from their own dtype (its largest finite value, exact in float32), then rounded back."""
    info = ml_dtypes.finfo(a.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf

    def f(x):
        xp, t = array_module(x), x.dtype.type
        return xp.where(x != x, t(nan), xp.where(x == t(np.inf), t(hi), xp.where(x == t(-np.inf), t(lo), x)))
    return opmath(f, a)


nan_to_num.partials(lambda ctx: (ctx.inputs[0].isfinite(),))


# ---------------------------------------------------------------- inverse trigonometric and hyperbolic
atan = unary("atan", ufunc("arctan"), d_in=lambda x: 1 / (1 + x * x))
asinh = unary("asinh", ufunc("arcsinh"), d_in=lambda x: (x * x + 1).rsqrt())
acosh = unary("acosh", ufunc("arccosh"), d_in=lambda x: ((x - 1) * (x + 1)).rsqrt())
atanh = unary("atanh", ufunc("arctanh"), d_in=lambda x: 1 / (1 - x * x))

for _name in ("sgn", "square", "clamp_min", "clamp_max", "deg2rad", "rad2deg", "nan_to_num", "atan", "asinh", "acosh",
              "atanh"):
    setattr(Tensor, _name + "_", _in_place(_name + "_", _name))
