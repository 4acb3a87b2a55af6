"""FP8 scaling recipes as data: what to quantize to, and how each scale is chosen.

An FP8 number has a tiny range (float8_e4m3fn: about 2**-9 to 448; float8_e5m2: about
2**-16 to 57344), so a tensor is multiplied by a *scale* before the cast, chosen to map
its largest magnitude (its *amax*) near the format's maximum, and the matrix product
multiplies by the inverse afterwards. The recipes differ in where the amax comes from:

- ``DelayedScaling``: from a history of the amaxes seen in earlier steps. The cast
  needs no extra pass over the tensor, at the price of a scale that lags the data.
- ``CurrentScaling``: from the tensor itself, just before the cast (one more read
  of the tensor, no lag, no state).
- ``MXFP8BlockScaling``: one power-of-two scale per block of 32 consecutive values
  (the OCP Microscaling format), so an outlier only costs its own block precision.

The names, parameters and defaults are NVIDIA Transformer Engine's
(``transformer_engine.common.recipe``), so a recipe written for TE reads the same
here. Parameters that mixprec does not implement are accepted only at their default
value: a different value is refused rather than silently ignored. The scale
arithmetic itself lives in mixprec.amp.fp8.scaling.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["Format", "DelayedScaling", "CurrentScaling", "MXFP8BlockScaling", "FP8_MAX"]

# Largest finite value of each FP8 format (the saturation bound of a cast).
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


class _Formats(NamedTuple):
    forward: str   # dtype of the forward pass's FP8 tensors (activations, weights)
    backward: str  # dtype of the backward pass's FP8 tensors (gradients)


class Format(enum.Enum):
    """Which FP8 dtype the forward and the backward pass use.

    E4M3 has one more mantissa bit (precision), E5M2 one more exponent bit (range).
    Gradients span a wider range than activations and weights, hence HYBRID:
    E4M3 forward, E5M2 backward.
    """
    E4M3 = _Formats("float8_e4m3fn", "float8_e4m3fn")
    E5M2 = _Formats("float8_e5m2", "float8_e5m2")
    HYBRID = _Formats("float8_e4m3fn", "float8_e5m2")

    def __repr__(self):
        return f"Format.{self.name}"

    @property
    def forward(self) -> str:
        return self.value.forward

    @property
    def backward(self) -> str:
        return self.value.backward

    @property
    def max_fwd(self) -> float:
        return FP8_MAX[self.forward]

    @property
    def max_bwd(self) -> float:
        return FP8_MAX[self.backward]


def _check_format(recipe, fmt):
    if not isinstance(fmt, Format):
        raise TypeError(f"{recipe}: fp8_format must be a mixprec.amp.Format (E4M3, E5M2 or HYBRID), "
                        f"got {fmt!r}")
    if fmt is Format.E5M2:  # E5M2's 2 mantissa bits are too coarse for weights and activations
        raise ValueError(f"{recipe}: fp8_format=Format.E5M2 (E5M2 for the forward pass too) is not supported, "
                         "as in Transformer Engine; use Format.HYBRID (E4M3 forward, E5M2 backward) or Format.E4M3")


def _check_default(recipe, name, value, default):
    if value != default or type(value) is not type(default):
        raise ValueError(f"{recipe}: {name}={value!r} is not implemented in mixprec; only the default "
                         f"{name}={default!r} is accepted")


def _check_flag(recipe, name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{recipe}: {name} must be a bool, got {value!r}")


def _check_margin(recipe, margin):
    if isinstance(margin, bool) or not isinstance(margin, int):
        raise TypeError(f"{recipe}: margin must be an int (the scale is divided by 2**margin), got {margin!r}")
    # fp8_max * 2**-margin must stay a normal float32 for every format (448 = 1.75 * 2**8, 57344 = 1.75 * 2**15)
    if not -100 <= margin <= 100:
        raise ValueError(f"{recipe}: margin must be in [-100, 100] so that fp8_max / 2**margin stays a normal "
                         f"float32, got margin={margin}")


@dataclass(frozen=True)
class DelayedScaling:
    """Per-tensor scales predicted from the amaxes of earlier steps.

    Each quantized tensor keeps an amax history (its last ``amax_history_len`` amaxes)
    and a scale. The cast uses the scale as it stands and records the tensor's amax;
    after the step one update rolls every history and sets, per tensor::

        amax = max(history)            # amax_compute_algo="max"
        amax = the newest amax         # amax_compute_algo="most_recent"
        scale = fp8_max / amax / 2**margin

    "max" over a long window (the default, 1024 steps) makes a spike lower the scale
    at once and keeps it down until the spike leaves the window: overflow is what
    FP8 training cannot afford. ``margin`` leaves 2**margin of headroom for amaxes
    that grow between updates. A tensor whose new amax is 0 (not used this step) or
    not finite (an overflow) keeps its history and scale unchanged.

    ``scaling_factor_compute_algo`` (a custom function), a callable
    ``amax_compute_algo``, ``fp8_dpa`` and ``fp8_mha`` are Transformer Engine options
    mixprec does not implement: only their defaults are accepted. ``reduce_amax``
    (True: fp8_autocast all-reduces the amaxes with MAX across the ranks of
    mp.distributed before each update) is honoured by the region.
    """
    margin: int = 0
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: str = "max"
    scaling_factor_compute_algo: object = None
    reduce_amax: bool = True
    fp8_dpa: bool = False
    fp8_mha: bool = False

    def __post_init__(self):
        name = "DelayedScaling"
        _check_margin(name, self.margin)
        _check_format(name, self.fp8_format)
        n = self.amax_history_len
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name}: amax_history_len must be an int >= 1 (steps of amax history), got {n!r}")
        if callable(self.amax_compute_algo):
            raise ValueError(f"{name}: a callable amax_compute_algo is not implemented in mixprec; use \"max\" "
                             "or \"most_recent\"")
        if self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(f"{name}: amax_compute_algo must be \"max\" or \"most_recent\", "
                             f"got {self.amax_compute_algo!r}")
        if self.scaling_factor_compute_algo is not None:
            raise ValueError(f"{name}: a custom scaling_factor_compute_algo is not implemented in mixprec; only "
                             "the default None (scale = fp8_max / amax / 2**margin) is accepted")
        _check_flag(name, "reduce_amax", self.reduce_amax)
        _check_default(name, "fp8_dpa", self.fp8_dpa, False)
        _check_default(name, "fp8_mha", self.fp8_mha, False)

    @property
    def scaled_max(self) -> tuple:
        """(forward, backward) fp8_max / 2**margin: the value an amax is mapped to."""
        return tuple(math.ldexp(FP8_MAX[d], -self.margin) for d in self.fp8_format.value)


@dataclass(frozen=True)
class CurrentScaling:
    """Per-tensor scales from the tensor's own amax, computed just before each cast.

    ``scale = fp8_max / amax``: the largest magnitude lands exactly on the format's
    maximum, whatever the data did in earlier steps. It costs one extra read of the
    tensor (amax, then cast) and keeps no state between steps. An amax of 0, inf or
    NaN gives scale 1; an amax so small that the scale overflows float32 gives the
    largest float32. ``use_power_2_scales`` rounds each scale down to a power of
    two, so that scaling and unscaling are exact.

    Transformer Engine calls it ``Float8CurrentScaling``; mixprec exports both names.
    Its per-GEMM options (``fp8_quant_*``, ``fp8_gemm_*``) are not modelled here;
    ``fp8_dpa`` and ``fp8_mha`` are accepted only at their default.
    """
    fp8_format: Format = Format.HYBRID
    use_power_2_scales: bool = False
    fp8_dpa: bool = False
    fp8_mha: bool = False

    def __post_init__(self):
        name = type(self).__name__
        _check_format(name, self.fp8_format)
        _check_flag(name, "use_power_2_scales", self.use_power_2_scales)
        _check_default(name, "fp8_dpa", self.fp8_dpa, False)
        _check_default(name, "fp8_mha", self.fp8_mha, False)


Float8CurrentScaling = CurrentScaling


@dataclass(frozen=True)
class MXFP8BlockScaling:
    """One power-of-two scale per block of 32 consecutive values along the last dimension (MXFP8).

    This is the OCP Microscaling (MX) format, v1.0: each block of 32 shares an E8M0
    scale (an 8-bit exponent, no mantissa: a power of two 2**-127 .. 2**127) chosen
    from the block's amax as ``2**(floor(log2(amax)) - emax_elem)``, where emax_elem
    is the exponent of the element format's largest value (8 for E4M3). A
    per-tensor scale lets one outlier squeeze every other value towards zero; a
    per-block scale confines that loss to 31 neighbours, and multiplying by a
    power of two is exact. No history, no extra state.

    ``margin`` is kept for Transformer Engine's signature; the MX rule has no margin,
    so only 0 is accepted. ``fp8_dpa`` and ``fp8_mha`` are accepted only at their default.
    """
    margin: int = 0
    fp8_format: Format = Format.E4M3
    fp8_dpa: bool = False
    fp8_mha: bool = False

    block_size = 32  # not a field: the OCP format fixes it

    def __post_init__(self):
        name = "MXFP8BlockScaling"
        _check_default(name, "margin", self.margin, 0)
        _check_format(name, self.fp8_format)
        _check_default(name, "fp8_dpa", self.fp8_dpa, False)
        _check_default(name, "fp8_mha", self.fp8_mha, False)
