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
from ._layout import Stat, UpdateScaleArgs, history_of

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


def update_scale(args: UpdateScaleArgs):
    """One scale update on NumPy arrays, line for line kernels/update_scale.cu (same three parts)."""
    rule = args.rule
    found = bool((args.found_inf != 0).any())  # any non-zero entry (NaN included)
    old_scale = np.float32(args.scale[0])
    new_scale = old_scale
    tracker = args.growth_tracker

    # 1. torch's rule: back off after an overflow, grow after growth_interval clean steps.
    backed_off = grew = False
    if found:
        new_scale, backed_off = _times(old_scale, rule.backoff_factor), True
        tracker[0] = 0
    else:
        successful = int(tracker[0]) + 1
        if successful == rule.growth_interval:
            grown = _times(old_scale, rule.growth_factor)
            if np.isfinite(grown):  # never grow past float32 to inf
                new_scale, grew = grown, True
            tracker[0] = 0
        else:
            tracker[0] = successful

    # 2. mixprec's extras.
    if args.overflow_tracker is not None:  # hysteresis: back off only on the hysteresis-th overflow in a row
        overflows = int(args.overflow_tracker[0]) + 1 if found else 0
        tolerated = found and overflows < rule.hysteresis
        args.overflow_tracker[0] = overflows if tolerated else 0
        if tolerated:
            new_scale, backed_off = old_scale, False
    lowest, highest = np.float32(rule.lowest), np.float32(rule.highest)
    if backed_off and new_scale < lowest:  # the floor: the run overflows at every scale
        new_scale = lowest
        if args.floor_hit is not None:
            args.floor_hit[0] = 1.0
        if args.stats is not None:
            args.stats[Stat.FLOOR_HITS] += 1.0
    if grew and new_scale > highest:
        new_scale = highest
    args.scale[0] = new_scale

    # 3. Bookkeeping.
    if args.inv_scale is not None:
        with np.errstate(divide="ignore", over="ignore"):  # a scale of 0 or a subnormal one: inf, as on the GPU
            args.inv_scale[0] = np.float32(1.0 / np.float64(new_scale))  # as torch computes it
    if args.clear_found_inf:
        args.found_inf[...] = 0.0
    stats = args.stats
    if stats is not None:
        step = stats[Stat.STEPS]
        stats[Stat.STEPS] = step + 1.0
        if found:
            stats[Stat.SKIPPED_STEPS] += 1.0
            stats[Stat.LAST_OVERFLOW_PLUS_ONE] = step + 1.0
        history = history_of(stats)
        if history > 0 and new_scale.view(np.uint32) != old_scale.view(np.uint32):
            slot = Stat.RING + 2 * (int(stats[Stat.SCALE_CHANGES]) % history)
            stats[slot], stats[slot + 1] = step, float(new_scale)
            stats[Stat.SCALE_CHANGES] += 1.0


def _times(scale: np.float32, factor: float) -> np.float32:
    """float32(float64(scale) * factor): the product in float64, rounded once, as float * double is on the GPU."""
    with np.errstate(over="ignore"):
        return np.float32(float(scale) * factor)
