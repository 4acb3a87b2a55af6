"""Finite differences and integrals along a dim: diff, gradient, trapezoid (trapz), cumulative_trapezoid.

All are composites of slicing and arithmetic, so both modes of autograd come from their parts.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..tensor import Tensor
from .registry import register
from .shape import cat, dim_index


def _part(t, d, start, stop=None):
    """t[..., start:stop, ...] along dim d."""
    return t[(slice(None),) * d + (slice(start, stop),)]


@register("diff", methods=("diff",), composite=True)
def diff(ctx, input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (out[i] = x[i+1] - x[i], applied n times), after putting prepend
    before and append after input along dim; for bool input, whether neighbours differ."""
    if input.ndim == 0:
        raise RuntimeError("diff: expected a tensor with at least one dimension, got a 0-d tensor")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise RuntimeError(f"diff: n must be a non-negative int, got {n!r}")
    d = dim_index(dim, input.ndim, "diff")
    if n == 0:  # (as torch: input itself, without prepend and append)
        return input
    x = cat([p for p in (prepend, input, append) if p is not None], d) if prepend is not None or \
        append is not None else input
    for _ in range(n):
        if x.shape[d] == 0:
            break
        later, earlier = _part(x, d, 1), _part(x, d, 0, -1)
        x = later != earlier if x.dtype == np.bool_ else later - earlier
    return x


def _spacings(spacing, dims, input):
    """One spacing per dim: a number (uniform steps) or a 1-D coordinate tensor of the dim's length."""
    if spacing is None:
        return [1] * len(dims)
    if isinstance(spacing, (int, float)) and not isinstance(spacing, bool):
        return [spacing] * len(dims)
    if isinstance(spacing, Tensor) and spacing.ndim == 0:
        return [spacing.item()] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise RuntimeError(f"gradient: expected one spacing per dim ({len(dims)}), got {len(spacing)}")
    for s, d in zip(spacing, dims):
        if isinstance(s, Tensor) and s.ndim != 0 and (s.ndim != 1 or s.shape[0] != input.shape[d]):
            raise RuntimeError(f"gradient: the coordinates of dim {d} must be 1-D of its length {input.shape[d]}, "
                               f"got shape {tuple(s.shape)}")
    return [s.item() if isinstance(s, Tensor) and s.ndim == 0 else s for s in spacing]


def _along(t, d, ndim):
    """A 1-D tensor shaped to broadcast along dim d of an ndim-d tensor."""
    return t.reshape([t.shape[0] if i == d else 1 for i in range(ndim)])


def _gradient_uniform(f, d, h, edge_order):
    inner = (_part(f, d, 2) - _part(f, d, 0, -2)) / (2 * h)
    if edge_order == 1:
        first = (_part(f, d, 1, 2) - _part(f, d, 0, 1)) / h
        last = (_part(f, d, -1) - _part(f, d, -2, -1)) / h
    else:
        first = (-1.5 * _part(f, d, 0, 1) + 2 * _part(f, d, 1, 2) - 0.5 * _part(f, d, 2, 3)) / h
        last = (0.5 * _part(f, d, -3, -2) - 2 * _part(f, d, -2, -1) + 1.5 * _part(f, d, -1)) / h
    return cat([first, inner, last], d)


def _gradient_coordinates(f, d, x, edge_order):
    """Second-order accurate differences for unevenly spaced coordinates x (NumPy's and torch's weights). The
    weights are computed in x's own dtype (integer coordinates: true division, the default float dtype) and the
    result has the dtype input and weights promote to, as torch's."""
    x = _along(x, d, f.ndim)
    step = _part(x, d, 1) - _part(x, d, 0, -1)  # h_i = x[i+1] - x[i]
    h1, h2 = _part(step, d, 0, -1), _part(step, d, 1)
    inner = (-h2 / (h1 * (h1 + h2)) * _part(f, d, 0, -2) + (h2 - h1) / (h1 * h2) * _part(f, d, 1, -1)
             + h1 / (h2 * (h1 + h2)) * _part(f, d, 2))
    if edge_order == 1:
        first = (_part(f, d, 1, 2) - _part(f, d, 0, 1)) / _part(step, d, 0, 1)
        last = (_part(f, d, -1) - _part(f, d, -2, -1)) / _part(step, d, -1)
    else:
        a, b = _part(step, d, 0, 1), _part(step, d, 1, 2)
        first = (-(2 * a + b) / (a * (a + b)) * _part(f, d, 0, 1) + (a + b) / (a * b) * _part(f, d, 1, 2)
                 - a / (b * (a + b)) * _part(f, d, 2, 3))
        a, b = _part(step, d, -2, -1), _part(step, d, -1)
        last = (b / (a * (a + b)) * _part(f, d, -3, -2) - (a + b) / (a * b) * _part(f, d, -2, -1)
                + (2 * b + a) / (b * (a + b)) * _part(f, d, -1))
    return cat([first, inner, last], d)


@register("gradient", composite=True)
def gradient(ctx, input, *, spacing=1, dim=None, edge_order=1):
    """The derivative estimated along each dim (all when dim is None), one tensor per dim: central differences
    inside, one-sided ones of order edge_order (1 or 2) at the ends. spacing: a number, one per dim, or 1-D
    coordinates per dim."""
    if edge_order not in (1, 2):
        raise RuntimeError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    if input.ndim == 0:
        raise RuntimeError("gradient: expected a tensor with at least one dimension, got a 0-d tensor")
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, (int, np.integer)) else list(dim)
    dims = [dim_index(d, input.ndim, "gradient") for d in dims]
    if input.dtype == _dt.bool_:
        raise RuntimeError("gradient: bool input is not supported (bools have no differences, as in torch)")
    f = input if _dt.is_differentiable(input.dtype) else input.to(_dt.float32)
    out = []
    for d, h in zip(dims, _spacings(spacing, dims, input)):
        if input.shape[d] < edge_order + 1:
            raise RuntimeError(f"gradient: dim {d} has {input.shape[d]} elements; edge_order={edge_order} needs at "
                               f"least {edge_order + 1}")
        if isinstance(h, Tensor) and h.dtype == _dt.bool_:
            raise RuntimeError(f"gradient: the coordinates of dim {d} are bool; expected numbers")
        out.append(_gradient_coordinates(input, d, h, edge_order) if isinstance(h, Tensor)
                   else _gradient_uniform(f, d, h, edge_order))
    return tuple(out)


def _segments(name, y, x, dx, dim):
    """(the area of each trapezoid along dim, d): (x[i+1] - x[i]) * (y[i] + y[i+1]) / 2, x's steps dx."""
    if x is not None and dx is not None:
        raise TypeError(f"{name}: pass x or dx, not both")
    if y.ndim == 0:
        raise IndexError(f"{name}: expected a tensor with at least one dimension, got a 0-d tensor")
    d = dim_index(dim, y.ndim, name)
    if y.dtype == _dt.bool_ or (isinstance(x, Tensor) and x.dtype == _dt.bool_):
        raise RuntimeError(f"{name}: bool input is not supported for x or y; expected numbers")
    mid = _part(y, d, 1) + _part(y, d, 0, -1)
    if x is None:
        return mid * ((1 if dx is None else dx) / 2), d
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return mid * (x / 2), d
    if x.ndim == 1:
        steps = _along(x[1:] - x[:-1], d, y.ndim)
    else:
        steps = _part(x, x.ndim - y.ndim + d, 1) - _part(x, x.ndim - y.ndim + d, 0, -1)
    return steps * mid / 2, d


@register("trapezoid", composite=True)
def trapezoid(ctx, y, x=None, *, dx=None, dim=-1):
    """The integral of y along dim by the trapezoidal rule, at coordinates x (a tensor) or steps dx (1 by
    default)."""
    return _integral("trapezoid", y, x, dx, dim)


def _integral(name, y, x, dx, dim):
    """The sum of the trapezoids; with no samples along dim, zeros in y's dtype (x unread), as torch and NumPy."""
    if y.ndim and y.shape[dim_index(dim, y.ndim, name)] == 0:
        return y.sum(dim).to(y.dtype)
    area, d = _segments(name, y, x, dx, dim)
    return area.sum(d)


@register("trapz", composite=True)
def trapz(ctx, y, x=None, *, dx=None, dim=-1):
    """trapezoid (torch's older name)."""
    return _integral("trapz", y, x, dx, dim)


@register("cumulative_trapezoid", composite=True)
def cumulative_trapezoid(ctx, y, x=None, *, dx=None, dim=-1):
    """The running integral of y along dim by the trapezoidal rule (one element shorter than y there)."""
    area, d = _segments("cumulative_trapezoid", y, x, dx, dim)
    return area.cumsum(d)
