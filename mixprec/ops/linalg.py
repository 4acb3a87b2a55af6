"""Matrix products.

Float16/bfloat16 products follow the tensor-core contract: low-precision inputs,
float32 accumulation, one rounding of the result. NumPy has no fast half GEMM,
so on the CPU the inputs are widened to float32, multiplied with float32 BLAS and
the result rounded to the input dtype; that is the same arithmetic a GPU GEMM
with a float32 compute type performs. On CuPy, float16 matmul calls cuBLAS
(cublasGemmEx) with a float32 compute type by default; bfloat16 is widened the
same way as on the CPU so results do not depend on the CuPy build.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from .registry import register

LP = "lower_precision_fp"


def _mm(a, b):
    """a @ b with float32 accumulation for half inputs."""
    if a.dtype in _dt.LOW_PRECISION and (a.dtype == _dt.bfloat16 or isinstance(a, np.ndarray)):
        return (a.astype(np.float32) @ b.astype(np.float32)).astype(a.dtype)
    return a @ b


def _check(name, cond, a, b, what):
    if not cond:
        raise RuntimeError(f"{name}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied ({what})")


@register("matmul", methods=("matmul", "__matmul__"), aliases=("__matmul__",), promote=(0, 1),
          same_dtype=True, cuda=LP, cpu=LP)
def matmul(ctx, input, other):
    """Matrix product with NumPy's rules for 1-D operands and batch broadcasting."""
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError("matmul: both arguments need at least 1 dimension, got a 0-d tensor")
    k_other = other.shape[0] if other.ndim == 1 else other.shape[-2]
    _check("matmul", input.shape[-1] == k_other, input, other, "inner dimensions differ")
    return _mm(input, other)


@matmul.grad
def _(ctx, g):
    a, b = ctx.inputs
    if a.ndim == 1 and b.ndim == 1:
        return g * b, g * a
    if a.ndim == 1:   # (k) @ (..., k, n) -> (..., n)
        return (g.unsqueeze(-2) @ b.mT).squeeze(-2), a.unsqueeze(-1) * g.unsqueeze(-2)
    if b.ndim == 1:   # (..., m, k) @ (k) -> (..., m)
        return g.unsqueeze(-1) * b, (a.mT @ g.unsqueeze(-1)).squeeze(-1)
    return g @ b.mT, a.mT @ g   # batch dims broadcast: the engine sums them back


def _mm_grad(ctx, g):
    a, b = ctx.inputs
    return g @ b.mT, a.mT @ g


@register("mm", methods=("mm",), promote=(0, 1), same_dtype=True, cuda=LP, cpu=LP)
def mm(ctx, input, mat2):
    """(n, k) @ (k, m)."""
    _check("mm", input.ndim == 2 and mat2.ndim == 2, input, mat2, "mm needs two 2-D tensors")
    _check("mm", input.shape[1] == mat2.shape[0], input, mat2, "inner dimensions differ")
    return _mm(input, mat2)


mm.grad(_mm_grad)


@register("bmm", methods=("bmm",), promote=(0, 1), same_dtype=True, cuda=LP, cpu=LP)
def bmm(ctx, input, mat2):
    """(b, n, k) @ (b, k, m)."""
    _check("bmm", input.ndim == 3 and mat2.ndim == 3 and input.shape[0] == mat2.shape[0], input, mat2,
           "bmm needs two 3-D tensors with the same batch size")
    _check("bmm", input.shape[2] == mat2.shape[1], input, mat2, "inner dimensions differ")
    return _mm(input, mat2)


bmm.grad(_mm_grad)


@register("mv", methods=("mv",), promote=(0, 1), same_dtype=True, cuda=LP)
def mv(ctx, input, vec):
    """(n, k) @ (k)."""
    _check("mv", input.ndim == 2 and vec.ndim == 1 and input.shape[1] == vec.shape[0], input, vec,
           "mv needs a 2-D matrix and a 1-D vector of matching size")
    return _mm(input, vec)


@mv.grad
def _(ctx, g):
    a, v = ctx.inputs
    return g.unsqueeze(-1) * v, a.mT @ g


@register("dot", methods=("dot",), promote=(0, 1), same_dtype=True, cuda="promote")
def dot(ctx, input, other):
    """Inner product of two 1-D tensors."""
    _check("dot", input.ndim == 1 and other.ndim == 1 and input.shape == other.shape, input, other,
           "dot needs two 1-D tensors of the same size")
    return _mm(input, other)


@dot.grad
def _(ctx, g):
    a, b = ctx.inputs
    return g * b, g * a


@register("addmm", methods=("addmm",), promote=(0, 1, 2), cuda=LP, cpu=LP)
def addmm(ctx, input, mat1, mat2, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    _check("addmm", mat1.ndim == 2 and mat2.ndim == 2 and mat1.shape[1] == mat2.shape[0], mat1, mat2,
           "addmm needs two 2-D matrices with matching inner dimensions")
    ctx.beta, ctx.alpha = beta, alpha
    return _scaled_sum(input, _mm(mat1, mat2), beta, alpha)


def _scaled_sum(input, prod, beta, alpha):
    t = input.dtype.type
    out = prod if alpha == 1 else prod * t(alpha)
    if beta == 0:  # torch ignores input (even NaN) when beta is 0
        return out + array_module(out).zeros_like(input)
    return out + (input if beta == 1 else input * t(beta))


def _addmm_grad(ctx, g):
    _, m1, m2 = ctx.inputs[:3]
    gi = g * ctx.beta if ctx.beta != 1 else g
    gp = g * ctx.alpha if ctx.alpha != 1 else g
    return gi, gp @ m2.mT, m1.mT @ gp


addmm.grad(_addmm_grad)


@register("baddbmm", methods=("baddbmm",), promote=(0, 1, 2), cuda=LP, cpu=LP)
def baddbmm(ctx, input, batch1, batch2, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batched."""
    _check("baddbmm", batch1.ndim == 3 and batch2.ndim == 3 and batch1.shape[0] == batch2.shape[0]
           and batch1.shape[2] == batch2.shape[1], batch1, batch2, "baddbmm needs matching 3-D batches")
    ctx.beta, ctx.alpha = beta, alpha
    return _scaled_sum(input, _mm(batch1, batch2), beta, alpha)


baddbmm.grad(_addmm_grad)


@register("linear", functional=True, promote=(0, 1, 2), same_dtype=True, cuda=LP, cpu=LP)
def linear(ctx, input, weight, bias=None):
    """input @ weight.T + bias, with weight of shape (out_features, in_features)."""
    if weight.ndim != 2 or input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"linear: input of shape {tuple(input.shape)} does not fit weight of shape "
                           f"{tuple(weight.shape)} (expected input[..., {weight.shape[1] if weight.ndim == 2 else '?'}])")
    if bias is not None and bias.shape not in ((weight.shape[0],), ()):
        raise RuntimeError(f"linear: bias of shape {tuple(bias.shape)} does not fit weight of shape "
                           f"{tuple(weight.shape)} (expected ({weight.shape[0]},))")
    out = _mm(input, weight.T)
    return out if bias is None else out + bias


@linear.grad
def _(ctx, g):
    x, w, b = ctx.inputs
    gx = g @ w
    g2 = g.reshape(-1, g.shape[-1]) if g.ndim != 2 else g
    x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
    gw = g2.mT @ x2
    gb = None if b is None else g2.sum(0)
    return gx, gw, gb
