"""The CUDA side of mixprec's kernels (loss scaling, fused optimizers): sources, compiled modules, device tables,
launches.

Kernels live in kernels/*.cu (installed as mixprec/kernels/, so a non-editable install has
them too) and are compiled by CuPy's RawModule through NVRTC, once per device
(CuPy also keeps the binaries in its on-disk kernel cache). The functions here
trust their callers (mixprec.amp.functional and the GradScaler validate): arrays of
one device, one dtype pair per unscale call, none empty.

Every launch goes through a *runner*: ``CudaRunner`` (CuPy, the only one mixprec uses)
or the host emulation of tools/host_kernels.py, which builds these same sources with
g++ and runs them on NumPy arrays so that CI checks the kernels' code against the
NumPy reference without a GPU. Inside ``_host_build.run_on_host(runner)`` the CPU paths of
mixprec.amp.functional and of the fused optimizers send NumPy arrays through that
runner instead of their NumPy twins, so a whole AMP step runs the kernels' own code.

The compile settings below are what tools/compile_kernels.py checks in CI, so
what CI compiles is exactly what runs.
"""
from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np

from .. import _text
from ..backend import cupy_module
from . import _layout
from ._host_build import SOURCE_DIR
from .fp8 import _sources as _fp8_sources

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


# Fused optimizers: (parameter dtype, dtype of its low-precision weight copy or None) pairs, and each
# optimizer's kernel (LISTS of mixprec.amp._layout names its pointer lists).
OPTIMIZER_TYPES = (("float32", None), ("float16", None), ("bfloat16", None), ("float64", None),
                   ("float32", "float16"), ("float32", "bfloat16"))
OPTIMIZER_KERNELS = {"ADAM": "fused_adam", "SGD": "fused_sgd"}
OPTIMIZER_SOURCE = "multi_tensor_optimizers.cu"


def optimizer_kernel_name(kind: str, param_dtype: str, copy_dtype: str | None) -> str:
    copy = "no_copy" if copy_dtype is None else CTYPES[copy_dtype]
    return f"{OPTIMIZER_KERNELS[kind]}<{CTYPES[param_dtype]}, {copy}>"


# source file -> the kernel names (C++ name expressions) it must provide
TABLE_SOURCE = "table_words.cu"
MODULES = {
    TABLE_SOURCE: ("write_table_words",),
    "multi_tensor_unscale.cu": tuple(unscale_kernel_name(s, d) for s, d in UNSCALE_PAIRS),
    "update_scale.cu": ("update_scale",), **_fp8_sources.MODULES,
    OPTIMIZER_SOURCE: ("count_steps",) + tuple(optimizer_kernel_name(kind, p, c) for kind in OPTIMIZER_KERNELS
                                               for p, c in OPTIMIZER_TYPES),
}
# Headers that are not files: generated from Python so that both sides share one definition.
GENERATED_HEADERS = {"amp_layout.h": _layout.layout_header}

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\s*$", re.M)


def load_source(filename: str) -> str:
    """A kernel source with its local #include "x" lines spliced in (generated headers too).

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
            generated = GENERATED_HEADERS.get(name)
            header = generated() if generated else (SOURCE_DIR / name).read_text()
            return splice(_PRAGMA_ONCE.sub("", header))
        return _INCLUDE.sub(one, text)
    return splice(path.read_text())


# ---- device tables: chunk tables and update arguments, reused while the arrays stay put ----
class DeviceTables:
    """Small int64 device arrays (chunk tables, UpdateArgs blocks) built on the host, keyed by what they hold.

    A table is rebuilt only when its key is new: a gradient moved, or the rule changed.
    It reaches the device as kernel launch parameters (kernels/table_words.cu), not as a
    copy, so the host never waits for it. ``uploads`` counts the tables written; a steady
    loop writes none.

    CUDA graphs: a table a captured launch used is *pinned*: the graph keeps its
    address, so the table is never evicted (eviction would hand its memory to the
    next allocation and the replay would read garbage). A table first needed inside a
    capture is written by launches the graph records, and pinned too.
    """

    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self.uploads = 0
        self._tables: OrderedDict = OrderedDict()
        self._pinned: dict = {}

    def get(self, runner, device_id: int, key, build):
        """The table for key on the device; build() gives its host copy when there is none yet."""
        key = (device_id, key)
        capturing = runner.capturing(device_id)
        table = self._pinned.get(key)
        if table is None:
            table = self._tables.get(key)
            if table is None:
                table = self._tables[key] = runner.upload(build(), device_id)
                self.uploads += 1
                if len(self._tables) > self.capacity:
                    self._tables.popitem(last=False)
            else:
                self._tables.move_to_end(key)
            if capturing:
                self._pinned[key] = self._tables.pop(key)
        return table

    @property
    def pinned(self) -> tuple:
        """The tables captured CUDA graphs may use (kept for the life of the process)."""
        return tuple(self._pinned.values())

    def clear(self):
        """Drop the unpinned tables (a pinned one may be in use by a CUDA graph)."""
        self._tables.clear()


TABLES = DeviceTables()


_TABLE_BLOCK = np.dtype([("word", np.int64, (_layout.TABLE_WORDS,))])  # struct TableWords


class KernelCompileError(RuntimeError):
    """CuPy could not compile a mixprec kernel; the message says what to install or where the log is."""


class CudaRunner:
    """Compiles and launches the kernels with CuPy; the only code here that calls CuPy."""
    tables = TABLES

    def __init__(self):
        self._kernels: dict = {}  # (device id, kernel name) -> cupy.RawKernel
        self._modules: dict = {}  # source file -> cupy.RawModule (which itself compiles once per device)

    @property
    def xp(self):
        return cupy_module()

    def device_id(self, array) -> int:
        return array.device.id

    def pointer(self, array) -> int:
        return array.data.ptr

    def upload(self, host, device_id):
        """The table on the device, written by kernels/table_words.cu from its launch parameters (no copy)."""
        cp = cupy_module()
        words = np.ascontiguousarray(host, dtype=np.int64).reshape(-1)
        kernel = self._kernel(TABLE_SOURCE, "write_table_words", device_id)
        block = np.zeros(1, dtype=_TABLE_BLOCK)  # one by-value parameter: CuPy passes a size-1 array's bytes
        with cp.cuda.Device(device_id):
            table = cp.empty(words.size, dtype=np.int64)
            for start in range(0, words.size, _layout.TABLE_WORDS):
                part = words[start:start + _layout.TABLE_WORDS]
                block["word"][0, :part.size] = part
                kernel((1,), (_layout.TABLE_WORDS,), (table[start:], np.int64(part.size), block))
        return table

    def capturing(self, device_id) -> bool:
        """Whether the current stream is capturing a CUDA graph (if CUDA cannot say, assume it is)."""
        cp = cupy_module()
        try:
            with cp.cuda.Device(device_id):
                return bool(cp.cuda.get_current_stream().is_capturing())
        except Exception:  # e.g. asked on the legacy stream while another one captures
            return True

    def launch(self, filename, name, device_id, grid, block, args):
        cp = cupy_module()
        kernel = self._kernel(filename, name, device_id)
        with cp.cuda.Device(device_id):
            kernel((grid,), (block,), args)

    def _kernel(self, filename, name, device_id):
        key = (device_id, name)
        kernel = self._kernels.get(key)
        if kernel is None:
            cp = cupy_module()
            try:
                module = self._modules.get(filename)
                if module is None:
                    module = self._modules[filename] = cp.RawModule(code=load_source(filename), options=OPTIONS,
                                                                    name_expressions=MODULES[filename])
                with cp.cuda.Device(device_id):
                    kernel = self._kernels[key] = module.get_function(name)
            except Exception as exc:
                raise KernelCompileError(_text.compile_failure(filename, exc)) from exc
        return kernel


_cuda_runner = None
_launches = 0


def cuda_runner() -> CudaRunner:
    global _cuda_runner
    if _cuda_runner is None:
        _cuda_runner = CudaRunner()
    return _cuda_runner


def launch_count() -> int:
    """How many kernels this module has launched (benchmarks count launches per step with it)."""
    return _launches


def _launch(runner, filename, name, device_id, grid_and_block, args):
    global _launches
    runner.launch(filename, name, device_id, *grid_and_block, args)
    _launches += 1


# ---- unscale ----
def unscale(pairs, found_inf, inv_scale, runner=None):
    """dst = src * inv_scale for every (src, dst) pair of one dtype pair; found_inf[0] = 1 on any inf/NaN.

    Empty arrays are skipped (no launch when nothing is left). One launch, unless arrays
    share memory: the pairs are then applied in list order, each seeing what the earlier
    ones wrote (torch's semantics: an element that two listed views share is unscaled
    twice), as one launch per run of pairs whose memory does not overlap.
    """
    runner = runner or cuda_runner()
    pairs = [(src, dst) for src, dst in pairs if src.size]
    if pairs:
        for run in _runs_without_overlap(pairs, runner):
            _unscale_contiguous(run, found_inf, inv_scale, runner)


def _unscale_contiguous(pairs, found_inf, inv_scale, runner):
    """One launch. The kernel walks contiguous memory: a strided array goes through a contiguous
    copy (new addresses each call, so its chunk table is rebuilt: keep gradients contiguous)."""
    xp = runner.xp
    launch, write_back = [], []
    for src, dst in pairs:
        if src.flags.c_contiguous and dst.flags.c_contiguous:
            launch.append((src, dst))
            continue
        s = src if src.flags.c_contiguous else xp.ascontiguousarray(src)
        d = s if dst is src else (dst if dst.flags.c_contiguous else xp.empty(dst.shape, dtype=dst.dtype))
        launch.append((s, d))
        if d is not dst:
            write_back.append((dst, d))
    src, dst = launch[0]
    device_id = runner.device_id(src)
    dtypes = (src.dtype.name, dst.dtype.name)
    ptr = runner.pointer
    key = (dtypes, tuple([v for s, d in launch for v in (ptr(s), ptr(d), s.size)]))
    table = runner.tables.get(runner, device_id, key, lambda: _layout.chunk_table(
        ([ptr(s) for s, _ in launch], [ptr(d) for _, d in launch]), [s.size for s, _ in launch], CHUNK_SIZE))
    n_blocks = sum(-(-s.size // CHUNK_SIZE) for s, _ in launch)
    _launch(runner, "multi_tensor_unscale.cu", unscale_kernel_name(*dtypes), device_id, (n_blocks, THREADS),
            (table, found_inf, inv_scale))
    for dst, d in write_back:
        dst[...] = d


def _extent(array, pointer):
    """[first byte, past the last byte) of the memory an array can touch."""
    lo = hi = pointer(array)
    if array.flags.c_contiguous:
        return lo, lo + array.nbytes
    for n, stride in zip(array.shape, array.strides):
        if stride < 0:
            lo += stride * (n - 1)
        else:
            hi += stride * (n - 1)
    return lo, hi + array.itemsize


def _runs_without_overlap(pairs, runner):
    """Split pairs, in order, into runs in which no two arrays' memory extents overlap."""
    extents = sorted(_extent(a, runner.pointer) for src, dst in pairs for a in ((src,) if dst is src else (src, dst)))
    if all(a[1] <= b[0] for a, b in zip(extents, extents[1:])):
        return [pairs]  # the usual case: one launch
    runs, current, taken = [], [], []
    for src, dst in pairs:
        mine = [_extent(a, runner.pointer) for a in ((src,) if dst is src else (src, dst))]
        if any(lo < t_hi and t_lo < hi for lo, hi in mine for t_lo, t_hi in taken):
            runs.append(current)
            current, taken = [], []
        current.append((src, dst))
        taken.extend(mine)
    return runs + [current]


# ---- update ----
def update_scale(args: _layout.UpdateScaleArgs, runner=None):
    """Launch the one-thread update kernel on args (see kernels/update_scale.cu)."""
    runner = runner or cuda_runner()
    device_id = runner.device_id(args.scale)
    packed = _layout.pack_update_args(args, runner.pointer)
    table = runner.tables.get(runner, device_id, ("update", packed.tobytes()), lambda: packed)
    _launch(runner, "update_scale.cu", "update_scale", device_id, (1, 1), (table,))


# ---- fused optimizers ----
def optimizer_step(kind: str, lists: dict, rule, grad_scale=None, found_inf=None, runner=None):
    """One fused optimizer step of a group of tensors on one device, of one parameter dtype.

    kind: "ADAM" or "SGD"; lists: for each name of _layout.LISTS[kind], one array (or None where
    unused) per tensor, "PARAM" giving the parameters (contiguous, updated in place); rule: an
    AdamRule/SGDRule; grad_scale, found_inf: one-element float32 device arrays, or None (no
    unscaling; no skipping). Adam launches count_steps, then the update; SGD the update only.
    Nothing is read back: found_inf and the scale are read on the device.
    """
    runner = runner or cuda_runner()
    params = lists["PARAM"]
    device_id = runner.device_id(params[0])
    pointers = [[0 if a is None else runner.pointer(a) for a in lists[name]] for name in _layout.LISTS[kind]]
    sizes = [p.size for p in params]
    key = (kind, tuple(sizes), tuple(v for addresses in pointers for v in addresses))
    table = runner.tables.get(runner, device_id, key, lambda: _layout.chunk_table(pointers, sizes, CHUNK_SIZE))
    packed = _layout.pack_optimizer_args(rule, grad_scale, found_inf, runner.pointer)
    args = runner.tables.get(runner, device_id, (kind, packed.tobytes()), lambda: packed)
    copy = next((a.dtype.name for a in lists["WEIGHT_COPY"] if a is not None), None)
    if kind == "ADAM":
        _launch(runner, OPTIMIZER_SOURCE, "count_steps", device_id, (-(-len(params) // THREADS), THREADS),
                (table, args))
    n_blocks = sum(-(-n // CHUNK_SIZE) for n in sizes)
    if n_blocks:  # every tensor empty: only the step counts move
        _launch(runner, OPTIMIZER_SOURCE, optimizer_kernel_name(kind, params[0].dtype.name, copy), device_id,
                (n_blocks, THREADS), (table, args))
