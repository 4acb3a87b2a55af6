"""torch.nn.functional's pointwise activations beyond relu/gelu/silu: leaky_relu, elu, celu, selu, hardtanh,
relu6, hardswish, hardsigmoid, mish, softsign, softshrink, hardshrink, tanhshrink, threshold, logsigmoid, glu,
rrelu.

Each is one op on arrays, computed in float32 for half inputs and rounded once (opmath), with its derivative
given as a partial (so reverse and forward mode share it). Where a function has a kink, the derivative there is
torch's choice, written next to the partial. A NaN input gives a NaN output; its gradient is torch's: NaN where
the derivative is a formula of x (elu, hardswish, softsign), the gradient passed on by leaky_relu, and 0 from the
clamps and shrinks (hardtanh, relu6, softshrink, hardshrink), whose backward passes the gradient only where x is
known to be inside the sloped region.

An activation that takes ``inplace`` (leaky_relu, elu, ...) is a small composite op around the computing one
(``_leaky_relu``, ...): ``inplace=True`` writes the result into the input through mixprec's in-place machinery
(ops/inplace.py), so autograd sees it as torch's ``leaky_relu_`` would.

None of these is on an autocast list: they run in their input's dtype.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, devices
from ..random import _rng_state
from ..tensor import Tensor
from .elementwise import where
from .inplace import apply
from .opmath import compute_dtype, opmath
from .registry import register
from .shape import dim_index

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _floating(input, name):
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: expected a floating-point input, got {input.dtype.name}")


def _number(value, name, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: {what} must be a number, got {type(value).__name__}")
    return float(value)


def _select(cond, x, a, b):
    """where(cond, a, b) in x's dtype: a piecewise-constant partial derivative (a and b are rounded to that dtype
    once, so a float64 slope of 0.2 stays 0.2)."""
    return where(cond, x.new_full((), a), x.new_full((), b))


def _out_of_place_or_in(input, inplace, name, compute):
    """``compute(input)``, or with inplace=True the same value written into ``input`` (torch's ``<name>_``)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: expected a Tensor input, got {type(input).__name__}")
    if inplace:
        return apply(input, name + "_", compute, others=[])
    return compute(input)


# ---------------------------------------------------------------- leaky_relu
@register("_leaky_relu", saves=("input",))
def _leaky_relu(ctx, input, negative_slope):
    """x where x > 0, else negative_slope * x."""
    _floating(input, "leaky_relu")
    ctx.slope = s = _number(negative_slope, "leaky_relu", "negative_slope")
    return opmath(lambda a: array_module(a).where(a > 0, a, a * a.dtype.type(s)), input)


@_leaky_relu.partials
def _(ctx):
    x = ctx.inputs[0]
    return _select(x > 0, x, 1.0, ctx.slope), None  # slope at 0, as torch


@register("leaky_relu", functional=True, composite=True)
def leaky_relu(ctx, input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x."""
    return _out_of_place_or_in(input, inplace, "leaky_relu", lambda x: _leaky_relu(x, negative_slope))


# ---------------------------------------------------------------- elu, celu, selu (one formula)
@register("_elu", saves=("input",))
def _elu(ctx, input, alpha, scale, input_scale):
    """alpha * scale * (exp(input_scale * x) - 1) where x <= 0, else scale * x: elu, celu and selu."""
    _floating(input, "elu")
    ctx.coef = (alpha, scale, input_scale)

    def f(a):
        xp, t = array_module(a), a.dtype.type
        negative = xp.expm1(xp.minimum(a, t(0)) * t(input_scale)) * t(alpha * scale)
        return xp.where(a <= 0, negative, a * t(scale))
    return opmath(f, input)


@_elu.partials
def _(ctx):
    x = ctx.inputs[0]
    alpha, scale, input_scale = ctx.coef
    negative = (x.clamp(max=0) * input_scale).exp() * (alpha * scale * input_scale)  # (clamped: no inf to mask)
    return where(x > 0, scale, negative).to(x.dtype), None, None, None  # the exp branch at 0 and for a NaN (NaN)


@register("elu", functional=True, composite=True)
def elu(ctx, input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    alpha = _number(alpha, "elu", "alpha")
    return _out_of_place_or_in(input, inplace, "elu", lambda x: _elu(x, alpha, 1.0, 1.0))


@register("celu", functional=True, composite=True)
def celu(ctx, input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    alpha = _number(alpha, "celu", "alpha")
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (the input is divided by it)")
    return _out_of_place_or_in(input, inplace, "celu", lambda x: _elu(x, alpha, 1.0, 1.0 / alpha))


@register("selu", functional=True, composite=True)
def selu(ctx, input, inplace=False):
    """scale * elu(x, alpha) with torch's self-normalising constants (alpha 1.6733, scale 1.0507)."""
    return _out_of_place_or_in(input, inplace, "selu", lambda x: _elu(x, _SELU_ALPHA, _SELU_SCALE, 1.0))


# ---------------------------------------------------------------- hardtanh, relu6
@register("_hardtanh", saves=("input",))
def _hardtanh(ctx, input, min_val, max_val):
    """x clamped to [min_val, max_val]."""
    _floating(input, "hardtanh")
    ctx.bounds = (min_val, max_val)
    return opmath(lambda a: array_module(a).clip(a, a.dtype.type(min_val), a.dtype.type(max_val)), input)


@_hardtanh.partials
def _(ctx):
    x = ctx.inputs[0]
    low, high = ctx.bounds
    return _select((x > low).logical_and(x < high), x, 1.0, 0.0), None, None  # 0 on the bounds and for a NaN


@register("hardtanh", functional=True, composite=True)
def hardtanh(ctx, input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]."""
    low, high = _number(min_val, "hardtanh", "min_val"), _number(max_val, "hardtanh", "max_val")
    if low > high:
        raise ValueError(f"hardtanh: min_val ({min_val}) must not be greater than max_val ({max_val})")
    return _out_of_place_or_in(input, inplace, "hardtanh", lambda x: _hardtanh(x, low, high))


@register("relu6", functional=True, composite=True)
def relu6(ctx, input, inplace=False):
    """min(max(0, x), 6): hardtanh(x, 0, 6)."""
    return _out_of_place_or_in(input, inplace, "relu6", lambda x: _hardtanh(x, 0.0, 6.0))


# ---------------------------------------------------------------- hardswish, hardsigmoid
@register("_hardswish", saves=("input",))
def _hardswish(ctx, input):
    """x * relu6(x + 3) / 6."""
    _floating(input, "hardswish")

    def f(a):
        t = a.dtype.type
        return a * array_module(a).clip(a + t(3), t(0), t(6)) / t(6)
    return opmath(f, input)


@_hardswish.partials
def _(ctx):
    x = ctx.inputs[0]  # 0 up to -3 (included), x/3 + 1/2 up to 3 (excluded), then 1: torch's pieces; NaN: NaN
    return where(x <= -3, 0.0, where(x >= 3, 1.0, x / 3 + 0.5)).to(x.dtype),


@register("hardswish", functional=True, composite=True)
def hardswish(ctx, input, inplace=False):
    """x * relu6(x + 3) / 6."""
    return _out_of_place_or_in(input, inplace, "hardswish", _hardswish)


@register("_hardsigmoid", saves=("input",))
def _hardsigmoid(ctx, input):
    """relu6(x + 3) / 6."""
    _floating(input, "hardsigmoid")

    def f(a):
        t = a.dtype.type
        return array_module(a).clip(a + t(3), t(0), t(6)) / t(6)
    return opmath(f, input)


@_hardsigmoid.partials
def _(ctx):
    x = ctx.inputs[0]
    return _select((x > -3).logical_and(x < 3), x, 1 / 6, 0.0),  # 0 at +-3, as torch


@register("hardsigmoid", functional=True, composite=True)
def hardsigmoid(ctx, input, inplace=False):
    """relu6(x + 3) / 6."""
    return _out_of_place_or_in(input, inplace, "hardsigmoid", _hardsigmoid)


# ---------------------------------------------------------------- mish
def _softplus(a):
    return array_module(a).logaddexp(a.dtype.type(0), a)


@register("_mish", saves=("input",))
def _mish(ctx, input):
    """x * tanh(softplus(x))."""
    _floating(input, "mish")
    return opmath(lambda a: a * array_module(a).tanh(_softplus(a)), input)


@_mish.partials
def _(ctx):
    x = ctx.inputs[0]
    t = x.softplus().tanh()
    return t + x * x.sigmoid() * (1 - t * t),


@register("mish", functional=True, composite=True)
def mish(ctx, input, inplace=False):
    """x * tanh(softplus(x))."""
    return _out_of_place_or_in(input, inplace, "mish", _mish)


# ---------------------------------------------------------------- threshold
@register("_threshold", saves=("input",))
def _threshold(ctx, input, threshold, value):
    """value where x <= threshold, else x (integers too, as torch)."""
    ctx.threshold = threshold
    if input.dtype == np.bool_:
        raise TypeError("threshold: bool inputs are not supported (as in torch)")
    return opmath(lambda a: array_module(a).where(a <= threshold, a.dtype.type(value), a), input, ints="keep")


@_threshold.partials
def _(ctx):
    x = ctx.inputs[0]
    return _select(x <= ctx.threshold, x, 0.0, 1.0), None, None


@register("threshold", functional=True, composite=True)
def threshold(ctx, input, threshold, value, inplace=False):
    """value where x <= threshold, else x."""
    threshold, value = _number(threshold, "threshold", "threshold"), _number(value, "threshold", "value")
    return _out_of_place_or_in(input, inplace, "threshold", lambda x: _threshold(x, threshold, value))


# ---------------------------------------------------------------- activations without inplace
@register("softsign", functional=True, saves=("input",))
def softsign(ctx, input):
    """x / (1 + |x|)."""
    _floating(input, "softsign")
    return opmath(lambda a: a / (array_module(a).abs(a) + a.dtype.type(1)), input)


@softsign.partials
def _(ctx):
    x = ctx.inputs[0]
    # 1/(1+|x|)^2; NaN at an infinite x, where the forward is inf/inf = NaN too (as torch's gradient)
    return where(x.isinf(), float("nan"), (x.abs() + 1) ** -2).to(x.dtype),


def _shrink_partial(ctx):
    x, lambd = ctx.inputs[0], ctx.lambd  # 0 on [-lambd, lambd] (its ends included) and for a NaN, as torch
    return _select((x < -lambd).logical_or(x > lambd), x, 1.0, 0.0), None


@register("softshrink", functional=True, saves=("input",))
def softshrink(ctx, input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    _floating(input, "softshrink")
    ctx.lambd = lmb = _number(lambd, "softshrink", "lambd")
    if lmb < 0:
        raise ValueError(f"softshrink: lambd must be >= 0, got {lmb}")

    def f(a):
        xp, t = array_module(a), a.dtype.type
        return xp.where(a > t(lmb), a - t(lmb), xp.where(a < t(-lmb), a + t(lmb), a * t(0)))
    return opmath(f, input)


@register("hardshrink", methods=("hardshrink",), functional=True, saves=("input",))
def hardshrink(ctx, input, lambd=0.5):
    """x outside [-lambd, lambd], 0 inside."""
    _floating(input, "hardshrink")
    ctx.lambd = lmb = _number(lambd, "hardshrink", "lambd")  # (a negative lambd shrinks nothing, as torch)

    def f(a):
        t = a.dtype.type
        return array_module(a).where((a >= t(-lmb)) & (a <= t(lmb)), t(0), a)
    return opmath(f, input)


softshrink.partials(_shrink_partial)
hardshrink.partials(_shrink_partial)


@register("tanhshrink", functional=True, saves=("input",))
def tanhshrink(ctx, input):
    """x - tanh(x)."""
    _floating(input, "tanhshrink")
    return opmath(lambda a: a - array_module(a).tanh(a), input)


@tanhshrink.partials
def _(ctx):
    t = ctx.inputs[0].tanh()
    return t * t,


@register("logsigmoid", functional=True, saves=("input",))
def logsigmoid(ctx, input):
    """log(sigmoid(x)), computed as min(x, 0) - log1p(exp(-|x|)) (no overflow)."""
    _floating(input, "logsigmoid")

    def f(a):
        xp = array_module(a)
        return xp.minimum(a, a.dtype.type(0)) - xp.log1p(xp.exp(-xp.abs(a)))
    return opmath(f, input)


@logsigmoid.partials
def _(ctx):
    return (-ctx.inputs[0]).sigmoid(),


@register("glu", functional=True, composite=True)
def glu(ctx, input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of input along dim (computed in float32 for halves)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"glu: expected a Tensor input, got {type(input).__name__}")
    _floating(input, "glu")
    if input.ndim == 0:
        raise RuntimeError("glu: does not support 0-d (scalar) inputs")
    d = dim_index(dim, input.ndim, "glu")
    if input.shape[d] % 2:
        raise RuntimeError(f"glu: the halved dim {dim} must have an even size, got {input.shape[d]} "
                           f"(input of shape {tuple(input.shape)})")
    half = input.shape[d] // 2
    x = input.to(compute_dtype(input.dtype))
    out = x.narrow(d, 0, half) * x.narrow(d, half, half).sigmoid()
    return out if out.dtype == input.dtype else out.to(input.dtype)


# ---------------------------------------------------------------- rrelu
@register("rrelu", functional=True, composite=True)
def rrelu(ctx, input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky relu with a random slope: in training each negative element is multiplied by its own slope drawn
    uniformly from [lower, upper] (mixprec's generator: mp.manual_seed makes it reproducible, on every device);
    in eval the slope is (lower + upper) / 2."""
    lower, upper = _number(lower, "rrelu", "lower"), _number(upper, "rrelu", "upper")
    if lower > upper:
        raise ValueError(f"rrelu: lower ({lower}) must not be greater than upper ({upper})")
    if not training:
        return _out_of_place_or_in(input, inplace, "rrelu", lambda x: _leaky_relu(x, (lower + upper) / 2))
    if not isinstance(input, Tensor):
        raise TypeError(f"rrelu: expected a Tensor input, got {type(input).__name__}")
    _floating(input, "rrelu")
    draw = _rng_state["np"].uniform(lower, upper, input.shape)
    slopes = devices.to_device(draw.astype(compute_dtype(input.dtype)), input.device)
    xp = array_module(slopes)
    noise = Tensor._wrap(xp.where(input._array <= 0, slopes, slopes.dtype.type(1)))  # 1 where not x <= 0, as torch

    def compute(x):
        out = x.to(noise.dtype) * noise
        return out if out.dtype == x.dtype else out.to(x.dtype)
    return _out_of_place_or_in(input, inplace, "rrelu", compute)

