"""The dtype conversion methods beyond tensor.py's (byte, char, short, cfloat, cdouble; chalf, whose dtype
mixprec lacks, refuses), conj_physical, and resolve_conj/resolve_neg.

torch can mark a tensor as lazily conjugated or negated (a bit, resolved on demand); mixprec has no such
bits, since every conjugate is computed when asked for, so resolve_conj and resolve_neg return the tensor
itself, and is_conj/is_neg are always False.
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..tensor import Tensor
from .complex_ops import conj
from .inplace import _method as _in_place
from .registry import register


def _converter(name, dtype):
    def method(self):
        return self.to(dtype)
    method.__name__, method.__qualname__ = name, f"Tensor.{name}"
    method.__doc__ = f"self.to({dtype.name})"
    return method


def _chalf(self):
    raise TypeError("chalf: mixprec has no complex32 dtype (torch's chalf, a pair of float16); use cfloat() for "
                    "complex64")


for _name, _dtype in (("byte", _dt.uint8), ("char", _dt.int8), ("short", _dt.int16), ("cfloat", _dt.complex64),
                      ("cdouble", _dt.complex128)):
    setattr(Tensor, _name, _converter(_name, _dtype))
Tensor.chalf = _chalf


@register("conj_physical", methods=("conj_physical",), composite=True)
def conj_physical(ctx, input):
    """The complex conjugate in new memory (a copy of a real tensor)."""
    return conj(input).clone()


Tensor.conj_physical_ = _in_place("conj_physical_", "conj_physical")


def resolve_conj(input):
    """input itself: mixprec has no lazy conjugate bit to resolve."""
    return input


def resolve_neg(input):
    """input itself: mixprec has no lazy negation bit to resolve."""
    return input


Tensor.resolve_conj, Tensor.resolve_neg = resolve_conj, resolve_neg
Tensor.is_conj = Tensor.is_neg = lambda self: False
