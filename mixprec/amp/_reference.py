"""The NumPy twins of mixprec's CUDA kernels: the same arithmetic, bit for bit.

This is what GradScaler("cpu") and the fused optimizers on the CPU run, and what the
parity tests (GPU, and the kernels built for the host) compare the kernels with. Each
step mirrors kernels/*.cu:
  * unscale: widen to float32 (float64 stays float64; widening is exact), multiply
    by the float32 inv_scale in that precision (IEEE, round to nearest even, no
    flushing of subnormals — NumPy's and the kernels' arithmetic agree), round back
    with round-to-nearest-even (NumPy's float16 cast and ml_dtypes' bfloat16 cast
    are the same rounding as cvt.rn.f16.f32 and the kernels' bfloat16 rounding),
    and store a NaN result as the format's default quiet NaN;
  * update: the scale arithmetic done in float64 and rounded once to float32, as
    the kernel's float * double does;
  * fused optimizers (optimizer_step): the lines of fused_adam/fused_sgd, vectorised
    over a whole group (its tensors concatenated), each one IEEE operation in the
    opmath type in the kernel's order, every stored value rounded once.
"""
from __future__ import annotations

import numpy as np

import math

from .. import dtypes as _dt
from ._layout import AdamRule, SGDRule, Stat, UpdateScaleArgs, history_of

# The NaN a kernel stores in each format: NumPy's np.nan converted to it.
DEFAULT_NAN_BITS = {_dt.float16: (np.uint16, 0x7E00), _dt.bfloat16: (np.uint16, 0x7FC0),
                    _dt.float32: (np.uint32, 0x7FC00000), _dt.float64: (np.uint64, 0x7FF8000000000000)}


def opmath(dtype) -> np.dtype:
    """The precision the arithmetic runs in: float64 for float64, float32 for the rest."""
    return _dt.float64 if dtype == _dt.float64 else _dt.float32


def rounded(y, dtype) -> np.ndarray:
    """The opmath values y stored in dtype as a kernel stores them: round to nearest even, a NaN as the
    dtype's default NaN."""
    out = y.astype(dtype)
    nan = np.isnan(y)
    if nan.any():
        uint, bits = DEFAULT_NAN_BITS[np.dtype(dtype)]
        out.view(uint)[nan] = bits
    return out


def unscale(pairs, found_inf, inv_scale):
    """dst = round(widen(src) * inv_scale) for every (src, dst); found_inf[0] = 1 on any inf/NaN."""
    with np.errstate(all="ignore"):  # inf * 0, overflow when rounding: the IEEE results are wanted
        for src, dst in pairs:
            acc = opmath(src.dtype)
            x = src.astype(acc)
            if not np.isfinite(x).all():
                found_inf[0] = 1.0
            dst[...] = rounded(x * acc.type(inv_scale.reshape(-1)[0]), dst.dtype)


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


# ---- fused optimizers: kernels/multi_tensor_optimizers.cu ----
def optimizer_step(kind, lists, rule, grad_scale=None, found_inf=None):
    """One fused step of a group, as mixprec.amp._kernels.optimizer_step launches it (same arguments).

    found_inf non-zero: nothing changes. Otherwise Adam counts the steps, then every list is
    concatenated, updated with one array operation per kernel line, and written back.
    """
    if found_inf is not None and found_inf.reshape(-1)[0] != 0:  # any non-zero value, a NaN too
        return
    params = lists["PARAM"]
    if kind == "ADAM":
        for count in lists["STEP"]:
            count += 1
    sizes = [p.size for p in params]
    flat = {name: np.concatenate([a.reshape(-1) for a in arrays]) for name, arrays in lists.items()
            if name != "STEP" and arrays[0] is not None}
    scale = None if grad_scale is None else grad_scale.reshape(-1)[0]
    with np.errstate(all="ignore"):  # overflow, inf - inf: IEEE results, as on the device
        if kind == "ADAM":
            new = _adam(rule, flat, [int(c.reshape(-1)[0]) for c in lists["STEP"]], sizes, scale)
        else:
            new = _sgd(rule, flat, scale)
        if lists["WEIGHT_COPY"][0] is not None:
            new["WEIGHT_COPY"] = new["PARAM"]
        for name, values in new.items():
            arrays = lists[name]
            stored, start = rounded(values, arrays[0].dtype), 0
            for a, n in zip(arrays, sizes):
                a[...] = stored[start:start + n].reshape(a.shape)
                start += n


def power(base: float, n: int) -> float:
    """base**n by squaring in float64, the kernel's power(): the same products in the same order."""
    result = 1.0
    while n > 0:
        if n & 1:
            result *= base
        base *= base
        n >>= 1
    return result


def _adam(rule: AdamRule, flat, steps, sizes, scale):
    acc = opmath(flat["PARAM"].dtype)
    c = acc.type
    out = {}
    g = flat["GRAD"].astype(acc)
    if scale is not None:
        g = out["GRAD"] = g / c(scale)
    if rule.maximize:
        g = -g
    p = flat["PARAM"].astype(acc)
    if rule.weight_decay != 0.0:
        if rule.decoupled_weight_decay:
            p = p * c(1.0 - rule.lr * rule.weight_decay)
        else:
            g = g + p * c(rule.weight_decay)
    weight = c(1.0 - rule.beta1)
    m = flat["EXP_AVG"].astype(acc)
    m = out["EXP_AVG"] = m + weight * (g - m) if float(weight) < 0.5 else g - (g - m) * (c(1) - weight)
    v = out["EXP_AVG_SQ"] = flat["EXP_AVG_SQ"].astype(acc) * c(rule.beta2) + c(1.0 - rule.beta2) * g * g
    if rule.amsgrad:
        v = out["MAX_EXP_AVG_SQ"] = np.maximum(flat["MAX_EXP_AVG_SQ"].astype(acc), v)
    # the bias corrections of each tensor's step count (one set of scalars when all counts agree)
    per_step = {}
    for step in set(steps):
        bias_correction2 = 1.0 - power(rule.beta2, step)
        per_step[step] = (c(-(rule.lr / (1.0 - power(rule.beta1, step)))), c(math.sqrt(bias_correction2)))
    if len(per_step) == 1:
        neg_step_size, bias_correction2_sqrt = per_step[steps[0]]
    else:
        neg_step_size, bias_correction2_sqrt = (np.repeat(np.array([per_step[s][k] for s in steps], acc), sizes)
                                                for k in (0, 1))
    denom = np.sqrt(v) / bias_correction2_sqrt + c(rule.eps)
    out["PARAM"] = p + neg_step_size * m / denom
    return out


def _sgd(rule: SGDRule, flat, scale):
    acc = opmath(flat["PARAM"].dtype)
    c = acc.type
    out = {}
    g = flat["GRAD"].astype(acc)
    if scale is not None:
        g = out["GRAD"] = g / c(scale)
    if rule.maximize:
        g = -g
    p = flat["PARAM"].astype(acc)
    if rule.weight_decay != 0.0:
        g = g + c(rule.weight_decay) * p
    if rule.momentum != 0.0:
        momentum = c(rule.momentum)
        if rule.first_step:
            b = g
        else:
            b = flat["MOMENTUM_BUFFER"].astype(acc) * momentum + c(1.0 - rule.dampening) * g
        out["MOMENTUM_BUFFER"] = b
        g = g + momentum * b if rule.nesterov else b
    out["PARAM"] = p - c(rule.lr) * g
    return out
