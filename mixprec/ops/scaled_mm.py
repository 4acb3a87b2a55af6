"""``_scaled_mm``: the matrix product of two float8 matrices with their scales, as torch's CPU kernel computes it.

    out = ((float32(a) * scale_a) @ (float32(b) * scale_b) + bias) [/ scale_result]  ->  out_dtype

Each float8 matrix is widened to float32 (exactly) and multiplied by its scale in float32, the product is a
float32 GEMM (float32 accumulation), a bias is added in float32, and the result is rounded once to
``out_dtype`` (default: ``a``'s dtype) by torch's cast (backend/float8.py for a float8 result). When
``out_dtype`` is given as float8_e4m3fn or float8_e5m2, the sum is first divided by ``scale_result`` if one
is given (multiplied by its float32 reciprocal, as torch does); otherwise ``scale_result`` is ignored (also
when out_dtype is left to default to a float8 ``a``: torch's CPU kernel then skips it too).

Scales: tensorwise (both one-element float32 tensors) or rowwise (``scale_a`` of shape (M, 1) and
``scale_b`` of shape (1, N), float32, contiguous); anything else is torch's ValueError "Invalid scaling
configuration". torch's CPU kernel, which mixprec follows, takes a and b in any memory layout, any K, and
mixed e4m3fn/e5m2 operands (its CUDA kernels want a row-major, b column-major and sizes divisible by 16);
``use_fast_accum`` changes nothing on the CPU. Like torch, the result of inputs that require grad requires
grad too, but torch defines no derivative: backward (or forward mode) through it raises RuntimeError.

No FP8 tensor-core path: on CUDA this would be the same dequantize-then-float32-GEMM through CuPy (the code
is array-module generic), but CuPy holds no float8 array, so float8 tensors, and with them this op, live on
the CPU (a float8 tensor on CUDA is refused with a TypeError).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..backend.float8 import astype, from_float8
from .registry import register

_SCALED = (_dt.float8_e4m3fn, _dt.float8_e5m2)  # the result dtypes scale_result applies to (torch's list)


@register("_scaled_mm", promote=(), saves=())
def _scaled_mm(ctx, input, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
               use_fast_accum=False):
    """_scaled_mm(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    the float8 matrix product ``(a * scale_a) @ (b * scale_b) + bias`` with float32 accumulation, rounded to
    out_dtype (default: a's dtype), as torch._scaled_mm on the CPU. Tensorwise scales are one-element
    float32 tensors; rowwise ones are (M, 1) for a and (1, N) for b."""
    for name, m in (("mat_a", input), ("mat_b", mat2)):
        if m.ndim != 2:
            raise RuntimeError(f"_scaled_mm: {name} must be a matrix, got {m.ndim} dimensions")
    (rows, inner), (inner_b, cols) = input.shape, mat2.shape
    if inner != inner_b:
        raise RuntimeError(f"_scaled_mm: mat_a and mat_b shapes cannot be multiplied ({rows}x{inner} and "
                           f"{inner_b}x{cols})")
    rowwise = _scaling(input, mat2, scale_a, scale_b)
    if bias is not None and bias.size != cols:
        raise RuntimeError(f"_scaled_mm: bias must have {cols} elements (N), got {bias.size}")
    rescale = scale_result is not None and out_dtype is not None and _dt.as_dtype(out_dtype) in _SCALED
    out_dtype = input.dtype if out_dtype is None else _dt.as_dtype(out_dtype)
    if scale_result is not None and (scale_result.size != 1 or scale_result.dtype != _dt.float32):
        raise RuntimeError("_scaled_mm: scale_result must be a one-element float32 tensor, got "
                           f"{scale_result.size} elements of {scale_result.dtype.name}")
    xp = array_module(input)
    f32 = np.float32
    sa = scale_a if rowwise else scale_a.reshape(())
    sb = scale_b if rowwise else scale_b.reshape(())
    out = xp.matmul(from_float8(input, _dt.float32) * sa, from_float8(mat2, _dt.float32) * sb)
    if bias is not None:
        out += astype(bias, _dt.float32).reshape(cols)
    if rescale:
        out *= f32(1) / scale_result.reshape(()).astype(f32)
    return astype(out, out_dtype, copy=False)


@_scaled_mm.grad
def _(ctx, *grads):
    raise RuntimeError("derivative for _scaled_mm is not implemented (as in torch): quantize outside autograd, "
                       "or differentiate a float32 matmul of the dequantized operands")


@_scaled_mm.jvp
def _(ctx, *tangents):
    raise RuntimeError("the forward-mode derivative of _scaled_mm is not implemented (as in torch)")


def _scaling(a, b, scale_a, scale_b) -> bool:
    """Whether the scales are rowwise (False: tensorwise); torch's ValueError for any other configuration."""
    fp8 = a.dtype in _dt.IS_FLOAT8 and b.dtype in _dt.IS_FLOAT8
    f32 = scale_a.dtype == _dt.float32 and scale_b.dtype == _dt.float32
    if fp8 and f32 and scale_a.size == 1 and scale_b.size == 1:
        return False
    if fp8 and f32 and scale_a.shape == (a.shape[0], 1) and scale_b.shape == (1, b.shape[1]) \
            and scale_a.flags.c_contiguous and scale_b.flags.c_contiguous:
        return True
    raise ValueError(
        "_scaled_mm: invalid scaling configuration: for tensorwise scaling a and b are float8 and both scales "
        "one-element float32 tensors; for rowwise scaling a and b are float8, scale_a a contiguous float32 "
        f"({a.shape[0]}, 1) and scale_b a contiguous float32 (1, {b.shape[1]}); got a {a.dtype.name} "
        f"{tuple(a.shape)}, b {b.dtype.name} {tuple(b.shape)}, scale_a {scale_a.dtype.name} "
        f"{tuple(scale_a.shape)}, scale_b {scale_b.dtype.name} {tuple(scale_b.shape)}")
