"""The stand-in's ``RawModule``: the kernel's own CUDA C++ source, built for the host and run on host memory.

The source is compiled by a C++ compiler ($CXX, g++, clang++ or c++) with
``-DMIXPREC_HOST_EMULATION`` and ``kernels/host_emulation.cuh`` (which plays
the CUDA built-ins mixprec's kernels use: thread and block indices, the PTX
arithmetic, the bit casts) into a shared library, one launcher per name
expression, loaded with ctypes. A launch runs every block and thread in turn.
What this proves: the kernel's arithmetic and indexing, bit for bit against
its NumPy twin. What it cannot: races, memory ordering, warp behaviour.
Libraries are cached by the hash of their source, in the temporary folder, so
pytest workers build each once.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from . import _array

# IEEE arithmetic as the device does it: no contraction into fused multiply-adds, no fast-math (which would
# also flush subnormals), no aliasing assumptions about the kernels' reinterpret_casts.
FLAGS = ("-std=c++14", "-O2", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-fno-strict-aliasing",
         "-Wall", "-Wno-unknown-pragmas", "-Werror", "-DMIXPREC_HOST_EMULATION")


class HostBuildUnavailable(RuntimeError):
    """No C++ compiler here, or one without _Float16 (GCC >= 12, Clang >= 15 have it)."""


def find_compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "clang++", "c++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise HostBuildUnavailable("no C++ compiler found (set CXX, or install g++)")


def symbol(expression: str) -> str:
    """The extern "C" launcher of one kernel name expression."""
    return "mixprec_launch_" + hashlib.sha1(expression.encode()).hexdigest()[:12]


def translation_unit(code: str, name_expressions) -> str:
    """The kernel source as CuPy gets it, plus one extern "C" launcher per name expression."""
    launchers = [f'extern "C" void {symbol(e)}(unsigned int grid, unsigned int block, void** args) '
                 f'{{ host_launch(grid, block, &{e}, args); }}' for e in name_expressions]
    return "\n".join([code, "// host launchers (mixprec.strict_cupy._raw)", *launchers, ""])


def _emulation_header() -> Path:
    from mixprec.amp import _kernels
    return _kernels.SOURCE_DIR / "host_emulation.cuh"


def build(units: dict, out_dir) -> Path:
    """Compile ``units`` (name -> C++ text from translation_unit) into one shared library in out_dir."""
    cxx = find_compiler()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    probe = out_dir / "float16_probe.cpp"
    probe.write_text("int main() { _Float16 h = (_Float16)1.5f; return (float)h == 1.5f ? 0 : 1; }\n")
    if subprocess.run([cxx, "-std=c++14", "-fsyntax-only", str(probe)], capture_output=True).returncode != 0:
        raise HostBuildUnavailable(f"{cxx} has no _Float16 (needed for the float16 conversions; GCC >= 12 or "
                                   "Clang >= 15 have it)")
    sources = []
    for name, text in units.items():
        path = out_dir / (Path(name).stem + ".cpp")
        path.write_text(text)
        sources.append(str(path))
    library = out_dir / "host_kernels.so"
    partial = out_dir / f"host_kernels.{os.getpid()}.so"
    command = [cxx, *FLAGS, "-include", str(_emulation_header()), "-shared", "-o", str(partial), *sources]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"building the kernels for the host failed:\n{' '.join(command)}\n{done.stderr}")
    os.replace(partial, library)  # atomic: another process may be loading the same cached library
    return library


_built: dict = {}
_lock = threading.Lock()


def cached_library(code: str, name_expressions) -> ctypes.CDLL:
    unit = translation_unit(code, name_expressions)
    key = hashlib.sha1((unit + repr(FLAGS)).encode()).hexdigest()[:16]
    with _lock:
        lib = _built.get(key)
        if lib is None:
            folder = Path(tempfile.gettempdir()) / "mixprec-strict-cupy" / key
            path = folder / "host_kernels.so"
            if not path.exists():
                build({"module.cu": unit}, folder)
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
        pointers, keep = [], []
        for a in args:
            if not isinstance(a, _array.ndarray):
                raise TypeError(f"kernel {self.name}: the stand-in passes device arrays only (pointer arguments), "
                                f"got {type(a).__name__}")
            pointers.append(a._a.__array_interface__["data"][0])
            keep.append(a._a)
        packed = (ctypes.c_void_p * len(pointers))(*pointers)

        def launch(memory=tuple(keep)):  # the record holds the memory it writes, as a graph does
            self._fn(grid, block, packed)
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
        return RawKernel(getattr(self._lib, symbol(name)), name)
