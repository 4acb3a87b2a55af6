"""More math: the log/exp/trig family, erfinv, atan2, addcmul/addcdiv, norm, tensordot,
cosine_similarity, normalize, dist and softmin, each with its reference autocast policy.

Like the rest of mixprec, float16/bfloat16 math runs in float32 and rounds once.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, erf
from .elementwise import ufunc, unary, where
from .opmath import compute_dtype, opmath
from .reduce import _axes, _expand_back, _reduction_rules
from .registry import register


_LN2, _LN10 = math.log(2.0), math.log(10.0)

log2 = unary("log2", ufunc("log2"), d_in=lambda x: 1 / (x * _LN2), cuda="fp32")
log10 = unary("log10", ufunc("log10"), d_in=lambda x: 1 / (x * _LN10), cuda="fp32")
exp2 = unary("exp2", ufunc("exp2"), d_out=lambda y: y * _LN2)
sinh = unary("sinh", ufunc("sinh"), d_in=lambda x: cosh(x), cuda="fp32")
cosh = unary("cosh", ufunc("cosh"), d_in=lambda x: sinh(x), cuda="fp32")
tan = unary("tan", ufunc("tan"), d_out=lambda y: 1 + y * y, cuda="fp32")
asin = unary("asin", ufunc("arcsin"), d_in=lambda x: (1 - x * x).rsqrt(), cuda="fp32")
acos = unary("acos", ufunc("arccos"), d_in=lambda x: -(1 - x * x).rsqrt(), cuda="fp32")


# ---------------------------------------------------------------- erfinv
def _erfinv_array(x):
    """Inverse error function on float64 arrays of either backend.

    Giles' single-precision approximation as a start, then Newton steps on
    erf(y) = x (erf is exact to float64), which converge to float64 accuracy.
    """
    xp = array_module(x)
    w = -xp.log((1.0 - x) * (1.0 + x))
    lo = w - 2.5
    p_lo = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p_lo = c + p_lo * lo
    hi = xp.sqrt(xp.maximum(w, 0.0)) - 3.0
    p_hi = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p_hi = c + p_hi * hi
    y = xp.where(w < 5.0, p_lo, p_hi) * x
    inside = xp.abs(x) < 1
    y = xp.where(inside, y, 0.0)
    for _ in range(3):
        y = y - (erf(y) - x) / (2.0 / math.sqrt(math.pi) * xp.exp(-y * y))
    y = xp.where(inside, y, xp.where(xp.abs(x) == 1, xp.copysign(xp.inf, x), xp.nan))
    return y


def _erfinv(a):
    if isinstance(a, np.ndarray):
        try:
            from scipy.special import erfinv as _scipy_erfinv
        except ImportError:
            _scipy_erfinv = None
        if _scipy_erfinv is not None:
            return _scipy_erfinv(a.astype(np.float64)).astype(a.dtype)
    return _erfinv_array(a.astype(np.float64)).astype(a.dtype)


erfinv = unary("erfinv", _erfinv, d_out=lambda y: (y * y).exp() * (math.sqrt(math.pi) / 2), cuda="fp32")


# ---------------------------------------------------------------- binary / ternary pointwise
@register("atan2", methods=("atan2", "arctan2"), aliases=("arctan2",), promote=(0, 1), cuda="promote")
def atan2(ctx, input, other):
    """Elementwise angle of the point (other, input): atan(input / other) in the right quadrant."""
    return opmath(ufunc("arctan2"), input, other)


@atan2.partials
def _(ctx):
    y, x = ctx.inputs
    r2 = x * x + y * y
    return x / r2, -y / r2


@register("addcmul", methods=("addcmul",), promote=(0, 1, 2), cuda="promote", saves=("tensor1", "tensor2"))
def addcmul(ctx, input, tensor1, tensor2, value=1):
    """input + value * tensor1 * tensor2, in one rounding for half inputs."""
    ctx.value = value
    return opmath(lambda a, b, c: a + b * c * a.dtype.type(value), input, tensor1, tensor2)


@addcmul.partials
def _(ctx):
    _, t1, t2 = ctx.inputs[:3]
    return 1.0, t2 * ctx.value, t1 * ctx.value


@register("addcdiv", methods=("addcdiv",), promote=(0, 1, 2), cuda="promote", saves=("tensor1", "tensor2"))
def addcdiv(ctx, input, tensor1, tensor2, value=1):
    """input + value * tensor1 / tensor2, in one rounding for half inputs."""
    if input.dtype.kind in "biu" and tensor1.dtype.kind in "biu" and tensor2.dtype.kind in "biu":
        raise TypeError("addcdiv: integer division is not supported; cast the inputs to a floating dtype")
    ctx.value = value
    return opmath(lambda a, b, c: a + b / c * a.dtype.type(value), input, tensor1, tensor2)


@addcdiv.partials
def _(ctx):
    _, t1, t2 = ctx.inputs[:3]
    return 1.0, ctx.value / t2, -ctx.value * t1 / (t2 * t2)


# ---------------------------------------------------------------- norm
def _parse_p(p):
    if p in ("fro", None):
        return 2.0
    if p == "nuc":
        raise NotImplementedError("norm: the nuclear norm (p='nuc') needs an SVD, which mixprec does not have")
    if isinstance(p, str) or not isinstance(p, (int, float, np.integer, np.floating)) or isinstance(p, bool):
        raise ValueError(f"norm: p must be a number, inf, -inf or 'fro', got {p!r}")
    return float(p)


@register("norm", methods=("norm",), cuda="fp32", saves=("input", "output"))
def norm(ctx, input, p="fro", dim=None, keepdim=False, dtype=None):
    """The vector p-norm over dim (all elements when None): 'fro' and 2 are Euclidean, inf the max |x|.

    float32 under CUDA autocast. An explicit dtype= casts the input to it first.
    """
    pv = _parse_p(p)
    if dtype is not None:
        input = input.astype(_dt.as_dtype(dtype))
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"norm: expected a floating input, got {input.dtype.name} (pass dtype= or cast first)")
    axes = _axes(dim, input.ndim, "norm")
    ctx.p, ctx.axes, ctx.keepdim, ctx.in_shape = pv, axes, keepdim, input.shape

    def f(x):
        xp = array_module(x)
        a = xp.abs(x)
        if pv == math.inf:
            out = xp.amax(a, axis=axes, keepdims=keepdim)
        elif pv == -math.inf:
            out = xp.amin(a, axis=axes, keepdims=keepdim)
        elif pv == 0:
            out = (a != 0).sum(axis=axes, keepdims=keepdim).astype(x.dtype)
        elif pv == 1:
            out = a.sum(axis=axes, keepdims=keepdim)
        elif pv == 2:
            out = xp.sqrt((a * a).sum(axis=axes, keepdims=keepdim))
        else:
            out = ((a ** x.dtype.type(pv)).sum(axis=axes, keepdims=keepdim)) ** x.dtype.type(1 / pv)
        return xp.asarray(out)
    return opmath(f, input)


def _norm_partial(ctx):
    """d norm / d x_i (in float32 for half inputs); 0 where the norm is 0, ties share an inf-norm's."""
    x = ctx.inputs[0]
    x = x.to(compute_dtype(x.dtype))
    out = _expand_back(ctx, ctx.output.to(x.dtype))
    p = ctx.p
    if p == 0:
        return x * 0
    if p == 1:
        return x.sign()
    if p in (math.inf, -math.inf):
        hit = (x.abs() == out).to(x.dtype)
        return x.sign() * hit / hit.sum(dim=ctx.axes, keepdim=True)
    zero = out == 0
    safe = where(zero, 1.0, out)
    if p == 2:
        return where(zero, 0.0, x / safe)
    return where(zero, 0.0, x.sign() * x.abs() ** (p - 1) / safe ** (p - 1))


_reduction_rules(norm, _norm_partial)


# ---------------------------------------------------------------- composites
def _same_dtype(name, a, b):
    if a.dtype != b.dtype:
        raise TypeError(f"{name}: expected both inputs to have the same dtype, got {a.dtype.name} and "
                        f"{b.dtype.name} (cast one with .to(dtype), or run under mp.autocast)")


@register("tensordot", promote=(0, 1), cuda="promote", composite=True)
def tensordot(ctx, a, b, dims=2):
    """Contract a's last ``dims`` dims with b's first ones, or the dims given as ([a dims], [b dims])."""
    _same_dtype("tensordot", a, b)
    if isinstance(dims, (int, np.integer)):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: dims={dims} must be between 0 and {min(a.ndim, b.ndim)}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        try:
            da, db = dims
        except (TypeError, ValueError):
            raise ValueError(f"tensordot: dims must be an int or a pair of dim lists, got {dims!r}") from None
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
        if len(da) != len(db):
            raise ValueError(f"tensordot: contracting {len(da)} dims of a with {len(db)} dims of b")
        da = [d % a.ndim for d in da]
        db = [d % b.ndim for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"tensordot: contracted dim {i} of a (size {a.shape[i]}) does not match dim {j} "
                               f"of b (size {b.shape[j]})")
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [i for i in range(b.ndim) if i not in db]
    k = int(np.prod([a.shape[i] for i in da]))
    out_shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b)
    lhs = a.permute(*free_a, *da).reshape(-1, k) if a.ndim else a.reshape(1, 1)
    rhs = b.permute(*db, *free_b).reshape(k, -1) if b.ndim else b.reshape(1, 1)
    return (lhs @ rhs).reshape(out_shape)


@register("cosine_similarity", functional=True, promote=(0, 1), cuda="fp32", composite=True)
def cosine_similarity(ctx, x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between x1 and x2 along dim (broadcasting), each norm clamped to >= eps."""
    n1 = norm(x1, 2, dim, True).maximum(eps)
    n2 = norm(x2, 2, dim, True).maximum(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim=dim)


@register("normalize", functional=True, cuda="fp32", composite=True)
def normalize(ctx, input, p=2.0, dim=1, eps=1e-12):
    """input divided by its p-norm along dim, the norm clamped to >= eps."""
    return input / norm(input, p, dim, True).maximum(eps)


@register("dist", methods=("dist",), promote=(0, 1), cuda="fp32", composite=True)
def dist(ctx, input, other, p=2):
    """The p-norm of input - other (broadcast)."""
    return norm(input - other, p)


@register("softmin", methods=("softmin",), functional=True, cuda="fp32", composite=True)
def softmin(ctx, input, dim=None, dtype=None):
    """softmax(-input) along dim."""
    from .activation import softmax
    return softmax(-input, dim, dtype)
