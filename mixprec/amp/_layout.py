"""What the loss-scaling kernels read and write, named once.

Everything that crosses between the host and the kernels is defined here and only
here. The CUDA sources get the same names from a header generated from this module
(``#include "amp_layout.h"``, spliced in by ``mixprec.amp._kernels.load_source``),
so the NumPy reference, the kernel launcher, the GradScaler and the kernels cannot
drift apart:

* ``ScaleRule``: the update rule. torch's three numbers first (growth_factor,
  backoff_factor, growth_interval), then mixprec's opt-in extras (hysteresis,
  min_scale, max_scale). It checks itself when built, at a public entry
  (GradScaler, mp.amp.functional.update_scale_); everything below trusts it.
* ``UpdateScaleArgs`` -> ``struct UpdateArgs``: what one scale update reads and
  writes. The reference takes the dataclass; the kernel takes the same fields packed
  into one device block (``pack_update_args``), so its launch has one argument and a
  CUDA graph that captured it replays it unchanged.
* ``Stat``: the float64 statistics array the update keeps on the device (``read_statistics`` decodes it).
* The chunk table of multi-tensor launches (``chunk_table``): one int64 device array
  that tells each block which tensor and which chunk of it to process, for any
  number of pointer lists (unscale: source and destination; a fused optimizer:
  parameter, gradient, moments, step count, low-precision weight copy). ``LISTS``
  names each kernel's lists in table order.
* ``AdamRule``/``SGDRule`` -> ``struct AdamArgs``/``struct SGDArgs``: one fused
  optimizer step's hyper-parameters, with the device pointers of the loss scale and
  found_inf in front (``pack_optimizer_args``). Like UpdateArgs, one device block,
  so a captured launch replays it unchanged.
* ``TABLE_WORDS``: how many int64 words of such a block one launch of
  kernels/table_words.cu writes, carried as its parameters (no copy to the device).
"""
from __future__ import annotations

import enum
import math
import numbers
from dataclasses import astuple, dataclass, fields

import numpy as np

__all__ = ["ScaleRule", "UpdateScaleArgs", "Stat", "ChunkHeader", "LISTS", "chunk_table", "pack_update_args",
           "AdamRule", "SGDRule", "pack_optimizer_args", "layout_header", "check_scale", "check_count",
           "check_tracker"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)


# ---- the only validators of the scaler's numbers (callers prefix their own context) ----
def check_scale(x, name) -> float:
    """A loss scale or a bound of one: a finite number > 0 that float32 can hold."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or not 0 < x <= _FLOAT32_MAX:
        raise ValueError(f"{name} must be a finite number > 0 that fits float32, got {x!r}")
    return float(x)


def check_count(x, name) -> int:
    """growth_interval, hysteresis: an integer >= 1."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {x!r}")
    return int(x)


def check_tracker(x, name) -> int:
    """A step counter stored in int32 on the device."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 0 <= x < 2 ** 31:
        raise ValueError(f"{name} must be an integer >= 0 (it is stored as int32), got {x!r}")
    return int(x)


def _check_factor(x, name) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"the {name.replace('_', ' ')} ({name}) must be a finite number > 0, got {x!r}")
    return float(x)


@dataclass(frozen=True)
class ScaleRule:
    """How update() moves the scale. torch's rule: back off by backoff_factor after an
    overflow, grow by growth_factor after growth_interval clean steps. The extras are off
    by default: hysteresis=H backs off only on the H-th overflow in a row; min_scale and
    max_scale (None: unbounded) bound a back-off and a growth.

    Checked when built; a scaler adds its own policy on the factors (torch's GradScaler
    wants growth_factor > 1 > backoff_factor, a static scaler wants both exactly 1).
    """
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    hysteresis: int = 1
    min_scale: float | None = None
    max_scale: float | None = None

    def __post_init__(self):
        set_ = object.__setattr__  # frozen: store the normalised values once, here
        set_(self, "growth_factor", _check_factor(self.growth_factor, "growth_factor"))
        set_(self, "backoff_factor", _check_factor(self.backoff_factor, "backoff_factor"))
        set_(self, "growth_interval", check_count(self.growth_interval, "growth_interval"))
        set_(self, "hysteresis", check_count(self.hysteresis, "hysteresis"))
        for name in ("min_scale", "max_scale"):
            value = getattr(self, name)
            set_(self, name, None if value is None else check_scale(value, name))
        if self.lowest > self.highest:
            raise ValueError(f"min_scale ({self.lowest}) must not exceed max_scale ({self.highest})")

    @property
    def lowest(self) -> float:
        return 0.0 if self.min_scale is None else self.min_scale

    @property
    def highest(self) -> float:
        return math.inf if self.max_scale is None else self.max_scale


@dataclass
class UpdateScaleArgs:
    """One scale update's arrays and rule (NumPy for the reference, CuPy for the kernel).

    scale (float32, 1), growth_tracker (int32, 1) and found_inf (float32, n: any non-zero
    entry is an overflow) are torch's; overflow_tracker (int32, 1) counts overflows in a
    row for hysteresis; floor_hit (float32, 1) is set when min_scale stopped a back-off;
    inv_scale (float32, 1) receives float32(1 / float64(new scale)); stats (float64, see
    Stat); clear_found_inf zeroes found_inf after reading it. None: not kept.
    """
    scale: object
    growth_tracker: object
    found_inf: object
    rule: ScaleRule
    overflow_tracker: object = None
    floor_hit: object = None
    inv_scale: object = None
    stats: object = None
    clear_found_inf: bool = False


# struct UpdateArgs, member by member. Every member is 8 bytes wide, so C and NumPy lay it out alike, without padding.
_POINTER, _INT, _DOUBLE = np.uint64, np.int64, np.float64
UPDATE_ARGS_FIELDS = (
    # torch's rule
    ("scale", "float*", _POINTER), ("growth_tracker", "int*", _POINTER), ("found_inf", "float*", _POINTER),
    ("n_found_inf", "long long", _INT), ("growth_factor", "double", _DOUBLE), ("backoff_factor", "double", _DOUBLE),
    ("growth_interval", "long long", _INT),
    # mixprec's extras (defaults: hysteresis 1, bounds 0 and inf)
    ("hysteresis", "long long", _INT), ("overflow_tracker", "int*", _POINTER), ("min_scale", "double", _DOUBLE),
    ("max_scale", "double", _DOUBLE), ("floor_hit", "float*", _POINTER),
    # bookkeeping
    ("inv_scale", "float*", _POINTER), ("stats", "double*", _POINTER), ("history", "long long", _INT),
    ("clear_found_inf", "long long", _INT),
)
UPDATE_ARGS_DTYPE = np.dtype([(name, kind) for name, _, kind in UPDATE_ARGS_FIELDS])
assert UPDATE_ARGS_DTYPE.itemsize == 8 * len(UPDATE_ARGS_FIELDS)


class Stat(enum.IntEnum):
    """Positions in the float64 statistics array; a ring of (update index, new scale) pairs follows."""
    STEPS = 0                    # updates that read found_inf
    SKIPPED_STEPS = 1            # ... of which saw an overflow
    LAST_OVERFLOW_PLUS_ONE = 2   # 1 + index of the last such update (0: none yet)
    FLOOR_HITS = 3               # back-offs stopped by min_scale
    SCALE_CHANGES = 4            # changes recorded in the ring so far
    RING = 5                     # first pair of the ring


def history_of(stats) -> int:
    """Pairs the ring of a statistics array holds."""
    return 0 if stats is None else (stats.size - Stat.RING) // 2


def read_statistics(stats) -> dict:
    """GradScaler.statistics() of a statistics array read back to the host (None: no scale made yet)."""
    if stats is None:
        return {"steps": 0, "skipped_steps": 0, "last_overflow_step": None, "floor_hits": 0, "scale_history": []}
    changes, ring = int(stats[Stat.SCALE_CHANGES]), history_of(stats)
    slots = [Stat.RING + 2 * (i % ring) for i in range(max(0, changes - ring), changes)]
    last = int(stats[Stat.LAST_OVERFLOW_PLUS_ONE])
    return {"steps": int(stats[Stat.STEPS]), "skipped_steps": int(stats[Stat.SKIPPED_STEPS]),
            "last_overflow_step": last - 1 if last else None, "floor_hits": int(stats[Stat.FLOOR_HITS]),
            "scale_history": [(int(stats[k]), float(stats[k + 1])) for k in slots]}


def pack_update_args(args: UpdateScaleArgs, pointer) -> np.ndarray:
    """args as the int64 words of struct UpdateArgs; pointer(array) gives an array's device address."""
    rule = args.rule
    packed = np.zeros((), UPDATE_ARGS_DTYPE)
    for name in ("scale", "growth_tracker", "found_inf", "overflow_tracker", "floor_hit", "inv_scale", "stats"):
        array = getattr(args, name)
        packed[name] = 0 if array is None else pointer(array)
    packed["n_found_inf"] = args.found_inf.size
    packed["growth_factor"], packed["backoff_factor"] = rule.growth_factor, rule.backoff_factor
    packed["growth_interval"], packed["hysteresis"] = rule.growth_interval, rule.hysteresis
    packed["min_scale"] = np.float32(rule.lowest)  # the kernel compares float32 scales: round the bounds once, here
    packed["max_scale"] = np.float32(rule.highest)
    packed["history"] = history_of(args.stats)
    packed["clear_found_inf"] = bool(args.clear_found_inf)
    return packed.reshape(1).view(np.int64)


# ---- chunk tables of multi-tensor launches ----
class ChunkHeader(enum.IntEnum):
    """The table starts with these four numbers; then, for T tensors and B blocks (chunks):
    T pointers per list, list after list; T element counts; B tensor indices (which tensor
    block b works on); B chunk indices (which chunk of it)."""
    N_TENSORS = 0
    N_BLOCKS = 1
    CHUNK_SIZE = 2
    N_LISTS = 3


CHUNK_HEADER_SIZE = len(ChunkHeader)

# The pointer lists of each multi-tensor kernel, in table order. A fused optimizer's STEP entries point at
# one int64 count per tensor (not at its chunk); WEIGHT_COPY is the low-precision copy written from the
# updated parameter (O2's float16 model weight), and MAX_EXP_AVG_SQ and WEIGHT_COPY hold 0 where unused.
LISTS = {
    "UNSCALE": ("SOURCE", "DESTINATION"),
    "ADAM": ("PARAM", "GRAD", "EXP_AVG", "EXP_AVG_SQ", "MAX_EXP_AVG_SQ", "STEP", "WEIGHT_COPY"),
    "SGD": ("PARAM", "GRAD", "MOMENTUM_BUFFER", "WEIGHT_COPY"),
}


def chunk_table(pointer_lists, sizes, chunk_size: int) -> np.ndarray:
    """The int64 chunk table (host copy) for tensors of `sizes` elements (a tensor of 0 elements has no block)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    chunks = -(-sizes // chunk_size)
    n_blocks = int(chunks.sum())
    first = np.repeat(np.cumsum(chunks) - chunks, chunks)
    header = np.array([sizes.size, n_blocks, chunk_size, len(pointer_lists)], dtype=np.int64)
    return np.concatenate([header, *(np.asarray(p, dtype=np.uint64).view(np.int64) for p in pointer_lists), sizes,
                           np.repeat(np.arange(sizes.size, dtype=np.int64), chunks),  # tensor of each block
                           np.arange(n_blocks, dtype=np.int64) - first])              # chunk of each block


# ---- fused optimizers: one step's hyper-parameters ----
@dataclass(frozen=True)
class AdamRule:
    """One fused Adam/AdamW step of a parameter group (torch.optim.Adam's hyper-parameters; the optimizer checked
    them). The kernel derives the bias corrections from each tensor's step count, which lives on the device."""
    lr: float
    beta1: float
    beta2: float
    eps: float
    weight_decay: float
    amsgrad: bool
    maximize: bool
    decoupled_weight_decay: bool


@dataclass(frozen=True)
class SGDRule:
    """One fused SGD step of a parameter group. first_step: the group has no momentum buffers yet (torch's rule:
    the buffer starts as the gradient itself)."""
    lr: float
    momentum: float
    dampening: float
    weight_decay: float
    nesterov: bool
    maximize: bool
    first_step: bool


_ARGS_HEAD = (("grad_scale", "const float*", _POINTER), ("found_inf", "const float*", _POINTER))


def _rule_fields(rule_type):
    """A rule's members as struct members: each float a double, each bool a long long (8 bytes wide each)."""
    return _ARGS_HEAD + tuple((f.name, "double", _DOUBLE) if f.type in ("float", float) else
                              (f.name, "long long", _INT) for f in fields(rule_type))


# struct name -> members; every member 8 bytes wide, so C and NumPy lay them out alike
STRUCTS = {"UpdateArgs": UPDATE_ARGS_FIELDS, "AdamArgs": _rule_fields(AdamRule), "SGDArgs": _rule_fields(SGDRule)}
_RULE_STRUCTS = {AdamRule: "AdamArgs", SGDRule: "SGDArgs"}


def pack_optimizer_args(rule, grad_scale, found_inf, pointer) -> np.ndarray:
    """struct AdamArgs / SGDArgs as int64 words: the device pointers of grad_scale and found_inf (0: none: no
    unscaling, no skipping), then the rule. pointer(array) gives an array's device address."""
    members = STRUCTS[_RULE_STRUCTS[type(rule)]]
    packed = np.zeros((), np.dtype([(name, kind) for name, _, kind in members]))
    packed["grad_scale"] = 0 if grad_scale is None else pointer(grad_scale)
    packed["found_inf"] = 0 if found_inf is None else pointer(found_inf)
    for (name, _, _), value in zip(members[len(_ARGS_HEAD):], astuple(rule)):
        packed[name] = value
    return packed.reshape(1).view(np.int64)


TABLE_WORDS = 256  # int64 words one table-writing launch carries as its parameters (kernels/table_words.cu)


def layout_header() -> str:
    """The text of kernels' #include "amp_layout.h": this module's names as C."""
    lines = ["// amp_layout.h: generated from mixprec/amp/_layout.py (layout_header); not a file on disk.",
             "#pragma once", f"#define TABLE_WORDS {TABLE_WORDS}"]
    lines += [f"#define STAT_{s.name} {s.value}" for s in Stat]
    lines += [f"#define CHUNK_{h.name} {h.value}" for h in ChunkHeader]
    lines.append(f"#define CHUNK_HEADER_SIZE {CHUNK_HEADER_SIZE}")
    lines += [f"#define {kernel}_{name} {i}" for kernel, names in LISTS.items() for i, name in enumerate(names)]
    for struct, members in STRUCTS.items():
        lines.append(f"struct {struct} {{")
        lines += [f"    {ctype} {name};" for name, ctype, _ in members]
        lines.append("};")
    return "\n".join(lines) + "\n"
