"""The real CuPy package, read for its facts only: names, signatures, loop tables.

CuPy imports without a GPU (and without its CUDA libraries); nothing here
allocates device memory or calls into CUDA.
"""
from __future__ import annotations

try:
    import cupy as real
    import cupyx as real_x
    import cupyx.scipy.special  # noqa: F401  (erf and friends: their loop tables)
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError("the strict CuPy stand-in reads CuPy's function names, signatures and dtype loops from the "
                      "real CuPy package, which imports without a GPU: pip install cupy-cuda13x (or cupy-cuda12x)"
                      ) from exc

__all__ = ["real", "real_x"]
