"""Complex numbers: building them, taking them apart, and their autograd convention.

complex64/complex128 tensors exist for the FFT and eig; these are the ops that
turn real data into complex and back. Autograd follows torch: the gradient of a
real loss L with respect to a complex z = x + iy is dL/dx + i dL/dy (twice the
conjugate Wirtinger derivative), so a gradient step moves z downhill just as it
moves a real tensor. Three rules make every op obey it:

* an elementwise op's backward multiplies by the *conjugate* of its partial
  derivative (``Op.partials``; holomorphic ops such as exp or mul need nothing
  else);
* a complex gradient reaching a real input keeps its real part
  (``autograd.engine._fit``), and a complex tangent of a real output likewise
  (``autograd.forward_ad``);
* an op that is not holomorphic (conj, real, imag, abs, angle) states its rules
  explicitly, or through a partial p with d out = Re(p dz).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, where
from ..tensor import Tensor
from ..creation import zeros_like
from .registry import register


def _from_parts(re, im):
    """The complex array re + i im, written part by part: re + im * 1j would turn an infinite imaginary part
    into a NaN real one (inf * 1j is nan + inf j)."""
    out = array_module(re).empty(np.broadcast_shapes(re.shape, im.shape), dtype=_dt.complex_of(re.dtype))
    out.real[...] = re
    out.imag[...] = im
    return out


def _require_complex(name, a):
    if not _dt.is_complex(a.dtype):
        raise TypeError(f"{name}: expected a complex tensor, got {a.dtype.name}")


@register("real", view=True, linear=True)
def real(ctx, input):
    """The real part (a real tensor comes back as a view of itself, as in torch)."""
    return input.real if _dt.is_complex(input.dtype) else input.view()


real.grad(lambda ctx, g: (g,))  # (the engine turns it into a complex gradient, imaginary part 0)


@register("imag", view=True, linear=True)
def imag(ctx, input):
    """The imaginary part of a complex tensor."""
    if not _dt.is_complex(input.dtype):
        raise TypeError(f"imag: is not defined for real tensors ({input.dtype.name}); it is only for complex ones")
    return input.imag


imag.grad(lambda ctx, g: (g * 1j,))  # dL/dy lands on the imaginary part
Tensor.real = property(lambda self: self if not _dt.is_complex(self.dtype) else real(self),
                       doc="The real part: the tensor itself when it is real (as torch's), else a differentiable op.")
Tensor.imag = property(lambda self: imag(self), doc="The imaginary part of a complex tensor (a differentiable op).")


@register("conj", methods=("conj",), view=True, linear=True)
def conj(ctx, input):
    """The complex conjugate; a real tensor is returned as a view of itself."""
    return array_module(input).conj(input) if _dt.is_complex(input.dtype) else input.view()


conj.grad(lambda ctx, g: (g.conj(),))


@register("angle", methods=("angle",))
def angle(ctx, input):
    """The argument of each element in (-pi, pi] (0 or pi for real values), as a real tensor."""
    xp = array_module(input)
    if input.dtype.kind in "biu":
        input = input.astype(_dt.float32)
    if _dt.is_complex(input.dtype):
        return xp.angle(input)
    t = input.dtype.type
    return where(xp.isnan(input), input, where(input < 0, t(np.pi), t(0)))  # keeps bfloat16 on CuPy too


@angle.partials
def _(ctx):
    """d angle = Im(conj(z) dz) / |z|^2 = Re(-i conj(z) dz / |z|^2); 0 at z = 0 and for real inputs (torch)."""
    from .elementwise import where
    z = ctx.inputs[0]
    if not _dt.is_complex(z.dtype):
        return zeros_like(z),
    mag2 = (z * z.conj()).real
    return where(mag2 == 0, 0.0, z.conj() * -1j / where(mag2 == 0, 1.0, mag2)),


@register("view_as_real", view=True, linear=True)
def view_as_real(ctx, input):
    """A complex (...) tensor as a real (..., 2) one: real and imaginary parts side by side."""
    _require_complex("view_as_real", input)
    return array_module(input).stack((input.real, input.imag), axis=-1)


view_as_real.grad(lambda ctx, g: (view_as_complex(g),))


@register("view_as_complex", linear=True)
def view_as_complex(ctx, input):
    """A real (..., 2) tensor as a complex (...) one (float32 -> complex64, float64 -> complex128)."""
    if input.dtype not in (_dt.float32, _dt.float64):
        raise TypeError(f"view_as_complex: expected a float32 or float64 tensor, got {input.dtype.name} "
                        "(mixprec has no complex32; cast to float32 first)")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError(f"view_as_complex: the input must have a last dimension of size 2, got shape "
                           f"{tuple(input.shape)}")
    return _from_parts(input[..., 0], input[..., 1])


view_as_complex.grad(lambda ctx, g: (view_as_real(g),))


@register("complex", promote=(0, 1), same_dtype=True, broadcast=True)
def complex_(ctx, real, imag):
    """real + i imag from two float32 (or two float64) tensors."""
    if real.dtype not in (_dt.float32, _dt.float64):
        raise TypeError(f"complex: expected float32 or float64 parts, got {real.dtype.name}")
    return _from_parts(real, imag)


complex_.partials(lambda ctx: (1.0, 1j))


@register("polar", promote=(0, 1), same_dtype=True, broadcast=True, saves=("abs", "angle", "output"))
def polar(ctx, abs, angle):
    """abs * (cos(angle) + i sin(angle)), from two float32 (or two float64) tensors."""
    if abs.dtype not in (_dt.float32, _dt.float64):
        raise TypeError(f"polar: expected float32 or float64 inputs, got {abs.dtype.name} (cast to float32, or "
                        "run under mp.autocast('cpu'), whose float32 policy for polar does it)")
    xp = array_module(abs)
    return _from_parts(abs * xp.cos(angle), abs * xp.sin(angle))


@polar.partials
def _(ctx):
    theta = ctx.inputs[1]
    return complex_(theta.cos(), theta.sin()), ctx.output * 1j
