"""Elementwise ops. Low-precision math runs in float32 and rounds, as GPU kernels do."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from .. import backend as _be
from ..backend import array_module, erf
from .registry import register

LP = "lower_precision_fp"


def _in_f32(fn, int_to_float=True):
    """Run fn on float16/bfloat16 arrays in float32 and round back to the input dtype.

    Integer and bool inputs compute in float32 and stay there (exp, sin, ... of an
    int tensor is float32 in torch), unless ``int_to_float`` is off (relu, abs).
    """
    def run(a, *rest):
        if a.dtype in _dt.LOW_PRECISION:
            return fn(a.astype(np.float32), *rest).astype(a.dtype)
        if int_to_float and a.dtype.kind in "biu":
            return fn(a.astype(np.float32), *rest)
        return fn(a, *rest)
    return run


# ---------------------------------------------------------------- arithmetic
@register("add", methods=("add", "__add__"), rmethods=("__radd__",), promote=(0, 1), broadcast=True)
def add(ctx, input, other, alpha=1):
    """input + alpha * other, promoting dtypes."""
    ctx.alpha = alpha
    return input + other if alpha == 1 else input + other * input.dtype.type(alpha)


@add.grad
def _(ctx, g):
    return g, (g if ctx.alpha == 1 else g * ctx.alpha)


@register("sub", methods=("sub", "__sub__"), promote=(0, 1), broadcast=True)
def sub(ctx, input, other, alpha=1):
    """input - alpha * other."""
    ctx.alpha = alpha
    return input - other if alpha == 1 else input - other * input.dtype.type(alpha)


@sub.grad
def _(ctx, g):
    return g, -g if ctx.alpha == 1 else g * -ctx.alpha


@register("__rsub__", rmethods=("__rsub__",), promote=(0, 1), broadcast=True)
def rsub(ctx, input, other):
    """other - input, for ``2 - x``: called as rsub(2, x)."""
    return input - other


rsub.grad(lambda ctx, g: (g, -g))


@register("mul", methods=("mul", "__mul__"), rmethods=("__rmul__",), promote=(0, 1), broadcast=True)
def mul(ctx, input, other):
    return input * other


@mul.grad
def _(ctx, g):
    a, b = ctx.inputs
    return g * b, g * a


def _div_grad(ctx, g):
    a, b = ctx.inputs
    return g / b, -g * a / (b * b)


@register("div", methods=("div", "__truediv__", "true_divide"), aliases=("true_divide",), promote=(0, 1),
          broadcast=True)
def div(ctx, input, other):
    """input / other; integer inputs divide into float32."""
    return _true_divide(input, other)


def _true_divide(a, b):
    """a / b; integer/bool operands (promotion left them integer) divide in float32, as torch does."""
    if a.dtype.kind in "biu":
        a = a.astype(np.float32)
        b = b.astype(np.float32) if hasattr(b, "astype") else np.float32(b)
    return a / b


div.grad(_div_grad)


@register("__rtruediv__", rmethods=("__rtruediv__",), aliases=("__rdiv__",), promote=(0, 1), cuda="fp32",
          broadcast=True)
def rtruediv(ctx, input, other):
    """other / input as the reflected operator (``2 / x``): float32 under CUDA autocast."""
    return _true_divide(input, other)


rtruediv.grad(_div_grad)


@register("neg", methods=("neg", "__neg__"))
def neg(ctx, input):
    if input.dtype == np.bool_:
        raise TypeError("neg: negation of a bool tensor is not supported; to invert a mask use ~ or logical_not()")
    return -input


neg.grad(lambda ctx, g: (-g,))


def _pow_grad(ctx, g):
    a, b = ctx.inputs
    out = ctx.output
    ga = gb = None
    if getattr(a, "requires_grad", False):
        ga = g * b * a ** (b - 1) if not _is_number(b) else g * (b * a ** (b - 1) if b != 0 else 0 * a)
    if getattr(b, "requires_grad", False):
        # d/db a**b = a**b * log(a), taken as 0 where a == 0 (the limit for b > 0)
        safe_log = where(a > 0, a, 1.0).log() if not _is_number(a) else math.log(a)
        gb = g * out * safe_log
    return ga, gb


def _is_number(x):
    return isinstance(x, (int, float, np.generic))


@register("pow", methods=("pow", "__pow__"), aliases=("__pow__",), promote=(0, 1), cuda="fp32", broadcast=True)
def pow(ctx, input, exponent):
    """input ** exponent (float32 under CUDA autocast)."""
    return _power(input, exponent)


@register("__rpow__", rmethods=("__rpow__",), promote=(0, 1), cuda="fp32", broadcast=True)
def rpow(ctx, input, exponent):
    """``2 ** x``, called as rpow(2, x)."""
    return _power(input, exponent)


def _power(a, b):
    """a ** b; half-precision bases compute in float32 and round back."""
    dt = a.dtype if hasattr(a, "dtype") else b.dtype
    if dt in _dt.LOW_PRECISION:
        out = (np.float32(a) if np.isscalar(a) else a.astype(np.float32)) ** \
            (np.float32(b) if np.isscalar(b) else b.astype(np.float32))
        return out.astype(dt)
    return a ** b


pow.grad(_pow_grad)
rpow.grad(_pow_grad)


# ---------------------------------------------------------------- unary math
def _unary(name, fn, grad, *, methods=True, functional=False, int_to_float=True, **policy):
    """Register a one-input op: fn on arrays, grad(x, out, g) with Tensors."""
    run = _in_f32(fn, int_to_float)

    def forward(ctx, input):
        return run(input)
    forward.__name__ = forward.__qualname__ = name
    op = register(name, methods=(name,) if methods else (), functional=functional, **policy)(forward)
    op.__doc__ = f"Elementwise {name}."

    @op.grad
    def _(ctx, g):
        return grad(ctx.args[0], ctx, g)
    return op


exp = _unary("exp", lambda a: array_module(a).exp(a), lambda x, c, g: g * c.output, cuda="fp32")
log = _unary("log", lambda a: array_module(a).log(a), lambda x, c, g: g / c.inputs[0], cuda="fp32")
log1p = _unary("log1p", lambda a: array_module(a).log1p(a), lambda x, c, g: g / (c.inputs[0] + 1), cuda="fp32")
expm1 = _unary("expm1", lambda a: array_module(a).expm1(a), lambda x, c, g: g * (c.output + 1), cuda="fp32")
sqrt = _unary("sqrt", lambda a: array_module(a).sqrt(a), lambda x, c, g: g / (2 * c.output))
rsqrt = _unary("rsqrt", lambda a: 1 / array_module(a).sqrt(a), lambda x, c, g: g * -0.5 * c.output ** 3, cuda="fp32")
reciprocal = _unary("reciprocal", lambda a: 1 / a, lambda x, c, g: -g * c.output * c.output, cuda="fp32")
abs = _unary("abs", lambda a: array_module(a).abs(a), lambda x, c, g: g * c.inputs[0].sign(), int_to_float=False)
sign = _unary("sign", lambda a: array_module(a).sign(a), lambda x, c, g: g * 0, int_to_float=False)
sin = _unary("sin", lambda a: array_module(a).sin(a), lambda x, c, g: g * c.inputs[0].cos())
cos = _unary("cos", lambda a: array_module(a).cos(a), lambda x, c, g: -g * c.inputs[0].sin())
tanh = _unary("tanh", lambda a: array_module(a).tanh(a), lambda x, c, g: g * (1 - c.output * c.output),
              functional=True)
sigmoid = _unary("sigmoid", lambda a: 0.5 * (array_module(a).tanh(a * a.dtype.type(0.5)) + 1),
                 lambda x, c, g: g * c.output * (1 - c.output), functional=True)
relu = _unary("relu", lambda a: array_module(a).maximum(a, a.dtype.type(0)),
              lambda x, c, g: g * (c.inputs[0] > 0), functional=True, int_to_float=False)

_SQRT_HALF = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


@register("gelu", methods=("gelu",), functional=True)
def gelu(ctx, input, approximate="none"):
    """x * Phi(x); approximate="tanh" uses the tanh formula."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    ctx.approximate = approximate
    xp = array_module(input)

    def f(a):
        if approximate == "tanh":
            return 0.5 * a * (1 + xp.tanh(a.dtype.type(math.sqrt(2 / math.pi)) * (a + a.dtype.type(0.044715) * a ** 3)))
        return 0.5 * a * (1 + erf(a * a.dtype.type(_SQRT_HALF)))
    return _in_f32(f)(input)


@gelu.grad
def _(ctx, g):
    x = ctx.inputs[0]
    if ctx.approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        inner = k * (x + 0.044715 * x ** 3)
        t = inner.tanh()
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)),
    cdf = 0.5 * (1 + _erf_tensor(x * _SQRT_HALF))
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return g * (cdf + x * pdf),


@register("erf", methods=("erf",))
def erf_op(ctx, input):
    return _in_f32(erf)(input)


erf_op.grad(lambda ctx, g: (g * (ctx.inputs[0] * ctx.inputs[0] * -1).exp() * (2 / math.sqrt(math.pi)),))
_erf_tensor = erf_op


@register("softplus", methods=("softplus",), functional=True, cuda="fp32")
def softplus(ctx, input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above threshold as torch does."""
    ctx.beta, ctx.threshold = beta, threshold

    def f(a):
        xp = array_module(a)
        z = a * a.dtype.type(beta)
        return xp.where(z > threshold, a, xp.logaddexp(a.dtype.type(0), z) / a.dtype.type(beta))
    return _in_f32(f)(input)


@softplus.grad
def _(ctx, g):
    x = ctx.inputs[0]
    z = x * ctx.beta
    return g * where(z > ctx.threshold, 1.0, z.sigmoid()),


# ---------------------------------------------------------------- binary selection
def _minmax_grad(ctx, g):
    a, b = ctx.inputs
    out = ctx.output
    # ties split the gradient evenly, as torch does
    wa = (a == out).to(g.dtype) if hasattr(a, "_vc") else None
    wb = (b == out).to(g.dtype) if hasattr(b, "_vc") else None
    if wa is not None and wb is not None:
        tot = wa + wb
        return g * wa / tot, g * wb / tot
    return (g * wa if wa is not None else None), (g * wb if wb is not None else None)


@register("maximum", methods=("maximum",), promote=(0, 1), broadcast=True)
def maximum(ctx, input, other):
    return array_module(input).maximum(input, other)


@register("minimum", methods=("minimum",), promote=(0, 1), broadcast=True)
def minimum(ctx, input, other):
    return array_module(input).minimum(input, other)


maximum.grad(_minmax_grad)
minimum.grad(_minmax_grad)


@register("where", promote=(1, 2), broadcast=True)
def where(ctx, condition, input, other):
    """input where condition holds, else other."""
    if condition.dtype != np.bool_:
        raise TypeError(f"where: condition must be a bool tensor, got {condition.dtype.name}")
    return _be.where(condition, input, other)


@where.grad
def _(ctx, g):
    c = ctx.args[0]
    zero = g * 0
    return None, where(c, g, zero), where(c, zero, g)


@register("clamp", methods=("clamp", "clip"), aliases=("clip",), promote=(0, 1, 2), broadcast=True)
def clamp(ctx, input, min=None, max=None):
    """Limit values to [min, max]; either bound may be None, a number or a tensor."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    xp = array_module(input)
    out = input
    if min is not None:
        out = xp.maximum(out, min)
    if max is not None:
        out = xp.minimum(out, max)
    return out


@clamp.grad
def _(ctx, g):
    x, lo, hi = (*ctx.inputs, None, None)[:3]  # bounds given by keyword may be absent
    inside = None
    if lo is not None:
        inside = x >= lo
    if hi is not None:
        upper = x <= hi
        inside = upper if inside is None else inside.logical_and(upper)
    gx = g * inside
    glo = g * (x < lo) if hasattr(lo, "_vc") else None
    ghi = g * (x > hi) if hasattr(hi, "_vc") else None
    return gx, glo, ghi


# ---------------------------------------------------------------- comparisons (no gradient)
def _compare(name, fn, method):
    op = register(name, methods=(name, method), promote=(0, 1), differentiable=False, broadcast=True)(
        lambda ctx, input, other: fn(input, other))
    op.__doc__ = f"Elementwise {name}, a bool tensor."
    return op


eq = _compare("eq", lambda a, b: a == b, "__eq__")
ne = _compare("ne", lambda a, b: a != b, "__ne__")
lt = _compare("lt", lambda a, b: a < b, "__lt__")
le = _compare("le", lambda a, b: a <= b, "__le__")
gt = _compare("gt", lambda a, b: a > b, "__gt__")
ge = _compare("ge", lambda a, b: a >= b, "__ge__")


@register("logical_and", methods=("logical_and", "__and__"), promote=(), differentiable=False, broadcast=True)
def logical_and(ctx, input, other):
    return array_module(input).logical_and(input, other)


@register("logical_or", methods=("logical_or", "__or__"), promote=(), differentiable=False, broadcast=True)
def logical_or(ctx, input, other):
    return array_module(input).logical_or(input, other)


@register("logical_not", methods=("logical_not", "__invert__"), promote=(), differentiable=False)
def logical_not(ctx, input):
    return array_module(input).logical_not(input)


@register("isfinite", methods=("isfinite",), differentiable=False)
def isfinite(ctx, input):
    return array_module(input).isfinite(input)


@register("isnan", methods=("isnan",), differentiable=False)
def isnan(ctx, input):
    return array_module(input).isnan(input)


@register("isinf", methods=("isinf",), differentiable=False)
def isinf(ctx, input):
    return array_module(input).isinf(input)
