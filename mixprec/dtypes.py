"""The dtypes mixprec knows and the one promotion table every op uses.

mp dtypes *are* NumPy dtype objects (``mp.bfloat16`` is ml_dtypes' bfloat16),
so ``t.dtype == np.float16`` and ``t.dtype == mp.float16`` both read naturally.
NumPy cannot promote float16 with bfloat16 and ml_dtypes promotes
``bfloat16 * 2.0`` to float32, so mixprec never relies on NumPy's rules:
:func:`promote` (the table) and :func:`result_type` (tensors and scalars,
torch's rules) decide, and nothing is ever promoted to float64 unless an
input already is float64.

The float8 dtypes (float8_e4m3fn, float8_e5m2: OCP FP8; float8_e8m0fnu: the OCP MX scale, a bare power of
two) are ml_dtypes' too. Like torch, mixprec holds, casts, prints and saves them, but promotes them with no
other dtype (:func:`promote` raises) and lets only data movement and a few comparisons take them
(mixprec/ops/float8.py); the casts into them follow torch's rules, not ml_dtypes' (backend/float8.py).

complex64/complex128 follow torch: a complex dtype wins over any real one and
takes the wider real precision (float32 + complex64 -> complex64, float64 +
complex64 -> complex128); autocast never casts them (amp only lists real dtypes).
"""
from __future__ import annotations

import builtins
import math

import ml_dtypes
import numpy as np

float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
uint8 = np.dtype(np.uint8)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)

half, float, double, long, int, short = float16, float32, float64, int64, int32, int16  # torch-style aliases
cfloat, cdouble = complex64, complex128

FLOATING = (float16, bfloat16, float32, float64)
COMPLEX = (complex64, complex128)
LOW_PRECISION = (float16, bfloat16)
FLOAT8 = (float8_e4m3fn, float8_e5m2, float8_e8m0fnu)
IS_FLOAT8 = frozenset(FLOAT8)  # (a set: the membership test dispatch makes on every call is a hash lookup)
ML_DTYPES = frozenset((float16, bfloat16) + FLOAT8)  # whose NumPy scalars are not Python floats (.item())
SUPPORTED = (float16, bfloat16, float32, float64, complex64, complex128, uint8, int8, int16, int32, int64, bool_,
             *FLOAT8)
_BY_NAME = {d.name: d for d in SUPPORTED} | {"half": float16, "float": float32, "double": float64,
                                              "cfloat": complex64, "cdouble": complex128,
                                              "long": int64, "int": int32, "short": int16, "bool": bool_}

# Rank inside a category; promotion takes the higher category, then the higher rank.
_CATEGORY = {bool_: 0, uint8: 1, int8: 1, int16: 1, int32: 1, int64: 1, float16: 2, bfloat16: 2, float32: 2,
             float64: 2, complex64: 3, complex128: 3, float8_e4m3fn: 2, float8_e5m2: 2, float8_e8m0fnu: 2}
_RANK = {bool_: 0, uint8: 1, int8: 1, int16: 2, int32: 3, int64: 4, float16: 1, bfloat16: 1, float32: 2, float64: 3}


def as_dtype(spec) -> np.dtype:
    """Normalise an mp dtype, NumPy dtype-like or name ("float16") to a supported dtype."""
    if isinstance(spec, str):
        d = _BY_NAME.get(spec)
    else:
        try:
            d = np.dtype(spec)
        except TypeError:
            d = None
    if d is None or d not in _CATEGORY:
        names = ", ".join(x.name for x in SUPPORTED)
        raise TypeError(f"unsupported dtype {spec!r}; mixprec supports {names}")
    return d


def is_floating(d) -> bool:
    return d in (float16, bfloat16, float32, float64)


def is_complex(d) -> bool:
    return d in COMPLEX


def is_differentiable(d) -> bool:
    """Whether a tensor of dtype d can require gradients: floating and complex ones (torch's rule)."""
    return d in _DIFFERENTIABLE


_DIFFERENTIABLE = frozenset(FLOATING + COMPLEX + FLOAT8)  # (torch lets a float8 tensor require grad)


def complex_of(d) -> np.dtype:
    """The complex dtype holding values of real dtype d: complex128 for float64, complex64 otherwise."""
    return d if d in COMPLEX else (complex128 if d == float64 else complex64)


def real_of(d) -> np.dtype:
    """The real dtype of one part of a complex dtype (float32 for complex64); a real dtype itself."""
    return {complex64: float32, complex128: float64}.get(d, d)


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype an op on tensors of dtypes a and b computes in."""
    if a == b:
        return a
    if a in IS_FLOAT8 or b in IS_FLOAT8:
        raise RuntimeError(f"Promotion for Float8 Types is not supported, attempted to promote {a.name} and {b.name} "
                           "(as in torch: cast one side with .to(dtype) first)")
    ca, cb = _CATEGORY[a], _CATEGORY[b]
    if ca == 3 or cb == 3:  # complex meets anything: complex, double precision if either side has it
        return complex128 if {a, b} & {float64, complex128} else complex64
    if ca != cb:
        return a if ca > cb else b
    if {a, b} == {float16, bfloat16}:  # neither holds the other: meet in float32
        return float32
    if {a, b} == {uint8, int8}:  # likewise: int16 holds both
        return int16
    return a if _RANK[a] > _RANK[b] else b


def can_cast(source: np.dtype, target: np.dtype) -> bool:
    """Whether an in-place op may write a result of dtype ``source`` into a tensor of dtype ``target``: not into a
    lower category (complex into real, floating into integer, anything but bool into bool), as torch's rule."""
    return _CATEGORY[source] <= _CATEGORY[target]


def _int_range(dtype):
    """The Python ints that convert to integer ``dtype`` (torch's overflow check: an unsigned dtype also takes the
    negatives down to -max, which wrap around)."""
    info = np.iinfo(dtype)
    return (-builtins.int(info.max) if dtype.kind == "u" else builtins.int(info.min)), builtins.int(info.max)


def check_fits(value, dtype, what):
    """Refuse a number that an integer ``dtype`` cannot hold (RuntimeError naming both): what torch checks when a
    number is stored (tensor(), full, fill_, t[k] = v) or bounds an op (clamp, where, pow); nan is refused too.
    A floating dtype refuses a finite number beyond its largest (fill_, full and t[k] = v; inf passes)."""
    if dtype in IS_FLOAT8 and isinstance(value, (builtins.int, builtins.float)):
        _check_fits_float8(value, dtype, what)
    elif dtype.kind not in "biuc" and isinstance(value, (builtins.int, builtins.float)):  # floating: finite only
        if math.isfinite(value) and builtins.abs(value) > builtins.float(ml_dtypes.finfo(dtype).max):
            raise RuntimeError(f"{what}: value {value!r} cannot be converted to {dtype.name} without overflow")
    elif dtype.kind in "iu" and isinstance(value, (builtins.int, builtins.float, np.number)) \
            and not isinstance(value, (builtins.bool, np.bool_)):
        lo, hi = _int_range(dtype)
        if not lo <= value <= hi:
            raise RuntimeError(f"{what}: value {value!r} cannot be converted to {dtype.name} without overflow "
                               f"(it takes {lo} to {hi})")


def _check_fits_float8(value, dtype, what):
    """torch's range check of a number stored into a float8 tensor: below its lowest or above its largest value is
    refused, and so is an infinity the format cannot hold (e4m3fn and e8m0fnu have none; e8m0fnu's lowest is
    2**-127, so a negative number too). Zero passes (zeros() makes e8m0fnu's 2**-127, its all-zero bit pattern)."""
    info = ml_dtypes.finfo(dtype)
    inf_ok = dtype == float8_e5m2
    if value != 0 and (value < builtins.float(info.min) or value > builtins.float(info.max)) \
            and not (inf_ok and math.isinf(value)):
        raise RuntimeError(f"{what}: value {value!r} cannot be converted to {dtype.name} without overflow (it holds "
                           f"{builtins.float(info.min):g} to {builtins.float(info.max):g}"
                           f"{', and inf' if inf_ok else ''}; to saturate or round, cast a tensor with .to())")


def python_numbers(data, arr, dtype):
    """``arr``, NumPy's reading of the Python numbers ``data`` that tensor() is given, checked as torch does: an int
    that int64 cannot hold is refused (ValueError) unless the tensor is to be floating or complex (NumPy reads such
    ints as uint64, float64 or objects), and a number the integer ``dtype`` asked for cannot hold is refused
    (RuntimeError, as check_fits)."""
    target = as_dtype(dtype) if dtype is not None else None
    if arr.dtype == object or arr.dtype.kind == "u" or (arr.dtype.kind == "f" and arr.size and target is None
                                                        and np.abs(arr).max() >= 2.0 ** 63):
        values = list(_flat(data))
        big = next((v for v in values if type(v) is builtins.int and not -2 ** 63 <= v < 2 ** 63), None)
        if target is None and any(isinstance(v, (builtins.float, builtins.complex)) for v in values):
            target = float32  # (what tensor() makes of Python floats)
        if big is not None:
            if target is None or target.kind in "biu":
                raise ValueError(f"tensor: the Python int {big} does not fit in int64 (it takes -2**63 to 2**63 - 1); "
                                 "give dtype=mp.float32 or mp.float64 to keep it as a float")
            arr = np.asarray(np.asarray(data, dtype=object).astype(np.float64))
    if target is not None and target.kind in "iu" and arr.size and arr.dtype.kind in "iuf":
        for value in (arr.min(), arr.max()):
            check_fits(value.item(), target, "tensor")
        if target.kind == "u" and arr.dtype.kind == "i":
            arr = np.asarray(arr % (1 << 8 * target.itemsize))  # the negatives torch lets in wrap around
    return arr


def _flat(data):
    """The numbers in (nested lists of) ``data``."""
    if isinstance(data, (list, tuple)):
        for x in data:
            yield from _flat(x)
    else:
        yield data


def as_integer(value, dtype):
    """The Python int ``value`` stored as integer ``dtype``, wrapping around (modulo 2**bits) where it does not
    fit; an int that 64 bits cannot hold at all is refused with OverflowError."""
    if not -2 ** 63 <= value < 2 ** 64:
        raise OverflowError(f"the Python int {value} does not fit in 64 bits")
    bits = 8 * dtype.itemsize
    value %= 1 << bits
    return dtype.type(value - (1 << bits) if dtype.kind == "i" and value >> (bits - 1) else value)


def scalar_dtype(value) -> np.dtype:
    """Default dtype of a Python scalar when it creates a tensor on its own."""
    if isinstance(value, (builtins.bool, np.bool_)):
        return bool_
    if isinstance(value, (builtins.int, np.integer)):
        return int64
    if isinstance(value, (builtins.complex, np.complexfloating)):
        return complex64  # weak, like a float: float64 * 1j is complex128, float32 * 1j complex64
    if isinstance(value, (builtins.float, np.floating)) or (isinstance(value, np.generic) and value.dtype in FLOATING):
        return float32  # (ml_dtypes' bfloat16 scalars are not np.floating)
    raise TypeError(f"expected a Python number, got {type(value).__name__}")


def result_type(*operands) -> np.dtype:
    """The dtype an op on these operands computes in (torch's rules, on mixprec's table).

    Operands are dtypes, tensors/arrays, or Python/NumPy scalars, in three tiers:
    tensors with dimensions (and bare dtypes) decide among themselves; a 0-d
    tensor, and then a scalar, only counts when it is of a higher category
    (bool < integer < floating) than what decided so far. So float16 * 0.5 and
    float16 * tensor(0.5) stay float16, int * 0.5 becomes float32 (a Python
    float counts as float32), and float16 + bfloat16 tensors meet in float32.
    """
    dims = zero_dims = weak = None
    for x in operands:
        if isinstance(x, np.dtype):
            dims = _join(dims, x)
        elif hasattr(x, "dtype") and hasattr(x, "ndim") and not isinstance(x, np.generic):
            if x.ndim:
                dims = _join(dims, as_dtype(x.dtype))
            else:
                zero_dims = _join(zero_dims, as_dtype(x.dtype))
        else:
            weak = _join(weak, scalar_dtype(x))
    out = _combine(dims, _combine(zero_dims, weak))
    if out is None:
        raise TypeError("result_type() needs at least one operand")
    return out


def _join(a, b):
    return b if a is None else promote(a, b)


def _combine(higher, lower):
    """Add a weaker tier's dtype: it only matters when its category is higher."""
    if higher is None or lower is None:
        return lower if higher is None else higher
    if _CATEGORY[lower] > _CATEGORY[higher]:
        return promote(higher, lower)
    return higher


class finfo:
    """The numbers of a floating dtype, as torch.finfo: ``mp.finfo(mp.float16).max`` is 65504.0.

    bits; eps (the gap from 1.0 to the next value: 2^-mantissa bits); max, min (the largest finite value and its
    negative); tiny = smallest_normal (below it values are subnormal, losing precision); resolution (10^-digits,
    the decimal precision); dtype (its name). A complex dtype gives the numbers of its real part.
    """

    def __init__(self, dtype=None):
        d = float32 if dtype is None else as_dtype(dtype)
        if d in COMPLEX:
            d = real_of(d)
        if d not in FLOATING and d not in IS_FLOAT8:
            raise TypeError(f"finfo needs a floating or complex dtype, got {d.name}; use mp.iinfo for integers")
        info = ml_dtypes.finfo(d.type)
        self.bits, self.dtype = info.bits, d.name
        self.eps, self.max, self.min = builtins.float(info.eps), builtins.float(info.max), builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.smallest_normal)
        # torch's decimal digits: floor(mantissa bits * log10(2)), which for float8 is 0 (ml_dtypes says 1)
        self.resolution = 10.0 ** -(math.floor(info.nmant * math.log10(2)) if d in IS_FLOAT8 else info.precision)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The range of an integer dtype, as torch.iinfo: bits, min, max, dtype (its name)."""

    def __init__(self, dtype):
        d = as_dtype(dtype)
        if d.kind not in "iu":
            raise TypeError(f"iinfo needs an integer dtype, got {d.name}; use mp.finfo for floating dtypes")
        info = np.iinfo(d)
        self.bits, self.min, self.max, self.dtype = info.bits, builtins.int(info.min), builtins.int(info.max), d.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
