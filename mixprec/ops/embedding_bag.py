"""embedding_bag: the sum, mean or max of the embedding rows of each bag of indices, without materialising
the per-index rows for the caller.

Bags are the rows of a 2-D index tensor, or the slices of a 1-D one that ``offsets`` start (with
include_last_offset the last offset ends the last bag instead). Entries equal to padding_idx take no part
(nor count towards a mean); an empty bag gives zeros. per_sample_weights (mode "sum" only) weights each
entry. max_norm first renormalises, in place and outside autograd, each referenced row whose norm exceeds it
(as torch does to ``weight``); scale_grad_by_freq divides each row's gradient by how often its index occurs.

It is a composite: embedding picks the rows, index_add sums them into their bags (amax per bag for "max"),
so both modes of autograd come from those ops. The bag layout is read on the host. Not on an autocast list.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import devices
from ..tensor import Tensor
from ..creation import zeros
from .nn_layers import embedding, renorm_rows_
from .registry import register
from .shape import stack

_MODES = ("sum", "mean", "max")


@register("embedding_bag", functional=True, composite=True)
def embedding_bag(ctx, input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The sum, mean or max of the rows of ``weight`` (num_embeddings, dim) in each bag: shape (bags, dim).

    See mixprec/ops/embedding_bag.py. sparse=True is accepted and gives a dense gradient (mixprec has no
    sparse tensors)."""
    if not isinstance(input, Tensor) or input.dtype.kind not in "iu":
        raise TypeError(f"embedding_bag: input must be an integer tensor of indices, got "
                        f"{getattr(input, 'dtype', type(input).__name__)}")
    if not isinstance(weight, Tensor) or weight.ndim != 2 or not _dt.is_floating(weight.dtype):
        raise ValueError(f"embedding_bag: weight must be a 2-D floating tensor (num_embeddings, embedding_dim), "
                         f"got {tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}")
    if mode not in _MODES:
        raise ValueError(f"embedding_bag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights is only supported for mode='sum', got "
                                      f"mode={mode!r}")
        if tuple(per_sample_weights.shape) != tuple(input.shape) or per_sample_weights.dtype != weight.dtype:
            raise ValueError(f"embedding_bag: per_sample_weights must have the input's shape {tuple(input.shape)} "
                             f"and the weight's dtype {weight.dtype.name}, got {tuple(per_sample_weights.shape)} "
                             f"{per_sample_weights.dtype.name}")
    num, dim = weight.shape
    flat, starts = _bags(input, offsets, include_last_offset)
    ends = starts[1:] + [flat.shape[0]] if not include_last_offset else starts[1:]
    starts = starts if not include_last_offset else starts[:-1]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError(f"embedding_bag: padding_idx {padding_idx} is out of range for {num} embeddings")
        padding_idx %= num
    if max_norm is not None:
        renorm_rows_(weight, flat, max_norm, norm_type, "embedding_bag")
    rows = embedding(flat, weight)  # (entries, dim); checks the indices
    index = devices.to_host(flat._array)
    if scale_grad_by_freq:  # the value of rows, the gradient of rows / (how often its index occurs)
        counts = np.bincount(index, minlength=num)[index].astype(np.float64)
        scale = Tensor._wrap(devices.to_device((1.0 / counts).astype(rows.dtype)[:, None], rows.device))
        rows = rows.detach() + (rows - rows.detach()) * scale
    kept = np.ones(index.shape, dtype=bool) if padding_idx is None else index != padding_idx
    bag_of = np.repeat(np.arange(len(starts)), np.asarray(ends, dtype=np.int64) - np.asarray(starts, dtype=np.int64))
    if mode == "max":
        out = [rows[Tensor._wrap(devices.to_device(np.flatnonzero(kept[s:e]) + s, rows.device))].amax(0)
               if kept[s:e].any() else zeros(dim, dtype=weight.dtype, device=weight.device)
               for s, e in zip(starts, ends)]
        return stack(out) if out else zeros(0, dim, dtype=weight.dtype, device=weight.device)
    factor = kept.astype(np.float64)
    if mode == "mean":
        count = np.bincount(bag_of[kept], minlength=len(starts)).astype(np.float64)
        factor = factor / np.maximum(count, 1)[bag_of]
    rows = rows * Tensor._wrap(devices.to_device(factor.astype(rows.dtype)[:, None], rows.device))
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    base = zeros(len(starts), dim, dtype=weight.dtype, device=weight.device)
    return base.index_add(0, Tensor._wrap(devices.to_device(bag_of.astype(np.int64), weight.device)), rows)


def _bags(input, offsets, include_last_offset):
    """(the indices as one 1-D tensor, the start of each bag as a list of ints; with include_last_offset the
    last entry ends the last bag)."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: offsets must be None for a 2-D input (each row is a bag)")
        n, length = input.shape
        if length == 0:
            raise RuntimeError(f"embedding_bag: a 2-D input of shape {tuple(input.shape)} has bags of no entries; "
                               "torch refuses it (a 1-D input with offsets can hold empty bags)")
        return input.reshape(-1), [i * length for i in range(n)] + ([n * length] if include_last_offset else [])
    if input.ndim != 1:
        raise ValueError(f"embedding_bag: input must be 1-D or 2-D, got shape {tuple(input.shape)}")
    if offsets is None or not isinstance(offsets, Tensor) or offsets.ndim != 1 or offsets.dtype.kind not in "iu":
        raise ValueError("embedding_bag: a 1-D input needs offsets, a 1-D integer tensor of where each bag starts")
    starts = [int(o) for o in devices.to_host(offsets._array)]
    if not starts and input.shape[0]:
        raise ValueError(f"embedding_bag: offsets is empty, so the input's {input.shape[0]} entries are in no bag")
    if starts and (starts[0] != 0 or any(b < a for a, b in zip(starts, starts[1:])) or starts[-1] > input.shape[0]):
        raise ValueError(f"embedding_bag: offsets must start at 0, never decrease and stay within the input's "
                         f"{input.shape[0]} entries, got {starts}")
    return input, starts
