"""GPU memory statistics, read from CuPy's memory pools.

CuPy keeps freed blocks in a pool for reuse instead of returning them to
CUDA (as torch's caching allocator does). So:

- allocated: bytes of live arrays (``MemoryPool.used_bytes``);
- reserved:  bytes the pools hold from CUDA, live or cached (``total_bytes``).

Both count CuPy's default pool plus the private pools of live CUDA graphs
(mp.cuda.graph), which is where torch counts graph memory too. They describe
CuPy's default allocator: arrays made with another allocator
(``cupy.cuda.set_allocator``) are not seen.

Peaks. CuPy does not record a peak, so mixprec watches allocations with a
CuPy memory hook, from the first call to a function of this module on (so
that a program that never asks pays nothing per allocation); call
``reset_peak_memory_stats()`` before the code you measure. Like every CuPy
memory hook it sees the allocations of the thread that started it.
"""
from __future__ import annotations

import pickle
import traceback
import warnings
import weakref

from .. import backend as _be
from ..backend import availability, devices
from .._state import PER_THREAD
from ._runtime import device_index

_GRAPH_POOLS: "weakref.WeakSet" = weakref.WeakSet()  # GraphPool objects alive (mp.cuda.graphs registers them)
_peaks: dict[int, list[int]] = {}  # device -> [peak allocated, peak reserved]


def _watching():
    return PER_THREAD.memory  # this thread's allocation watcher (_state.py)


def _pools(cp):
    return [cp.get_default_memory_pool()] + [p.cupy_pool for p in list(_GRAPH_POOLS)]


def _current(cp, index: int) -> tuple[int, int]:
    """(allocated, reserved) bytes on a device, over every pool."""
    with cp.cuda.Device(index):
        pools = _pools(cp)
        return sum(p.used_bytes() for p in pools), sum(p.total_bytes() for p in pools)


def _note(cp, index: int) -> list[int]:
    """Fold the current figures into the device's peaks; returns them."""
    allocated, reserved = _current(cp, index)
    peak = _peaks.setdefault(index, [allocated, reserved])
    peak[0], peak[1] = max(peak[0], allocated), max(peak[1], reserved)
    return peak


def _watch(cp) -> None:
    """Start the peak-watching memory hook in this thread (once)."""
    watching = _watching()
    if watching.hook is not None:
        return

    class _PeakHook(cp.cuda.MemoryHook):
        name = "mixprec_peak_memory"

        def malloc_postprocess(self, device_id, *args, **kwargs):
            _note(cp, device_id)

    watching.hook = _PeakHook()
    watching.hook.__enter__()  # registered for the life of the thread, as `with hook:` would inside


def _stats_device(device, what):
    index = device_index(device, what)
    cp = _be.cupy_module()
    _watch(cp)
    return cp, index


def memory_allocated(device=None) -> int:
    """Bytes held by live arrays on the device."""
    cp, index = _stats_device(device, "memory_allocated")
    return _current(cp, index)[0]


def memory_reserved(device=None) -> int:
    """Bytes CuPy's pools hold from CUDA on the device (live arrays plus cached free blocks)."""
    cp, index = _stats_device(device, "memory_reserved")
    return _current(cp, index)[1]


def max_memory_allocated(device=None) -> int:
    """The most bytes live at once since peaks were last reset (or first watched)."""
    cp, index = _stats_device(device, "max_memory_allocated")
    return _note(cp, index)[0]


def max_memory_reserved(device=None) -> int:
    cp, index = _stats_device(device, "max_memory_reserved")
    return _note(cp, index)[1]


def reset_peak_memory_stats(device=None) -> None:
    """Start the peaks again from what is allocated and reserved now."""
    cp, index = _stats_device(device, "reset_peak_memory_stats")
    _peaks[index] = list(_current(cp, index))


def empty_cache() -> None:
    """Give the cached free blocks of CuPy's default pool back to CUDA, on every device mixprec has used.

    Live arrays are untouched, and so are the private pools of live CUDA graphs.
    """
    cp = availability.require_cuda("mp.cuda.empty_cache")
    used = set(devices._cuda_devices) | {cp.cuda.runtime.getDevice()}
    for index in sorted(used):
        with cp.cuda.Device(index):
            cp.get_default_memory_pool().free_all_blocks()


def memory_stats(device=None) -> dict:
    """The figures above as a dict, with torch's key names for the ones it shares."""
    cp, index = _stats_device(device, "memory_stats")
    allocated, reserved = _current(cp, index)
    peak = _note(cp, index)
    with cp.cuda.Device(index):
        free, total = cp.cuda.runtime.memGetInfo()
    return {"allocated_bytes.all.current": allocated, "allocated_bytes.all.peak": peak[0],
            "reserved_bytes.all.current": reserved, "reserved_bytes.all.peak": peak[1],
            "graph_pools": len(_GRAPH_POOLS), "device_free_bytes": int(free), "device_total_bytes": int(total)}


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A short human-readable report of memory_stats (abbreviated drops the device-wide line)."""
    index = device_index(device, "memory_summary")
    stats = memory_stats(index)

    def mib(n):
        return f"{n / 2 ** 20:12.1f} MiB"

    cached = stats["reserved_bytes.all.current"] - stats["allocated_bytes.all.current"]
    lines = [f"mixprec CUDA memory on cuda:{index} (CuPy's pools)",
             f"  allocated (live arrays)   {mib(stats['allocated_bytes.all.current'])}   "
             f"peak {mib(stats['allocated_bytes.all.peak'])}",
             f"  reserved (pools hold)     {mib(stats['reserved_bytes.all.current'])}   "
             f"peak {mib(stats['reserved_bytes.all.peak'])}",
             f"  cached, reusable          {mib(cached)}",
             f"  CUDA graph pools alive    {stats['graph_pools']:12d}"]
    if not abbreviated:
        lines.append(f"  device free / total       {mib(stats['device_free_bytes'])} / "
                     f"{stats['device_total_bytes'] / 2 ** 20:.1f} MiB")
    return "\n".join(lines)


def _cupy_oom():
    """The exception CuPy raises when an allocation fails (absent from the strict stand-in and without CuPy)."""
    found = getattr(getattr(getattr(_be._cupy, "cuda", None), "memory", None), "OutOfMemoryError", None)
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


class _OutOfMemoryError(MemoryError):
    """A CUDA allocation failed (raised by CuPy; this class stands in where CuPy's is not there)."""


# torch.cuda.OutOfMemoryError: catching it catches what a failed allocation on the GPU raises, i.e. CuPy's
# (cupy.cuda.memory.OutOfMemoryError, a MemoryError where torch's is a RuntimeError).
OutOfMemoryError = _cupy_oom() or _OutOfMemoryError


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the device, as CUDA reports them (cudaMemGetInfo)."""
    index = device_index(device, "mem_get_info")
    cp = _be.cupy_module()
    with cp.cuda.Device(index):
        free, total = cp.cuda.runtime.memGetInfo()
    return int(free), int(total)


def reset_max_memory_allocated(device=None) -> None:
    """Deprecated, as in torch: it is reset_peak_memory_stats, which resets every peak."""
    warnings.warn("mp.cuda.reset_max_memory_allocated now calls mp.cuda.reset_peak_memory_stats, which resets "
                  "/all/ peak memory stats.", FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device_index(device, "reset_max_memory_allocated"))


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Cap what CuPy's default pool may take from the device at ``fraction`` (0..1) of its memory; an
    allocation past it fails with OutOfMemoryError (CuPy's MemoryPool.set_limit)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise ValueError(f"mp.cuda.set_per_process_memory_fraction: fraction must be a number in [0, 1], "
                         f"got {fraction!r}")
    index = device_index(device, "set_per_process_memory_fraction")
    cp = _be.cupy_module()
    with cp.cuda.Device(index):
        cp.get_default_memory_pool().set_limit(fraction=float(fraction))


def memory_snapshot() -> list:
    """torch's memory_snapshot shape, as far as CuPy's pools tell: one entry per device mixprec has used and
    per pool (the default one and each live CUDA graph's), with total_size (reserved) and allocated_size.
    CuPy does not expose its blocks, so ``blocks`` is empty."""
    cp = availability.require_cuda("mp.cuda.memory_snapshot")
    out = []
    for index in sorted(set(devices._cuda_devices) | {cp.cuda.runtime.getDevice()}):
        with cp.cuda.Device(index):
            for kind, pool in zip(("default", *("graph",) * len(_GRAPH_POOLS)), _pools(cp)):
                out.append({"device": index, "segment_type": kind, "total_size": int(pool.total_bytes()),
                            "allocated_size": int(pool.used_bytes()), "blocks": []})
    return out


# ---------------------------------------------------------------- allocation history (torch.cuda.memory._*)
_history: dict = {"hook": None, "traces": [], "max_entries": None}


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=None) -> None:
    """Record each allocation of this thread (size, device, Python stack) for _snapshot/_dump_snapshot.
    enabled=None stops recording. CuPy's memory hook tells allocations, so frees are not recorded."""
    cp = availability.require_cuda("mp.cuda.memory._record_memory_history")
    if enabled not in (None, "all", "state", True, False):
        raise ValueError(f"_record_memory_history: enabled must be None, 'state' or 'all', got {enabled!r}")
    hook = _history["hook"]
    if not enabled:
        if hook is not None:
            hook.__exit__(None, None, None)
            _history["hook"] = None
        return
    _history["max_entries"] = max_entries
    if hook is None:
        class _HistoryHook(cp.cuda.MemoryHook):
            name = "mixprec_memory_history"

            def malloc_postprocess(self, device_id=None, size=0, mem_size=0, mem_ptr=0, **kwargs):
                traces = _history["traces"]
                frames = [{"filename": f.filename, "line": f.lineno, "name": f.name}
                          for f in traceback.extract_stack()[:-1]] if stacks else []
                traces.append({"action": "alloc", "device": device_id, "addr": mem_ptr, "size": mem_size or size,
                               "frames": frames})
                limit = _history["max_entries"]
                if limit is not None and len(traces) > limit:
                    del traces[:len(traces) - limit]

        _history["hook"] = _HistoryHook().__enter__()


def _snapshot(device=None) -> dict:
    """{"segments": memory_snapshot(), "device_traces": [the recorded allocations of each device]}."""
    availability.require_cuda("mp.cuda.memory._snapshot")
    segments = memory_snapshot()
    count = max([s["device"] for s in segments] + [t["device"] or 0 for t in _history["traces"]]) + 1
    traces = [[t for t in _history["traces"] if (t["device"] or 0) == i] for i in range(count)]
    return {"segments": segments, "device_traces": traces}


def _dump_snapshot(filename="dump_snapshot.pickle") -> None:
    """Write _snapshot() to ``filename`` as a pickle, the format torch's memory viewer reads
    (https://pytorch.org/memory_viz). Plain dicts and lists only."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
