"""More math: the log/exp/trig family, erfinv, atan2, addcmul/addcdiv, norm, tensordot,
cosine_similarity, normalize, softmin, cross, renorm and the distances (dist, cdist, pdist,
pairwise_distance), each with its reference autocast policy.

Like the rest of mixprec, float16/bfloat16 math runs in float32 and rounds once.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, special
from ..tensor import tensor
from ..creation import zeros_like
from .elementwise import ufunc, unary, where
from .opmath import compute_dtype, opmath
from .reduce import _axes, _expand_back, _reduction_rules, check_nonempty
from .registry import get, register
from .shape import dim_index
from .activation import softmax


_LN2, _LN10 = math.log(2.0), math.log(10.0)

log2 = unary("log2", ufunc("log2"), d_in=lambda x: 1 / (x * _LN2))
log10 = unary("log10", ufunc("log10"), d_in=lambda x: 1 / (x * _LN10))
exp2 = unary("exp2", ufunc("exp2"), d_out=lambda y: y * _LN2)
sinh = unary("sinh", ufunc("sinh"), d_in=lambda x: cosh(x))
cosh = unary("cosh", ufunc("cosh"), d_in=lambda x: sinh(x))
tan = unary("tan", ufunc("tan"), d_out=lambda y: 1 + y * y)
asin = unary("asin", ufunc("arcsin"), d_in=lambda x: (1 - x * x).rsqrt())
acos = unary("acos", ufunc("arccos"), d_in=lambda x: -(1 - x * x).rsqrt())


# ---------------------------------------------------------------- erfinv
def _erfinv(a):
    return special.call("erfinv", a)


erfinv = unary("erfinv", _erfinv, d_out=lambda y: (y * y).exp() * (math.sqrt(math.pi) / 2))


# ---------------------------------------------------------------- binary / ternary pointwise
@register("atan2", methods=("atan2", "arctan2"), aliases=("arctan2",), promote=(0, 1),
          broadcast=True)
def atan2(ctx, input, other):
    """Elementwise angle of the point (other, input): atan(input / other) in the right quadrant."""
    return opmath(ufunc("arctan2"), input, other)


@atan2.partials
def _(ctx):
    y, x = ctx.inputs
    r2 = x * x + y * y
    return x / r2, -y / r2


@register("addcmul", methods=("addcmul",), promote=(0, 1, 2), broadcast=True,
          saves=("tensor1", "tensor2"))
def addcmul(ctx, input, tensor1, tensor2, value=1):
    """input + value * tensor1 * tensor2, in one rounding for half inputs."""
    ctx.value = value
    return opmath(lambda a, b, c: a + b * c * a.dtype.type(value), input, tensor1, tensor2)


@addcmul.partials
def _(ctx):
    _, t1, t2 = ctx.inputs[:3]
    return 1.0, t2 * ctx.value, t1 * ctx.value


@register("addcdiv", methods=("addcdiv",), promote=(0, 1, 2), broadcast=True,
          saves=("tensor1", "tensor2"))
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
        return p
    if isinstance(p, str) or not isinstance(p, (int, float, np.integer, np.floating)) or isinstance(p, bool):
        raise ValueError(f"norm: p must be a number, inf, -inf or 'fro', got {p!r}")
    return float(p)


@register("norm", methods=("norm",), saves=("input", "output"))
def norm(ctx, input, p="fro", dim=None, keepdim=False, dtype=None):
    """The vector p-norm over dim (all elements when None): 'fro' and 2 are Euclidean, inf the max |x|; 'nuc' the
    nuclear norm (the sum of the singular values) of the matrices in two dims.

    float32 under CUDA autocast. An explicit dtype= casts the input to it first.
    """
    pv = _parse_p(p)
    if dtype is not None:
        input = input.astype(_dt.as_dtype(dtype))
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"norm: expected a floating input, got {input.dtype.name} (pass dtype= or cast first)")
    axes = _axes(dim, input.ndim, "norm")
    if pv == "nuc":
        return _nuclear(ctx, input, axes, keepdim)
    if pv in (math.inf, -math.inf):  # the max/min of nothing is undefined
        check_nonempty("norm", input, axes, RuntimeError)
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


def _matrices_last(x, axes):
    """The permutation that moves the two dims ``axes`` of x last."""
    return [i for i in range(x.ndim) if i not in axes] + list(axes)


def _nuclear(ctx, x, axes, keepdim):
    """The nuclear norm of the matrices in dims ``axes`` (two of them, in that order)."""
    if len(axes) != 2:
        raise RuntimeError(f"norm: p='nuc' needs exactly two dims (the matrices' rows and columns), got dim={axes}")
    ctx.p, ctx.axes, ctx.keepdim, ctx.in_shape = "nuc", axes, keepdim, x.shape
    xp = array_module(x)
    a = xp.transpose(x, _matrices_last(x, axes)).astype(compute_dtype(x.dtype))  # (half precision: in float32)
    try:
        out = xp.linalg.svd(a, compute_uv=False).sum(-1).astype(x.dtype)
    except np.linalg.LinAlgError:
        raise RuntimeError("norm: p='nuc': the SVD did not converge (the input holds inf or NaN)") from None
    return xp.asarray(xp.expand_dims(out, tuple(sorted(axes))) if keepdim else out)


def _norm_partial(ctx):
    """d norm / d x_i, in float32 for half inputs."""
    x = ctx.inputs[0]
    if ctx.p == "nuc":  # d sum(s) / dA = U Vh (thin), in x's layout
        perm = _matrices_last(x, ctx.axes)
        svd = get("linalg_svd")  # (by name: the linalg modules import this one)
        a = x.to(compute_dtype(x.dtype)).permute(*perm)
        finite = a.isfinite().all(-1, keepdim=True).all(-2, keepdim=True)  # per matrix
        u, _, vh = svd(where(finite, a, 0.0), False)
        # a matrix holding inf or NaN has a NaN norm, and so NaN slopes (its SVD is not defined)
        return where(finite, u @ vh, math.nan).permute(*np.argsort(perm).tolist()).to(x.dtype)
    x = x.to(compute_dtype(x.dtype))
    return _p_norm_partial(x, _expand_back(ctx, ctx.output.to(x.dtype)), ctx.p, ctx.axes)


def _p_norm_partial(x, norm, p, dims):
    """d ||x||_p / d x_i for the p-norm over dims, given that norm broadcast against x.

    0 where the norm is 0, and at x_i = 0 for p < 1 (where |x|^(p-1) is infinite),
    as torch; ties share an inf-norm's gradient evenly.
    """
    if p == 0:
        return zeros_like(x)  # (not x * 0: that is nan at an infinite x)
    if p == 1:
        return x.sign()
    if p in (math.inf, -math.inf):  # a nan is the extreme of its group (torch's mask); its sign, 0, zeroes it
        hit = (x.abs() == norm).logical_or(x.isnan()).to(x.dtype)
        return x.sign() * hit / hit.sum(dim=dims, keepdim=True)
    zero = norm == 0
    safe = where(zero, 1.0, norm)
    if p == 2:
        return where(zero, 0.0, x / safe)
    magnitude = where(x == 0, 1.0, x.abs())  # sign(0) = 0 then zeroes it without an inf
    return where(zero, 0.0, x.sign() * magnitude ** (p - 1) / safe ** (p - 1))


_reduction_rules(norm, _norm_partial)


# ---------------------------------------------------------------- composites
def _same_dtype(name, a, b):
    if a.dtype != b.dtype:
        raise TypeError(f"{name}: expected both inputs to have the same dtype, got {a.dtype.name} and "
                        f"{b.dtype.name} (cast one with .to(dtype), or run under mp.autocast)")


@register("tensordot", promote=(0, 1), composite=True)
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
    shape_a, shape_b = list(a.shape), list(b.shape)
    for i, j in zip(da, db):  # a contracted dim of size 1 broadcasts against its partner, as in torch
        if a.shape[i] != b.shape[j] and 1 not in (a.shape[i], b.shape[j]):
            raise RuntimeError(f"tensordot: contracted dim {i} of a (size {a.shape[i]}) does not match dim {j} "
                               f"of b (size {b.shape[j]})")
        shape_a[i] = shape_b[j] = max(a.shape[i], b.shape[j]) if 0 not in (a.shape[i], b.shape[j]) else 0
    if tuple(shape_a) != a.shape or tuple(shape_b) != b.shape:
        a, b = a.expand(shape_a), b.expand(shape_b)
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [i for i in range(b.ndim) if i not in db]
    k = int(np.prod([a.shape[i] for i in da]))
    out_shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b)
    m, n = (int(np.prod([t.shape[i] for i in free])) for t, free in ((a, free_a), (b, free_b)))
    lhs = a.permute(*free_a, *da).reshape(m, k) if a.ndim else a.reshape(1, 1)  # (counted: -1 is ambiguous at k = 0)
    rhs = b.permute(*db, *free_b).reshape(k, n) if b.ndim else b.reshape(1, 1)
    return (lhs @ rhs).reshape(out_shape)


@register("cosine_similarity", functional=True, promote=(0, 1), composite=True)
def cosine_similarity(ctx, x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between x1 and x2 along dim (broadcasting), each norm clamped to >= eps."""
    try:  # broadcast first: each norm runs over the broadcast dim, as the sum of products does
        shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        raise RuntimeError(f"cosine_similarity: shapes {tuple(x1.shape)} and {tuple(x2.shape)} do not "
                           f"broadcast") from None
    x1, x2 = x1.expand(shape), x2.expand(shape)
    n1 = norm(x1, 2, dim, True).maximum(eps)
    n2 = norm(x2, 2, dim, True).maximum(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim=dim)


@register("normalize", functional=True, composite=True)
def normalize(ctx, input, p=2.0, dim=1, eps=1e-12):
    """input divided by its p-norm along dim, the norm clamped to >= eps."""
    return input / norm(input, p, dim, True).maximum(eps)


@register("dist", methods=("dist",), promote=(0, 1), composite=True)
def dist(ctx, input, other, p=2):
    """The p-norm of input - other (broadcast)."""
    return norm(input - other, p)


@register("softmin", methods=("softmin",), functional=True, composite=True)
def softmin(ctx, input, dim=None, dtype=None):
    """softmax(-input) along dim."""
    return softmax(-input, dim, dtype)


@register("renorm", methods=("renorm",), composite=True)
def renorm(ctx, input, p, dim, maxnorm):
    """Each slice along dim (input.select(dim, i)) whose p-norm exceeds maxnorm, scaled to norm maxnorm.

    The scale is maxnorm / (norm + 1e-7), as torch's, and its gradient flows
    through the norm too.
    """
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)) or not p > 0:
        raise ValueError(f"renorm: p must be a positive number, got {p!r}")
    if not maxnorm >= 0:
        raise ValueError(f"renorm: maxnorm must be >= 0, got {maxnorm!r}")
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got shape {tuple(input.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"renorm: expected a floating input, got {input.dtype.name}")
    d = dim_index(dim, input.ndim, "renorm")
    n = norm(input, p, tuple(i for i in range(input.ndim) if i != d), True)
    over = n > maxnorm  # (a slice whose norm is nan is not over: it stays as it is, as torch's)
    return input * where(over, maxnorm / (where(over, n, 1.0) + 1e-7), 1.0)  # no nan from the unused branch


# ---------------------------------------------------------------- cross product
def _cross_array(a, b, d):
    """a x b along axis d of size 3 (the other axes broadcast), on either backend."""
    def at(x, k):
        return x[(slice(None),) * d + (k,)]
    a0, a1, a2 = (at(a, k) for k in range(3))
    b0, b1, b2 = (at(b, k) for k in range(3))
    return array_module(a).stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=d)


@register("cross", methods=("cross",), promote=(0, 1), same_dtype=True)
def cross(ctx, input, other, dim=None):
    """Cross product of 3-vectors along dim; the other dims broadcast (same number of dims on both).

    dim=None picks the first dim of size 3 and warns, as torch does (its default
    will become -1, torch.linalg.cross's).
    """
    if input.ndim != other.ndim:
        raise RuntimeError(f"cross: inputs must have the same number of dimensions, got shapes "
                           f"{tuple(input.shape)} and {tuple(other.shape)}")
    if dim is None:
        dim = next((i for i, n in enumerate(input.shape) if n == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in input of shape {tuple(input.shape)}; pass dim=")
        warnings.warn("cross: calling without dim is deprecated; pass dim= (dim=-1 is torch.linalg.cross's "
                      "default)", UserWarning, stacklevel=3)
    d = dim_index(dim, input.ndim, "cross")
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"cross: dimension {d} must have length 3 in both inputs, got shapes "
                           f"{tuple(input.shape)} and {tuple(other.shape)}")
    try:
        np.broadcast_shapes(input.shape, other.shape)
    except ValueError:
        raise RuntimeError(f"cross: shapes {tuple(input.shape)} and {tuple(other.shape)} cannot be broadcast "
                           "together") from None
    ctx.dim = d
    return opmath(lambda a, b: _cross_array(a, b, d), input, other, ints="keep")


@cross.grad
def _(ctx, g):
    a, b = ctx.inputs[:2]
    return cross(b, g, ctx.dim), cross(g, a, ctx.dim)  # g . (a x b) = a . (b x g) = b . (g x a)


@cross.jvp
def _(ctx, ta, tb, *_):
    a, b = ctx.inputs[:2]
    return cross(ta, b, ctx.dim) + cross(a, tb, ctx.dim)


# ---------------------------------------------------------------- distances
_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


def _check_distance_p(name, p, negative=False):
    """p as a float; a negative p only where ``negative`` (pairwise_distance: the norm's (sum |x|^p)^(1/p))."""
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)) or np.isnan(p) \
            or (p < 0 and not negative):
        raise ValueError(f"{name}: p must be a {'' if negative else 'non-negative '}number (inf allowed), got {p!r}")
    return float(p)


def _cdist_array(a, b, p, use_mm):
    """Distances between the rows of a (..., P, M) and b (..., R, M)."""
    xp = array_module(a)
    if use_mm:  # |a - b|^2 = |a|^2 + |b|^2 - 2 a.b: one GEMM instead of P*R*M differences
        sq = (a * a).sum(-1)[..., :, None] + (b * b).sum(-1)[..., None, :]
        return xp.sqrt(xp.maximum(sq - 2 * (a @ xp.swapaxes(b, -1, -2)), 0))
    diff = xp.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == 0:  # the count of differing features; nan where a difference is nan, as torch's cdist
        return xp.where(xp.isnan(diff), diff, diff != 0).sum(-1).astype(a.dtype)
    if diff.shape[-1] == 0 or p == 1:
        return diff.sum(-1)
    if p == 2:
        return xp.sqrt((diff * diff).sum(-1))
    if p == math.inf:
        return diff.max(-1)
    return (diff ** p).sum(-1) ** (1 / p)


@register("cdist", promote=(0, 1), same_dtype=True, saves=("x1", "x2", "output"))
def cdist(ctx, x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): shape (..., P, R).

    For p = 2 with more than 25 rows on a side (or compute_mode=
    "use_mm_for_euclid_dist") the squared distances come from one matrix product,
    as torch's do: faster, less exact for nearly equal rows. Batch dims broadcast.
    """
    pv = _check_distance_p("cdist", p)
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"cdist: {compute_mode!r} is not a valid value for compute_mode; expected one of "
                         + ", ".join(repr(m) for m in _CDIST_MODES))
    for name, x in (("x1", x1), ("x2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist: {name} must have at least 2 dimensions (..., rows, features), "
                               f"got shape {tuple(x.shape)}")
        if not _dt.is_floating(x.dtype):
            raise TypeError(f"cdist: expected floating-point inputs, {name} is {x.dtype.name}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"cdist: x1 and x2 must have the same number of features (last dim), got shapes "
                           f"{tuple(x1.shape)} and {tuple(x2.shape)}")
    try:
        np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    except ValueError:
        raise RuntimeError(f"cdist: batch dims of shapes {tuple(x1.shape)} and {tuple(x2.shape)} cannot be "
                           "broadcast together") from None
    ctx.p = pv
    use_mm = pv == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary" and (x1.shape[-2] > 25 or x2.shape[-2] > 25)))
    return opmath(lambda a, b: _cdist_array(a, b, pv, use_mm), x1, x2)


def _euclid_ratio(ctx, g):
    """g / dist, 0 where the distance is 0 (the Euclidean distance's gradient there, as torch)."""
    d = ctx.output
    zero = d == 0
    return where(zero, 0.0, g / where(zero, 1.0, d))


def _cdist_partial(ctx):
    """d dist_ij / d (x1_i - x2_j), shape (..., P, R, M), in float32 for half inputs.

    nan where torch's cdist kernel has one: at a nan difference for p = 1, and for p = inf where
    |diff| - dist is nan (a nan, or an infinite difference)."""
    x1, x2 = ctx.inputs[:2]
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    diff = diff.to(compute_dtype(diff.dtype))
    dist = ctx.output.to(diff.dtype).unsqueeze(-1)
    partial = _p_norm_partial(diff, dist, ctx.p, -1)
    if ctx.p == 1:
        return where(diff.isnan(), diff, partial)
    if ctx.p == math.inf:
        gap = diff.abs() - dist
        return where(gap.isnan(), gap, partial)
    return partial


@cdist.grad
def _(ctx, g):
    x1, x2 = ctx.inputs[:2]
    if ctx.p == 2:  # (x1_i - x2_j) / d_ij summed with matrix products: no (P, R, M) tensor
        r = _euclid_ratio(ctx, g)
        return x1 * r.sum(-1, keepdim=True) - r @ x2, x2 * r.sum(-2).unsqueeze(-1) - r.mT @ x1
    gp = g.unsqueeze(-1) * _cdist_partial(ctx)
    return gp.sum(-2), -gp.sum(-3)


@cdist.jvp
def _(ctx, t1, t2, *_):
    x1, x2 = ctx.inputs[:2]
    if ctx.p == 2:  # (x1_i - x2_j) . (t1_i - t2_j) / d_ij
        along = (x1 * t1).sum(-1).unsqueeze(-1) + (x2 * t2).sum(-1).unsqueeze(-2) - x1 @ t2.mT - t1 @ x2.mT
        return _euclid_ratio(ctx, along)
    return (_cdist_partial(ctx) * (t1.unsqueeze(-2) - t2.unsqueeze(-3))).sum(-1)


@register("pdist", functional=True, composite=True)
def pdist(ctx, input, p=2.0):
    """p-norm distance between rows i < j of a 2-D input (N, M): N (N - 1) / 2 values, pairs in row-major order."""
    pv = _check_distance_p("pdist", p)
    if input.ndim != 2:
        raise RuntimeError(f"pdist: expected a 2-D input (rows, features), got shape {tuple(input.shape)}")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"pdist: expected a floating-point input, got {input.dtype.name}")
    i, j = (tensor(k, device=input.device) for k in np.triu_indices(input.shape[0], 1))
    return norm(input.index_select(0, i) - input.index_select(0, j), pv, 1)


@register("pairwise_distance", functional=True, promote=(0, 1), composite=True)
def pairwise_distance(ctx, x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """p-norm of x1 - x2 + eps along the last dim (broadcasting): torch's distance of matching rows."""
    return norm(x1 - x2 + eps, _check_distance_p("pairwise_distance", p, negative=True), -1, keepdim)
