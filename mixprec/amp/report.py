"""mp.amp.inspect's report: ops ranked by harm, gradients against the loss scale, and what to do about them.

The thresholds that flag an op or a gradient are the module constants below;
every suggestion is derived from measured numbers and quotes them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import dtypes as _dt
from .._text import DTYPE_LEGEND, markdown_table, plural, short, text_table
from .fp8.recipes import DelayedScaling, MXFP8BlockScaling
from .numerics import AmaxHistory, FP8Stats, ForwardStats, GradientStats, fp8_format_range, fp8_limits, limits

# An op is flagged when ...
IMPRECISE_U = 16           # ... its own error exceeds this many units u of its dtype (a rounded result is <= 1-2 u)
UNDERFLOW_FRACTION = 0.01  # ... it flushes more than this fraction of its nonzero results to zero
HEADROOM_DOUBLINGS = 1.0   # ... its largest value is less than this many doublings below the dtype's max
# A gradient is flagged when at the loss scale it ran at it overflows, or loses more than this fraction
LOST_FRACTION = 0.01
# An FP8 cast is flagged when it saturates any value (per-tensor scales: MXFP8's rule clips the top of a block by
# design, by at most 12.5%, so there it is counted, not flagged), or flushes more than this fraction of its nonzero
# values to 0
FP8_FLUSH_FRACTION = 0.01
# A flushing cast's delayed scale is called too small when more doublings than this are left above its amax
FP8_WASTED_HEADROOM = 1.0

_F16, _BF16 = _dt.float16, _dt.bfloat16


@dataclass
class OpRecord:
    """One op of the inspected code, with what autocast did and what it cost.

    index (call order, from 1), name, device_type; policy: the autocast policy text ("-":
    none applied); why: why it ran in the dtypes it did; input_dtypes / run_dtypes /
    output_dtype; params: the parameters it used (directly or through their autocast cast);
    stats: ForwardStats (None for an op without a floating result, or whose shadow failed:
    see note); gradient: GradientStats of the gradient reaching its output, when that is
    float16/bfloat16 and a backward pass ran inside the block.
    """
    index: int
    name: str
    device_type: str
    policy: str
    why: str
    input_dtypes: tuple
    run_dtypes: tuple
    output_dtype: np.dtype | None
    params: tuple = ()
    stats: ForwardStats | None = None
    gradient: GradientStats | None = None
    note: str | None = None

    @property
    def label(self) -> str:
        return f"#{self.index} {self.name}"

    @property
    def flags(self) -> list:
        """What is wrong with this op (empty when nothing is): see the thresholds above."""
        s = self.stats
        if s is None:
            return []
        flags = []
        if s.new_nonfinite:
            flags.append("makes inf/NaN")
        if s.shadow_nonfinite:
            flags.append("inf/NaN in float32 too")
        low = s.dtype in (_F16, _BF16)
        if s.local_error_in_u > IMPRECISE_U:
            flags.append("imprecise")
        if low and s.local_underflow_fraction > UNDERFLOW_FRACTION:
            flags.append("underflow")
        if low and not s.new_nonfinite and s.headroom is not None and s.headroom < HEADROOM_DOUBLINGS \
                and s.amax > s.input_amax:  # (an op that only passes large values on is not to blame)
            flags.append("near max")
        return flags

    def harm(self) -> tuple:
        """The sort key of the ranking: inf/NaN made here, then inf/NaN at all, then flagged, then the
        op's own error (in units u), then the error against the float32 path."""
        s = self.stats
        if s is None:
            return (0, 0, 0, -1.0, -1.0)
        return (s.new_nonfinite > 0, s.nonfinite > 0, bool(self.flags), s.local_error_in_u, s.error_max)


@dataclass
class ParamGradient:
    """The gradient of one parameter in float16/bfloat16 (at its autocast cast, or the parameter itself)."""
    name: str
    shape: tuple
    pass_index: int
    stats: GradientStats

    @property
    def label(self) -> str:
        return self.name

    @property
    def flags(self) -> list:
        return _gradient_flags(self.stats)


_FP8_NAMES = {"float8_e4m3fn": "E4M3", "float8_e5m2": "E5M2"}


def recipe_text(recipe) -> str:
    """A recipe in a table cell: its kind and the parameters that set its scales."""
    if isinstance(recipe, DelayedScaling):
        return f"delayed ({recipe.amax_compute_algo}, len {recipe.amax_history_len}, margin {recipe.margin})"
    if isinstance(recipe, MXFP8BlockScaling):
        return "mxfp8"
    return "current" + (" (pow2)" if recipe.use_power_2_scales else "")


@dataclass
class FP8Record:
    """One FP8 cast of the inspected block (mixprec.amp.fp8.watch), in cast order.

    index (from 1); module: its name in the inspected model; role: "input", "weight" or "grad_output";
    recipe: the recipe it ran under; stats: numerics.FP8Stats (None when measuring failed: see note);
    history: numerics.AmaxHistory for delayed scaling; columnwise: MXFP8's copy for a backward GEMM;
    backward: cast during a backward pass; op: the label of the op record it was cast in ("" in a
    backward pass).
    """
    index: int
    module: str
    role: str
    recipe: object
    stats: FP8Stats | None
    history: AmaxHistory | None = None
    columnwise: bool = False
    backward: bool = False
    op: str = ""
    note: str | None = None

    @property
    def label(self) -> str:
        return f"{self.module} {self.role}" + (" (columnwise)" if self.columnwise else "")

    @property
    def format(self) -> str:
        return _FP8_NAMES.get(self.stats.fp8, self.stats.fp8) if self.stats else "-"

    @property
    def flags(self) -> list:
        s, h, flags = self.stats, self.history, []
        if s is None:
            return flags
        if s.saturated and not s.blocks:
            flags.append("saturates")
        if s.flushed_fraction > FP8_FLUSH_FRACTION:
            flags.append("flushes")
        if s.saturated and h is not None and h.above_max is not None and h.above_max > 0:
            flags.append("stale scale")
        return flags


def _fp8_suggestions(r: FP8Record) -> list:
    """What the numbers of one FP8 cast support doing; each line quotes them."""
    s, h, recipe, flags, out = r.stats, r.history, r.recipe, r.flags, []
    if not flags:
        return out
    top, fmt = fp8_limits(s.fp8)[0], r.format
    where = f"FP8 #{r.index} {r.label} ({fmt}, {recipe_text(recipe)})"
    sat = (f"{s.saturated} of its {s.nonzero} nonzero values ({_pct(s.saturated_fraction)}) saturate at {fmt}'s "
           f"max {top:g}")
    flush = f"{s.flushed} of its {s.nonzero} nonzero values ({_pct(s.flushed_fraction)}) flush to 0"
    span = (f"its values span {s.dynamic_range:.1f} doublings ({s.amin:.2g}..{s.amax:.3g}), {fmt} "
            f"{fp8_format_range(s.fp8):.1f} from its smallest subnormal to its max")
    off = "keep this module out of FP8 (an fp8_autocast(enabled=False) region around its call)"
    delayed = isinstance(recipe, DelayedScaling) and h is not None
    if delayed and h.steps == 0:
        what = "; ".join(x for x in (sat if s.saturated else "", flush if "flushes" in flags else "") if x)
        return [f"{where}: {what} at its first cast: its amax history is empty, so the scale is the initial "
                f"{s.scale:g} for an amax of {s.amax:.3g}. The region's exit sets the scale from this amax: inspect "
                "a step after a warm-up step"]
    if "saturates" in flags:
        need = recipe.margin + math.ceil(-s.headroom) if delayed and s.headroom < 0 else None
        if delayed and "stale scale" in flags:
            out.append(f"{where}: {sat}: its amax {s.amax:.3g} is 2^{h.above_max:.1f} above the largest of the "
                       f"{h.steps} amaxes in its history ({h.max:.3g}), so the delayed scale {s.scale:.4g} was stale "
                       f"(headroom {s.headroom:.1f} doublings). CurrentScaling() takes each amax just before its "
                       f"cast; keeping delayed scaling, margin={need} leaves room for a spike this large")
        elif delayed:
            fixes = [f"margin={need}"] if need is not None else []
            if h.algo == "most_recent" and s.amax is not None and s.amax <= h.max:
                fixes.insert(0, f"amax_compute_algo=\"max\" (its history's max {h.max:.3g} covers this amax, the "
                                f"most recent {h.most_recent:.3g} does not)")
            out.append(f"{where}: {sat} (headroom {s.headroom:.1f} doublings, scale {s.scale:.4g} for an amax of "
                       f"{s.amax:.3g})" + (f". Use {' or '.join(fixes)}" if fixes else ""))
        else:
            out.append(f"{where}: {sat} though its scale comes from its own amax (headroom {s.headroom:.2f}); "
                       f"{off}")
    if "flushes" in flags:
        if isinstance(recipe, MXFP8BlockScaling):
            out.append(f"{where}: {flush}, in {s.blocks_flushed} of its {s.blocks} blocks: inside a block of 32 the "
                       f"values span more than {fmt}'s {fp8_format_range(s.fp8):.1f} doublings. The remedy is to "
                       f"{off}")
        elif delayed and s.headroom is not None and s.headroom > FP8_WASTED_HEADROOM:
            k = math.floor(s.headroom)
            fixes = [f"margin={recipe.margin - k}"]
            if h.algo == "max" and s.amax is not None and h.max >= 2 * s.amax:
                fixes.append(f"amax_compute_algo=\"most_recent\" (its history's max {h.max:.3g} is "
                             f"2^{math.log2(h.max / s.amax):.1f} above this amax)")
            out.append(f"{where}: {flush} while its scale {s.scale:.4g} leaves {s.headroom:.1f} doublings unused above "
                       f"its amax {s.amax:.3g}: {' or '.join(fixes)} would scale these values 2^{k} higher")
        elif s.mx_flushed is not None and s.mx_flushed < s.flushed:
            out.append(f"{where}: {flush}: {span}, more than one scale can hold. MXFP8BlockScaling() (a scale per 32 "
                       f"values) flushes {s.mx_flushed} of them (run on this tensor)")
        else:
            out.append(f"{where}: {flush} with its scale already at its amax (headroom {s.headroom:.1f}): {span}; "
                       f"{off}")
    return out


def _gradient_flags(g: GradientStats) -> list:
    flags = []
    if g.nonfinite or (g.headroom is not None and g.headroom < 0):
        flags.append("overflows at this scale")
    if g.zero_fraction > LOST_FRACTION:
        flags.append("underflows at this scale")
    return flags


def _pow2(x: float) -> str:
    k = math.log2(x) if x > 0 else float("nan")
    return f"2^{int(k)}" if k == int(k) else f"{x:g}"


def _pct(x: float) -> str:
    return "0%" if x == 0 else f"{100 * x:.2g}%" if x < 0.1 else f"{100 * x:.1f}%"


def _override(name: str) -> str:
    return f"mp.amp.override({{\"{name}\": \"fp32\"}})"


class InspectReport:
    """The result of ``mp.amp.inspect``: ``ops`` (OpRecords ranked by harm), ``gradients`` (ParamGradients),
    ``scales`` (the loss scale of each backward pass), ``flagged`` and ``suggestions``; print it,
    ``to_markdown()`` it, or ``plot(path)`` it."""

    def __init__(self, records, param_grads, scales, exponents, fp8=()):
        self.calls = list(records)  # in call order
        self.fp8 = list(fp8)        # FP8Records, in cast order
        self.ops = sorted(self.calls, key=lambda r: r.harm(), reverse=True)
        self.gradients = list(param_grads)
        self.scales = list(scales)
        self.exponents = tuple(exponents)

    # ---- what is wrong ----
    @property
    def op_gradients(self) -> list:
        """The ops whose output's gradient was measured (float16/bfloat16), in call order."""
        return [r for r in self.calls if r.gradient is not None]

    @property
    def flagged(self) -> list:
        """(subject label, flags) for every op and gradient with something wrong, ops most harmful first."""
        out = [(r.label, r.flags) for r in self.ops if r.flags]
        out += [(g.label, g.flags) for g in self.gradients if g.flags]
        out += [(f"{r.label} (output gradient)", _gradient_flags(r.gradient)) for r in self.op_gradients
                if _gradient_flags(r.gradient)]
        out += [(f"FP8 #{r.index} {r.label}", r.flags) for r in self.fp8 if r.flags]
        return out

    @property
    def suggestions(self) -> list:
        """What the numbers support doing, most harmful first (one line each)."""
        lines, seen = [], set()
        for r in self.ops:
            for text in self._op_suggestions(r):
                if (r.name, text.split(":")[0]) not in seen:
                    seen.add((r.name, text.split(":")[0]))
                    lines.append(text)
        lines += self._gradient_suggestions()
        for r in self.fp8:
            lines += _fp8_suggestions(r)
        return lines

    def _op_suggestions(self, r: OpRecord) -> list:
        s, flags, out = r.stats, r.flags, []
        if s is None:
            return out
        where = f"{r.label}" + (f" ({', '.join(r.params)})" if r.params else "")
        dtype = s.dtype.name
        if "makes inf/NaN" in flags:
            if s.overflow and s.dtype == _F16 and s.amax is not None and s.amax < limits(_BF16).max:
                out.append(f"{where}: {s.overflow} of its values overflow float16 (largest |x| {s.amax:.3g} > "
                           f"65504). Run it in float32 with {_override(r.name)}, or autocast with "
                           f"dtype=mp.bfloat16 (float32's range, max 3.4e38)")
            else:
                out.append(f"{where}: makes {s.new_nonfinite} inf/NaN values in {dtype} where float32 stays "
                           f"finite. Run it in float32 with {_override(r.name)}")
        if "imprecise" in flags:
            text = (f"{where}: its own error is {s.local_error_in_u:.0f}u of {dtype} (max relative error "
                    f"{s.local_error_max:.2g}). Run it in float32 with {_override(r.name)}")
            f16 = limits(_F16)
            if s.dtype == _BF16 and s.amax is not None and s.amax < f16.max / 4 \
                    and (s.amin is None or s.amin >= f16.tiny):
                text += (", or autocast with dtype=mp.float16 (3 more significant bits; these values, "
                         f"{s.amin:.2g}..{s.amax:.3g}, fit its range)")
            out.append(text)
        if "underflow" in flags:
            fix = (f"Use autocast dtype=mp.bfloat16 (down to 9e-41) or {_override(r.name)}" if s.dtype == _F16 else
                   f"Only float32 keeps them ({_override(r.name)}); bfloat16 already has float32's exponent range, "
                   "so these are values below 1.2e-38, which may not matter")
            out.append(f"{where}: {_pct(s.local_underflow_fraction)} of its nonzero results flush to 0 in "
                       f"{dtype} (smallest |x| {s.amin:.2g}; {dtype}'s smallest is {limits(s.dtype).subnormal:.2g})."
                       f" {fix}")
        if "near max" in flags:
            where_max = (f"is {s.headroom:.1f} doublings below {dtype}'s max {limits(s.dtype).max:.5g}: a larger "
                         "input would overflow" if s.headroom >= 0 else
                         f"is beyond {dtype}'s max {limits(s.dtype).max:.5g} on the float32 path")
            fix = (f"Consider dtype=mp.bfloat16 or {_override(r.name)}" if s.dtype == _F16 else
                   "float32's range ends there too: rescale (input normalisation, initialisation)")
            out.append(f"{where}: its largest |x| {s.amax:.3g} {where_max}. {fix}")
        if "inf/NaN in float32 too" in flags:
            out.append(f"{where}: its float32 shadow has {s.shadow_nonfinite} inf/NaN values too: the model "
                       "overflows without AMP (check input scaling and initialisation)")
        return out

    def _gradient_suggestions(self) -> list:
        if not self.scales:
            return []
        makers = [r.label for r in self.ops if r.stats is not None and r.stats.new_nonfinite]
        if makers:  # a backward from inf/NaN says nothing about the loss scale
            return [f"the backward pass started from the inf/NaN values the forward made ({', '.join(makers[:3])}): "
                    "fix those first (the measured gradients are inf/NaN because of them; the 'at 1' columns "
                    "come from the float32 path)"]
        last = len(self.scales)
        grads = [(g.label, g.stats) for g in self.gradients if g.pass_index == last]
        grads += [(f"{r.label} output", r.gradient) for r in self.op_gradients]
        f16 = [(n, g) for n, g in grads if g.dtype == _F16 and g.amax is not None]
        if not f16:
            return []
        scale = self.scales[-1]
        safe = min(g.max_safe_exponent for _, g in f16) - 1  # one doubling of margin, as GradScaler grows
        lines = []
        over = [n for n, g in f16 if "overflows at this scale" in _gradient_flags(g)]
        if over:
            lines.append(f"gradients overflow float16 at loss scale {_pow2(scale)} ({', '.join(over[:3])}"
                         f"{', ...' if len(over) > 3 else ''}): GradScaler skips such steps and halves the scale; "
                         f"start at mp.GradScaler(init_scale=2.**{safe}), the largest scale at which every "
                         "gradient here stays finite with one doubling to spare")
        lost = [(n, g) for n, g in f16 if "underflows at this scale" in _gradient_flags(g)]
        if lost:
            names = ", ".join(n for n, _ in lost[:3]) + (", ..." if len(lost) > 3 else "")
            now = max(g.zero_fraction for _, g in lost)
            exps = [k for k in self.exponents if k <= safe]
            # the worst predicted loss over the underflowing gradients at each safe scale
            worst = {k: max(g.at_scale(2.0 ** k)[0] for _, g in lost) for k in exps}
            good = [k for k in exps if worst[k] <= LOST_FRACTION]
            if good:
                k = good[0]
                lines.append(f"gradients underflow float16 at loss scale {_pow2(scale)} (up to {_pct(now)} of "
                             f"{names} lost): at 2^{k} at most {_pct(worst[k])} would be (predicted), and every "
                             f"gradient stays finite up to 2^{safe}; use mp.GradScaler(init_scale=2.**{k})")
            else:
                k = exps[-1] if exps else self.exponents[0]
                name = max(lost, key=lambda p: p[1].at_scale(2.0 ** k)[0])[0]
                lines.append(f"gradients span more than float16's range: even at loss scale 2^{k}, the largest "
                             f"without overflow, {_pct(worst.get(k, 1.0))} of {name}'s gradient underflows. Use "
                             "autocast dtype=mp.bfloat16 (float32's exponent range: no loss scaling needed)")
        return lines

    # ---- rendering ----
    def _op_rows(self, markdown=False):
        rows = []
        for rank, r in enumerate(self.ops, 1):
            s = r.stats
            if s is None:
                rows.append([str(rank), r.label, ", ".join(r.params), r.policy, ", ".join(map(short, r.run_dtypes)),
                             short(r.output_dtype), "-", "-", "-", "-", "-", r.note or "", r.why])
                continue
            lim = limits(s.dtype)
            nonfinite = (f"{s.nonfinite} ({s.new_nonfinite} new)" if s.new_nonfinite else
                         f"{s.nonfinite} (inherited)") if s.nonfinite else "0"
            rng = "-" if s.amax is None else (f"2^{math.log2(s.amin):.1f}..2^{math.log2(s.amax):.1f} "
                                              f"(max 2^{lim.max_exponent:.0f})")
            rows.append([str(rank), r.label, ", ".join(r.params), r.policy, ", ".join(map(short, r.run_dtypes)),
                         short(s.dtype), f"{s.local_error_in_u:.1f}", f"{s.error_max:.2g}", nonfinite,
                         _pct(s.underflow / s.numel) if s.underflow else "0", rng, ", ".join(r.flags), r.why])
        return rows

    def _gradient_rows(self):
        rows = []
        items = [(g.label, g.pass_index, g.stats) for g in self.gradients]
        items += [(f"{r.label} output", None, r.gradient) for r in self.op_gradients]
        for label, _, g in items:
            at1 = g.at_scale(1.0) if 0 in g.exponents else (float("nan"),) * 3
            rows.append([label, short(g.dtype), _pow2(g.scale), _pct(at1[0]), _pct(at1[1]), _pct(g.zero_fraction),
                         _pct(g.subnormal_fraction), "-" if g.headroom is None else f"{g.headroom:.1f}",
                         "-" if g.max_safe_exponent is None else f"2^{g.max_safe_exponent}",
                         "" if g.reference else "no float32 reference", ", ".join(_gradient_flags(g))])
        return rows

    def _fp8_rows(self):
        rows = []
        for r in self.fp8:
            s, h = r.stats, r.history
            if s is None:
                rows.append([str(r.index), r.label, "-", recipe_text(r.recipe)] + ["-"] * 8 + [r.note or ""])
                continue
            if s.block_exponents is not None:
                scale = f"2^{s.block_exponents[0]}..2^{s.block_exponents[1]} per block"
            else:
                scale = "-" if s.scale is None else f"{s.scale:.4g}"
            if h is not None:
                past = (f"max {h.max:.3g}, last {h.most_recent:.3g}, {h.steps}/{h.length} steps"
                        + (f"; amax {h.above_max:+.1f} vs max" if h.above_max is not None else "")
                        if h.steps else f"empty (0/{h.length} steps)")
            elif s.blocks:
                past = f"{s.blocks_saturated} / {s.blocks_flushed} of {s.blocks} blocks"
            else:
                past = "-"
            count = [f"{n} ({_pct(n / s.nonzero)})" if n else "0" for n in (s.saturated, s.flushed, s.subnormal)]
            headroom = "-" if s.headroom is None else f"{s.headroom:.1f}".replace("-0.0", "0.0")  # (not "-0.0")
            rows.append([str(r.index), r.label, r.format, recipe_text(r.recipe), *count, headroom,
                         "-" if s.amax is None else f"{s.amax:.3g}", scale, past, f"{s.error:.2g}",
                         ", ".join(r.flags)])
        return rows

    @staticmethod
    def _plot_fp8(ax, casts):
        """Per FP8 cast: bars of the % saturated and flushed, and its headroom (dots, right axis)."""
        k = np.arange(len(casts))
        ax.bar(k - 0.2, [100 * r.stats.saturated_fraction for r in casts], 0.4, color="tab:red",
               label="% saturated (clipped at the max)")
        ax.bar(k + 0.2, [100 * r.stats.flushed_fraction for r in casts], 0.4, color="tab:blue",
               label="% flushed to 0")
        ax.set_ylabel("% of nonzero values")
        ax.set_ylim(0, 105)
        ax.legend(fontsize=7, loc="upper left")
        right = ax.twinx()
        right.plot(k, [np.nan if r.stats.headroom is None else r.stats.headroom for r in casts], "o",
                   color="black", ms=4, label="headroom (doublings)")
        right.axhline(0, color="black", lw=0.8, ls=":")
        right.set_ylabel("headroom: log2(fp8_max / (amax * scale))")
        right.legend(fontsize=7, loc="upper right")
        ax.set_xticks(k)
        ax.set_xticklabels([f"#{r.index} {r.label} ({r.format})" for r in casts], rotation=60, ha="right",
                           fontsize=8)
        ax.set_xlim(-0.6, len(casts) - 0.4)
        ax.set_title("FP8 casts: values saturated and flushed, and the scale's headroom (below the dotted line: "
                     "saturating)", fontsize=9)

    _FP8_HEAD = ("#", "tensor", "format", "recipe", "saturated", "flushed to 0", "subnormal", "headroom",
                 "amax", "scale", "amax history / blocks sat., flushed", "error", "flags")
    _FP8_TITLE = ("FP8 casts (saturated: clipped at the format's max; flushed: nonzero values cast to 0; headroom: "
                  "log2(fp8_max / (amax * scale)) doublings, negative saturates, MXFP8 the smallest over its blocks; "
                  "amax history: delayed scaling's, amax vs its max in doublings; error: max relative error of the "
                  "dequantized values):")

    _OP_HEAD = ("rank", "op", "params", "autocast", "ran in", "out", "own error (u)", "error vs f32",
                "inf/NaN", "underflow", "|x| range", "flags", "why this dtype")
    _GRAD_HEAD = ("gradient", "dtype", "scale", "lost at 1", "subnormal at 1", "lost at scale", "subnormal at scale",
                  "headroom (doublings)", "overflows above", "note", "flags")

    def _summary(self) -> str:
        devices = sorted({r.device_type for r in self.calls})
        passes = ", ".join(_pow2(s) for s in self.scales)
        fp8 = f"{plural(len(self.fp8), 'FP8 cast')}; " if self.fp8 else ""
        return (f"{plural(len(self.calls), 'op')} inspected on {', '.join(devices) or '-'}; {fp8}"
                f"{plural(len(self.flagged), 'problem')} flagged; "
                + (f"{plural(len(self.scales), 'backward pass', )} at loss scale {passes}" if self.scales
                   else "no backward pass inspected"))

    def table(self, row_limit: int = 30) -> str:
        """The report as text: the ops (most harmful first, ``row_limit`` of them; -1 for all), the
        float16/bfloat16 gradients, and the suggestions."""
        ops = self._op_rows()
        shown = ops if row_limit == -1 else ops[:row_limit]
        out = ["AMP numerics: " + self._summary(), "",
               "Ops, most harmful first (own error: this op's error in units u of its dtype, 1-2 when rounded "
               "correctly; error vs f32: max relative error against the float32 path):",
               text_table(self._OP_HEAD, shown, right={0, 6, 7})]
        if len(shown) < len(ops):
            out.append(f"... {len(ops) - len(shown)} more ops (table(row_limit=-1) shows all)")
        grads = self._gradient_rows()
        if grads:
            out += ["", "Gradients in float16/bfloat16 (fractions of the nonzero elements; 'at 1': without loss "
                    "scaling):", text_table(self._GRAD_HEAD, grads)]
        if self.fp8:
            out += ["", self._FP8_TITLE, text_table(self._FP8_HEAD, self._fp8_rows(), right={0, 7})]
        out += ["", "Suggestions:"] + [f"- {s}" for s in self.suggestions or ["none: nothing flagged"]]
        out.append(f"({DTYPE_LEGEND})")
        return "\n".join(out)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return f"<mp.amp.inspect report: {self._summary()}>"

    def to_markdown(self, row_limit: int = 30) -> str:
        """The same report as GitHub markdown."""
        ops = self._op_rows()
        shown = ops if row_limit == -1 else ops[:row_limit]
        out = [f"**AMP numerics**: {self._summary()}", "", "### Ops, most harmful first", "",
               markdown_table(self._OP_HEAD, shown, right={0, 6, 7})]
        if len(shown) < len(ops):
            out.append(f"\n… {len(ops) - len(shown)} more ops")
        grads = self._gradient_rows()
        if grads:
            out += ["", "### Gradients in float16/bfloat16", "", markdown_table(self._GRAD_HEAD, grads)]
        if self.fp8:
            out += ["", "### FP8 casts", "", self._FP8_TITLE, "", markdown_table(self._FP8_HEAD, self._fp8_rows(),
                                                                                 right={0, 7})]
        out += ["", "### Suggestions", ""] + [f"- {s}" for s in self.suggestions or ["none: nothing flagged"]]
        return "\n".join(out) + "\n"

    def plot(self, path=None, max_ops: int = 40, max_gradients: int = 8):
        """A figure: per-op error (own and against the float32 path, in units u) and range bars against
        the dtype limits, gradient underflow against the loss scale, and the FP8 casts (saturated and flushed
        per cast, and the scale's headroom). Written to ``path`` when given; the matplotlib Figure is returned."""
        import matplotlib
        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
        ops = [r for r in self.calls if r.stats is not None][:max_ops]
        grads = [(g.label, g.stats) for g in self.gradients] + [(f"{r.label} out", r.gradient)
                                                                 for r in self.op_gradients]
        casts = [r for r in self.fp8 if r.stats is not None][:max_ops]
        panels = 2 + bool(grads) + bool(casts)
        fig, axes = plt.subplots(panels, 1, figsize=(max(8, 0.35 * len(ops) + 3), 3.6 * panels))
        x = np.arange(len(ops))
        labels = [r.label for r in ops]
        floor = 2.0 ** -30  # the bottom of the log axis: an error of exactly 0 is marked there, not drawn as a bar
        ax = axes[0]
        colors = ["tab:red" if r.flags else "tab:blue" for r in ops]
        own = [r.stats.local_error_max for r in ops]
        path_error = [r.stats.error_max for r in ops]
        ax.bar(x - 0.2, [e if e > 0 else np.nan for e in own], 0.4, color=colors,
               label="own error (this op in float32 on its inputs)")
        ax.bar(x + 0.2, [e if e > 0 else np.nan for e in path_error], 0.4, color="tab:gray", alpha=0.6,
               label="error against the float32 path")
        finite = [not r.stats.nonfinite for r in ops]  # an op that made inf/NaN has no error to draw
        exact = ([k - 0.2 for k, e in enumerate(own) if e == 0 and finite[k]]
                 + [k + 0.2 for k, e in enumerate(path_error) if e == 0 and finite[k]])
        if exact:
            ax.scatter(exact, [floor * 2] * len(exact), marker="o", facecolors="none", edgecolors="tab:gray", s=18,
                       label="exactly 0 (the same bits as float32)")
        for k, r in enumerate(ops):
            if r.stats.nonfinite:
                ax.annotate("inf/NaN", (k, floor * 4), ha="center", va="bottom", color="tab:red", fontsize=8)
        for d, style in ((_F16, "-"), (_BF16, "--")):
            ax.axhline(limits(d).u, color="black", ls=style, lw=0.8, alpha=0.6, label=f"u of {d.name}")
            ax.axhline(IMPRECISE_U * limits(d).u, color="tab:red", ls=style, lw=0.8, alpha=0.6,
                       label=f"flag threshold {IMPRECISE_U}u of {d.name}")
        ax.set_yscale("log")
        ax.set_ylim(floor, 1e4)  # headroom above the bars for the legend
        ax.set_ylabel("max relative error")
        ax.set_title("per-op error, normwise (red bars: flagged ops)", fontsize=9)
        ax.legend(fontsize=7, ncol=2)
        ax = axes[1]
        spans = []
        for k, r in enumerate(ops):
            st = r.stats
            if st.amax is not None:
                lo, hi = math.log2(st.amin), math.log2(st.amax)
                spans += [lo, hi]
                ax.plot([k, k], [lo, hi], lw=6, marker="_", ms=12, color="tab:red" if r.flags else "tab:green")
        f16 = limits(_F16)
        shown = [math.log2(f16.subnormal), math.log2(f16.max)] + spans
        bottom, top = min(shown) - 4, max(shown) + 4
        for d, style in ((_F16, "-"), (_BF16, "--")):
            lim = limits(d)
            for value, what in ((lim.max, "max"), (lim.tiny, "smallest normal"), (lim.subnormal, "smallest")):
                if bottom <= math.log2(value) <= top:
                    ax.axhline(math.log2(value), color="black", ls=style, lw=0.8, alpha=0.6)
                    ax.annotate(f"{d.name} {what}", (len(ops) - 0.5, math.log2(value)), fontsize=7,
                                va="bottom", ha="right")
        ax.set_ylim(bottom, top)
        ax.set_ylabel("log2 |x| (float32 shadow)")
        ax.set_title("range of the values each op produces (smallest nonzero to largest)", fontsize=9)
        for a in axes[:2]:
            a.set_xticks(x)
            a.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
            a.set_xlim(-0.6, len(ops) - 0.4)
        if grads:
            ax = axes[2]
            exps = grads[0][1].exponents
            for k, (label, g) in enumerate(grads[:max_gradients]):
                colour = f"C{k % 10}"
                ax.plot(g.exponents, 100 * np.array(g.zero_at), marker=".", color=colour,
                        label=f"{label} ({short(g.dtype)})")
                ax.plot(g.exponents, 100 * (np.array(g.zero_at) + np.array(g.subnormal_at)), ls="--", lw=0.8,
                        color=colour)
            for scale in sorted(set(self.scales)):
                ax.axvline(math.log2(scale), color="black", ls=":", lw=1)
            safe = [g.max_safe_exponent for _, g in grads if g.max_safe_exponent is not None]
            if safe and min(safe) < exps[-1]:
                ax.axvspan(min(safe) + 0.5, exps[-1] + 0.5, color="tab:red", alpha=0.1,
                           label="a gradient overflows")
            if safe and min(safe) < exps[0]:
                ax.text(0.5, 0.5, "a gradient overflows at every scale shown: the float32 path's gradients are\n"
                        "beyond float16's range already; fix the forward first (see the suggestions)",
                        transform=ax.transAxes, ha="center", va="center", fontsize=9, color="tab:red")
            ax.set_xlim(exps[0] - 0.5, exps[-1] + 0.5)
            ax.set_ylim(-3, 103)
            ax.set_xlabel("log2 of the loss scale (dotted: the scale the backward ran at)")
            ax.set_ylabel("% of nonzero gradient")
            ax.set_title("gradient underflow against the loss scale (the float32 reference rounded to the gradient's "
                         "dtype)\nsolid: lost (flushed to 0); dashed: lost or subnormal", fontsize=9)
            ax.legend(fontsize=7, ncol=2)
        if casts:
            self._plot_fp8(axes[-1], casts)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig
