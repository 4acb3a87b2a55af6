"""The stand-in's ``RawModule``: the kernel's own CUDA C++ source, built for the host and run on host memory.

mixprec.amp._host_build compiles the source with kernels/host_emulation.cuh;
a launch runs every block and thread in turn, on the stand-in's memory, with
CUDA's parameter convention (pointers by value, structs by their bytes). What
this proves: the kernel's arithmetic and indexing, bit for bit against its
NumPy twin. What it cannot: races, memory ordering, warp behaviour. Libraries
are cached by the hash of their source, in the temporary folder, so pytest
workers reuse what another built.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from . import _array

_built: dict = {}
_lock = threading.Lock()


def cached_library(code: str, name_expressions) -> ctypes.CDLL:
    # (here, not at the top: mixprec.amp imports the op registry, which imports mixprec.backend, which imports
    # this stand-in)
    from ..amp._host_build import FLAGS, build, translation_unit
    unit = translation_unit(code, name_expressions)
    key = hashlib.sha1((unit + repr(FLAGS)).encode()).hexdigest()[:16]
    with _lock:
        lib = _built.get(key)
        if lib is None:
            cache = Path(tempfile.gettempdir()) / "mixprec-strict-cupy"
            path = cache / f"{key}.so"
            if not path.exists():  # built in a folder of its own, then moved in whole: pytest workers may race
                cache.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryDirectory(dir=cache) as work:
                    os.replace(build({"module.cu": unit}, work), path)
            lib = _built[key] = ctypes.CDLL(str(path))
    return lib


class RawKernel:
    """One kernel: ``kernel(grid, block, args)`` with device arrays as arguments (pointers, as mixprec's
    kernels take); recorded instead of run while the current stream captures."""

    def __init__(self, function, name):
        self._fn, self.name = function, name
        self._fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)]
        self._fn.restype = None

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        grid, block = _one_dim(grid, "grid"), _one_dim(block, "block")
        values, keep = [], []
        for a in args:
            if isinstance(a, _array.ndarray):  # a device array: its pointer, by value
                keep.append(a._a)
                values.append(np.array([a._a.__array_interface__["data"][0]], dtype=np.uintp))
            elif isinstance(a, np.ndarray) and a.size == 1:  # CuPy passes a size-1 host array's bytes by value
                values.append(a.copy())
            elif isinstance(a, np.generic):
                values.append(np.array([a]))
            else:
                raise TypeError(f"kernel {self.name}: argument of type {type(a).__name__} (the stand-in takes "
                                "device arrays, NumPy scalars and size-1 NumPy arrays, as CuPy passes them)")
        # cuLaunchKernel's kernelParams: one pointer per argument, to that argument's value (copied now: a
        # launch takes its parameters when it is issued, and a graph keeps them)
        params = (ctypes.c_void_p * len(values))(*[v.__array_interface__["data"][0] for v in values])

        def launch(memory=tuple(keep), held=tuple(values)):  # the record holds its memory and its parameters
            self._fn(grid, block, params)
        _array.mutate(launch)


def _one_dim(value, what) -> int:
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if any(int(d) != 1 for d in dims[1:]):
        raise ValueError(f"the stand-in launches one-dimensional {what}s only, got {dims}")
    return int(dims[0])


class RawModule:
    """``cupy.RawModule(code=..., options=..., name_expressions=...)``, built for the host."""

    def __init__(self, code=None, *, path=None, options=(), backend="nvrtc", translate_cucomplex=False,
                 enable_cooperative_groups=False, name_expressions=None, jitify=None):
        if code is None:
            if path is None:
                raise TypeError("RawModule needs code= or path=")
            code = Path(path).read_text()
        if not name_expressions:
            raise ValueError("the stand-in finds kernels by their name expressions: pass name_expressions")
        self._expressions = tuple(name_expressions)
        self._lib = cached_library(code, self._expressions)

    def get_function(self, name) -> RawKernel:
        if name not in self._expressions:
            raise KeyError(f"{name} is not one of this module's name expressions")
        from ..amp._host_build import symbol
        return RawKernel(getattr(self._lib, symbol(name)), name)
