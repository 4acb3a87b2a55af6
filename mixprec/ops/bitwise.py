"""Bitwise ops on integer and bool tensors: ``& | ^ ~ << >>``.

Their operands promote like any binary op's (``bool_mask & 1`` is int64, ``int8 & 1000`` wraps 1000 around to
int8 first, as torch does); floating and complex tensors have no bits to combine, so they are refused with
NotImplementedError (torch's type), and ``~`` with TypeError (torch's). No gradients: the results are integers.
A shift by a negative count or by the type's width or more gives 0 (or the sign, shifting a negative value
right), as torch defines it; NumPy and CuPy leave such shifts to the hardware.
"""
from __future__ import annotations

from .. import backend as _be
from ..backend import array_module
from .registry import register


def _xp(a, b):
    return array_module(a if _be.is_array(a) else b)


def _bits(name, a, kinds="biu"):
    """Refuse an operand without bits to combine (after promotion, both operands share ``a``'s dtype)."""
    if a.dtype.kind not in kinds:
        what = "integer and bool" if "b" in kinds else "integer"
        raise NotImplementedError(f"{name}: not implemented for {a.dtype.name} tensors; it takes {what} tensors "
                                  "(as in torch)")


def _binary(name, fn, operator):
    def forward(ctx, input, other):
        _bits(name, input)
        return getattr(_xp(input, other), fn)(input, other)
    forward.__name__ = forward.__qualname__ = name
    op = register(name, methods=(name, f"__{operator}__"), rmethods=(f"__r{operator}__",), promote=(0, 1),
                  broadcast=True, differentiable=False)(forward)
    op.__doc__ = f"Elementwise {fn.replace('bitwise_', '')} of the bits of integer or bool tensors (``{operator}``)."
    return op


bitwise_and = _binary("bitwise_and", "bitwise_and", "and")
bitwise_or = _binary("bitwise_or", "bitwise_or", "or")
bitwise_xor = _binary("bitwise_xor", "bitwise_xor", "xor")


@register("bitwise_not", methods=("bitwise_not", "__invert__"), promote=(), differentiable=False)
def bitwise_not(ctx, input):
    """~x: every bit flipped for integers, logical not for bool (as torch); floats have no bits to flip."""
    if input.dtype.kind not in "biu":
        raise TypeError(f"bitwise_not: ~ is only for integer and bool tensors, got {input.dtype.name} "
                        "(for a mask from floats use logical_not())")
    return array_module(input).invert(input)


def _shift(a, b, left):
    """a shifted by b bits; a count outside [0, width) shifts every bit out (0, or -1 for a negative a shifted
    right)."""
    xp = _xp(a, b)
    dtype, b = a.dtype, xp.asarray(b)
    width = 8 * dtype.itemsize
    outside = (b < 0) | (b >= width)
    count = xp.clip(b, 0, width - 1).astype(dtype)
    if left:
        return xp.where(outside, dtype.type(0), xp.left_shift(a, count))
    shifted = xp.right_shift(a, count)
    gone = xp.right_shift(a, dtype.type(width - 1)) if dtype.kind == "i" else dtype.type(0)  # the sign bits
    return xp.where(outside, gone, shifted)


@register("bitwise_left_shift", methods=("bitwise_left_shift", "__lshift__"), rmethods=("__rlshift__",),
          promote=(0, 1), broadcast=True, differentiable=False)
def bitwise_left_shift(ctx, input, other):
    """input << other: the bits of an integer tensor moved up (bits past its width are lost)."""
    _bits("bitwise_left_shift", input, "iu")
    return _shift(input, other, left=True)


@register("bitwise_right_shift", methods=("bitwise_right_shift", "__rshift__"), rmethods=("__rrshift__",),
          promote=(0, 1), broadcast=True, differentiable=False)
def bitwise_right_shift(ctx, input, other):
    """input >> other: the bits of an integer tensor moved down (a signed one fills with its sign bit)."""
    _bits("bitwise_right_shift", input, "iu")
    return _shift(input, other, left=False)
