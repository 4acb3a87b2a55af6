"""Cases for the op of mixprec/ops/scaled_mm.py.

The float64 inputs are quantized inside ``fn`` (the registry's drivers hand it float64 tensors); the
reference quantizes the same way with ml_dtypes (the values stay in range, where ml_dtypes rounds as torch),
then multiplies in float64, so the tolerance is float32 accumulation's. There is no gradient (torch has
none) and no low-precision variant (the inputs are float8 already). Float8 tensors cannot live on CUDA
(CuPy holds no float8 array), so these cases skip there.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp

from .case import Case, rnd, pos


def _fp8(x, dtype=mp.float8_e4m3fn):
    if x.device.type != "cpu":
        pytest.skip("float8 tensors cannot live on CUDA (CuPy holds no float8 array)")
    return x.to(dtype)


def _q(x, dtype=ml_dtypes.float8_e4m3fn):
    """x rounded to ``dtype`` as torch rounds: float8_e4m3fn has no inf, so it saturates at +-448 (NaN stays NaN);
    ml_dtypes' cast, nearest-even within the range, would give NaN past it."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == ml_dtypes.float8_e4m3fn:
        x = np.clip(x, -448.0, 448.0)
    return x.astype(dtype).astype(np.float64)


def _f32(x):
    return np.asarray(x).astype(np.float32).astype(np.float64)


def _tensorwise(a, b, sa, sb):
    return mp._scaled_mm(_fp8(a * 4), _fp8(b * 4).t().contiguous().t(), sa.float().reshape(()),
                         sb.float().reshape(()), out_dtype=mp.float32).double()


def _rowwise_bias(a, b, sa, sb, bias):
    return mp._scaled_mm(_fp8(a * 4), _fp8(b * 4, mp.float8_e5m2), sa.float(), sb.float(), bias=bias.float(),
                         out_dtype=mp.float32).double()


CASES = [
    Case("_scaled_mm-tensorwise", "_scaled_mm", [rnd(3, 16), rnd(16, 5), pos(1), pos(1)], _tensorwise,
         lambda a, b, sa, sb: (_q(a * 4) * _f32(sa[0])) @ (_q(b * 4) * _f32(sb[0])),
         grad=False, lowp=False, rtol64=1e-5),
    Case("_scaled_mm-rowwise-bias-e5m2", "_scaled_mm", [rnd(4, 8), rnd(8, 3), pos(4, 1), pos(1, 3), rnd(3)],
         _rowwise_bias,
         lambda a, b, sa, sb, bias: (_q(a * 4) * _f32(sa)) @ (_q(b * 4, ml_dtypes.float8_e5m2) * _f32(sb)) + _f32(bias),
         grad=False, lowp=False, rtol64=1e-5),
]
