"""Elementwise ops: arithmetic, the unary math table, selection and comparisons.

Half-precision math runs in float32 and rounds once (``opmath``, see opmath.py).
Gradients come from partial derivatives (``Op.partials``): backward multiplies
the output's gradient by them, forward mode sums tangent times partial.
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend as _be
from .. import dtypes as _dt
from ..backend import array_module, device_checks, erf
from ..tensor import Tensor
from ..creation import zeros_like
from . import halfbits
from .opmath import opmath
from .registry import register


def ufunc(name):
    """The NumPy/CuPy function ``name`` of whichever library owns the array (they share names)."""
    def call(a, *rest):
        return getattr(array_module(a), name)(a, *rest)
    call.__name__ = name
    return call


# ---------------------------------------------------------------- arithmetic
@register("add", methods=("add", "__add__"), rmethods=("__radd__",), promote=(0, 1), broadcast=True,
          linear=True)
def add(ctx, input, other, alpha=1):
    """input + alpha * other, promoting dtypes."""
    ctx.alpha = alpha
    return input + other if alpha == 1 else input + other * _alpha("add", input.dtype, alpha)


@add.grad
def _(ctx, g):
    return g, (g if ctx.alpha == 1 else g * ctx.alpha)


@register("sub", methods=("sub", "__sub__"), promote=(0, 1), broadcast=True, linear=True, bools=False)
def sub(ctx, input, other, alpha=1):
    """input - alpha * other."""
    _no_bool_difference(input)
    ctx.alpha = alpha
    return input - other if alpha == 1 else input - other * _alpha("sub", input.dtype, alpha)


@sub.grad
def _(ctx, g):
    return g, -g if ctx.alpha == 1 else g * -ctx.alpha


def _alpha(name, dtype, alpha):
    """alpha as a scalar of ``dtype``: an integer dtype takes an int, wrapped around as integer arithmetic wraps
    (uint8 with alpha=-3, as torch), and refuses a float."""
    if dtype.kind not in "iu":
        return dtype.type(alpha)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, np.integer)):
        raise RuntimeError(f"{name}: for integer tensors alpha must be an int, got {alpha!r}")
    return _dt.as_integer(int(alpha), dtype)


@register("__rsub__", rmethods=("__rsub__",), promote=(0, 1), broadcast=True, linear=True, bools=False)
def rsub(ctx, input, other):
    """other - input, for ``2 - x``: called as rsub(2, x)."""
    _no_bool_difference(input)
    return input - other


rsub.grad(lambda ctx, g: (g, -g))


def _no_bool_difference(input):
    """Two bool tensors reach sub's forward unpromoted (one bool beside other data is refused by dispatch)."""
    if input.dtype == np.bool_:
        raise RuntimeError("sub: subtraction, the `-` operator, of two bool tensors is not supported (as in torch); "
                           "for the elements where exactly one is True use the `^` operator or logical_xor()")


@register("neg", methods=("neg", "__neg__"), linear=True)
def neg(ctx, input):
    if input.dtype == np.bool_:
        raise RuntimeError("neg: negation, the `-` operator, of a bool tensor is not supported (as in torch); to "
                           "invert a mask use ~ or logical_not()")
    return -input


neg.grad(lambda ctx, g: (-g,))


@register("mul", methods=("mul", "__mul__"), rmethods=("__rmul__",), promote=(0, 1), broadcast=True)
def mul(ctx, input, other):
    return input * other


@mul.partials
def _(ctx):
    a, b = ctx.inputs
    return _partial(a, b), _partial(b, a)


def _partial(x, value):
    """``value`` as the partial derivative w.r.t. x: None when x is not a tensor (a scalar operand)."""
    return value if isinstance(x, Tensor) else None


@register("div", methods=("div", "__truediv__", "true_divide"), aliases=("true_divide",), promote=(0, 1),
          broadcast=True)
def div(ctx, input, other, rounding_mode=None):
    """input / other; integer inputs divide into float32. rounding_mode="trunc" rounds the quotient toward 0,
    "floor" toward -inf (then integers stay integers, and dividing one by zero is an error)."""
    ctx.rounding_mode = rounding_mode
    if rounding_mode is None:
        return _true_divide(input, other)
    if rounding_mode == "floor":
        return opmath(lambda a, b: _xp(a, b).floor_divide(a, b), *_divisible("div", input, other), ints="keep")
    if rounding_mode == "trunc":  # (a half quotient is rounded to its dtype before it is truncated, as torch's)
        a, b = _divisible("div", input, other)
        return _trunc_divide(a, b) if a.dtype.kind in "iu" else opmath(ufunc("trunc"), _true_divide(a, b))
    raise RuntimeError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


def _trunc_divide(a, b):
    """Integer a / b rounded toward zero: the floor quotient one step back up where it was rounded down past a
    negative quotient (a nonzero remainder, operands of opposite signs)."""
    xp = _xp(a, b)
    q = xp.floor_divide(a, b)
    return xp.where((q * b != a) & ((a < 0) != (b < 0)), q + 1, q)


def _true_divide(a, b):
    """a / b. NumPy's float16 and ml_dtypes' bfloat16 division already compute in float32 and round
    once; integers divide in float32 (as torch's true division does)."""
    return opmath(np.true_divide, a, b) if a.dtype.kind in "biu" else a / b


@register("__rtruediv__", rmethods=("__rtruediv__", "__rdiv__"), aliases=("__rdiv__",), promote=(0, 1),
          broadcast=True)
def rtruediv(ctx, input, other):
    """other / input as the reflected operator (``2 / x``): float32 under CUDA autocast."""
    return _true_divide(input, other)


@div.partials
@rtruediv.partials
def _(ctx):
    a, b = ctx.inputs[:2]  # d/db as torch: -(a / b) / b, not -a / b**2 (b * b overflows first: an inf b gives 0, not nan)
    if getattr(ctx, "rounding_mode", None) is not None:  # a rounded quotient is a step function: zero, as torch
        return _partial(a, 0.0), _partial(b, 0.0)
    return _partial(a, 1 / b), _partial(b, -(a / b) / b)


# ---------------------------------------------------------------- floor division and remainders
@register("floor_divide", methods=("floor_divide", "__floordiv__"), rmethods=("__rfloordiv__",), promote=(0, 1),
          broadcast=True)
def floor_divide(ctx, input, other):
    """input // other, rounded toward -inf (Python's rule); integers stay integers, and dividing one by zero is an
    error (a float gives inf or nan)."""
    return opmath(lambda a, b: _xp(a, b).floor_divide(a, b), *_divisible("floor_divide", input, other), ints="keep")


@floor_divide.grad
def _(ctx, g):
    raise RuntimeError("floor_divide: the derivative is not implemented (as in torch); detach its inputs first")


@floor_divide.jvp
def _(ctx, *tangents):
    raise RuntimeError("floor_divide: forward-mode AD is not implemented (as in torch); detach its inputs first")


@register("remainder", methods=("remainder", "__mod__"), rmethods=("__rmod__",), promote=(0, 1), broadcast=True)
def remainder(ctx, input, other):
    """input % other with the sign of other (Python's rule): input - floor(input / other) * other."""
    a, b = _divisible("remainder", input, other)
    if a.dtype.kind in "iu":
        return _xp(a, b).remainder(a, b)

    def f(a, b):  # fmod, moved into other's sign (so -0.0 % 3 stays -0.0 and -5 % inf is inf, as torch)
        xp = _xp(a, b)
        m = xp.fmod(a, b)
        return xp.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)
    return opmath(f, a, b)


@register("fmod", methods=("fmod",), promote=(0, 1), broadcast=True)
def fmod(ctx, input, other):
    """The remainder of input / other with the sign of input (C's fmod): input - trunc(input / other) * other."""
    return opmath(lambda a, b: _xp(a, b).fmod(a, b), *_divisible("fmod", input, other), ints="keep")


@remainder.partials
def _(ctx):
    a, b = (x.detach() if isinstance(x, Tensor) else x for x in ctx.inputs)
    return _partial(ctx.inputs[0], 1.0), _partial(ctx.inputs[1], -floor_divide(a, b))


@fmod.partials
def _(ctx):
    a, b = (x.detach() if isinstance(x, Tensor) else x for x in ctx.inputs)
    q = div(a, b)._array
    return _partial(ctx.inputs[0], 1.0), _partial(ctx.inputs[1], -Tensor._wrap(array_module(q).trunc(q)))


def _xp(a, b):
    """numpy or cupy, for two operands of which one may be a scalar."""
    return array_module(a if _be.is_array(a) else b)


def _divisible(name, a, b):
    """(a, b) after refusing what torch cannot divide: bool and complex operands, and integer division by zero."""
    kind = a.dtype.kind
    if kind in "bc":
        raise NotImplementedError(f"{name}: not implemented for {a.dtype.name} operands (as in torch); it takes "
                                  "integer and floating tensors")
    if kind in "iu":
        zero = b == 0
        device_checks.check(zero if _be.is_array(zero) else np.asarray(zero), RuntimeError,
                            f"{name}: integer division by zero (ZeroDivisionError)")
    return a, b


@register("pow", methods=("pow", "__pow__"), aliases=("__pow__",), promote=(0, 1), broadcast=True,
          exact_scalars=True, saves=("input", "exponent", "output"))
def pow(ctx, input, exponent):
    """input ** exponent (float32 under CUDA autocast); integers stay integers."""
    return _power(input, exponent)


@register("__rpow__", rmethods=("__rpow__",), promote=(0, 1), broadcast=True, exact_scalars=True,
          saves=("input", "exponent", "output"))
def rpow(ctx, input, exponent):
    """``2 ** x``, called as rpow(2, x)."""
    return _power(input, exponent)


def _power(base, exponent):
    """base ** exponent in opmath; integers stay integers (as torch). A negative number exponent of integers is
    refused; a tensor of them gives what integer arithmetic does: 1 ** -n = 1, (-1) ** -n = +-1, others 0."""
    scalar = not _be.is_array(exponent)
    if base.dtype == np.bool_:  # (both are bool after promotion)
        if scalar and exponent:  # torch's shortcut for x ** 1: x as it is
            return base.copy()
        raise NotImplementedError("pow: not implemented for bool tensors (as in torch); convert the mask first: "
                                  "mask.to(dtype)")
    if base.dtype.kind not in "iu" or exponent.dtype.kind not in "iu":
        return opmath(np.power, base, exponent, ints="keep")
    if scalar:
        if exponent < 0:
            raise RuntimeError("pow: integers to negative integer powers are not allowed (cast to a floating dtype "
                               "first)")
        return array_module(base).power(base, exponent)
    xp = array_module(exponent)
    negative = exponent < 0
    inverse = xp.where(base == 1, 1, xp.where(base == base.dtype.type(-1) if base.dtype.kind == "i" else False,
                                              xp.where(exponent % 2 == 0, 1, -1), 0)).astype(exponent.dtype)
    return xp.where(negative, inverse, xp.power(base, xp.where(negative, exponent.dtype.type(0), exponent)))


@pow.partials
@rpow.partials
def _(ctx):
    a, b = ctx.inputs
    if not isinstance(b, Tensor):  # a number exponent: d/da a**b = b * a**(b-1) (0 for b == 0)
        return (_nan_where_nan(ctx.output, b * a ** (b - 1)) if b != 0 else zeros_like(a)), None
    # d/db a**b = a**b * log(a), taken as 0 where a == 0 (the limit for b > 0)
    if not isinstance(a, Tensor):  # a number base (2 ** x)
        return None, ctx.output * math.log(a)
    return _nan_where_nan(ctx.output, b * a ** (b - 1)), ctx.output * where(a > 0, a, 1.0).log()


def _nan_where_nan(out, partial):
    """The partial, nan where the result is nan: C's pow(-inf, -0.5) is 0, but sqrt(-inf) is no number."""
    return where(out.isnan(), out, partial)


# ---------------------------------------------------------------- the unary math table
def unary(name, fn, *, d_in=None, d_out=None, ints="float", bools=True, functional=False, float16=None, operator=None):
    """Register an elementwise one-input op ``name``: ``fn`` on arrays, run in opmath.

    Its derivative is given from the input x, ``d_in(x)``, or from the output
    y = f(x), ``d_out(y)`` (whichever is cheaper; both on Tensors); with neither,
    the caller registers the op's rules itself (relu: a selection, not a product). Integer
    inputs compute in float32 (``ints="keep"``: in their own type); ``bools=False``
    refuses bool inputs, as torch does for relu and abs. ``float16``, for an op
    that only selects, computes a NumPy float16 input's result on its bit patterns
    instead of widening it: the same bits (halfbits.py). ``operator``: the Python operator
    method that calls it too (``"__abs__"``: ``abs(t)``).
    """
    def forward(ctx, input):
        if not bools and input.dtype == np.bool_:
            raise TypeError(f"{name}: bool inputs are not supported (as in torch); convert the mask first: "
                            "mask.to(dtype)")
        if float16 is not None and halfbits.applies(input):
            return float16(input)
        return opmath(fn, input, ints=ints)
    forward.__name__ = forward.__qualname__ = name
    saves = ("input",) if d_in is not None else ("output",)
    methods = (name,) if operator is None else (name, operator)
    op = register(name, methods=methods, functional=functional, saves=saves)(forward)
    op.__doc__ = f"Elementwise {name}."
    if d_in is not None:
        op.partials(lambda ctx: (d_in(ctx.inputs[0]),))
    elif d_out is not None:
        op.partials(lambda ctx: (d_out(ctx.output),))
    return op


def _sigmoid(a):
    return 0.5 * (array_module(a).tanh(a * a.dtype.type(0.5)) + 1)  # stable for large |a|


def _silu_slope(s, x):
    """d/dx x * sigmoid(x), from s = sigmoid(x)."""
    return s * (1 + x * (1 - s))


def _rsqrt(a):
    return 1 / array_module(a).sqrt(a)


exp = unary("exp", ufunc("exp"), d_out=lambda y: y)
log = unary("log", ufunc("log"), d_in=lambda x: 1 / x)
log1p = unary("log1p", ufunc("log1p"), d_in=lambda x: 1 / (x + 1))
expm1 = unary("expm1", ufunc("expm1"), d_out=lambda y: y + 1)
sqrt = unary("sqrt", ufunc("sqrt"), d_out=lambda y: 0.5 / y)
rsqrt = unary("rsqrt", _rsqrt, d_out=lambda y: -0.5 * y ** 3)
reciprocal = unary("reciprocal", ufunc("reciprocal"), d_out=lambda y: -y * y)
# (|z| moves by Re(conj(sgn z) dz): a complex input's partial is conj(sgn z); see complex_ops.py)
def _sign(a):
    """(a > 0) - (a < 0), torch's sign: 0 at nan and at -0.0; a bool is its own sign; complex: torch's sgn,
    z / |z| as written (0 at 0; nan at an infinite z, where NumPy's sign gives the limit direction)."""
    if a.dtype == np.bool_:
        return a.copy()
    if a.dtype.kind == "c":
        xp = array_module(a)
        size = xp.abs(a)
        return xp.where(size == 0, a.dtype.type(0), a / xp.where(size == 0, size.dtype.type(1), size))
    return (a > 0).astype(a.dtype) - (a < 0).astype(a.dtype)


abs = unary("abs", ufunc("abs"), d_in=lambda x: x.sign().conj() if x.is_complex() else x.sign(), ints="keep",
            bools=False, operator="__abs__")  # 0 at nan, as torch
sign = unary("sign", _sign, d_in=zeros_like, ints="keep")
sin = unary("sin", ufunc("sin"), d_in=lambda x: x.cos())
cos = unary("cos", ufunc("cos"), d_in=lambda x: -x.sin())
tanh = unary("tanh", ufunc("tanh"), d_out=lambda y: 1 - y * y, functional=True)
sigmoid = unary("sigmoid", _sigmoid, d_out=lambda y: y * (1 - y), functional=True)
silu = unary("silu", lambda a: a * _sigmoid(a), d_in=lambda x: _silu_slope(x.sigmoid(), x), functional=True)
relu = unary("relu", lambda a: array_module(a).maximum(a, a.dtype.type(0)),
             functional=True, ints="keep", bools=False, float16=halfbits.relu)


@register("_relu_backward", promote=(0, 1), saves=("output",))
def _relu_backward(ctx, grad, output):
    """relu's gradient, torch's threshold_backward: grad where the output is not <= 0, else 0.

    A selection, not a product: where relu was flat the gradient is 0 even if grad is inf or
    NaN, and a NaN output (a NaN input) passes grad on, as in torch. NumPy float16 takes the
    same test and selection on the 16-bit patterns (halfbits.py): comparing float16 costs NumPy
    a conversion of every element, and ``where`` a branch.
    """
    if halfbits.applies(grad, output):
        return halfbits.keep_where(halfbits.relu_passes(output), grad)
    return array_module(grad).where(~(output <= 0), grad, grad.dtype.type(0))


@_relu_backward.grad
def _(ctx, gg):
    return _relu_backward(gg, ctx.inputs[1]), None   # (the partial is a step: nothing for the output)


@_relu_backward.jvp
def _(ctx, t, _t_output):
    return _relu_backward(t, ctx.inputs[1])


relu.grad(lambda ctx, g: (_relu_backward(g, ctx.output),))
relu.jvp(lambda ctx, t: _relu_backward(t, ctx.output))
erf_op = unary("erf", erf, d_in=lambda x: (x * x * -1).exp() * (2 / math.sqrt(math.pi)))

_SQRT_HALF = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_K_TANH = math.sqrt(2 / math.pi)


@register("gelu", methods=("gelu",), functional=True)
def gelu(ctx, input, approximate="none"):
    """x * Phi(x); approximate="tanh" uses the tanh formula."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    ctx.approximate = approximate
    xp = array_module(input)

    def f(a):
        t = a.dtype.type
        if approximate == "tanh":
            return 0.5 * a * (1 + xp.tanh(t(_K_TANH) * (a + t(0.044715) * a ** 3)))
        return 0.5 * a * (1 + erf(a * t(_SQRT_HALF)))
    return opmath(f, input)


@gelu.partials
def _(ctx):
    x = ctx.inputs[0]
    if ctx.approximate == "tanh":
        t = (_K_TANH * (x + 0.044715 * x ** 3)).tanh()
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _K_TANH * (1 + 3 * 0.044715 * x * x),
    cdf = 0.5 * (1 + erf_op(x * _SQRT_HALF))
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return cdf + x * pdf,


@register("softplus", methods=("softplus",), functional=True)
def softplus(ctx, input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above threshold as torch does."""
    ctx.beta, ctx.threshold = beta, threshold

    def f(a):
        xp = array_module(a)
        z = a * a.dtype.type(beta)
        return xp.where(z > threshold, a, xp.logaddexp(a.dtype.type(0), z) / a.dtype.type(beta))
    return opmath(f, input)


@softplus.partials
def _(ctx):
    z = ctx.inputs[0] * ctx.beta
    return where(z > ctx.threshold, 1.0, z.sigmoid()),


# ---------------------------------------------------------------- binary selection
def _selection_partials(loses):
    """Partials of maximum/minimum, torch's rule: half each on a tie, else all of it to each input that does
    not lose the comparison (``loses(x, y)``: x < y for maximum). A nan loses nothing, so both inputs of a
    comparison with a nan get the whole gradient: the nan is never replaced by a finite 0."""
    def partials(ctx):
        a, b = ctx.inputs
        tie = a == b
        return (where(tie, 0.5, loses(a, b).logical_not()) if isinstance(a, Tensor) else None,
                where(tie, 0.5, loses(b, a).logical_not()) if isinstance(b, Tensor) else None)
    return partials


@register("maximum", methods=("maximum",), promote=(0, 1), broadcast=True, saves=("input", "other", "output"))
def maximum(ctx, input, other):
    return array_module(input).maximum(input, other)


@register("minimum", methods=("minimum",), promote=(0, 1), broadcast=True, saves=("input", "other", "output"))
def minimum(ctx, input, other):
    return array_module(input).minimum(input, other)


maximum.partials(_selection_partials(lambda x, y: x < y))
minimum.partials(_selection_partials(lambda x, y: x > y))


@register("where", promote=(1, 2), broadcast=True, linear=True, exact_scalars=True, saves=("condition",))
def where(ctx, condition, input, other):
    """input where condition holds, else other."""
    if condition.dtype != np.bool_:
        raise TypeError(f"where: condition must be a bool tensor, got {condition.dtype.name}")
    return _be.where(condition, input, other)


@where.grad
def _(ctx, g):
    c = ctx.inputs[0]
    zero = zeros_like(g)  # (not g * 0: a NaN gradient must not leak into the branch that was not taken)
    return None, where(c, g, zero), where(c, zero, g)


@register("clamp", methods=("clamp", "clip"), aliases=("clip",), promote=(0, 1, 2), broadcast=True,
          exact_scalars=True)
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


@clamp.partials
def _(ctx):
    """torch's clamp_backward: the input where min <= x <= max (never at a nan, of x or of a bound); a
    tensor bound where it binds, max also wherever max < min (then it is the result)."""
    x, lo, hi = (*ctx.inputs, None, None)[:3]  # bounds given by keyword may be absent
    inside = None
    if lo is not None:
        inside = x >= lo
    if hi is not None:
        upper = x <= hi
        inside = upper if inside is None else inside.logical_and(upper)
    below = above = None
    if isinstance(lo, Tensor):
        below = x < lo if hi is None else (x < lo).logical_and(lo < hi)
    if isinstance(hi, Tensor):
        above = x > hi if lo is None else (x > hi).logical_or(hi < lo)
    return inside, below, above


# ---------------------------------------------------------------- comparisons and tests (no gradient)
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


@register("logical_and", methods=("logical_and",), promote=(), differentiable=False, broadcast=True)
def logical_and(ctx, input, other):
    return array_module(input).logical_and(input, other)


@register("logical_or", methods=("logical_or",), promote=(), differentiable=False, broadcast=True)
def logical_or(ctx, input, other):
    return array_module(input).logical_or(input, other)


@register("logical_xor", methods=("logical_xor",), promote=(), differentiable=False, broadcast=True)
def logical_xor(ctx, input, other):
    return array_module(input).logical_xor(input, other)


@register("logical_not", methods=("logical_not",), promote=(), differentiable=False)
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
