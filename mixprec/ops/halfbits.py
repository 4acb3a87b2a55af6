"""Exact float16 selections done on the 16-bit patterns, without widening (NumPy only).

A float16 op computes in float32 and rounds once (opmath.py). Some ops only *select*:
relu keeps its input or gives zero, relu's gradient passes the gradient or zero, a
max pool picks the largest element of each window, and a gradient added to zero is
itself. The float32 route's result is then one of the input's own values, so there
is nothing to round — but the route still pays NumPy's float16 conversions, one
element at a time (3-10 ns each), and ``where`` branches per element (~5 ns). Integer
arithmetic on the bit patterns, viewed as int16, runs at memory speed.

Each function here gives the float32 route's bits exactly, signed zeros and NaN
payloads included; tests/test_half_cpu.py pins them against it over all 65,536
patterns. (CuPy runs these ops as kernels; bfloat16's float32 round trip does not
keep every NaN's payload. Both keep the float32 route.) A float16 pattern ``v``, as
an int16, is

    v >= 0              +0, positive numbers, +inf, positive NaNs (0x7C01..0x7FFF)
    -1023 <= v <= -1    negative NaNs (0xFC01..0xFFFF)
    v <= -1024          -0 (-32768), negative numbers, -inf (-1024)
"""
from __future__ import annotations

import numpy as np

NEGATIVE_ZERO = np.int16(-32768)
_ABOVE_NEGATIVE = np.int16(-1024)   # the largest pattern of a negative non-NaN: -inf
_MAGNITUDE = np.int16(0x7FFF)
_INF = np.int16(0x7C00)
_QUIET = np.int16(0x0200)           # the bit that makes a NaN quiet


def applies(*arrays) -> bool:
    """Whether every array is a NumPy float16 one (what these functions are for)."""
    for a in arrays:
        if not (isinstance(a, np.ndarray) and a.dtype == np.float16):
            return False
    return True


def bits(x):
    """The int16 view of a float16 array."""
    return x.view(np.int16)


def relu(x):
    """float32's ``maximum(x, 0)`` rounded back: x, except +0 for a negative non-NaN x (-0 included)."""
    v = bits(x)
    return (v * (v > _ABOVE_NEGATIVE)).view(np.float16)


def relu_passes(y):
    """Where relu's output ``y`` passes the gradient on, torch's ``not (y <= 0)``: y > 0, or y is NaN."""
    v = bits(y)
    return (v > _ABOVE_NEGATIVE) & (v != 0)


def keep_where(mask, x):
    """``where(mask, x, +0)`` as a product of the patterns (``where`` branches per element)."""
    return (bits(x) * mask).view(np.float16)


def plus_zero(x):
    """float16 ``0 + x``: x, except +0 for -0 and a signaling NaN made quiet (as float32 addition does)."""
    v = bits(x)
    quieted = v | ((v & _MAGNITUDE) > _INF) * _QUIET
    return (quieted * (v != NEGATIVE_ZERO)).view(np.float16)


# ---------------------------------------------------------------- order: max pooling on integers
def has_nan_or_negative_zero(v) -> bool:
    """Whether int16 patterns ``v`` hold a NaN or a -0: float32's max returns the first of several NaNs and, of
    equal zeros, the last (which sign, NumPy's loop decides), and ``ordered`` keys cannot tell those apart."""
    return bool(((v & _MAGNITUDE) > _INF).any() or (v == NEGATIVE_ZERO).any())


def ordered(v):
    """int16 keys in float16's order for patterns ``v`` without NaN: the pattern of x >= 0, -|x|'s for x < 0."""
    negative = v >> 15                             # -1 where the sign bit is set, else 0
    return ((v & _MAGNITUDE) ^ negative) - negative


NEGATIVE_INF_KEY = np.int16(-0x7C00)  # ordered(-inf): what a max pool's padding holds


def from_ordered(keys):
    """The float16 values of ``ordered`` keys."""
    return (np.abs(keys) | ((keys >> 15) & NEGATIVE_ZERO)).view(np.float16)


def first_max(keys):
    """Along axis 0 of int16 ``keys``: (the index of the first maximum, the maximum), as argmax and max.

    Each key gets its position in the low 16 bits of an int32, the earlier the larger, so
    one integer max finds both (argmax along a short axis loops window by window).
    """
    taps = keys.shape[0]
    if taps > 1 << 16:
        return keys.argmax(axis=0), keys.max(axis=0)
    tagged = keys.astype(np.int32) << 16
    tagged |= np.arange(taps - 1, -1, -1, dtype=np.int32).reshape((taps,) + (1,) * (keys.ndim - 1))
    top = tagged.max(axis=0)
    return (taps - 1) - (top & 0xFFFF), (top >> 16).astype(np.int16)
