"""The NumPy reference of the loss-scaling kernels: the same arithmetic, bit for bit.

This is what GradScaler("cpu") runs, and what the GPU parity tests compare the
kernels with. Each step mirrors kernels/*.cu:
  * unscale: widen to float32 (float64 stays float64; widening is exact), multiply
    by the float32 inv_scale in that precision (IEEE, round to nearest even, no
    flushing of subnormals — NumPy's and the kernels' arithmetic agree), round back
    with round-to-nearest-even (NumPy's float16 cast and ml_dtypes' bfloat16 cast
    are the same rounding as cvt.rn.f16.f32 and the kernels' bfloat16 rounding),
    and store a NaN result as the format's default quiet NaN;
  * update: the scale arithmetic done in float64 and rounded once to float32, as
    the kernel's float * double does.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt

# The NaN a kernel stores in each format: NumPy's np.nan converted to it.
DEFAULT_NAN_BITS = {_dt.float16: (np.uint16, 0x7E00), _dt.bfloat16: (np.uint16, 0x7FC0),
                    _dt.float32: (np.uint32, 0x7FC00000), _dt.float64: (np.uint64, 0x7FF8000000000000)}


def opmath(dtype) -> np.dtype:
    """The precision the arithmetic runs in: float64 for float64, float32 for the rest."""
    return _dt.float64 if dtype == _dt.float64 else _dt.float32


def unscale(pairs, found_inf, inv_scale):
    """dst = round(widen(src) * inv_scale) for every (src, dst); found_inf[0] = 1 on any inf/NaN."""
    with np.errstate(all="ignore"):  # inf * 0, overflow when rounding: the IEEE results are wanted
        for src, dst in pairs:
            acc = opmath(src.dtype)
            x = src.astype(acc)
            if not np.isfinite(x).all():
                found_inf[0] = 1.0
            y = x * acc.type(inv_scale.reshape(-1)[0])
            out = y.astype(dst.dtype)
            nan = np.isnan(y)
            if nan.any():
                uint, bits = DEFAULT_NAN_BITS[dst.dtype]
                out.view(uint)[nan] = bits
            dst[...] = out


def update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval, *,
                 hysteresis, overflow_tracker, min_scale, max_scale, floor_hit, inv_scale, stats,
                 clear_found_inf):
    """One scale update on NumPy arrays, line for line the update_scale kernel."""
    found = bool((found_inf != 0).any())  # any non-zero entry (NaN included)
    if clear_found_inf:
        found_inf[...] = 0.0
    old_scale = np.float32(scale.reshape(-1)[0])
    new_scale = old_scale
    min_scale, max_scale = np.float32(min_scale), np.float32(max_scale)
    tracker = growth_tracker.reshape(-1)
    if found:
        tracker[0] = 0
        overflows = 1
        if overflow_tracker is not None:
            overflows = int(overflow_tracker.reshape(-1)[0]) + 1
            overflow_tracker.reshape(-1)[0] = overflows if overflows < hysteresis else 0
        if overflows >= hysteresis:
            new_scale = np.float32(float(old_scale) * backoff_factor)
            if new_scale < min_scale:
                new_scale = min_scale
                if floor_hit is not None:
                    floor_hit.reshape(-1)[0] = 1.0
                if stats is not None:
                    stats[3] += 1.0
    else:
        if overflow_tracker is not None:
            overflow_tracker.reshape(-1)[0] = 0
        successful = int(tracker[0]) + 1
        if successful == growth_interval:
            with np.errstate(over="ignore"):
                grown = np.float32(float(old_scale) * growth_factor)
            if np.isfinite(grown):
                new_scale = grown if grown < max_scale else max_scale
            tracker[0] = 0
        else:
            tracker[0] = successful
    scale.reshape(-1)[0] = new_scale
    if inv_scale is not None:
        with np.errstate(divide="ignore"):
            inv_scale.reshape(-1)[0] = np.float32(1.0 / np.float64(new_scale))
    if stats is not None:
        step = stats[0]
        stats[0] = step + 1.0
        if found:
            stats[1] += 1.0
            stats[2] = step + 1.0
        history = (stats.size - 5) // 2
        if history > 0 and new_scale.view(np.uint32) != old_scale.view(np.uint32):
            slot = int(stats[4]) % history
            stats[5 + 2 * slot] = step
            stats[6 + 2 * slot] = float(new_scale)
            stats[4] += 1.0
