"""Two-input elementwise math: hypot, copysign, fmax/fmin, logaddexp/logaddexp2, lerp, float_power, ldexp,
heaviside, nextafter, frexp (one input, two outputs), gcd and lcm.

Floating results are computed in opmath (float32 for half inputs) and rounded once; integer inputs of
floating math compute in float32, as torch's do. nextafter steps in the input's own dtype (a step in
float32 would round back to where it started). Gradients are given beside each op, as partial derivatives
where the op is smooth; heaviside has none in torch and refuses one here too.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor
from .elementwise import _partial, ufunc, where
from .inplace import _method as _in_place
from .opmath import opmath
from .registry import register

_LN2 = math.log(2.0)


def _real_floating(name, *arrays, ints=True):
    """Refuse complex (and bool and integer, unless ``ints``) inputs, which the op has no kernel for in torch."""
    for a in arrays:
        kind = getattr(a, "dtype", np.dtype(float)).kind
        if kind == "c" or (not ints and kind in "biu"):
            raise NotImplementedError(f"{name}: not implemented for {a.dtype.name} tensors (as in torch); it takes "
                                      f"{'real' if ints else 'floating'} tensors")


def _no_derivative(op):
    """torch defines no derivative of ``op``: both rules say so (a clear error, not a silent zero)."""
    def refuse(ctx, *_):
        raise RuntimeError(f"{op.name}: the derivative is not implemented (as in torch); detach its inputs first")
    op.grad(refuse)
    op.jvp(refuse)


# ---------------------------------------------------------------- smooth binary ops
@register("hypot", methods=("hypot",), promote=(0, 1), broadcast=True, saves=("input", "other", "output"))
def hypot(ctx, input, other):
    """sqrt(input**2 + other**2) without overflow in the squares; floating inputs only (as torch)."""
    _real_floating("hypot", input, other, ints=False)
    return opmath(ufunc("hypot"), input, other)


@hypot.partials
def _(ctx):
    a, b = ctx.inputs
    return _partial(a, a / ctx.output), _partial(b, b / ctx.output)


@register("copysign", methods=("copysign",), promote=(0, 1), broadcast=True, saves=("input", "other", "output"))
def copysign(ctx, input, other):
    """|input| with the sign (bit) of other; integers compute in float32."""
    _real_floating("copysign", input, other)
    return opmath(ufunc("copysign"), input, other)


@copysign.partials
def _(ctx):
    """+-1 for input (0 where input is 0, where the result does not move with it); other's sign is a step."""
    a, b = ctx.inputs
    return _partial(a, where(a == 0, 0.0, ctx.output / where(a == 0, 1.0, a))), _partial(b, 0.0)


def _fselect(name, pick):
    """fmax / fmin: the larger (smaller) value, the number where one of the two is a nan."""
    def forward(ctx, input, other):
        _real_floating(name, input, other)
        return getattr(array_module(input if hasattr(input, "shape") else other), pick)(input, other)
    forward.__name__ = forward.__qualname__ = name
    op = register(name, methods=(name,), promote=(0, 1), broadcast=True, saves=("input", "other"))(forward)
    op.__doc__ = f"Elementwise {pick}, ignoring a nan where the other value is a number."

    @op.partials
    def _(ctx):
        """All of the gradient to the value picked: input on a tie or when other is a nan (torch's rule)."""
        a, b = ctx.inputs
        beaten = a >= b if name == "fmax" else a <= b
        first = beaten.logical_or(b.isnan() if isinstance(b, Tensor) else b != b)
        return _partial(a, first), _partial(b, first.logical_not())
    return op


fmax = _fselect("fmax", "fmax")
fmin = _fselect("fmin", "fmin")


def _logaddexp(name, base_log):
    def forward(ctx, input, other):
        if name == "logaddexp" and input.dtype.kind == "c":
            return _complex_logaddexp(input, other)
        _real_floating(name, input, other, ints=False)
        return opmath(ufunc(name), input, other)
    forward.__name__ = forward.__qualname__ = name
    op = register(name, methods=(name,), promote=(0, 1), broadcast=True, saves=("input", "other"))(forward)
    op.__doc__ = f"{'log2(2**input + 2**other)' if base_log != 1 else 'log(exp(input) + exp(other))'}, without overflow."

    @op.partials
    def _(ctx):
        """b**a / (b**a + b**b) = 1 / (1 + b**(other - input)) for input, likewise for other (finite where one
        input is infinite, complex ones included)."""
        a, b = ctx.inputs
        d = (a - b) * base_log
        return _partial(a, 1 / (1 + (-d).exp())), _partial(b, 1 / (1 + d.exp()))
    return op


def _complex_logaddexp(a, b):
    """log(exp(a) + exp(b)) of complex numbers (NumPy has no complex logaddexp): the term with the larger real
    part factored out, m + log1p(exp(n - m)), so the exponential cannot overflow."""
    xp = array_module(a)
    first = a.real >= b.real
    m, n = xp.where(first, a, b), xp.where(first, b, a)
    return m + xp.log1p(xp.exp(n - m))


logaddexp = _logaddexp("logaddexp", 1.0)
logaddexp2 = _logaddexp("logaddexp2", _LN2)


@register("lerp", methods=("lerp",), promote=(0, 1), same_dtype=True, broadcast=True,
          saves=("input", "end", "weight"))
def lerp(ctx, input, end, weight):
    """input + weight * (end - input), in the form that is exact at weight 1 (end - (end - input) * (1 - w)
    for |w| >= 0.5). A number weight stays a number (float32 for half inputs: not rounded to their dtype)."""
    if input.dtype.kind in "biu":
        raise NotImplementedError(f"lerp: not implemented for {input.dtype.name} tensors (as in torch); it takes "
                                  "floating and complex tensors")
    if hasattr(weight, "dtype") and weight.dtype != input.dtype:
        raise TypeError(f"lerp: expected weight to have the dtype of input and end ({input.dtype.name}), got "
                        f"{weight.dtype.name}")

    def f(a, e, w):
        xp = array_module(a)
        w = a.dtype.type(w) if not hasattr(w, "shape") else w
        return xp.where(xp.abs(w) < 0.5, a + w * (e - a), e - (e - a) * (1 - w))
    return opmath(f, input, end, weight)


@lerp.partials
def _(ctx):
    a, e, w = ctx.inputs
    return _partial(a, 1 - w), _partial(e, w), _partial(w, e - a)


@register("ldexp", methods=("ldexp",), promote=(0, 1), broadcast=True, saves=("input", "other", "output"))
def ldexp(ctx, input, other):
    """input * 2**other; integer inputs give float32."""
    return opmath(lambda a, b: a * array_module(a if hasattr(a, "shape") else b).exp2(b), input, other)


@ldexp.partials
def _(ctx):
    a, b = ctx.inputs
    return _partial(a, 2.0 ** b), _partial(b, ctx.output * _LN2)


@register("float_power", methods=("float_power",), composite=True)
def float_power(ctx, input, exponent):
    """input ** exponent in double precision: float64 (complex128 when either is complex), whatever the inputs."""
    complex_ = any(isinstance(x, complex) or (isinstance(x, Tensor) and x.is_complex()) for x in (input, exponent))
    wide = _dt.complex128 if complex_ else _dt.float64
    a, b = (x.to(wide) if isinstance(x, Tensor) else x for x in (input, exponent))
    return a ** b


def _float_power_(self, exponent):
    """In-place float_power: only a base that already has the result's dtype (float64, or complex128) can hold it."""
    complex_ = self.is_complex() or isinstance(exponent, complex) or (isinstance(exponent, Tensor)
                                                                      and exponent.is_complex())
    wide = _dt.complex128 if complex_ else _dt.float64
    if self.dtype != wide:
        raise RuntimeError(f"float_power_: the base has dtype {self.dtype.name}, but the result is {wide.name}, "
                           "which it cannot hold; use float_power(), or convert the base first")
    return _in_place("float_power_", "float_power")(self, exponent)


# ---------------------------------------------------------------- steps: no derivative
@register("heaviside", methods=("heaviside",), promote=(0, 1), same_dtype=True, broadcast=True)
def heaviside(ctx, input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0 (0 at a nan, as torch)."""
    _real_floating("heaviside", input)

    def f(a, v):
        xp = array_module(a)
        return xp.where(a == 0, v, (a > 0).astype(a.dtype))
    return opmath(f, input, values, ints="keep")


_no_derivative(heaviside)


@register("nextafter", methods=("nextafter",), promote=(0, 1), broadcast=True, saves=("input", "other"))
def nextafter(ctx, input, other):
    """The next value of input's dtype after input, towards other; floating inputs only."""
    _real_floating("nextafter", input, other, ints=False)
    return ufunc("nextafter")(input, other)


@nextafter.partials
def _(ctx):
    """torch's rule: the step is taken as the identity in input (an ulp's move), and constant in other."""
    return _partial(ctx.inputs[0], 1.0), _partial(ctx.inputs[1], 0.0)


# ---------------------------------------------------------------- frexp: mantissa and exponent
@register("frexp", methods=("frexp",), saves=("output1",))
def frexp(ctx, input):
    """(mantissa, exponent) with input = mantissa * 2**exponent, 0.5 <= |mantissa| < 1 (0 at 0); the
    exponent is int32. Floating inputs only."""
    _real_floating("frexp", input, ints=False)
    wide = input.astype(np.float32) if input.dtype in _dt.LOW_PRECISION else input
    mantissa, exponent = array_module(input).frexp(wide)
    return mantissa.astype(input.dtype, copy=False), exponent.astype(np.int32, copy=False)


@frexp.grad
def _(ctx, g_mantissa, g_exponent):
    e = ctx.outputs[1]
    return None if g_mantissa is None else g_mantissa / 2.0 ** e.to(g_mantissa.dtype)


@frexp.jvp
def _(ctx, t):
    e = ctx.outputs[1]
    return t / 2.0 ** e.to(t.dtype), None


# ---------------------------------------------------------------- integer: gcd, lcm
def _integer(name):
    def forward(ctx, input, other):
        for a in (input, other):
            if getattr(a, "dtype", np.dtype(int)).kind not in "iu":
                raise NotImplementedError(f"{name}: not implemented for {a.dtype.name} tensors (as in torch); it "
                                          "takes integer tensors")
        return ufunc(name)(input, other)
    forward.__name__ = forward.__qualname__ = name
    op = register(name, methods=(name,), promote=(0, 1), broadcast=True, differentiable=False)(forward)
    op.__doc__ = f"Elementwise {'greatest common divisor' if name == 'gcd' else 'least common multiple'} " \
                 "(non-negative) of integer tensors."
    return op


gcd = _integer("gcd")
lcm = _integer("lcm")

for _name in ("hypot", "copysign", "lerp", "ldexp", "heaviside", "nextafter", "gcd", "lcm"):
    setattr(Tensor, _name + "_", _in_place(_name + "_", _name))
Tensor.float_power_ = _float_power_
