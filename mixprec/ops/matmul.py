"""Matrix products.

Float16/bfloat16 products follow the tensor-core contract: low-precision inputs,
float32 accumulation, one rounding of the result. NumPy has no fast half GEMM,
so on the CPU the inputs are widened to float32, multiplied with float32 BLAS and
the result rounded to the input dtype: the arithmetic of a GPU GEMM with a
float32 compute type. The fused ops (addmm, baddbmm, addbmm, addmv, addr,
linear with a bias) add their extra term in float32 too, before that single
rounding, as torch's CPU GEMM does. linalg.multi_dot and chain_matmul are built
from mm, in the cheapest order.

On a GPU every float product of matrices is one cuBLAS call that ops/gemm.py
makes (compute type CUBLAS_COMPUTE_32F: float32 accumulation on the tensor
cores), and the fused ops' extra term joins inside it, before its one rounding,
as in torch. A 1-D . 1-D dot is widened like on the CPU. See docs/core.md.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, is_array
from . import fp8_gemms as _fp8
from . import gemm
from .gemm import in_places, wanted_only
from .opmath import opmath
from .reduce import _add_reduce
from .registry import register
from .shape import broadcasts_to


def _mm(a, b):
    """a @ b, with float32 accumulation and one rounding for half inputs."""
    if gemm.on_gpu(a, b):
        return gemm.product(a, b)
    return opmath(operator.matmul, a, b, ints="keep")


def _mm_plus(name, a, b, c, alpha=1, beta=1):
    """alpha * (a @ b) + beta * c, rounded once for half inputs (torch ignores c, even NaN, when beta is 0)."""
    prod_shape = a.shape[:-1] + (b.shape[-1:] if b.ndim > 1 else ())  # (matching batches; b may be a vector)
    # (a bias, the product's last dims, is decided without broadcast_shapes: it is the common case)
    if c.shape != prod_shape[len(prod_shape) - c.ndim:] and not broadcasts_to(c.shape, prod_shape):
        raise RuntimeError(f"{name}: the added tensor of shape {tuple(c.shape)} does not broadcast to the "
                           f"product's shape {tuple(prod_shape)}")

    def combine(prod, c):
        t = prod.dtype.type
        out = prod if alpha == 1 else prod * t(alpha)
        if beta == 0:
            return out + array_module(out).zeros_like(c)
        return out + (c if beta == 1 else c * t(beta))
    if gemm.on_gpu(a, b):  # the addend joins inside cuBLAS's GEMM: one rounding, as in torch
        return gemm.addmm(c, a, b, alpha, beta)
    return opmath(lambda a, b, c: combine(a @ b, c), a, b, c, ints="keep")


def _c(t):
    """The conjugate of a complex tensor, a real one as it is: a product's gradient multiplies by the conjugate
    of the other factor (torch's convention for complex tensors; see mixprec/ops/complex_ops.py)."""
    return t.conj() if t.dtype.kind == "c" else t


def _H(t):
    """The conjugate transpose of a batch of matrices (the transpose of real ones)."""
    return _c(t.mT)


def _check(name, cond, a, b, what):
    if not cond:
        raise RuntimeError(f"{name}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied ({what})")


@register("matmul", methods=("matmul", "__matmul__"), rmethods=("__rmatmul__",), aliases=("__matmul__",), promote=(0, 1),
          same_dtype=True)
def matmul(ctx, input, other):
    """Matrix product with NumPy's rules for 1-D operands and batch broadcasting."""
    for name, x in (("input", input), ("other", other)):
        if not is_array(x):
            raise TypeError(f"matmul: {name} must be a Tensor, got {type(x).__name__}")
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError("matmul: both arguments need at least 1 dimension, got a 0-d tensor")
    k_other = other.shape[0] if other.ndim == 1 else other.shape[-2]
    _check("matmul", input.shape[-1] == k_other, input, other, "inner dimensions differ")
    if input.ndim > 2 and other.ndim > 2:
        try:
            np.broadcast_shapes(input.shape[:-2], other.shape[:-2])
            batches_broadcast = True
        except ValueError:
            batches_broadcast = False  # (the error is raised outside the handler: NumPy's is no part of it)
        _check("matmul", batches_broadcast, input, other, "batch dimensions do not broadcast")
    if _fp8.entered and (y := _fp8.product(ctx, "matmul", input, other)) is not None:  # in mp.amp.fp8_autocast
        return y
    return _mm(input, other)


def _bilinear_tangent(ctx, ta, tb, *_):
    """A product is linear in each factor: d(a @ b) = da @ b + a @ db."""
    a, b = ctx.inputs[:2]
    return ctx.op(ta, b) + ctx.op(a, tb)


matmul.jvp(_bilinear_tangent)


@matmul.grad
def _(ctx, g):
    if _fp8.noted and (fp8 := _fp8.grads(ctx, g, ctx.needs_input_grad)) is not None:  # forward ran an FP8 GEMM
        return fp8
    a, b = ctx.inputs
    if a.ndim == 1 and b.ndim == 1:
        return g * _c(b), g * _c(a)
    if a.ndim == 1:   # (k) @ (..., k, n) -> (..., n)
        return (g.unsqueeze(-2) @ _H(b)).squeeze(-2), _c(a).unsqueeze(-1) * g.unsqueeze(-2)
    if b.ndim == 1:   # (..., m, k) @ (k) -> (..., m)
        return g.unsqueeze(-1) * _c(b), (_H(a) @ g.unsqueeze(-1)).squeeze(-1)
    if a.ndim == 2 and b.ndim == 2:
        return _mm_grad(ctx, g)
    return g @ _H(b), _H(a) @ g   # batch dims broadcast: the engine sums them back


def _mm_grad(ctx, g):
    if _fp8.noted and (fp8 := _fp8.grads(ctx, g, ctx.needs_input_grad)) is not None:  # forward ran an FP8 GEMM
        return fp8
    a, b = ctx.inputs[:2]
    if a.ndim != 2 or b.ndim != 2:  # (batches of matrices: bmm)
        return g @ _H(b), _H(a) @ g
    wanted = ctx.needs_input_grad[:2]
    return in_places(wanted, mm_backward(g, a, b, wanted) if any(wanted) else ())


@register("_mm_backward", promote=(0, 1, 2), same_dtype=True, saves=("grad", "input", "mat2"))
def mm_backward(ctx, grad, input, mat2, wanted):
    """The gradients of ``input @ mat2`` (two matrices) that ``wanted`` (two bools) asks for, as one op:
    grad @ mat2^H and input^H @ grad. Four dispatches (two transposes, two products) become one; each
    product is the one ``_mm`` makes, so the gradients are bit for bit those of the two products."""
    if not (grad.ndim == input.ndim == mat2.ndim == 2 and grad.shape == (input.shape[0], mat2.shape[1])
            and input.shape[1] == mat2.shape[0]):
        raise RuntimeError(f"_mm_backward: grad {tuple(grad.shape)}, input {tuple(input.shape)} and mat2 "
                           f"{tuple(mat2.shape)} do not fit (expected grad (n, m), input (n, k), mat2 (k, m))")
    if len(wanted) != 2:
        raise ValueError(f"_mm_backward: wanted must hold two bools (input, mat2), got {wanted!r}")

    def h(a):
        return (a.conj() if a.dtype.kind == "c" else a).T
    return wanted_only(wanted, (lambda: _mm(grad, h(mat2)), lambda: _mm(h(input), grad)))


@mm_backward.grad
def _(ctx, *cotangents):
    # gi = g @ H(b) and gb = H(a) @ g are products: their cotangents ci, cb go back through each factor
    g, a, b, wanted = ctx.inputs
    ci, cb = in_places(wanted, cotangents)
    needs = ctx.needs_input_grad
    terms = [ci @ b if needs[0] and ci is not None else None, a @ cb if needs[0] and cb is not None else None]
    terms = [t for t in terms if t is not None]
    gg = terms[0] + terms[1] if len(terms) == 2 else terms[0] if terms else None
    ga = g @ _H(cb) if needs[1] and cb is not None else None
    gb = _H(ci) @ g if needs[2] and ci is not None else None
    return gg, ga, gb, None


@mm_backward.jvp
def _(ctx, tg, ta, tb, *_):
    g, a, b, wanted = ctx.inputs
    return wanted_only(wanted, (lambda: tg @ _H(b) + g @ _H(tb), lambda: _H(ta) @ g + _H(a) @ tg))


@register("mm", methods=("mm",), promote=(0, 1), same_dtype=True)
def mm(ctx, input, mat2):
    """(n, k) @ (k, m)."""
    _check("mm", input.ndim == 2 and mat2.ndim == 2, input, mat2, "mm needs two 2-D tensors")
    _check("mm", input.shape[1] == mat2.shape[0], input, mat2, "inner dimensions differ")
    if _fp8.entered and (y := _fp8.product(ctx, "mm", input, mat2)) is not None:  # in mp.amp.fp8_autocast
        return y
    return _mm(input, mat2)


mm.grad(_mm_grad)
mm.jvp(_bilinear_tangent)


@register("bmm", methods=("bmm",), promote=(0, 1), same_dtype=True)
def bmm(ctx, input, mat2):
    """(b, n, k) @ (b, k, m)."""
    _check("bmm", input.ndim == 3 and mat2.ndim == 3 and input.shape[0] == mat2.shape[0], input, mat2,
           "bmm needs two 3-D tensors with the same batch size")
    _check("bmm", input.shape[2] == mat2.shape[1], input, mat2, "inner dimensions differ")
    if _fp8.entered and (y := _fp8.product(ctx, "bmm", input, mat2)) is not None:  # in mp.amp.fp8_autocast
        return y
    return _mm(input, mat2)


bmm.grad(_mm_grad)
bmm.jvp(_bilinear_tangent)


@register("mv", methods=("mv",), promote=(0, 1), same_dtype=True)
def mv(ctx, input, vec):
    """(n, k) @ (k)."""
    _check("mv", input.ndim == 2 and vec.ndim == 1 and input.shape[1] == vec.shape[0], input, vec,
           "mv needs a 2-D matrix and a 1-D vector of matching size")
    return _mm(input, vec)


mv.jvp(_bilinear_tangent)


@mv.grad
def _(ctx, g):
    a, v = ctx.inputs
    return g.unsqueeze(-1) * _c(v), _H(a) @ g


@register("dot", methods=("dot",), promote=(0, 1), same_dtype=True)
def dot(ctx, input, other):
    """Inner product of two 1-D tensors."""
    _check("dot", input.ndim == 1 and other.ndim == 1 and input.shape == other.shape, input, other,
           "dot needs two 1-D tensors of the same size")
    return _mm(input, other)


def _dot_grad(ctx, g):
    a, b = ctx.inputs
    return g * _c(b), g * _c(a)


dot.grad(_dot_grad)
dot.jvp(_bilinear_tangent)


@register("vdot", methods=("vdot",), promote=(0, 1), same_dtype=True)
def vdot(ctx, input, other):
    """Inner product of two 1-D tensors, conjugating the first: for real tensors, dot (no autocast policy)."""
    _check("vdot", input.ndim == 1 and other.ndim == 1 and input.shape == other.shape, input, other,
           "vdot needs two 1-D tensors of the same size")
    return _mm(input, other)


vdot.grad(_dot_grad)
vdot.jvp(_bilinear_tangent)


@register("addmm", methods=("addmm",), promote=(0, 1, 2), same_dtype=True, saves=("mat1", "mat2"))
def addmm(ctx, input, mat1, mat2, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    _check("addmm", mat1.ndim == 2 and mat2.ndim == 2 and mat1.shape[1] == mat2.shape[0], mat1, mat2,
           "addmm needs two 2-D matrices with matching inner dimensions")
    ctx.beta, ctx.alpha = beta, alpha
    if _fp8.entered and (y := _fp8.product(ctx, "addmm", mat1, mat2, input, alpha, beta)) is not None:
        return y   # (in mp.amp.fp8_autocast)
    return _mm_plus("addmm", mat1, mat2, input, alpha, beta)


def _fused_grad(adjoints):
    """Backward of beta * c + alpha * product(m1, m2): adjoints(ga, m1, m2) gives the product's gradients
    for the output gradient ga = alpha * g."""
    def backward(ctx, g):
        if _fp8.noted:   # (addmm's FP8 product, when its forward ran one: mat1, mat2, then input)
            needs = ctx.needs_input_grad
            fp8 = _fp8.grads(ctx, g, (needs[1], needs[2], needs[0]))
            if fp8 is not None:
                return fp8[2], fp8[0], fp8[1]
        _, m1, m2 = ctx.inputs[:3]
        return (g * ctx.beta if ctx.beta != 1 else g, *adjoints(g * ctx.alpha if ctx.alpha != 1 else g, m1, m2))
    return backward


def _fused_tangent(product):
    """Tangent of beta * c + alpha * product(m1, m2), product bilinear: beta dc + alpha (p(dm1, m2) + p(m1, dm2))."""
    def tangent(ctx, tc, t1, t2, *_):
        _, m1, m2 = ctx.inputs[:3]
        out = (product(t1, m2) + product(m1, t2)) * ctx.alpha
        return out if ctx.beta == 0 else out + tc * ctx.beta
    return tangent


def _matmul_adjoints(ga, m1, m2):
    return ga @ _H(m2), _H(m1) @ ga


addmm.grad(_fused_grad(_matmul_adjoints))
addmm.jvp(_fused_tangent(operator.matmul))


def _check_batches(name, batch1, batch2):
    _check(name, batch1.ndim == 3 and batch2.ndim == 3 and batch1.shape[0] == batch2.shape[0]
           and batch1.shape[2] == batch2.shape[1], batch1, batch2, f"{name} needs matching 3-D batches")


@register("baddbmm", methods=("baddbmm",), promote=(0, 1, 2), same_dtype=True,
          saves=("batch1", "batch2"))
def baddbmm(ctx, input, batch1, batch2, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batched."""
    _check_batches("baddbmm", batch1, batch2)
    ctx.beta, ctx.alpha = beta, alpha
    return _mm_plus("baddbmm", batch1, batch2, input, alpha, beta)


baddbmm.grad(_fused_grad(_matmul_adjoints))
baddbmm.jvp(_fused_tangent(operator.matmul))


@register("addbmm", methods=("addbmm",), promote=(0, 1, 2), same_dtype=True)
def addbmm(ctx, input, batch1, batch2, beta=1, alpha=1):
    """beta * input + alpha * sum_b batch1[b] @ batch2[b], the batch sum inside one GEMM's accumulation."""
    _check_batches("addbmm", batch1, batch2)
    ctx.beta, ctx.alpha = beta, alpha
    b, n, k = batch1.shape
    wide = batch1.transpose(1, 0, 2).reshape(n, b * k)  # [batch1[0] | batch1[1] | ...] @ [batch2[0]; ...]
    return _mm_plus("addbmm", wide, batch2.reshape(b * k, batch2.shape[2]), input, alpha, beta)


addbmm.grad(_fused_grad(lambda ga, b1, b2: (ga @ _H(b2), _H(b1) @ ga)))
addbmm.jvp(_fused_tangent(lambda b1, b2: (b1 @ b2).sum(0)))


@register("addmv", methods=("addmv",), promote=(0, 1, 2), same_dtype=True)
def addmv(ctx, input, mat, vec, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    _check("addmv", mat.ndim == 2 and vec.ndim == 1 and mat.shape[1] == vec.shape[0], mat, vec,
           "addmv needs a 2-D matrix and a 1-D vector of matching size")
    ctx.beta, ctx.alpha = beta, alpha
    return _mm_plus("addmv", mat, vec, input, alpha, beta)


addmv.grad(_fused_grad(lambda ga, m, v: (ga.unsqueeze(-1) * _c(v), _H(m) @ ga)))
addmv.jvp(_fused_tangent(operator.matmul))


@register("addr", methods=("addr",), promote=(0, 1, 2), same_dtype=True)
def addr(ctx, input, vec1, vec2, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: expected a 1-D {name}, got shape {tuple(v.shape)}")
    ctx.beta, ctx.alpha = beta, alpha
    return _mm_plus("addr", vec1[:, None], vec2[None, :], input, alpha, beta)  # a product with k = 1: exact


addr.grad(_fused_grad(lambda ga, v1, v2: (ga @ _c(v2), ga.mT @ _c(v1))))
addr.jvp(_fused_tangent(lambda v1, v2: v1.unsqueeze(-1) * v2))


@register("linear", functional=True, promote=(0, 1, 2), same_dtype=True,
          saves=("input", "weight"))
def linear(ctx, input, weight, bias=None):
    """input @ weight.T + bias, with weight of shape (out_features, in_features)."""
    if weight.ndim != 2 or input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        k = weight.shape[1] if weight.ndim == 2 else "?"
        raise RuntimeError(f"linear: input of shape {tuple(input.shape)} does not fit weight of shape "
                           f"{tuple(weight.shape)} (expected input[..., {k}])")
    if bias is not None and bias.shape not in ((weight.shape[0],), ()):
        raise RuntimeError(f"linear: bias of shape {tuple(bias.shape)} does not fit weight of shape "
                           f"{tuple(weight.shape)} (expected ({weight.shape[0]},))")
    if _fp8.entered and (y := _fp8.product(ctx, "linear", input, weight, bias, transpose_b=True)) is not None:
        return y   # (in mp.amp.fp8_autocast)
    return _mm(input, weight.T) if bias is None else _mm_plus("linear", input, weight.T, bias)


@linear.jvp
def _(ctx, tx, tw, tb=None):
    x, w = ctx.inputs[:2]
    out = linear(tx, w) + linear(x, tw)
    return out if tb is None else out + tb


@linear.grad
def _(ctx, g):
    x, w, b = (*ctx.inputs, None)[:3]  # bias may be absent
    needs = ctx.needs_input_grad
    wanted = (needs[0], needs[1], b is not None and needs[2])  # (a first layer's input needs no gradient)
    if _fp8.noted and (fp8 := _fp8.grads(ctx, g, wanted)) is not None:  # forward ran an FP8 GEMM
        return fp8
    return in_places(wanted, linear_backward(g, x, w, wanted) if any(wanted) else ())


@register("_linear_backward", promote=(0, 1, 2), same_dtype=True, saves=("grad", "input", "weight"))
def linear_backward(ctx, grad, input, weight, wanted):
    """The gradients of linear that ``wanted`` (three bools) asks for, in the order (input, weight, bias), as
    one op: grad @ conj(weight), grad^T @ conj(input) and grad summed over the batch (each batch flattened to
    rows). Four dispatches become one; half inputs are widened once and each gradient is rounded once."""
    out_f, in_f = weight.shape if weight.ndim == 2 else (None, None)
    if weight.ndim != 2 or grad.ndim == 0 or grad.shape[-1] != out_f or input.shape[-1:] != (in_f,) \
            or grad.shape[:-1] != input.shape[:-1]:
        raise RuntimeError(f"_linear_backward: grad {tuple(grad.shape)}, input {tuple(input.shape)} and weight "
                           f"{tuple(weight.shape)} do not fit (expected grad (..., out), input (..., in), weight "
                           "(out, in))")
    if len(wanted) != 3:
        raise ValueError(f"_linear_backward: wanted must hold three bools (input, weight, bias), got {wanted!r}")
    if not _dt.is_differentiable(grad.dtype):
        raise TypeError(f"_linear_backward: needs floating or complex tensors, got {grad.dtype.name}")

    rows = math.prod(grad.shape[:-1])  # (not -1: a batch may be empty)

    if gemm.on_gpu(grad, weight):  # each gradient one GEMM (or a float32 sum), rounded once
        g2 = grad.reshape(rows, out_f)
        return wanted_only(wanted, (lambda: gemm.product(g2, weight).reshape(grad.shape[:-1] + (in_f,)),
                                    lambda: gemm.product(g2.T, input.reshape(rows, in_f)),
                                    lambda: opmath(lambda g: _add_reduce(g, 0, False, g.dtype), g2)))

    def compute(g, x, w):
        g2 = g.reshape(rows, out_f)
        return wanted_only(wanted, (lambda: g @ (w.conj() if w.dtype.kind == "c" else w),
                                    lambda: g2.T @ (x.conj() if x.dtype.kind == "c" else x).reshape(rows, in_f),
                                    lambda: _add_reduce(g2, 0, False, g2.dtype)))  # (as the sum op adds)
    return opmath(compute, grad, input, weight)


@linear_backward.grad
def _(ctx, *cotangents):
    # linear_backward is linear in grad and in (input, weight): with cotangents cx, cw, cb of its outputs
    # gx = g @ conj(w), gw = g2^T @ conj(x2), gb = sum(g2), each goes back through a product
    g, x, w, wanted = ctx.inputs
    cx, cw, cb = in_places(wanted, cotangents)
    needs = ctx.needs_input_grad
    g2 = _rows(g)
    gg = gx = gw = None
    if needs[0]:
        terms = [cx @ w.mT if cx is not None else None,
                 (_rows(x) @ cw.mT).reshape(g.shape) if cw is not None else None,
                 cb.expand(g.shape) if cb is not None else None]
        for t in terms:
            if t is not None:
                gg = t if gg is None else gg + t
    if needs[1] and cw is not None:
        gx = (g2 @ _c(cw)).reshape(x.shape)
    if needs[2] and cx is not None:
        gw = g2.mT @ _c(_rows(cx))
    return gg, gx, gw, None


def _rows(t):
    """A batch of vectors (..., n) as the rows of one matrix (None stays None)."""
    return None if t is None else t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


@linear_backward.jvp
def _(ctx, tg, tx, tw, *_):
    g, x, w, wanted = ctx.inputs

    def product(a, ta, b, tb):  # d(a @ b) with b conjugated, either tangent possibly None
        terms = [ta @ _c(b) if ta is not None else None, a @ _c(tb) if tb is not None else None]
        terms = [t for t in terms if t is not None]
        return terms[0] + terms[1] if len(terms) == 2 else terms[0] if terms else None

    g2, tg2 = _rows(g), _rows(tg)
    return wanted_only(wanted, (lambda: product(g, tg, w, tw),
                                lambda: product(g2.mT, None if tg2 is None else tg2.mT, _rows(x), _rows(tx)),
                                lambda: tg2.sum(0) if tg2 is not None else None))


# ---------------------------------------------------------------- chains of products
def _cheapest_splits(dims):
    """The matrix-chain order: split[i][j] is where the cheapest product of matrices i..j divides.

    Matrix i is dims[i] x dims[i + 1]; a product (a x b) @ (b x c) costs a*b*c
    multiplications (the textbook dynamic programme over sub-chains).
    """
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min((cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                                          for k in range(i, j))
    return split


def _chain_product(mats, split, i, j):
    if i == j:
        return mats[i]
    k = split[i][j]
    return mm(_chain_product(mats, split, i, k), _chain_product(mats, split, k + 1, j))


@register("linalg_multi_dot", promote=(0,), composite=True)
def linalg_multi_dot(ctx, tensors):
    """tensors[0] @ tensors[1] @ ... in the order that needs the fewest multiplications (mp.linalg.multi_dot).

    The first tensor may be 1-D (a row vector) and the last 1-D (a column
    vector); the others must be matrices. torch.linalg.multi_dot's rules.
    """
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"linalg.multi_dot: expected a list or tuple of tensors, got {type(tensors).__name__}")
    if len(tensors) < 2:
        raise RuntimeError(f"linalg.multi_dot: expected a list of at least 2 tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in allowed:
            raise RuntimeError(f"linalg.multi_dot: tensor {i} must be {' or '.join(f'{d}-D' for d in allowed)}, "
                               f"got shape {tuple(t.shape)}")
        if t.dtype != tensors[0].dtype:
            raise TypeError(f"linalg.multi_dot: expected all tensors to have the same dtype, got "
                            f"{tensors[0].dtype.name} (tensor 0) and {t.dtype.name} (tensor {i})")
    first, last = tensors[0], tensors[-1]
    mats = [first.unsqueeze(0) if first.ndim == 1 else first, *tensors[1:-1],
            last.unsqueeze(1) if last.ndim == 1 else last]
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"linalg.multi_dot: tensors {i} and {i + 1} with shapes {tuple(tensors[i].shape)} "
                               f"and {tuple(tensors[i + 1].shape)} cannot be multiplied")
    dims = [m.shape[0] for m in mats] + [mats[-1].shape[1]]
    out = _chain_product(mats, _cheapest_splits(dims), 0, len(mats) - 1)
    if last.ndim == 1:
        out = out.squeeze(1)
    return out.squeeze(0) if first.ndim == 1 else out


@register("chain_matmul", promote=(0,), composite=True)
def chain_matmul(ctx, *matrices):
    """matrices[0] @ matrices[1] @ ... (all 2-D) in the cheapest order: torch's older spelling of linalg.multi_dot."""
    for i, m in enumerate(matrices):  # (no matrix at all: dispatch finds no tensor and says so)
        if m.ndim != 2:
            raise RuntimeError(f"chain_matmul: matrix {i} must be 2-D, got shape {tuple(m.shape)}")
    return matrices[0].clone() if len(matrices) == 1 else linalg_multi_dot(matrices)
