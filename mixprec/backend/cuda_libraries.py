"""CUDA libraries mixprec calls itself, through ctypes: for calls CuPy does not offer, or refuses inside a
CUDA-graph capture (ops/gemm.py's cuBLAS calls)."""
from __future__ import annotations

import ctypes
import ctypes.util
import os

from .. import backend
from .availability import DeviceUnavailableError

_CUBLAS_STATUS = {1: "NOT_INITIALIZED", 3: "ALLOC_FAILED", 7: "INVALID_VALUE", 8: "ARCH_MISMATCH",
                  11: "MAPPING_ERROR", 13: "EXECUTION_FAILED", 14: "INTERNAL_ERROR", 15: "NOT_SUPPORTED"}


class CudaLibrary:
    """A CUDA library's C functions called through ctypes, each declared by its argument types."""

    def __init__(self, name: str, cdll, signatures: dict):
        self.name, self._cdll, self._signatures, self._functions = name, cdll, signatures, {}

    def check(self, function: str, *args) -> None:
        """Call ``function``; a status other than 0 raises RuntimeError naming it."""
        fn = self._functions.get(function)
        if fn is None:
            fn = self._functions[function] = getattr(self._cdll, function)
            fn.argtypes, fn.restype = self._signatures[function], ctypes.c_int
        status = fn(*args)
        if status != 0:
            raise RuntimeError(f"{function} failed: CUBLAS_STATUS_{_CUBLAS_STATUS.get(status, status)}")


_libraries: dict = {}


def cuda_library(name: str, signatures: dict):
    """The CUDA library ``name`` ("cublas") as ctypes calls it: the copy CuPy loaded (its handles work with
    it), or the strict stand-in's twin under MIXPREC_CUPY=strict."""
    if backend._standin is not None:
        return backend._standin.library(name)
    lib = _libraries.get(name)
    if lib is None:
        lib = _libraries[name] = CudaLibrary(name, ctypes.CDLL(_library_path(name)), signatures)
    return lib


def _library_path(name: str) -> str:
    """Where lib<name> is: the copy CuPy loaded (its handles belong to that copy). CuPy 14 loads its libraries
    through the CUDA path finder, which remembers them; else the copy this process has mapped; else the
    system's library path."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        return load_nvidia_dynamic_lib(name).abs_path
    except Exception:  # no path finder (an older CuPy), or it found nothing: look at what is mapped
        pass
    prefix = f"lib{name}.so"
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if os.path.basename(path).startswith(prefix):
                    return path
    except OSError:
        pass
    found = ctypes.util.find_library(name)
    if found is None:
        raise DeviceUnavailableError(f"the CUDA library lib{name} was not found (install CuPy with its CUDA "
                                     "libraries: mixprec[cuda12] or mixprec[cuda13])")
    return found
