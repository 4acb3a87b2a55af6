"""The CUDA side of loss scaling: kernel sources, compiled modules, chunk tables, launches.

Kernels live in kernels/*.cu (installed as mixprec/kernels/, so a non-editable install has
them too) and are compiled by CuPy's RawModule through NVRTC, once per device
(CuPy also keeps the binaries in its on-disk kernel cache). The functions here
trust their callers (mixprec.amp.functional validates): CuPy arrays, one device,
one dtype pair per unscale call, C-contiguous, non-empty.

The compile settings below are what tools/compile_kernels.py checks in CI, so
what CI compiles is exactly what runs.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from pathlib import Path

import numpy as np

from ..backend import cupy_module

_PKG = Path(__file__).resolve().parent.parent
# A source checkout keeps them in the top-level kernels/; an install puts them in mixprec/kernels/.
SOURCE_DIR = next((d for d in (_PKG / "kernels", _PKG.parent / "kernels") if (d / "amp_common.cuh").exists()),
                  _PKG.parent / "kernels")

# IEEE arithmetic without shortcuts: no fused multiply-add, correctly rounded division.
# The NumPy reference relies on them.
OPTIONS = ("--std=c++14", "--fmad=false", "--prec-div=true", "--prec-sqrt=true")
# What CuPy adds after our options on every compile (cupy.cuda.compiler; NVRTC honours the
# last occurrence). The kernels are written not to depend on it (amp_common.cuh), and CI
# compiles with it so that what is checked is what runs.
CUPY_APPENDED_OPTIONS = ("-ftz=true",)

CHUNK_SIZE = 65536  # elements per block; a multiple of every vector width (<= 8)
THREADS = 512

# C++ storage type of each dtype the unscale kernel handles.
CTYPES = {"float32": "float", "float16": "half_bits", "bfloat16": "bfloat16_bits", "float64": "double"}
# (source dtype, destination dtype) pairs: in place, or half/bfloat16 into float32 master grads.
UNSCALE_PAIRS = (("float32", "float32"), ("float16", "float16"), ("bfloat16", "bfloat16"),
                 ("float64", "float64"), ("float16", "float32"), ("bfloat16", "float32"))


def unscale_kernel_name(src_dtype: str, dst_dtype: str) -> str:
    return f"multi_tensor_unscale<{CTYPES[src_dtype]}, {CTYPES[dst_dtype]}>"


# source file -> the kernel names (C++ name expressions) it must provide
MODULES = {
    "multi_tensor_unscale.cu": tuple(unscale_kernel_name(s, d) for s, d in UNSCALE_PAIRS),
    "update_scale.cu": ("update_scale",),
}

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\s*$", re.M)


def load_source(filename: str) -> str:
    """A kernel source with its local #include "x.cuh" lines spliced in.

    Splicing (rather than passing -I) keeps the whole program in the text CuPy
    hashes for its disk cache, so editing a header can never serve a stale binary.
    """
    path = SOURCE_DIR / filename
    if not path.is_file():
        raise FileNotFoundError(f"kernel source {path} is missing; reinstall mixprec (the .cu/.cuh files "
                                "are package data)")
    seen = set()

    def splice(text):
        def one(match):
            name = match.group(1)
            if name in seen:  # like #pragma once: each header is spliced once
                return ""
            seen.add(name)
            return splice(_PRAGMA_ONCE.sub("", (SOURCE_DIR / name).read_text()))
        return _INCLUDE.sub(one, text)
    return splice(path.read_text())


# ---- compiled kernels, per device ----
_kernels: dict = {}  # (device id, kernel name) -> cupy.RawKernel
_modules: dict = {}  # source file -> cupy.RawModule (which itself compiles once per device)
_launches = 0


def launch_count() -> int:
    """How many kernels this module has launched (benchmarks count launches per step with it)."""
    return _launches


def _kernel(filename: str, name: str, device_id: int):
    key = (device_id, name)
    k = _kernels.get(key)
    if k is None:
        cp = cupy_module()
        mod = _modules.get(filename)
        if mod is None:
            mod = _modules[filename] = cp.RawModule(code=load_source(filename), options=OPTIONS,
                                                    name_expressions=MODULES[filename])
        with cp.cuda.Device(device_id):
            k = _kernels[key] = mod.get_function(name)
    return k


# ---- chunk tables ----
class ChunkTables:
    """Device-resident chunk tables, reused while gradients keep their addresses.

    The key is the exact list of (source pointer, destination pointer, size), so
    a table is rebuilt (and copied host-to-device) only when a gradient moved or
    changed size. ``uploads`` counts those copies: a steady loop makes none.
    """

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self.uploads = 0
        self._tables: OrderedDict = OrderedDict()

    def get(self, device_id: int, pairs, dtypes):
        key = (device_id, dtypes, tuple([v for s, d in pairs for v in (s.data.ptr, d.data.ptr, s.size)]))
        hit = self._tables.get(key)
        if hit is not None:
            self._tables.move_to_end(key)
            return hit
        table = self._build(device_id, pairs)
        self._tables[key] = table
        if len(self._tables) > self.capacity:
            self._tables.popitem(last=False)
        return table

    def _build(self, device_id, pairs):
        cp = cupy_module()
        sizes = np.array([s.size for s, _ in pairs], dtype=np.int64)
        chunks = -(-sizes // CHUNK_SIZE)
        n_blocks = int(chunks.sum())
        first = np.repeat(np.cumsum(chunks) - chunks, chunks)
        host = np.concatenate([
            np.array([s.data.ptr for s, _ in pairs], dtype=np.int64),
            np.array([d.data.ptr for _, d in pairs], dtype=np.int64),
            sizes,
            np.repeat(np.arange(len(pairs), dtype=np.int64), chunks),  # tensor of each block
            np.arange(n_blocks, dtype=np.int64) - first,               # chunk of each block
        ])
        with cp.cuda.Device(device_id):
            table = cp.asarray(host)
        self.uploads += 1
        return table, len(pairs), n_blocks

    def clear(self):
        self._tables.clear()


TABLES = ChunkTables()


def unscale(pairs, found_inf, inv_scale):
    """dst = src * inv_scale for every (src, dst) pair; found_inf[0] = 1 on any inf/NaN. One launch."""
    global _launches
    src, dst = pairs[0]
    device_id = src.device.id
    table, n_tensors, n_blocks = TABLES.get(device_id, pairs, (src.dtype.name, dst.dtype.name))
    kernel = _kernel("multi_tensor_unscale.cu", unscale_kernel_name(src.dtype.name, dst.dtype.name), device_id)
    with cupy_module().cuda.Device(device_id):
        kernel((n_blocks,), (THREADS,), (table, np.int32(n_tensors), np.int64(CHUNK_SIZE), found_inf, inv_scale))
    _launches += 1


def update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval, *,
                 hysteresis, overflow_tracker, min_scale, max_scale, floor_hit, inv_scale, stats,
                 clear_found_inf):
    """Launch the one-thread update kernel (see update_scale.cu); None pointers are skipped."""
    global _launches
    null = np.uint64(0)

    def ptr(a):
        return null if a is None else a
    history = 0 if stats is None else (stats.size - 5) // 2
    kernel = _kernel("update_scale.cu", "update_scale", scale.device.id)
    with cupy_module().cuda.Device(scale.device.id):
        kernel((1,), (1,), (scale, growth_tracker, ptr(overflow_tracker), found_inf, np.int32(found_inf.size),
                            np.int32(bool(clear_found_inf)), np.float64(growth_factor), np.float64(backoff_factor),
                            np.int32(growth_interval), np.int32(hysteresis), np.float32(min_scale),
                            np.float32(max_scale), ptr(floor_hit), ptr(inv_scale), ptr(stats), np.int32(history)))
    _launches += 1
