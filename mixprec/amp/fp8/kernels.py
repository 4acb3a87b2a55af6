"""Launches of the FP8 kernels (kernels/fp8_scaling.cu) through a mixprec.amp._kernels runner.

A runner is CUDA's (CuPy arrays) or the host build's (NumPy arrays, tests). Every
kernel's last argument is an int64 table of sizes and constants, kept on the device
by the runner's table cache: a steady loop uploads nothing and never waits for the
host. The callers (mixprec.amp.fp8.scaling) validate; these trust their arguments:
contiguous arrays of one device, float32 amax/scale arrays, uint8 FP8 outputs.
"""
from __future__ import annotations

import numpy as np

from .. import _kernels
from . import _sources

THREADS = 256
MAX_BLOCKS = 4096  # grid-stride loops cover the rest


def _grid(work: int) -> tuple:
    return max(1, min(MAX_BLOCKS, -(-work // THREADS))), THREADS


def _table(runner, device_id, words):
    packed = np.array(words, dtype=np.int64)
    return runner.tables.get(runner, device_id, ("fp8", packed.tobytes()), lambda: packed)


def _f32_bits(value) -> int:
    return int(np.array(value, dtype=np.float32).view(np.uint32))


def _run(runner, name, like, work, arrays, words):
    device_id = runner.device_id(like)
    table = _table(runner, device_id, words)
    _kernels._launch(runner, _sources.SOURCE, name, device_id, _grid(work), (*arrays, table))


def segment_amax(x, amax, seg_len: int, runner):
    """amax[s] = max(amax[s], max |x| over segment s of seg_len elements); x flat, amax float32."""
    if x.size:
        n_seg = x.size // seg_len
        _run(runner, _sources.amax_kernel(x.dtype.name), x, n_seg * -(-seg_len // 32), (x, amax), (x.size, seg_len))


def cast(x, out, scale, seg_len: int, fp8_dtype: str, runner, amax=None):
    """out (uint8) = FP8 bits of saturate(x * scale[i // seg_len]); amax[0] folds in max |x| when given."""
    if x.size:
        fold = amax is not None
        _run(runner, _sources.cast_kernel(x.dtype.name, fp8_dtype), x, x.size,
             (x, out, scale, amax if fold else scale), (x.size, seg_len, int(fold)))


def current_scale(amax, scale, scale_inv, scaled_max: float, power_2: bool, runner):
    if amax.size:
        _run(runner, "fp8_current_scale", amax, amax.size, (amax, scale, scale_inv),
             (amax.size, _f32_bits(scaled_max), int(power_2)))


def mx_scale(amax, e8m0, multiplier, emax_elem: int, runner):
    if amax.size:
        _run(runner, "fp8_mx_scale", amax, amax.size, (amax, e8m0, multiplier), (amax.size, emax_elem))


def delayed_update(history, scale, scale_inv, amax, scaled_max, most_recent: bool, clear: bool, runner):
    """One launch for all tensors; scaled_max: one float per tensor; scale_inv may be None."""
    n, length = history.shape
    if n:
        words = (n, length, int(most_recent), int(clear), int(scale_inv is not None),
                 *[_f32_bits(v) for v in scaled_max])
        _run(runner, "fp8_delayed_update", history, n,
             (history, scale, scale if scale_inv is None else scale_inv, amax), words)
