"""``mp.masked``: torch.masked's reductions and normalisations of a tensor with a mask.

    import mixprec as mp
    total = mp.masked.sum(x, 1, mask=x > 0)          # the sum of the positive elements of each row
    probs = mp.masked.softmax(scores, -1, mask=keep) # masked-out positions get probability 0

The mask (bool, or anything compared with 0) broadcasts to the input's shape; ``mask=None`` keeps
every element. Each function replaces the masked-out elements by its reduction's identity (0 for
sum, 1 for prod, -inf for amax/argmax/logsumexp, +inf for amin/argmin, NaN for median, which then
skips them) and applies the ordinary op, so a fully masked-out slice gives that identity; mean,
var and std, which have none, give NaN there. Everything is built of mixprec ops: gradients and
forward-mode tangents come from them, and a masked-out element receives no gradient.
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as _dt
from . import ops as _ops
from .nn import functional as _F
from .tensor import Tensor
from .creation import full_like

__all__ = ["sum", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin", "mean", "median", "norm",
           "var", "std", "softmax", "log_softmax", "softmin", "normalize", "logaddexp", "logsumexp"]

_op = _ops.get


def _input_mask(name, input, mask):
    """The mask as a bool tensor of the input's shape (None stays None)."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked.{name}: mask must be a Tensor or None, got {type(mask).__name__}")
    if mask.ndim > input.ndim:
        raise IndexError(f"masked.{name}: the mask has more dims ({mask.ndim}) than the input ({input.ndim}); it "
                         "must broadcast to the input's shape")
    if mask.dtype != np.bool_:
        mask = mask != 0
    return mask if mask.shape == input.shape else mask.expand(*input.shape)


def _identity(kind, input):
    """The identity of a reduction for input's dtype: 'max' (-inf, or the dtype's least value), 'min', or a
    number."""
    if kind not in ("max", "min"):
        return kind
    if _dt.is_floating(input.dtype):
        return -math.inf if kind == "max" else math.inf
    if input.dtype == np.bool_:
        raise TypeError(f"masked: a bool input has no {kind} identity; convert it first")
    info = np.iinfo(input.dtype)
    return int(info.min if kind == "max" else info.max)


def _combined(name, input, mask, kind):
    """input with its masked-out elements replaced by the identity ``kind`` (see _identity)."""
    m = _input_mask(name, input, mask)
    return input if m is None else _op("where")(m, input, _identity(kind, input))


def _dims(dim, ndim):
    """dim as a tuple of dims (None and () mean all of them, as torch.masked reads them)."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    return (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)


def _to(t, dtype):
    return t if dtype is None else t.to(dtype)


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The sum of the masked-in elements over dim (0 where all are masked out)."""
    return _op("sum")(_combined("sum", input, mask, 0), _dims(dim, input.ndim), keepdim, dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The product of the masked-in elements over dim (1 where all are masked out)."""
    return _op("prod")(_combined("prod", input, mask, 1), _dims(dim, input.ndim), keepdim, dtype=dtype)


def cumsum(input, dim, *, dtype=None, mask=None):
    """The running sum along dim, masked-out elements counting as 0 (in input's dtype unless dtype is given)."""
    return _op("cumsum")(_combined("cumsum", input, mask, 0), dim, dtype=dtype or input.dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """The running product along dim, masked-out elements counting as 1."""
    return _op("cumprod")(_combined("cumprod", input, mask, 1), dim, dtype=dtype or input.dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The largest masked-in element over dim (-inf, or the dtype's least value, where all are masked out)."""
    return _to(_op("amax")(_combined("amax", input, mask, "max"), _dims(dim, input.ndim), keepdim), dtype)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The smallest masked-in element over dim (+inf, or the dtype's greatest value, where all are masked out)."""
    return _to(_op("amin")(_combined("amin", input, mask, "min"), _dims(dim, input.ndim), keepdim), dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the largest masked-in element along dim, in input's dtype (as torch.masked returns it)."""
    out = _op("argmax")(_combined("argmax", input, mask, "max"), dim, keepdim)
    return out.to(dtype or input.dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the smallest masked-in element along dim, in input's dtype."""
    out = _op("argmin")(_combined("argmin", input, mask, "min"), dim, keepdim)
    return out.to(dtype or input.dtype)


def _count(name, input, dim, keepdim, mask):
    """How many elements are masked in over dim (int64)."""
    m = _input_mask(name, input, mask)
    if m is None:
        m = full_like(input, True, dtype=_dt.bool_)
    return _op("sum")(m, _dims(dim, input.ndim), keepdim)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean of the masked-in elements over dim (NaN where all are masked out)."""
    out_dtype = _dt.as_dtype(dtype) if dtype is not None else input.dtype
    if not _dt.is_differentiable(out_dtype):
        raise ValueError(f"masked.mean: the result needs a floating or complex dtype, got {out_dtype.name}; pass "
                         "dtype=")
    total = sum(input, dim, keepdim=keepdim, dtype=out_dtype, mask=mask)
    return total / _count("mean", input, dim, keepdim, mask)


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The lower median of the masked-in elements along dim (NaN where all are masked out; an integer input
    must have none such)."""
    floating = _dt.is_floating(input.dtype)
    x = input if floating else input.to(_dt.float32)
    d = _dims(dim, input.ndim)[0]
    out = _op("nanmedian")(_combined("median", x, mask, math.nan), d, keepdim).values
    if floating:
        return out
    if bool(out.isnan().any()):
        raise ValueError("masked.median: an integer input cannot have a fully masked-out slice (its median is NaN)")
    return out.to(dtype or input.dtype)


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """log(sum(exp())) of the masked-in elements over dim (-inf where all are masked out)."""
    out = _op("logsumexp")(_combined("logsumexp", input, mask, "max"), _dims(dim, input.ndim), keepdim)
    return _to(out, dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """log(exp(input) + exp(other)) elementwise, a masked-out element of either counting as -inf."""
    a = _combined("logaddexp", input, input_mask, "max")
    b = _combined("logaddexp", other, other_mask, "max")
    where, maximum = _op("where"), _op("maximum")
    top = maximum(a, b)
    finite = top.isinf().logical_not()  # (both -inf: -inf; an inf: inf)
    safe = where(finite, top, 0.0)
    out = where(finite, safe + ((a - safe).exp() + (b - safe).exp()).log(), top)
    return out.to(dtype or input.dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The vector ord-norm of the masked-in elements over dim (masked-out ones count as 0; as +inf for
    ord=-inf)."""
    fill = math.inf if ord == -math.inf else 0
    return _op("norm")(_combined("norm", input, mask, fill), ord, _dims(dim, input.ndim), keepdim, dtype=dtype)


def _std_var(name, input, dim, unbiased, correction, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction is not None:
        raise TypeError(f"masked.{name}: pass correction or unbiased, not both")
    correction = (1.0 if unbiased else 0.0) if unbiased is not None else 1.0 if correction is None else correction
    out_dtype = _dt.as_dtype(dtype) if dtype is not None else input.dtype
    if not _dt.is_differentiable(out_dtype):
        out_dtype = _dt.float32
    count = _count(name, input, dim, True, mask)
    centred = input - sum(input, dim, keepdim=True, dtype=out_dtype, mask=mask) / count
    total = sum(centred * centred.conj(), dim, keepdim=keepdim, dtype=out_dtype, mask=mask)
    count = count.reshape(total.shape).to(total.real.dtype if total.dtype.kind == "c" else total.dtype)
    if correction != 0:
        count = _op("clamp")(count - correction, 0)
    out = (total / count).to(out_dtype)
    return out.sqrt() if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The variance of the masked-in elements over dim (correction 1, Bessel's, by default; NaN where too few
    are masked in)."""
    return _std_var("var", input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """The standard deviation of the masked-in elements over dim (the square root of var)."""
    return _std_var("std", input, dim, unbiased, correction, keepdim, dtype, mask, True)


def softmax(input, dim, *, dtype=None, mask=None):
    """softmax along dim over the masked-in elements (masked-out ones get 0; NaN where all are masked out)."""
    return _F.softmax(_combined("softmax", input, mask, "max"), _dims(dim, input.ndim)[0], dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """log_softmax along dim over the masked-in elements (masked-out ones get -inf)."""
    return _F.log_softmax(_combined("log_softmax", input, mask, "max"), _dims(dim, input.ndim)[0], dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """softmin along dim over the masked-in elements (masked-out ones get 0)."""
    return _F.softmin(_combined("softmin", input, mask, "min"), _dims(dim, input.ndim)[0], dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """input divided by the ord-norm of its masked-in elements along dim (at least eps); masked-out elements
    give 0."""
    nrm = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    return _combined("normalize", input, mask, 0) / _op("clamp")(nrm, eps)
