"""Casts into and out of the float8 dtypes (mixprec/backend/float8.py): bit for bit as torch casts.

Without torch: each format's known values from its definition, and every bit pattern's round trip through
float32. With torch (the oracle): all 256 patterns of each format into every float and integer dtype, and
float32 (every value near each format's thresholds, and random bit patterns), float16, bfloat16, float64,
integer and bool inputs into each format.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec.backend.float8 import astype, fill_value, from_float8, to_float8

FORMATS = [pytest.param(d, id=d.name) for d in (mp.float8_e4m3fn, mp.float8_e5m2, mp.float8_e8m0fnu)]
PATTERNS = np.arange(256, dtype=np.uint8)


def bits_of(values, dtype):
    return to_float8(np.asarray(values, dtype=np.float32), dtype).view(np.uint8).tolist()


# ------------------------------------------------------------------ without torch: the formats' definitions
def test_e4m3fn_known_values():
    # 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinity, one NaN per sign (S.1111.111)
    assert bits_of([1.0, 448.0, 2.0 ** -6, 2.0 ** -9, -2.0, 0.0, -0.0], mp.float8_e4m3fn) == \
        [0x38, 0x7E, 0x08, 0x01, 0xC0, 0x00, 0x80]
    values = from_float8(PATTERNS.view(mp.float8_e4m3fn), mp.float32)
    assert np.nanmax(values) == 448.0 and np.nanmin(values) == -448.0
    assert np.isnan(values).sum() == 2 and np.isnan(values[[0x7F, 0xFF]]).all()
    assert values[1] == 2.0 ** -9 and values[8] == 2.0 ** -6  # smallest subnormal, smallest normal


def test_e5m2_known_values():
    # 1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like: +-inf at S.11111.00, NaNs above
    assert bits_of([1.0, 57344.0, 2.0 ** -14, 2.0 ** -16, np.inf, -np.inf], mp.float8_e5m2) == \
        [0x3C, 0x7B, 0x04, 0x01, 0x7C, 0xFC]
    values = from_float8(PATTERNS.view(mp.float8_e5m2), mp.float32)
    assert np.isnan(values).sum() == 6 and values[0x7C] == np.inf and values[0xFC] == -np.inf


def test_e8m0fnu_known_values():
    # 8 exponent bits (bias 127), no sign, no mantissa: 2**(bits - 127); 0xFF is NaN
    values = from_float8(PATTERNS.view(mp.float8_e8m0fnu), mp.float64)
    assert np.array_equal(values[:255], 2.0 ** (np.arange(255) - 127)) and np.isnan(values[255])


@pytest.mark.parametrize("dtype", FORMATS)
def test_every_pattern_round_trips_through_float32(dtype):
    wide = from_float8(PATTERNS.view(dtype), mp.float32)
    back = to_float8(wide, dtype).view(np.uint8)
    nan = np.isnan(wide)
    assert np.array_equal(back[~nan], PATTERNS[~nan])
    # each NaN comes back a NaN of its sign (e5m2's three NaN payloads become one)
    assert np.isnan(from_float8(back[nan].view(dtype), mp.float32)).all()
    assert np.array_equal(back[nan] & 0x80, PATTERNS[nan] & 0x80) or dtype == mp.float8_e8m0fnu


def test_out_of_range_follows_torch_rules_not_ml_dtypes():
    # e4m3fn saturates (ml_dtypes makes NaN); e8m0fnu drops the sign and keeps 0 as 2**-127 (ml_dtypes: NaN)
    assert bits_of([500.0, 1e30, np.inf, -np.inf], mp.float8_e4m3fn) == [0x7E, 0x7E, 0x7E, 0xFE]
    assert np.asarray([500.0], np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)[0] == 0x7F
    assert bits_of([-4.0, 0.0, 3.0, 0.75, np.inf, 2.0 ** 128 * 0.99], mp.float8_e8m0fnu) == \
        [129, 0, 129, 127, 255, 255]
    # e5m2: the rounding midpoint past the largest finite value (61440) is a tie that rounds to even: inf
    assert bits_of([61439.996, 61440.0], mp.float8_e5m2) == [0x7B, 0x7C]


def test_astype_leaves_other_dtypes_to_numpy_and_fill_value_rounds_like_a_cast():
    a = np.arange(4, dtype=np.float32)
    assert astype(a, np.dtype(np.float32), copy=False) is a
    assert astype(a, mp.float8_e5m2).dtype == mp.float8_e5m2
    assert fill_value(500.0, mp.float8_e4m3fn).view(np.uint8) == 0x7E
    assert fill_value(2 ** 8 + 3, mp.int8) == 3 and fill_value(1.5, mp.float32) == 1.5


# ------------------------------------------------------------------ against torch
torch_dtypes = {}


def _torch():
    torch = pytest.importorskip("torch")
    if not torch_dtypes:
        torch_dtypes.update({mp.float8_e4m3fn: torch.float8_e4m3fn, mp.float8_e5m2: torch.float8_e5m2,
                             mp.float8_e8m0fnu: torch.float8_e8m0fnu, mp.float32: torch.float32,
                             mp.float16: torch.float16, mp.bfloat16: torch.bfloat16, mp.float64: torch.float64,
                             mp.int64: torch.int64, mp.int32: torch.int32, mp.int16: torch.int16,
                             mp.int8: torch.int8, mp.uint8: torch.uint8, mp.bool_: torch.bool})
    return torch


def _raw(array):
    """The bits of an array, as unsigned integers of its width (NaN payloads and signs compared too)."""
    return np.ascontiguousarray(array).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.itemsize])


def _torch_raw(t):
    torch = _torch()
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return _raw(t.contiguous().view(width).numpy())


@pytest.mark.parametrize("target", [mp.float32, mp.float16, mp.bfloat16, mp.float64, mp.int64, mp.int32, mp.int16,
                                    mp.int8, mp.uint8, mp.bool_], ids=lambda d: d.name)
@pytest.mark.parametrize("dtype", FORMATS)
def test_all_256_patterns_cast_out_as_torch(dtype, target):
    torch = _torch()
    ours = from_float8(PATTERNS.view(dtype), target)
    theirs = torch.from_numpy(PATTERNS.copy()).view(torch_dtypes[dtype]).to(torch_dtypes[target])
    assert ours.dtype == target
    assert np.array_equal(_raw(ours), _torch_raw(theirs))


def _near_thresholds(dtype, span=1 << 12):
    """Every float32 within ``span`` ulps of each of the format's thresholds (both signs): its largest value
    and the rounding midpoint past it, its smallest normal and subnormal values, half the smallest subnormal,
    1.0 and the midpoints around it."""
    info = ml_dtypes.finfo(dtype)
    points = [float(info.max), float(info.max) * (1 + float(info.eps) / 4), float(info.smallest_normal),
              float(info.smallest_subnormal), float(info.smallest_subnormal) / 2, 1.0, 1.0 + float(info.eps) / 2,
              1.0 + 1.5 * float(info.eps), 2.0 ** 127, 2.0 ** -127]
    centres = np.array(points, dtype=np.float32).view(np.uint32).astype(np.int64)
    around = (centres[:, None] + np.arange(-span, span + 1)[None, :]).ravel()
    around = around[(around >= 0) & (around < 0x7F800000)]
    magnitudes = around.astype(np.uint32)
    return np.concatenate([magnitudes, magnitudes | np.uint32(0x80000000)]).view(np.float32)


@pytest.mark.parametrize("dtype", FORMATS)
def test_float32_into_float8_as_torch(dtype):
    torch = _torch()
    rng = np.random.default_rng(7)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], dtype=np.float32)
    nan_payloads = (np.uint32(0x7F800001) + rng.integers(0, 1 << 23, 64).astype(np.uint32)).view(np.float32)
    random_bits = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([specials, nan_payloads, -nan_payloads, _near_thresholds(dtype), random_bits])
    ours = to_float8(x, dtype).view(np.uint8)
    theirs = torch.from_numpy(x).to(torch_dtypes[dtype]).view(torch.uint8).numpy()
    bad = np.nonzero(ours != theirs)[0]
    assert bad.size == 0, [(float(x[i]), int(ours[i]), int(theirs[i])) for i in bad[:5]]


@pytest.mark.parametrize("source", [mp.float16, mp.bfloat16, mp.float64, mp.int64, mp.int32, mp.int8, mp.uint8,
                                    mp.bool_], ids=lambda d: d.name)
@pytest.mark.parametrize("dtype", FORMATS)
def test_other_dtypes_into_float8_as_torch(dtype, source):
    torch = _torch()
    rng = np.random.default_rng(3)
    if source in (mp.float16, mp.bfloat16):  # every bit pattern of the 16-bit formats
        x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(source)
    elif source == mp.float64:  # the whole range, and values whose float32 rounding makes a float8 tie
        scale = 10.0 ** rng.integers(-45, 40, 1 << 16)
        ties = 1.0 + np.array([2.0 ** -4, 2.0 ** -3, 2.0 ** -2]) + 2.0 ** -40
        x = np.concatenate([rng.standard_normal(1 << 16) * scale, ties, -ties, [np.inf, -np.inf, np.nan, 1e300]])
    elif source == mp.bool_:
        x = np.array([True, False])
    else:
        info = np.iinfo(source)
        x = rng.integers(info.min, int(info.max) + 1, 1 << 14, dtype=source)
    ours = to_float8(x, dtype).view(np.uint8)
    t = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16) if source == mp.bfloat16 else torch.from_numpy(x)
    theirs = t.to(torch_dtypes[dtype]).view(torch.uint8).numpy()
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("target", FORMATS)
@pytest.mark.parametrize("dtype", FORMATS)
def test_float8_into_float8_as_torch(dtype, target):
    torch = _torch()
    ours = astype(PATTERNS.view(dtype), target).view(np.uint8)
    theirs = torch.from_numpy(PATTERNS.copy()).view(torch_dtypes[dtype]).to(torch_dtypes[target])
    assert np.array_equal(ours, theirs.view(torch.uint8).numpy())
