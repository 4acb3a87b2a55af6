"""quantile and nanquantile, with torch's semantics (and its five interpolation modes).

Both are composites: the positions are found on the raw data (a sort), and the
result is built from differentiable ops, ``lerp(x[lo], x[hi], w)`` with
``w = q * (k - 1) - lo``. So the gradient reaches the elements the answer was
read from, and q too (through w), in both modes of autograd. A slice with a NaN
gives NaN (quantile), or NaN only when all of it is NaN (nanquantile, which
otherwise skips them): torch reads the NaN that sorting put last, and so do we,
so even the gradient goes where torch's goes.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from ..backend.devices import CPU, to_device
from .elementwise import where
from .registry import register
from .shape import dim_index
from ..tensor import Tensor, tensor

_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _q_tensor(name, q, input):
    if isinstance(q, Tensor):
        if q.dtype != input.dtype:
            raise TypeError(f"{name}: q must have the input's dtype ({input.dtype.name}), got {q.dtype.name}")
        if q.ndim > 1:
            raise RuntimeError(f"{name}: q must be a number, a 0-d or a 1-d tensor, got shape {tuple(q.shape)}")
        values = to_device(q._array, CPU)
    elif isinstance(q, (int, float)) and not isinstance(q, bool):
        values = np.asarray(q)
        q = tensor(float(q), dtype=input.dtype, device=input.device)
    else:
        raise TypeError(f"{name}: q must be a number or a tensor, got {type(q).__name__}")
    if not np.all((values >= 0) & (values <= 1)):
        raise RuntimeError(f"{name}: q values must be in the range [0, 1], got {values.tolist()}")
    return q


def _quantile(name, input, q, dim, keepdim, interpolation, skip_nan):
    if input.dtype not in (_dt.float32, _dt.float64):
        raise TypeError(f"{name}: the input must be float32 or float64 (as in torch), got {input.dtype.name}"
                        + ("; cast it, or run under mp.autocast('cpu')" if _dt.is_floating(input.dtype) else ""))
    if interpolation not in _MODES:
        raise ValueError(f"{name}: interpolation must be one of {_MODES}, got {interpolation!r}")
    q_in = q
    q = _q_tensor(name, q, input)
    if input.numel() == 0:
        raise RuntimeError(f"{name}: the input tensor must be non-empty")
    if dim is None:
        x, d = input.reshape(-1), 0
    else:
        d = dim_index(dim, input.ndim, name)
        x = input.permute(*[i for i in range(input.ndim) if i != d], d) if input.ndim else input.reshape(1)
    xp = array_module(x._array)
    n = x.shape[-1]
    order = xp.argsort(x._array, axis=-1, kind="stable" if xp is np else None)  # NaNs last (CuPy's sort is stable)
    nans = xp.isnan(x._array)
    count = (n - nans.sum(-1, keepdims=True)) if skip_nan else xp.full(x.shape[:-1] + (1,), n)
    nothing = (count == 0) if skip_nan else nans.any(-1, keepdims=True)  # the answer is the NaN sorted last
    last = Tensor._wrap((count - 1).astype(input.dtype))
    ranks = where(Tensor._wrap(nothing), float(n - 1), q.reshape(-1) * last)  # (..., nq)
    r = ranks._array
    r = {"lower": xp.floor, "higher": xp.ceil, "nearest": xp.round}.get(interpolation, lambda a: a)(r)
    lo, hi = xp.floor(r).astype(np.int64), xp.ceil(r).astype(np.int64)
    x_lo = x.gather(-1, Tensor._wrap(xp.take_along_axis(order, lo, -1)))
    if interpolation in ("linear", "midpoint"):
        x_hi = x.gather(-1, Tensor._wrap(xp.take_along_axis(order, hi, -1)))
        w = ranks - Tensor._wrap(lo.astype(input.dtype)) if interpolation == "linear" else 0.5
        out = x_lo + w * (x_hi - x_lo)
    else:
        out = x_lo
    out = out.permute(out.ndim - 1, *range(out.ndim - 1))  # q first, then the kept dims
    if keepdim and input.ndim:  # a 0-d input has no dim to keep: its quantiles stay 0-d (as torch)
        out = out.reshape(out.shape[0], *((1,) * input.ndim)) if dim is None else out.unsqueeze(d + 1)
    return out[0] if not isinstance(q_in, Tensor) or q_in.ndim == 0 else out


@register("quantile", methods=("quantile",), promote=(0, 1), composite=True)
def quantile(ctx, input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles of input over dim (all of it when None); q a number or a 1-D tensor (first dim of the
    result). A slice holding a NaN gives NaN."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, skip_nan=False)


@register("nanquantile", methods=("nanquantile",), promote=(0, 1), composite=True)
def nanquantile(ctx, input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaNs (NaN only where a slice is all NaN)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, skip_nan=True)
