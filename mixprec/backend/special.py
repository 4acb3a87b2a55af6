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


# SciPy functions cupyx.scipy.special does not have: on CuPy arrays they run on the host (a copy each way,
# and the host waits for the GPU), so a GPU caller still gets a GPU array back.
HOST_ONLY = frozenset({"airy"})


def call(name, *args):
    """The special function ``name`` of whichever library owns the arrays among ``args``, applied to them."""
    module = module_of(*args)
    if module is _scipy or name not in HOST_ONLY:
        return getattr(module, name)(*args)
    cupy = _backend._cupy
    device = next(a.device for a in args if _backend.is_cupy_array(a))
    result = getattr(_scipy, name)(*(cupy.asnumpy(a) if _backend.is_cupy_array(a) else a for a in args))
    with device:
        return tuple(cupy.asarray(r) for r in result) if isinstance(result, tuple) else cupy.asarray(result)


def erf(a):
    """Elementwise error function, in a's dtype (float16/bfloat16 through float32)."""
    wide = a if a.dtype.kind == "f" and a.dtype.itemsize >= 4 else a.astype("float32")
    return call("erf", wide).astype(a.dtype, copy=False)
