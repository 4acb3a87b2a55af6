"""The numbers behind mp.amp.inspect: what a value in float16/bfloat16 loses, measured on NumPy arrays.

Pure functions: they take host arrays (the low-precision result, its float32
shadow, ...) and return plain records, so every formula is testable by itself.

Errors are *normwise* relative errors, ``max|low - ref| / max|ref|`` and
``sum|low - ref| / sum|ref|``, over the elements finite in both. An elementwise
ratio would be dominated by values that cancel to nearly zero (``a - b`` with
a ~ b), which no dtype computes to full relative precision; the normwise error
is what a layer downstream feels, and for a correctly rounded result it is of
the order of the dtype's unit roundoff u (2^-11 for float16, 2^-8 for bfloat16).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .. import dtypes as _dt


@dataclass(frozen=True)
class Limits:
    """What a floating dtype can hold: max (largest finite), tiny (smallest normal), subnormal
    (smallest positive), u (unit roundoff: half the distance from 1 to the next value)."""
    dtype: np.dtype
    max: float
    tiny: float
    subnormal: float
    u: float

    @property
    def max_exponent(self) -> float:
        return math.log2(self.max)


def limits(dtype) -> Limits:
    f = ml_dtypes.finfo(dtype)
    return Limits(np.dtype(dtype), float(f.max), float(f.smallest_normal), float(f.smallest_subnormal),
                  float(f.eps) / 2)


def unit_roundoff(dtypes) -> float:
    """u of the least precise floating dtype among ``dtypes`` (1.0 when there is none)."""
    us = [limits(d).u for d in dtypes if d in _dt.FLOATING]
    return max(us) if us else 1.0


def _normwise(low, ref, both):
    """(max, mean) normwise relative error of low against ref over the mask ``both``."""
    if not both.any():
        return 0.0, 0.0
    diff = np.abs(low[both] - ref[both])
    mag = np.abs(ref[both])
    top, total = float(mag.max()), float(mag.sum())
    worst, spread = float(diff.max()), float(diff.sum())
    return (worst / top if top else (0.0 if worst == 0 else math.inf),
            spread / total if total else (0.0 if spread == 0 else math.inf))


@dataclass(frozen=True)
class ForwardStats:
    """One op's result in its dtype against float32.

    error_max/error_mean: against the float32 shadow (the whole model so far in float32);
    local_error_max/local_error_mean: against the op itself in float32 on the inputs it was
    actually given (the error this op adds; 0 when it ran in float32); u: the unit roundoff of
    the dtype it ran in. overflow / nan: elements inf / NaN where the shadow is finite / a number;
    new_nonfinite: inf or NaN elements that this op made from finite inputs (its float32 run is
    finite there); shadow_nonfinite: non-finite elements of the float32 shadow (the model is
    broken without AMP too). underflow: nonzero shadow values that became 0; local_underflow: the
    same against the op's own float32 run; subnormal: results in the dtype's subnormal range (they
    keep fewer significant bits). amax / amin: the largest and smallest nonzero magnitude of the
    float32 shadow (the range the values need), None when all are 0 or non-finite; input_amax:
    the same for the float32 shadows of its inputs (so an op that only passes large values on, such
    as relu, can be told from one that makes them).
    """
    dtype: np.dtype
    numel: int
    error_max: float
    error_mean: float
    local_error_max: float
    local_error_mean: float
    u: float
    overflow: int
    nan: int
    new_nonfinite: int
    shadow_nonfinite: int
    underflow: int
    local_underflow: int
    local_nonzero: int
    subnormal: int
    amax: float | None
    amin: float | None
    input_amax: float = 0.0

    @property
    def nonfinite(self) -> int:
        return self.overflow + self.nan

    @property
    def local_error_in_u(self) -> float:
        """The op's own error in units of its dtype's rounding unit (1-2 for a correctly rounded op)."""
        return self.local_error_max / self.u

    @property
    def headroom(self) -> float | None:
        """Doublings between the largest value needed and the dtype's max (negative: it overflows)."""
        if self.amax is None:
            return None
        return limits(self.dtype).max_exponent - math.log2(self.amax)

    @property
    def local_underflow_fraction(self) -> float:
        return self.local_underflow / self.local_nonzero if self.local_nonzero else 0.0


def forward_stats(low, shadow, local, dtype, run_u, input_amax=0.0) -> ForwardStats:
    """Compare one op's result ``low`` (its own dtype ``dtype``) with its float32 ``shadow`` and with
    ``local``, the same op in float32 on the inputs it was given (None: it ran in float32 itself).
    All three are host arrays of one shape; ``run_u`` is the unit roundoff of the dtype it ran in."""
    low = np.asarray(low, dtype=np.float64)
    shadow = np.asarray(shadow, dtype=np.float64)
    local = low if local is None else np.asarray(local, dtype=np.float64)
    fin_low, fin_sh, fin_loc = np.isfinite(low), np.isfinite(shadow), np.isfinite(local)
    err = _normwise(low, shadow, fin_low & fin_sh)
    local_err = _normwise(low, local, fin_low & fin_loc)
    mag = np.abs(shadow[fin_sh])
    nonzero = mag[mag > 0]
    lim = limits(dtype)
    a_low = np.abs(low)
    return ForwardStats(
        dtype=np.dtype(dtype), numel=int(low.size), error_max=err[0], error_mean=err[1],
        local_error_max=local_err[0], local_error_mean=local_err[1], u=run_u,
        overflow=int(np.count_nonzero(np.isinf(low) & fin_sh)),
        nan=int(np.count_nonzero(np.isnan(low) & ~np.isnan(shadow))),
        new_nonfinite=int(np.count_nonzero(~fin_low & fin_loc)),
        shadow_nonfinite=int(np.count_nonzero(~fin_sh)),
        underflow=int(np.count_nonzero((low == 0) & (shadow != 0) & fin_sh)),
        local_underflow=int(np.count_nonzero((low == 0) & (local != 0) & fin_loc)),
        local_nonzero=int(np.count_nonzero((local != 0) & fin_loc)),
        subnormal=int(np.count_nonzero((a_low > 0) & (a_low < lim.tiny))),
        amax=float(mag.max()) if nonzero.size else None, amin=float(nonzero.min()) if nonzero.size else None,
        input_amax=float(input_amax))


def finite_amax(arrays) -> float:
    """The largest finite magnitude in any of the host arrays (0.0 when there is none)."""
    best = 0.0
    for a in arrays:
        a = np.abs(np.asarray(a, dtype=np.float64))
        a = a[np.isfinite(a)]
        if a.size:
            best = max(best, float(a.max()))
    return best


# ---------------------------------------------------------------- gradients
DEFAULT_SCALE_EXPONENTS = tuple(range(0, 25))  # loss scales 2^0 .. 2^24 for the underflow-vs-scale curve


@dataclass(frozen=True)
class GradientStats:
    """One gradient in a lower dtype, at the loss scale it was computed with and at other scales.

    dtype; scale: the loss scale the backward ran at; numel, nonzero (elements the float32
    reference gives as nonzero); measured at that scale: zero (nonzero in the reference, 0 here),
    subnormal, nonfinite; reference: whether a float32 backward of the shadow was the reference
    (else the low-precision gradient itself, divided by the scale). amax / amin: largest and
    smallest nonzero magnitude of the gradient at scale 1. exponents / zero_at / subnormal_at /
    overflow_at: for each loss scale 2^k, the fraction of the nonzero elements that would be 0,
    subnormal, inf in ``dtype``.
    """
    dtype: np.dtype
    scale: float
    numel: int
    nonzero: int
    zero: int
    subnormal: int
    nonfinite: int
    reference: bool
    amax: float | None
    amin: float | None
    exponents: tuple = field(default=DEFAULT_SCALE_EXPONENTS)
    zero_at: tuple = ()
    subnormal_at: tuple = ()
    overflow_at: tuple = ()

    @property
    def zero_fraction(self) -> float:
        return self.zero / self.nonzero if self.nonzero else 0.0

    @property
    def subnormal_fraction(self) -> float:
        return self.subnormal / self.nonzero if self.nonzero else 0.0

    def at_scale(self, scale: float):
        """(zero, subnormal, overflow) fractions at loss scale ``scale`` (a power of two in the curve)."""
        k = self.exponents.index(int(round(math.log2(scale))))
        return self.zero_at[k], self.subnormal_at[k], self.overflow_at[k]

    @property
    def headroom(self) -> float | None:
        """Doublings of the current scale left before the largest gradient overflows (negative: it does)."""
        if self.amax is None:
            return None
        return limits(self.dtype).max_exponent - math.log2(self.amax * self.scale)

    @property
    def max_safe_exponent(self) -> int | None:
        """The largest k such that at loss scale 2^k this gradient stays finite."""
        if self.amax is None:
            return None
        return math.floor(limits(self.dtype).max_exponent - math.log2(self.amax))


def gradient_stats(actual, dtype, scale, reference=None, exponents=DEFAULT_SCALE_EXPONENTS) -> GradientStats:
    """Statistics of gradient ``actual`` (host array, values as computed in ``dtype`` at loss scale
    ``scale``) against a float32 ``reference`` of the same scaled gradient (None: ``actual`` is its
    own reference, so elements already lost at this scale cannot be told from true zeros)."""
    actual = np.asarray(actual, dtype=np.float32)
    ref = actual if reference is None else np.asarray(reference, dtype=np.float32)
    fin = np.isfinite(ref)
    nonzero = fin & (ref != 0)
    n = int(np.count_nonzero(nonzero))
    lim = limits(dtype)
    a = np.abs(actual)
    true = np.abs(ref[nonzero]).astype(np.float64) / scale  # the gradient at loss scale 1
    zero_at, sub_at, over_at = [], [], []
    for k in exponents:
        with np.errstate(over="ignore"):  # (overflow to inf is what is being counted)
            rounded = np.abs((true * 2.0 ** k).astype(dtype).astype(np.float64))  # rounds to nearest, as casts do
        zero_at.append(float(np.count_nonzero(rounded == 0)) / n if n else 0.0)
        sub_at.append(float(np.count_nonzero((rounded > 0) & (rounded < lim.tiny))) / n if n else 0.0)
        over_at.append(float(np.count_nonzero(np.isinf(rounded))) / n if n else 0.0)
    return GradientStats(
        dtype=np.dtype(dtype), scale=float(scale), numel=int(actual.size), nonzero=n,
        zero=int(np.count_nonzero((actual == 0) & nonzero)),
        subnormal=int(np.count_nonzero((a > 0) & (a < lim.tiny))),
        nonfinite=int(np.count_nonzero(~np.isfinite(actual))), reference=reference is not None,
        amax=float(true.max()) if n else None, amin=float(true.min()) if n else None,
        exponents=tuple(exponents), zero_at=tuple(zero_at), subnormal_at=tuple(sub_at), overflow_at=tuple(over_at))


# ---------------------------------------------------------------- FP8 casts
@dataclass(frozen=True)
class FP8Stats:
    """One FP8 cast (mixprec.amp.fp8.watch.Cast) measured: what its scale did to the tensor's values.

    fp8: the format's name; numel; nonzero: finite nonzero source values; nonfinite: inf/NaN in
    the source. saturated: finite values the cast clipped, |x * scale| beyond the format's max by
    more than half its last step (448 + 16 for E4M3, 57344 + 4096 for E5M2: below that, rounding
    alone gives the max); flushed: finite nonzero values cast to 0; subnormal: FP8 values in the
    format's subnormal range (fewer significant bits). amax / amin: the largest and smallest nonzero
    finite |x| (None when there is none). scale: the per-tensor scale (None for MXFP8). headroom:
    log2(fp8_max / (amax * scale)) in doublings (negative: the largest values saturate); for MXFP8
    the smallest over the blocks. error: max normwise relative error of the dequantized values
    against the source, over the finite ones. MXFP8 only: blocks (of 32), blocks_saturated and
    blocks_flushed (blocks with a saturated / flushed value), block_exponents (the smallest and
    largest log2 of the scales of blocks with a nonzero value). Per-tensor only: mx_flushed, the
    values MXFP8BlockScaling would flush in the same tensor (the OCP rule run on it; None when its
    last dimension is not a multiple of 32).
    """
    fp8: str
    numel: int
    nonzero: int
    nonfinite: int
    saturated: int
    flushed: int
    subnormal: int
    amax: float | None
    amin: float | None
    scale: float | None
    headroom: float | None
    error: float
    blocks: int = 0
    blocks_saturated: int = 0
    blocks_flushed: int = 0
    block_exponents: tuple | None = None
    mx_flushed: int | None = None

    @property
    def saturated_fraction(self) -> float:
        return self.saturated / self.nonzero if self.nonzero else 0.0

    @property
    def flushed_fraction(self) -> float:
        return self.flushed / self.nonzero if self.nonzero else 0.0

    @property
    def dynamic_range(self) -> float | None:
        """Doublings from the smallest to the largest nonzero |x|."""
        return None if self.amax is None else math.log2(self.amax / self.amin)


def fp8_limits(fp8: str):
    """(max, saturation bound, smallest normal, smallest subnormal) of an FP8 format: the bound is max plus half
    the step below it, where a value rounds to max without the clip."""
    f = ml_dtypes.finfo(getattr(ml_dtypes, fp8))
    top = float(f.max)
    step = 2.0 ** math.floor(math.log2(top)) * float(f.eps)
    return top, top + step / 2, float(f.smallest_normal), float(f.smallest_subnormal)


def fp8_format_range(fp8: str) -> float:
    """Doublings from the format's smallest subnormal to its max: what one scale can hold."""
    top, _, _, sub = fp8_limits(fp8)
    return math.log2(top / sub)


def fp8_stats(source, scale, data, fp8, blocked=False, mx_flush=None) -> FP8Stats:
    """Measure one FP8 cast from host arrays: ``source`` (what was cast), ``scale`` (float32 (1,) per tensor, or for
    ``blocked`` MXFP8 the E8M0 bits per block of 32 along source's last dimension), ``data`` (the FP8 values, an
    ml_dtypes float8 array or uint8 bits). ``mx_flush``: a function giving, for a per-tensor cast, the FP8 values
    MXFP8 makes of the source (None: not measured)."""
    x = np.asarray(source).astype(np.float32)
    q = np.asarray(data)
    q = (q.view(getattr(ml_dtypes, fp8)) if q.dtype == np.uint8 else q).astype(np.float32).reshape(x.shape)
    top, bound, tiny, _ = fp8_limits(fp8)
    if blocked:
        bits = np.asarray(scale).astype(np.int64)
        mult = np.where(bits == 0xFF, np.float32(np.nan), np.ldexp(np.float32(1.0), 127 - bits).astype(np.float32))
        m = np.repeat(mult.astype(np.float32), 32, axis=-1).reshape(x.shape)
    else:
        m = np.float32(np.asarray(scale).reshape(-1)[0])
    with np.errstate(all="ignore"):
        y = x * m                                                   # as the cast computes it, in float32
        finite = np.isfinite(x)
        nonzero = finite & (x != 0)
        sat = finite & (np.abs(y) > bound)
        flushed = nonzero & (q == 0)
        deq = q.astype(np.float64) / np.asarray(m, np.float64)
    mag = np.abs(x[nonzero]).astype(np.float64)
    amax, amin = (float(mag.max()), float(mag.min())) if mag.size else (None, None)
    extra = {}
    if blocked:
        shape = x.shape[:-1] + (x.shape[-1] // 32, 32)
        block_amax = np.where(nonzero, np.abs(x), 0).reshape(shape).max(axis=-1, initial=0.0).astype(np.float64)
        used = block_amax > 0
        with np.errstate(all="ignore"):
            room = np.log2(top / (block_amax[used] * np.asarray(mult, np.float64)[used]))
        headroom = float(room.min()) if room.size else None
        exps = bits[used] - 127
        extra = dict(blocks=int(block_amax.size), blocks_saturated=int(sat.reshape(shape).any(-1).sum()),
                     blocks_flushed=int(flushed.reshape(shape).any(-1).sum()),
                     block_exponents=(int(exps.min()), int(exps.max())) if exps.size else None)
    else:
        headroom = math.log2(top / (amax * float(m))) if amax is not None and m > 0 else None
        if mx_flush is not None and x.ndim and x.shape[-1] % 32 == 0 and x.size:
            mq = np.asarray(mx_flush(x)).astype(np.float32).reshape(x.shape)
            extra["mx_flushed"] = int(np.count_nonzero(nonzero & (mq == 0)))
    both = finite & np.isfinite(deq)
    return FP8Stats(fp8=fp8, numel=int(x.size), nonzero=int(np.count_nonzero(nonzero)),
                    nonfinite=int(np.count_nonzero(~finite)), saturated=int(np.count_nonzero(sat)),
                    flushed=int(np.count_nonzero(flushed)),
                    subnormal=int(np.count_nonzero((np.abs(q) > 0) & (np.abs(q) < tiny))),
                    amax=amax, amin=amin, scale=None if blocked else float(m), headroom=headroom,
                    error=_normwise(deq, x.astype(np.float64), both)[0], **extra)


@dataclass(frozen=True)
class AmaxHistory:
    """Delayed scaling's amax history of one tensor, as it stood at the cast (the scale came from it).

    length: amax_history_len; steps: the amaxes recorded (its nonzero entries; an unused step adds
    none); max / most_recent: of those (0 when there are none); amax: this cast's amax; algo, margin: the
    recipe's amax_compute_algo and margin.
    """
    length: int
    steps: int
    max: float
    most_recent: float
    amax: float | None
    algo: str
    margin: int

    @property
    def above_max(self) -> float | None:
        """Doublings by which this amax exceeds every amax in the history (positive: a spike the scale could not
        foresee); None without a history or an amax."""
        if not self.steps or self.amax is None:
            return None
        return math.log2(self.amax / self.max)


def amax_history(row, amax, algo, margin) -> AmaxHistory:
    """AmaxHistory from a host copy of one row of fp8_amax_history (newest last)."""
    row = np.asarray(row, np.float64).reshape(-1)
    recorded = row[row > 0]
    return AmaxHistory(length=int(row.size), steps=int(recorded.size),
                       max=float(recorded.max()) if recorded.size else 0.0,
                       most_recent=float(row[-1]) if recorded.size else 0.0, amax=amax, algo=algo, margin=int(margin))
