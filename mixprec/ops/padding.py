"""Padding: ``mp.nn.functional.pad`` and the per-mode ops it routes to, which the autocast tables name.

    pad(input, pad, mode="constant", value=None)
        "constant"   -> constant_pad_nd            any trailing dims; negative pads crop
        "reflect"    -> reflection_pad{1,2,3}d     mirrored at the edge, the edge not repeated
        "replicate"  -> replication_pad{1,2,3}d    the edge value repeated
        "circular"   -> _pad_circular              wrapped around

How a mode-dependent policy maps onto mixprec's per-op policy: exactly as in
torch, ``pad`` itself has no cast policy; it is a composite that calls the op for
its mode and rank, and that op carries the policy the reference table gives its
name. reflection_pad1d/2d and replication_pad1d/2d/3d run in float32 under CPU
autocast; reflection_pad3d, constant_pad_nd and _pad_circular are on no list and
run in their input's dtype. So inside ``mp.autocast("cpu")``,
``pad(x_bf16, (1, 1), mode="reflect")`` returns float32 and
``pad(x_bf16, (1, 1))`` bfloat16, as torch's do.

The non-constant modes gather: each padded dim reads the input through an index
map, and the gradient adds back along the same map (the backward of
``__getitem__``). constant_pad_nd is linear; its adjoint is constant_pad_nd with
the pads negated (a crop).
"""
from __future__ import annotations

import numpy as np

from ..backend import array_module
from ..tensor import Tensor
from ..tensor import tensor as _make_tensor
from .registry import get, register


def _pad_pairs(name, pad, ndim):
    """pad (last dim first: (left, right, top, bottom, ...)) as [(low, high)] for the trailing dims, first dim
    first."""
    try:
        pad = tuple(pad)
    except TypeError:
        raise TypeError(f"{name}: pad must be a sequence of ints, got {type(pad).__name__}") from None
    if not all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in pad):
        raise TypeError(f"{name}: pad must be a sequence of ints, got {pad!r}")
    if len(pad) % 2:
        raise ValueError(f"{name}: pad must have an even length (a low and a high pad per dim), got {pad!r}")
    if len(pad) // 2 > ndim:
        raise ValueError(f"{name}: pad {pad!r} pads {len(pad) // 2} dims, but the input has only {ndim}")
    return [(int(pad[i]), int(pad[i + 1])) for i in range(len(pad) - 2, -1, -2)]


def _check_out_sizes(name, shape, pairs):
    """Negative pads crop first (torch narrows, then pads): the crop must fit the dim (then so does the result)."""
    first = len(shape) - len(pairs)
    for d, (lo, hi) in enumerate(pairs, first):
        cropped = shape[d] - max(-lo, 0) - max(-hi, 0)
        if cropped < 0:
            raise RuntimeError(f"{name}: dim {d} of size {shape[d]} cropped by pads ({lo}, {hi}) would have a "
                               f"negative size {cropped} (negative pads crop before the others pad)")


# ---------------------------------------------------------------- constant
@register("constant_pad_nd")
def constant_pad_nd(ctx, input, pad, value=0):
    """input with ``value`` added around its trailing dims (pad: left, right of the last dim, then the one before,
    ...); a negative pad removes elements."""
    pairs = _pad_pairs("constant_pad_nd", pad, input.ndim)
    _check_out_sizes("constant_pad_nd", input.shape, pairs)
    first = input.ndim - len(pairs)
    shape = input.shape[:first] + tuple(n + lo + hi for n, (lo, hi) in zip(input.shape[first:], pairs))
    xp = array_module(input)
    out = xp.full(shape, value, dtype=input.dtype)
    src = (Ellipsis,) + tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(input.shape[first:], pairs))
    dst = (Ellipsis,) + tuple(slice(max(lo, 0), m - max(hi, 0)) for m, (lo, hi) in zip(shape[first:], pairs))
    if all(s.stop > s.start for s in src[1:]):
        out[dst] = input[src]
    return out


@constant_pad_nd.grad
def _(ctx, g):
    return constant_pad_nd(g, [-p for p in ctx.inputs[1]]), None


@constant_pad_nd.jvp
def _(ctx, t, *_):
    return constant_pad_nd(t, ctx.inputs[1], 0)  # the pad value is a constant: its tangent is 0


# ---------------------------------------------------------------- index-map modes
# Index maps: the input index each output position reads, for pads (lo, hi) of a dim of size n.
def _reflect(lo, hi, n):
    j = np.arange(-lo, n + hi)
    return np.where(j < 0, -j, np.where(j >= n, 2 * (n - 1) - j, j))  # pads < n: one reflection is enough


def _replicate(lo, hi, n):
    return np.clip(np.arange(-lo, n + hi), 0, n - 1)


def _circular(lo, hi, n):
    kept = n + min(lo, 0) + min(hi, 0)  # negative pads crop first; the rest wraps around what is left
    return (np.arange(kept + max(lo, 0) + max(hi, 0)) - max(lo, 0)) % kept + max(-lo, 0)


def _gather_pad(name, nd, input, pad, index_map, limit, any_leading=False):
    """input padded along its last nd dims by reading input[index_map(lo, hi, size)] along each.

    ``limit(size)`` is the largest pad the mode allows on a dim of that size. The reflection and replication
    kernels (torch's) take no bool input and need every dim but the batch non-empty; ``any_leading`` (circular,
    a composite in torch) takes any dtype and empty dims before the padded ones.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
    if not any_leading and input.dtype == np.bool_:
        raise TypeError(f"{name}: bool input is not supported (as in torch); pad an integer or floating tensor")
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: expected a {nd + 1}-D or {nd + 2}-D input, got shape {tuple(input.shape)}")
    pairs = _pad_pairs(name, pad, input.ndim)
    if len(pairs) != nd:
        raise ValueError(f"{name}: expected {2 * nd} pad values (a low and a high pad for each of the last {nd} "
                         f"dims), got {tuple(pad)!r}")
    first_checked = input.ndim - nd if any_leading else input.ndim - nd - 1
    if any(s == 0 for s in input.shape[first_checked:]):
        raise RuntimeError(f"{name}: expected non-empty dims besides the batch dim, got an input of shape "
                           f"{tuple(input.shape)}")
    _check_out_sizes(name, input.shape, pairs)
    out = input
    for d, (lo, hi) in enumerate(pairs, input.ndim - nd):
        n = input.shape[d]
        if max(lo, hi) > limit(n):
            raise RuntimeError(f"{name}: pads ({lo}, {hi}) are too large for dim {d} of size {n} (at most "
                               f"{limit(n)} in this mode)")
        index = index_map(lo, hi, n)
        out = out[(slice(None),) * d + (_make_tensor(index, device=input.device),)]
    return out


def _register_gather_pad(name, nd, index_map, limit):
    def forward(ctx, input, padding):
        return _gather_pad(name, nd, input, padding, index_map, limit)
    forward.__doc__ = f"Pad the last {nd} dims of a ({nd + 1}- or {nd + 2}-D) input; what F.pad's mode uses."
    return register(name, composite=True)(forward)


reflection_pad1d, reflection_pad2d, reflection_pad3d = (
    _register_gather_pad(f"reflection_pad{nd}d", nd, _reflect, lambda n: n - 1)
    for nd in (1, 2, 3))
replication_pad1d, replication_pad2d, replication_pad3d = (
    _register_gather_pad(f"replication_pad{nd}d", nd, _replicate, lambda n: float("inf")) for nd in (1, 2, 3))


@register("_pad_circular", composite=True)
def _pad_circular(ctx, input, pad):
    """Pad the last len(pad) // 2 dims by wrapping around (at most once: each pad <= the dim's size)."""
    nd = len(pad) // 2 if isinstance(pad, (tuple, list)) else 0
    if nd not in (1, 2, 3):
        raise ValueError(f"_pad_circular: expected 2, 4 or 6 pad values, got {pad!r}")
    return _gather_pad("_pad_circular", nd, input, pad, _circular, lambda n: n, any_leading=True)


# ---------------------------------------------------------------- F.pad
_MODES = {"reflect": "reflection_pad", "replicate": "replication_pad"}


@register("pad", functional=True, composite=True)
def pad(ctx, input, pad, mode="constant", value=None):
    """Pad ``input``: pad = (left, right) of the last dim, then (top, bottom) of the one before, and so on.

    mode "constant" (fill with value, default 0, any number of dims) or
    "reflect", "replicate", "circular" (the last 1, 2 or 3 dims of a batched or
    unbatched input). Autocast follows the op each mode runs (see this module).
    """
    if mode == "constant":
        return constant_pad_nd(input, pad, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if value is not None and value != 0:
        raise ValueError(f"pad: mode {mode!r} does not take a value (it is only for mode='constant'), got {value!r}")
    if not isinstance(input, Tensor):
        raise TypeError(f"pad: input must be a Tensor, got {type(input).__name__}")
    n = len(tuple(pad)) if isinstance(pad, (tuple, list)) else -1
    if n not in (2, 4, 6) or input.ndim not in (n // 2 + 1, n // 2 + 2):
        raise NotImplementedError(f"pad: mode {mode!r} pads the last 1, 2 or 3 dims of an input with one or two "
                                  f"more dims (pad of length 2, 4 or 6); got pad {pad!r} for an input of shape "
                                  f"{tuple(input.shape)}")
    if mode == "circular":
        return _pad_circular(input, pad)
    return get(f"{_MODES[mode]}{n // 2}d")(input, pad)
