"""Rounding: floor, ceil, trunc, round (to a number of decimals), frac.

Each rounds in opmath (float32 for half inputs: exact, since every half value is a
float32 value) and keeps the input's dtype. An integer input is already whole: floor,
ceil, trunc and round give a copy of it (torch's rule); frac refuses it. The rounded
ops are piecewise constant, so their gradient is zero everywhere (torch's choice at
the jumps too); frac's is one.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..tensor import Tensor
from ..creation import zeros_like
from .inplace import _method as _in_place
from .opmath import opmath
from .registry import register


def _floating(name, input):
    """Refuse the inputs torch's kernel has no rounding for: bool always, and complex."""
    if input.dtype.kind in "bc":
        raise NotImplementedError(f"{name}: not implemented for {input.dtype.name} tensors (as in torch); it takes "
                                  "integer and floating tensors")


def _zero_rules(op):
    """Both rules of a piecewise-constant op: a zero gradient and a zero tangent (zeros, not g * 0: a nan or
    inf gradient arriving must not turn into nan)."""
    op.grad(lambda ctx, g: (zeros_like(g),))
    op.jvp(lambda ctx, t: zeros_like(t))


def _rounding(name, ufunc_name):
    def forward(ctx, input):
        _floating(name, input)
        if input.dtype.kind in "iu":
            return input.copy()
        return opmath(lambda a: getattr(array_module(a), ufunc_name)(a), input)
    forward.__name__ = forward.__qualname__ = name
    op = register(name, methods=(name,), saves=())(forward)
    op.__doc__ = f"Elementwise {name}; an integer tensor is returned as a copy. Gradient: zero."
    _zero_rules(op)
    return op


floor = _rounding("floor", "floor")
ceil = _rounding("ceil", "ceil")
trunc = _rounding("trunc", "trunc")


@register("round", methods=("round",), saves=())
def round_(ctx, input, decimals=0):
    """Round half to even, at ``decimals`` digits after the point (before it when negative):
    rint(x * 10**d) / 10**d, or rint(x / 10**-d) * 10**-d, computed in the input's (opmath) dtype."""
    _floating("round", input)
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
        raise TypeError(f"round: decimals must be an int, got {type(decimals).__name__}")
    if input.dtype.kind in "iu":
        if decimals != 0:
            raise NotImplementedError("round: decimals= is not implemented for integer tensors (as in torch)")
        return input.copy()

    def f(a):
        xp, scale = array_module(a), a.dtype.type(10.0 ** abs(decimals))
        if decimals == 0:
            return xp.rint(a)
        return xp.rint(a * scale) / scale if decimals > 0 else xp.rint(a / scale) * scale
    return opmath(f, input)


_zero_rules(round_)


@register("frac", methods=("frac",), saves=())
def frac(ctx, input):
    """x - trunc(x), with x's sign; floating inputs only (as torch). Gradient: one."""
    if not _dt.is_floating(input.dtype):
        raise NotImplementedError(f"frac: not implemented for {input.dtype.name} tensors (as in torch); it takes "
                                  "floating tensors")
    return opmath(lambda a: a - array_module(a).trunc(a), input)


frac.grad(lambda ctx, g: (g,))
frac.jvp(lambda ctx, t: t)

for _name in ("floor", "ceil", "trunc", "round", "frac"):
    setattr(Tensor, _name + "_", _in_place(_name + "_", _name))
