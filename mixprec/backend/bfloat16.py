"""Whether bfloat16 arrays can live on the GPU with the installed CuPy and NumPy, and a clear error when not."""
from __future__ import annotations

import numpy as np

from .. import backend
from ..dtypes import IS_FLOAT8, bfloat16 as BFLOAT16
from .float8 import cuda_refusal

_CUPY_FOR_BFLOAT16, _NUMPY_FOR_BFLOAT16 = (14, 0, 0), (2, 1, 2)


def cuda_bfloat16_unsupported_reason(cupy_version=None, numpy_version=None) -> str | None:
    """Why bfloat16 arrays cannot live on the GPU with these versions, or None when they can.

    CuPy holds bfloat16 (through ml_dtypes) from 14.0 on, and it needs NumPy
    2.1.2 or newer for it; CuPy 13 raises "Unsupported dtype bfloat16".
    """
    cupy_version = cupy_version or (backend._cupy.__version__ if backend._cupy is not None else "0")
    numpy_version = numpy_version or np.__version__
    if (backend.version_tuple(cupy_version) >= _CUPY_FOR_BFLOAT16
            and backend.version_tuple(numpy_version) >= _NUMPY_FOR_BFLOAT16):
        return None
    return (f"bfloat16 on CUDA needs CuPy >= 14.0 and NumPy >= 2.1.2, this environment has CuPy {cupy_version} "
            f"and NumPy {numpy_version} (pip install 'cupy-cuda12x>=14' 'numpy>=2.1.2', or use float16)")


def require_dtype_support(dtype, dev) -> None:
    """A clear TypeError, before CuPy's own, when ``dtype`` cannot live on Device ``dev``.

    CuPy (14 included) holds no float8 array: it knows a C type for bfloat16 alone among ml_dtypes' dtypes and
    raises "Unsupported dtype" for the others, so float8 tensors live on the CPU."""
    if dtype in IS_FLOAT8 and dev.type == "cuda":
        raise cuda_refusal(dtype)
    if dtype == BFLOAT16 and dev.type == "cuda":
        reason = cuda_bfloat16_unsupported_reason()
        if reason is not None:
            raise TypeError(reason)
