"""Casts into and out of the float8 dtypes, bit for bit as torch makes them, on NumPy and CuPy arrays alike.

ml_dtypes (whose float8 dtypes mixprec's are) rounds to nearest-even like torch but treats what lies outside
each format's range differently, so every cast into a float8 dtype goes through :func:`to_float8`, which works
on the bits (uint32 arithmetic, vectorized) and gives torch's result:

    float8_e4m3fn   saturates: a finite value beyond 448 and +-inf become +-448 (bits 0x7E/0xFE); NaN is
                    0x7F with the input's sign (the format has no infinity)
    float8_e5m2     IEEE-like: values from 61440 on (the midpoint past 57344) and +-inf become +-inf; NaN is
                    0x7F with the input's sign
    float8_e8m0fnu  the exponent of |x| (the sign is dropped), rounded up when the float32 mantissa's top bit
                    is set and a lower bit is too or x is normal (torch's rule, ties away from the smaller
                    power); 0 and anything below 2**-127 become 2**-127 (bits 0), NaN, +-inf and what rounds
                    past 2**127 become NaN (0xFF)

Like torch, every source goes through float32 first (float64, integers and bools are rounded to float32 by
NumPy's/CuPy's own cast, then to float8: double rounding for float64, as torch does it). Out of float8, each of
the 256 bit patterns is looked up in a float32 table (exact), which then casts to the target as float32 does
(to an integer: truncation, as torch's).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from . import array_module as _xp

_F32_BIAS = 127
# (exponent bits, mantissa bits, exponent bias, the largest bit pattern a finite value rounds to, what
#  overflow becomes) of the two sign-exponent-mantissa formats
_FORMATS = {_dt.float8_e4m3fn: (4, 3, 7, 0x7E, 0x7E), _dt.float8_e5m2: (5, 2, 15, 0x7B, 0x7C)}
_NAN = 0x7F


def _table(dtype):
    """The float32 value of each of the 256 bit patterns of float8 ``dtype``, NaNs with torch's payloads: the
    mantissa moved up into float32's (e4m3fn), through float16's quieted NaN (e5m2), 0x7F800001 (e8m0fnu)."""
    patterns = np.arange(256, dtype=np.uint32)
    table = patterns.astype(np.uint8).view(dtype).astype(np.float32)
    bits = table.view(np.uint32)
    sign = (patterns & 0x80) << 24
    nan = np.isnan(table)
    if dtype == _dt.float8_e4m3fn:
        bits[nan] = (sign | 0x7F800000 | ((patterns & 0x7) << 20))[nan]
    elif dtype == _dt.float8_e5m2:
        bits[nan] = (sign | 0x7FC00000 | ((patterns & 0x3) << 21))[nan]
    else:
        bits[nan] = 0x7F800001
    return table


_TABLES = {d: _table(d) for d in _dt.FLOAT8}  # bit pattern -> value
_NANS = {d: np.array(bits, dtype=np.uint16).view(d)[()] for d, bits in ((_dt.bfloat16, 0x7FC0), (_dt.float16, 0x7E00))}


def cuda_refusal(dtype) -> TypeError:
    """The error a float8 tensor on CUDA gets: CuPy (14 included) knows a C type for bfloat16 alone of
    ml_dtypes' dtypes and raises "Unsupported dtype" for the others."""
    return TypeError(f"{dtype.name} tensors cannot live on CUDA in mixprec: CuPy has no float8 arrays (it holds "
                     "bfloat16 alone of ml_dtypes' dtypes); keep them on the CPU, or keep their bits as uint8")


def to_float8(array, dtype):
    """A new array of float8 ``dtype`` holding ``array``'s values (any real dtype) rounded as torch rounds."""
    if _xp(array) is not np:
        raise cuda_refusal(dtype)
    return float8_bits(array, dtype).view(dtype)


def float8_bits(array, dtype):
    """The bit patterns (uint8, NumPy or CuPy) of ``array``'s values rounded into float8 ``dtype`` as torch
    rounds them: what a device kernel holding float8 as bytes stores."""
    xp = _xp(array)
    if array.dtype in _dt.IS_FLOAT8:
        array = from_float8(array, _dt.float32)
    shape = array.shape
    with np.errstate(over="ignore", invalid="ignore"):  # (worked on flat: NumPy turns 0-d results into scalars)
        f = xp.ascontiguousarray(array.astype(np.float32)).reshape(-1)
    u = f.view(np.uint32).astype(np.int64)
    magnitude = u & 0x7FFFFFFF
    if dtype == _dt.float8_e8m0fnu:
        exponent = magnitude >> 23
        up = ((magnitude >> 22) & 1) & (((magnitude & 0x3FFFFF) != 0) | (exponent > 0))
        bits = xp.where(exponent == 255, 255, exponent + up)
        return bits.astype(np.uint8).reshape(shape)
    _, mant, bias, largest, overflow = _FORMATS[dtype]
    shift = 23 - mant
    # normal range: round the float32 pattern to nearest-even at the mantissa's last kept bit, then rebias
    rounded = magnitude + ((1 << (shift - 1)) - 1) + ((magnitude >> shift) & 1)
    normal = (rounded >> shift) - ((_F32_BIAS - bias) << mant)
    # subnormal range (below 2**(1 - bias)): the value in units of the smallest subnormal, rounded to even;
    # those units are the bit pattern itself (2**mant units is the smallest normal, pattern 1 << mant)
    with np.errstate(invalid="ignore", over="ignore"):  # (a signalling NaN warns; it is replaced below)
        small = xp.rint(xp.abs(f) * np.float32(2.0 ** (bias - 1 + mant))).astype(np.int64)
    bits = xp.where(magnitude < ((_F32_BIAS + 1 - bias) << 23), small, normal)
    bits = xp.where(bits > largest, overflow, bits)
    bits = xp.where(magnitude > 0x7F800000, _NAN, bits)
    return (bits | ((u >> 24) & 0x80)).astype(np.uint8).reshape(shape)


def from_float8(array, dtype, source=None):
    """A new array of ``dtype`` holding the float8 ``array``'s values, as torch casts them; ``array`` may also
    be uint8 bit patterns of float8 dtype ``source`` (NumPy or CuPy)."""
    xp = _xp(array)
    source = array.dtype if source is None else source
    patterns = array.view(np.uint8)
    values = xp.asarray(_TABLES[source])[patterns if xp is np else patterns.astype(np.int32)]  # (CuPy: wide indices)
    if dtype == _dt.float32:
        return values
    if dtype in _dt.IS_FLOAT8:
        return to_float8(values, dtype)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN, inf and large values into integers: as C casts
        out = values.astype(dtype)
    # NaNs torch writes otherwise than NumPy's cast of the float32 NaN: bfloat16's is always 0x7FC0; e8m0fnu's
    # (a signalling float32 NaN) is float16's 0x7E00 and an integer's 0
    fix = _NANS.get(dtype) if dtype == _dt.bfloat16 or source == _dt.float8_e8m0fnu else None
    if fix is not None or (dtype.kind in "iu" and source == _dt.float8_e8m0fnu):
        out[xp.isnan(values)] = 0 if fix is None else fix
    return out


def astype(array, dtype, copy=True):
    """``array.astype(dtype)`` where a float8 dtype on either side takes torch's rules (a new array then)."""
    if dtype in _dt.IS_FLOAT8:
        return (array.copy() if copy else array) if array.dtype == dtype else to_float8(array, dtype)
    if array.dtype in _dt.IS_FLOAT8:
        return from_float8(array, dtype)
    return array.astype(dtype, copy=copy)


def as_strided(array, shape, strides):
    """``lib.stride_tricks.as_strided`` of array's module, float8_e5m2 included: NumPy cannot read back that
    dtype's type string ('<f1') on the way, so its bits are strided and viewed back."""
    strided = _xp(array).lib.stride_tricks.as_strided
    if array.dtype == _dt.float8_e5m2:
        return strided(array.view(np.uint8), shape, strides).view(array.dtype)
    return strided(array, shape, strides)


def fill_value(value, dtype):
    """The number full() stores for ``value`` in ``dtype``: a Python int wrapped into an integer dtype
    (dtypes.as_integer), a number rounded into a float8 one as torch rounds it, anything else as it is."""
    if dtype in _dt.IS_FLOAT8:
        return to_float8(np.asarray(value, dtype=np.float64), dtype)[()]
    return _dt.as_integer(value, dtype) if dtype.kind in "iu" and isinstance(value, int) else value
