"""Low-precision math: compute in float32, round once.

A GPU kernel on float16 or bfloat16 data loads each value, widens it to float32
(its *opmath* type), computes, and rounds the result once when it stores it.
Every mixprec op does the same on NumPy and CuPy arrays, so results do not
depend on the backend and carry half an ulp of error, not one per step::

    opmath(fn, *arrays)       fn on the arrays in float32 (for float16/bfloat16),
                              its result (or each of a tuple of results) rounded
                              back to their dtype once
    compute_dtype(dtype)      the dtype that math on ``dtype`` runs in

Integer and bool inputs of floating math (exp, sqrt, ... of an int tensor)
compute in float32 and stay float32, as torch's do; ``ints="keep"`` computes
them in their own type instead (relu, abs, sign). Multiply by
``a.dtype.type(2.0)``, never a bare Python float, inside ``fn`` when the array
may be bfloat16: ml_dtypes' ``bfloat16 * 2.0`` is float32.
"""
from __future__ import annotations

import numpy as np

from ..dtypes import LOW_PRECISION, float32

__all__ = ["opmath", "compute_dtype"]

_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)


def compute_dtype(dtype, ints="float") -> np.dtype:
    """float32 for float16/bfloat16 (and for integers and bool, unless ``ints="keep"``); else the dtype itself.

    Reductions accumulate in it too: a float16 sum of 4096 ones is exact in float32
    (it would stall at 2048 in float16), an integer sum counts in int64.
    """
    if dtype in LOW_PRECISION or (dtype.kind in "biu" and ints != "keep"):
        return float32
    return dtype


def opmath(fn, *args, ints="float"):
    """``fn(*args)`` in the compute dtype of the first array among args, rounded once to its storage dtype.

    Every array (and NumPy scalar) argument is widened; Python numbers (and None)
    pass as they are (they are weak: float32 math keeps them float32). ``ints="keep"``
    runs integer/bool inputs in their own dtype. An ``fn`` that returns a tuple
    (an op with several results computed from the same widened inputs) has each
    result rounded.
    """
    try:
        dtype = args[0].dtype  # (an array comes first in nearly every call)
    except AttributeError:
        dtype = next(a.dtype for a in args if hasattr(a, "dtype"))
    if dtype is _FLOAT32 or dtype is _FLOAT64:  # nothing to widen: the common case, told apart by identity
        return fn(*args)
    low = dtype in LOW_PRECISION
    if not low and (dtype.kind not in "biu" or ints == "keep"):
        return fn(*args)
    out = fn(*(a.astype(float32) if hasattr(a, "astype") else a for a in args))
    if not low:
        return out
    return tuple(o.astype(dtype) for o in out) if type(out) is tuple else out.astype(dtype)
