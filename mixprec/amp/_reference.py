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
    out = y.astype(dtype, copy=False)
    nan = np.isnan(y)
    if nan.any():
        out = out.copy() if out is y else out
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
TWIN_CHUNK = 1 << 16  # elements the optimizer twin takes at a time (the kernel's chunk): temporaries stay in cache


def optimizer_step(kind, lists, rule, grad_scale=None, found_inf=None, flat=None):
    """One fused step of a group, as mixprec.amp._kernels.optimizer_step launches it (same arguments).

    found_inf non-zero: nothing changes. Otherwise Adam counts the steps, then the group's elements
    are taken TWIN_CHUNK at a time, in the order of the tensors (a piece may span several small
    tensors, or be part of a large one: elementwise, any cut gives the same bits), and each piece
    gets one array operation per kernel line. flat: for a state list whose arrays are consecutive
    views of one 1-D buffer, in order and covering it (the fused optimizers lay their state out
    so), that buffer: its pieces are slices, read and written in place.
    """
    if found_inf is not None and found_inf.reshape(-1)[0] != 0:  # any non-zero value, a NaN too
        return
    flat = flat or {}
    sizes = [a.size for a in lists["PARAM"]]
    scale = None if grad_scale is None else grad_scale.reshape(-1)[0]
    per_tensor = None
    if kind == "ADAM":  # count_steps runs first: the update sees the new counts
        counts = flat.get("STEP")
        if counts is None:
            for count in lists["STEP"]:
                count += 1
            counts = np.concatenate([c.reshape(-1) for c in lists["STEP"]])
        else:
            counts += 1
        per_tensor = _adam_scalars(rule, counts, opmath(lists["PARAM"][0].dtype))
    views = {name: [a if a.ndim == 1 else a.reshape(-1) for a in arrays] for name, arrays in lists.items()
             if arrays[0] is not None and name not in flat and name != "STEP"}
    with np.errstate(all="ignore"):  # overflow, inf - inf: IEEE results, as on the device
        for lo, hi, segments in _pieces(sizes):
            x = {name: _read(views.get(name), flat.get(name), lo, hi, segments) for name, arrays in lists.items()
                 if arrays[0] is not None and name not in ("STEP", "WEIGHT_COPY")}
            acc = opmath(x["PARAM"].dtype)
            new = {}  # list name -> the values to store; both kernels start alike (gradient())
            g, p = _gradient(x, scale, rule.maximize, acc, new), x["PARAM"].astype(acc, copy=False)
            if kind == "ADAM":
                _adam(rule, x, g, p, new, *_piece_scalars(per_tensor, segments))
            else:
                _sgd(rule, x, g, p, new)
            if lists["WEIGHT_COPY"][0] is not None:
                new["WEIGHT_COPY"] = new["PARAM"]
            for name, result in new.items():  # every line computed, then stored (the kernel's order too)
                _write(rounded(result, lists[name][0].dtype), views.get(name), flat.get(name), lo, hi, segments)


def _pieces(sizes, chunk=TWIN_CHUNK):
    """(first, last + 1 element in the concatenation, [(tensor, start, stop), ...]) for consecutive pieces of at
    most `chunk` elements: runs of small tensors packed together, a tensor of `chunk` elements or more cut into
    pieces of its own (slices: nothing to concatenate)."""
    segments, filled, lo = [], 0, 0
    for t, n in enumerate(sizes):
        if n >= chunk and segments:  # a large tensor starts a piece of its own
            yield lo, lo + filled, segments
            segments, filled, lo = [], 0, lo + filled
        start = 0
        while start < n:
            take = min(n - start, chunk - filled)
            segments.append((t, start, start + take))
            filled, start = filled + take, start + take
            if filled == chunk:
                yield lo, lo + filled, segments
                segments, filled, lo = [], 0, lo + filled
    if segments:
        yield lo, lo + filled, segments


def _read(views, buffer, lo, hi, segments):
    """One piece of a list: a slice of its flat buffer or of its one tensor, or the tensors' parts concatenated."""
    if buffer is not None:
        return buffer[lo:hi]
    if len(segments) == 1:
        t, start, stop = segments[0]
        return views[t][start:stop]
    return np.concatenate([views[t][start:stop] for t, start, stop in segments])


def _write(stored, views, buffer, lo, hi, segments):
    if buffer is not None:
        buffer[lo:hi] = stored
        return
    offset = 0
    for t, start, stop in segments:
        views[t][start:stop] = stored[offset:offset + stop - start]
        offset += stop - start


def power(base: float, n: int) -> float:
    """base**n by squaring in float64, the kernel's power(): the same products in the same order."""
    result = 1.0
    while n > 0:
        if n & 1:
            result *= base
        base *= base
        n >>= 1
    return result


def _adam_scalars(rule: AdamRule, counts, acc):
    """(neg_step_size, bias_correction2_sqrt) in the opmath type, from each tensor's step count: one row when all
    counts agree (the usual case), else a row per tensor."""
    distinct, which = np.unique(counts, return_inverse=True)
    scalars = np.array([(-(rule.lr / (1.0 - power(rule.beta1, int(n)))), math.sqrt(1.0 - power(rule.beta2, int(n))))
                        for n in distinct]).astype(acc)
    return scalars if distinct.size == 1 else scalars[which.reshape(-1)]


def _piece_scalars(scalars, segments):
    """A piece's (neg_step_size, bias_correction2_sqrt): two scalars, or one value per element where the tensors'
    step counts differ."""
    if len(scalars) == 1:
        return scalars[0]
    rows = scalars[[t for t, _, _ in segments]]
    return np.repeat(rows, [stop - start for _, start, stop in segments], axis=0).T


def _gradient(x, scale, maximize, acc, out):
    """The kernels' gradient(): divided by the scale (out["GRAD"]: the unscaled value to write back), negated to
    maximize."""
    g = x["GRAD"].astype(acc, copy=False)
    if scale is not None:
        g = out["GRAD"] = g / acc.type(scale)
    return -g if maximize else g


def _adam(rule: AdamRule, x, g, p, out, neg_step_size, bias_correction2_sqrt):
    """fused_adam's lines after gradient(): x the piece's inputs, g and p in the opmath type; results into out."""
    acc = g.dtype
    c = acc.type
    if rule.weight_decay != 0.0:
        if rule.decoupled_weight_decay:
            p = p * c(1.0 - rule.lr * rule.weight_decay)
        else:
            g = g + p * c(rule.weight_decay)
    weight = c(1.0 - rule.beta1)
    m = x["EXP_AVG"].astype(acc, copy=False)
    m = out["EXP_AVG"] = m + weight * (g - m) if float(weight) < 0.5 else g - (g - m) * (c(1) - weight)
    v = out["EXP_AVG_SQ"] = x["EXP_AVG_SQ"].astype(acc, copy=False) * c(rule.beta2) + c(1.0 - rule.beta2) * g * g
    if rule.amsgrad:
        v = out["MAX_EXP_AVG_SQ"] = np.maximum(x["MAX_EXP_AVG_SQ"].astype(acc, copy=False), v)
    denom = np.sqrt(v) / bias_correction2_sqrt + c(rule.eps)
    out["PARAM"] = p + neg_step_size * m / denom


def _sgd(rule: SGDRule, x, g, p, out):
    """fused_sgd's lines after gradient()."""
    acc = g.dtype
    c = acc.type
    if rule.weight_decay != 0.0:
        g = g + c(rule.weight_decay) * p
    if rule.momentum != 0.0:
        momentum = c(rule.momentum)
        if rule.first_step:
            b = g
        else:
            b = x["MOMENTUM_BUFFER"].astype(acc, copy=False) * momentum + c(1.0 - rule.dampening) * g
        out["MOMENTUM_BUFFER"] = b
        g = g + momentum * b if rule.nesterov else b
    out["PARAM"] = p - c(rule.lr) * g
