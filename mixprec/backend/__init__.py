"""The array switch: NumPy for "cpu", CuPy for "cuda".

This package is the only place that imports CuPy. Everything else asks it for
the array module of a device or of an array (``xp_of``, ``array_module``) and
for the few primitives NumPy and CuPy spell differently. Its modules each do
one job of the GPU path:

    devices         Device, "cpu"/"cuda:N", the default device, copies between devices
    availability    whether CUDA can be used, and why not (DeviceUnavailableError)
    bfloat16        whether this CuPy and NumPy can hold bfloat16 on a GPU
    capture         whether this thread is capturing a CUDA graph
    device_checks   checks the GPU makes without the host waiting, raised where it waits
    curand          random numbers drawn on the GPU
    dlpack          zero-copy exchange with other array libraries, bfloat16 included
    cuda_libraries  CUDA libraries called through ctypes (cuBLAS)
    special         special functions: SciPy's on the CPU, cupyx.scipy.special's on a GPU
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

from ..dtypes import LOW_PRECISION
from ..dtypes import bfloat16 as BFLOAT16


def _import_cupy():
    """(cupy, cupyx, the stand-in or None, the import error): CuPy is optional, mixprec runs on NumPy alone.
    MIXPREC_CUPY=strict takes mixprec.strict_cupy instead, the strict stand-in that runs the CUDA path on the
    CPU under CuPy's rules."""
    choice = os.environ.get("MIXPREC_CUPY", "")
    if choice == "strict":  # (a stand-in that cannot load is an error, not "no GPU")
        from .. import strict_cupy
        return strict_cupy.cupy, strict_cupy.cupyx, strict_cupy, None
    if choice:
        raise ValueError(f"MIXPREC_CUPY={choice!r}: the one value it takes is 'strict' (unset: the real CuPy)")
    try:
        import cupy
        try:
            import cupyx  # (ships with CuPy; missing only from a partial install)
        except ImportError:
            cupyx = None
        return cupy, cupyx, None, None
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return None, None, None, exc


# The modules of this package read these through the package, so a test that replaces _cupy replaces it for all.
_cupy, _cupyx, _standin, _CUPY_IMPORT_ERROR = _import_cupy()


def cupy_module():
    """CuPy itself, for the few modules (kernels) that need its raw API; None without it."""
    return _cupy


def strict_standin():
    """mixprec.strict_cupy when MIXPREC_CUPY=strict made it this process's CuPy, else None."""
    return _standin


def version_tuple(text: str) -> tuple:
    """A version's text as three numbers to compare: "14.0.0rc1" -> (14, 0, 0)."""
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits or 0))
    return tuple(parts + [0] * (3 - len(parts)))


# ---- arrays ----
def xp_of(dev):
    """The array module (numpy or cupy) for a Device."""
    return np if dev.type == "cpu" else _cupy


def is_array(obj) -> bool:
    return isinstance(obj, np.ndarray) or (_cupy is not None and isinstance(obj, _cupy.ndarray))


def array_module(a):
    """numpy or cupy, whichever owns array ``a`` (numpy for NumPy scalars and other host values)."""
    return _cupy if _cupy is not None and isinstance(a, _cupy.ndarray) else np


def is_cupy_array(obj) -> bool:
    return _cupy is not None and isinstance(obj, _cupy.ndarray)


# ---- primitives NumPy and CuPy spell differently ----
def data_ptr(array) -> int:
    """The address of an array's first element."""
    return array.data.ptr if is_cupy_array(array) else array.__array_interface__["data"][0]


def owner(array):
    """The array whose memory ``array`` views (itself when it views none): a tensor's storage. The chain of .base
    may pass through holder objects (as_strided's) and end in a buffer that is not an array (np.frombuffer's)."""
    found = array
    while (array := getattr(array, "base", None)) is not None:
        if is_array(array):
            found = array
    return found


class Storage:
    """The memory a tensor's array lies in (torch's untyped storage): its owner's bytes."""

    def __init__(self, array):
        self._owner = owner(array)

    def data_ptr(self) -> int:
        return data_ptr(self._owner)

    def nbytes(self) -> int:
        return int(self._owner.nbytes)

    size = nbytes


def scatter_add(target, index, values):
    """target[index] += values, summing repeated indices (in place).

    float16/bfloat16 targets accumulate in float32 and round once, like the
    reductions: adding many small values one rounding at a time in half
    precision would lose them (and CuPy has no bfloat16 atomic add).
    """
    if target.dtype in LOW_PRECISION:
        wide = target.astype(np.float32)
        scatter_add(wide, index, values.astype(np.float32) if hasattr(values, "astype") else values)
        target[...] = wide.astype(target.dtype)
    elif isinstance(target, np.ndarray):
        np.add.at(target, index, values)
    else:
        _cupyx.scatter_add(target, index, values)


def where(condition, a, b):
    """``a`` where condition holds, else ``b``, keeping their dtype exactly.

    CuPy's where has no bfloat16 loop: it would return float32. Selecting
    never changes a value, so bfloat16 operands are selected as their 16-bit
    patterns (a free view), on NumPy and CuPy alike.
    """
    xp = array_module(condition)
    dtype = getattr(a, "dtype", None)
    if dtype != BFLOAT16 or getattr(b, "dtype", None) != BFLOAT16:
        return xp.where(condition, a, b)
    return xp.where(condition, _bits16(a), _bits16(b)).view(BFLOAT16)


def _bits16(v):
    """A bfloat16 array's uint16 view, or a bfloat16 scalar's bits as a NumPy uint16 scalar."""
    if is_array(v):
        return v.view(np.uint16)
    return np.uint16(np.asarray(v, dtype=BFLOAT16).view(np.uint16).item())


def open_grid(xp, shape):
    """``xp.indices(shape, sparse=True)``: one arange per axis, shaped to broadcast against the others.

    CuPy's ``indices`` has no ``sparse`` argument, so this builds the grid from aranges.
    """
    ndim = len(shape)
    return tuple(xp.arange(n).reshape((1,) * axis + (n,) + (1,) * (ndim - axis - 1)) for axis, n in enumerate(shape))


def linalg_errors(xp):
    """A context in which a failed factorization (singular, not positive-definite) raises
    numpy.linalg.LinAlgError on CuPy as it always does on NumPy: CuPy checks cuSOLVER's info
    (a device sync, as torch's checked linalg ops do) only inside cupyx.errstate(linalg="raise")."""
    if xp is np:
        return contextlib.nullcontext()
    return _cupyx.errstate(linalg="raise")


from .special import erf  # noqa: E402,F401  (backend.erf: special functions live in backend/special.py)
