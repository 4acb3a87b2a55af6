"""Special functions (erf, gamma, Bessel...): SciPy's on the CPU, cupyx.scipy.special's on a GPU.

The one place that picks between the two, by the array's type: ``special.call("gammaln", a)``.
Both libraries evaluate float32 in float32 and everything else in float64, so a caller passes
float32 or float64 arrays (opmath widens float16/bfloat16 and integers to float32 first).
"""
from __future__ import annotations

import scipy.special as _scipy

from .. import backend as _backend


def module_of(*args):
    """cupyx.scipy.special when a CuPy array is among ``args``, else scipy.special (host arrays, scalars)."""
    cupy_owned = any(_backend.is_cupy_array(a) for a in args)
    return _backend._cupyx.scipy.special if cupy_owned else _scipy


def call(name, *args):
    """The special function ``name`` of whichever library owns the arrays among ``args``, applied to them."""
    return getattr(module_of(*args), name)(*args)


def erf(a):
    """Elementwise error function, in a's dtype (float16/bfloat16 through float32)."""
    wide = a if a.dtype.kind == "f" and a.dtype.itemsize >= 4 else a.astype("float32")
    return call("erf", wide).astype(a.dtype, copy=False)
