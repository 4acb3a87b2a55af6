"""Writing into chosen places of a tensor: masks, flat indices, scatters along a dim, and scattered reductions.

scatter and scatter_reduce work on arrays (their gradients are rules here); the rest are composites of
index_put, where, gather and them. Every out-of-place op here has its in-place twin (masked_fill_, scatter_,
put_, ...) through ops/inplace.py, which writes the result into the tensor's memory with autograd's bookkeeping.
"""
from __future__ import annotations

import operator

import numpy as np

from .. import backend as _be, dtypes as _dt
from ..autograd import grad_mode
from ..backend import array_module
from ..tensor import Tensor
from .elementwise import where
from .inplace import _method as _inplace
from .opmath import compute_dtype
from .registry import register
from .shape import _along, _index_along, _zeros_of, cat, dim_index, index_put
from .arrange import broadcast_shapes

_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _bool_mask(name, mask):
    if not isinstance(mask, Tensor) or mask.dtype != np.bool_:
        raise RuntimeError(f"{name}: mask must be a bool tensor, got "
                           f"{mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__}")


def _value_of(name, input, value):
    """A fill value (a number, or a 0-d tensor that may carry a gradient) as a 0-d tensor of input's dtype."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"{name}: value must be a number or a 0-d tensor, got a {value.ndim}-D tensor")
        if value.requires_grad and grad_mode.is_grad_enabled() and not _dt.is_differentiable(input.dtype):
            raise RuntimeError(f"{name}: value requires grad, but the result has input's dtype {input.dtype.name}, "
                               "which cannot carry a gradient (as torch); detach value or give a floating input")
        return value if value.dtype == input.dtype else value.to(input.dtype)
    if not isinstance(value, (bool, int, float, np.number)):
        raise TypeError(f"{name}: value must be a number or a 0-d tensor, got {type(value).__name__}")
    return Tensor._wrap(array_module(input._array).asarray(value).astype(input.dtype))


# ---------------------------------------------------------------- masks
@register("masked_fill", methods=("masked_fill",), promote=(), composite=True)
def masked_fill(ctx, input, mask, value):
    """input with ``value`` where ``mask`` is True (the two broadcast against each other)."""
    _bool_mask("masked_fill", mask)
    broadcast_shapes(input.shape, mask.shape)
    return where(mask, _value_of("masked_fill", input, value), input)


@register("masked_select", methods=("masked_select",), promote=(), composite=True)
def masked_select(ctx, input, mask):
    """The elements of input (broadcast with mask) where mask is True, as a 1-D tensor."""
    _bool_mask("masked_select", mask)
    shape = broadcast_shapes(input.shape, mask.shape)
    return input.expand(shape)[mask.expand(shape)]


@register("masked_scatter", methods=("masked_scatter",), promote=(0, 2), same_dtype=True, composite=True)
def masked_scatter(ctx, input, mask, source):
    """input (broadcast with mask) with the places where mask is True filled, in order, by source's elements."""
    _bool_mask("masked_scatter", mask)
    shape = broadcast_shapes(input.shape, mask.shape)
    mask = mask.expand(shape)
    n = int(mask.sum())
    if n > source.numel():
        raise RuntimeError(f"masked_scatter: the mask selects {n} places, but source holds only {source.numel()} "
                           "elements")
    return index_put(input.expand(shape), (mask,), source.reshape(-1)[:n])


# ---------------------------------------------------------------- flat indices
def _long_index(name, index):
    if not isinstance(index, Tensor) or index.dtype.kind not in "iu":
        raise RuntimeError(f"{name}: index must be an integer tensor, got "
                           f"{index.dtype.name if isinstance(index, Tensor) else type(index).__name__}")


@register("take", methods=("take",), promote=(), composite=True)
def take(ctx, input, index):
    """input's elements, counted as if it were 1-D, at ``index`` (negative ones from the end), shaped like index."""
    _long_index("take", index)
    return input.reshape(-1)[index]


@register("take_along_dim", methods=("take_along_dim",), promote=(), composite=True)
def take_along_dim(ctx, input, indices, dim=None):
    """gather() along dim with input and indices broadcast against each other outside dim (the flattened input
    and indices without dim)."""
    _long_index("take_along_dim", indices)
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError(f"take_along_dim: input and indices must have the same number of dims, got {input.ndim} "
                           f"and {indices.ndim}")
    d = dim_index(dim, input.ndim, "take_along_dim")
    indices = where(indices < 0, indices + input.shape[d], indices)  # a negative index counts from the end
    outside = broadcast_shapes(input.shape[:d] + (1,) + input.shape[d + 1:],
                               indices.shape[:d] + (1,) + indices.shape[d + 1:])
    return input.expand(outside[:d] + (input.shape[d],) + outside[d + 1:]).gather(
        d, indices.expand(outside[:d] + (indices.shape[d],) + outside[d + 1:]))


@register("put", methods=("put",), promote=(0, 2), same_dtype=True, composite=True)
def put(ctx, input, index, source, accumulate=False):
    """input with source's elements written (added, with accumulate) at flat positions ``index``."""
    _long_index("put", index)
    if index.numel() != source.numel():
        raise RuntimeError(f"put: index and source must have the same number of elements, got {index.numel()} and "
                           f"{source.numel()}")
    flat = index_put(input.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate=accumulate)
    return flat.reshape(input.shape)


# ---------------------------------------------------------------- slices of a dim
@register("index_fill", methods=("index_fill",), promote=(), composite=True)
def index_fill(ctx, input, dim, index, value):
    """input with the slices ``index`` along dim set to ``value``."""
    d = dim_index(dim, max(input.ndim, 1), "index_fill")
    _long_index("index_fill", index)
    n = input.shape[d] if input.ndim else 1
    picked = index.reshape(-1)._array
    if bool(((picked < -n) | (picked >= n)).any()):
        raise IndexError(f"index_fill: an index is out of range for dim {d} of size {n} (expected {-n} <= index < {n})")
    xp = array_module(input._array)
    hit = xp.zeros(n, dtype=np.bool_)
    hit[picked % max(n, 1)] = True
    mask = Tensor._wrap(hit.reshape((n,) + (1,) * (input.ndim - d - 1)) if input.ndim else hit.reshape(()))
    return masked_fill(input, mask, value)


def _region_key(d, part):
    """The key that picks ``part`` (an int or a slice) of dim d."""
    return (slice(None),) * d + (part,)


@register("select_scatter", promote=(0, 1), same_dtype=True, composite=True)
def select_scatter(ctx, input, src, dim, index):
    """input with input.select(dim, index) replaced by src."""
    d = dim_index(dim, input.ndim, "select_scatter")
    i = operator.index(index)
    if not -input.shape[d] <= i < input.shape[d]:
        raise IndexError(f"select_scatter: index {i} is out of range for dim {d} of size {input.shape[d]}")
    expected = input.shape[:d] + input.shape[d + 1:]
    if src.shape != expected:
        raise RuntimeError(f"select_scatter: src of shape {src.shape} must have the shape {expected} of the slice")
    return index_put(input, _region_key(d, i), src)


@register("slice_scatter", promote=(0, 1), same_dtype=True, composite=True)
def slice_scatter(ctx, input, src, dim=0, start=None, end=None, step=1):
    """input with input[..., start:end:step, ...] (at dim) replaced by src."""
    d = dim_index(dim, input.ndim, "slice_scatter")
    if operator.index(step) <= 0:
        raise RuntimeError(f"slice_scatter: step must be positive, got {step}")
    key = _region_key(d, slice(start, end, step))
    expected = input._array[key].shape
    if src.shape != expected:
        raise RuntimeError(f"slice_scatter: src of shape {src.shape} must have the shape {expected} of the slice")
    return index_put(input, key, src)


@register("as_strided_scatter", promote=(0, 1), same_dtype=True, composite=True)
def as_strided_scatter(ctx, input, src, size, stride, storage_offset=None):
    """A copy of input with the elements its as_strided(size, stride, storage_offset) view would cover (counted
    in input's elements in C order) replaced by src."""
    numbers = Tensor._wrap(array_module(input._array).arange(input.numel()))
    where_ = numbers.as_strided(size, stride, 0 if storage_offset is None else storage_offset)
    if src.shape != where_.shape:
        raise RuntimeError(f"as_strided_scatter: src of shape {src.shape} must have the view's shape {where_.shape}")
    return index_put(input.reshape(-1), (where_.reshape(-1),), src.reshape(-1)).reshape(input.shape)


# ---------------------------------------------------------------- scatters along a dim
def _scatter_key(name, input, dim, index, src_shape):
    """(dim as an index, the key that reaches input[..., index[i], ...] for every place i of index)."""
    d = _along(name, input, dim, index)
    if len(src_shape) != index.ndim or any(i > n for i, n in zip(index.shape, src_shape)) or \
            any(i > n for k, (i, n) in enumerate(zip(index.shape, input.shape)) if k != d):
        raise RuntimeError(f"{name}: index of shape {tuple(index.shape)} must not be larger than src "
                           f"{tuple(src_shape)}, nor than the input {tuple(input.shape)} outside dim {d}")
    grids = _be.open_grid(array_module(input), index.shape)
    return d, tuple(index if k == d else grids[k] for k in range(input.ndim))


def _used(src, index):
    """The part of src that index covers (src may be larger)."""
    return src[tuple(slice(0, n) for n in index.shape)]


def _one_d(*arrays):
    """0-d arrays as 1-D ones of one element (how the scatters read a 0-d input, index or src)."""
    return tuple(a.reshape(1) if a is not None and a.ndim == 0 else a for a in arrays)


def _src_grad(g_src, src_shape, index):
    """A gradient for the used part of src, zero-padded to src's shape."""
    if tuple(g_src.shape) == tuple(src_shape):
        return g_src
    return index_put(_zeros_of(g_src, src_shape), tuple(slice(0, n) for n in index.shape), g_src)


@register("_scatter_src", promote=(0, 3), same_dtype=True, linear=True, saves=("index",),
          doc="scatter's array op: a copy of input with src[i] written at index[i] along dim.")
def _scatter_src(ctx, input, dim, index, src):
    shape, (input_, index_, src_) = input.shape, _one_d(input, index, src)
    ctx.dim, key = _scatter_key("scatter", input_, dim, index_, src_.shape)
    ctx.src_shape = src.shape
    out = input_.copy()
    out[key] = _used(src_, index_)
    return out.reshape(shape)


@_scatter_src.grad
def _(ctx, g):
    index = ctx.inputs[2]
    g_input = _scatter_src(g, ctx.dim, index, _zeros_of(g, index.shape))
    return g_input, None, None, _src_grad(g.gather(ctx.dim, index), ctx.src_shape, index)


@register("scatter", methods=("scatter",), promote=(), composite=True)
def scatter(ctx, input, dim, index, src=None, value=None, *, reduce=None):
    """A copy of input with src[i] (or ``value``) written at index[i] along dim; with reduce='add' or
    'multiply', combined with what is there instead."""
    if (src is None) == (value is None):
        raise TypeError("scatter: give exactly one of src (a tensor, or a number) and value")
    if value is None and not isinstance(src, Tensor):
        src, value = None, src
    if value is not None:
        src = _value_of("scatter", input, value).expand(index.shape)
    elif src.dtype != input.dtype:
        raise RuntimeError(f"scatter: src's dtype {src.dtype.name} differs from the input's {input.dtype.name}")
    if reduce is None:
        return _scatter_src(input, dim, index, src)
    how = {"add": "sum", "multiply": "prod"}.get(reduce)
    if how is None:
        raise RuntimeError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
    return scatter_reduce(input, dim, index, src, how)


def _group_ranks(xp, positions):
    """For flat target positions, each one's rank among the equal ones before it (0 for the first): within one
    rank, the positions are distinct, so a plain indexed write does each rank at once."""
    order = xp.argsort(positions, kind="stable")
    ordered = positions[order]
    ranks = xp.empty_like(positions)
    ranks[order] = xp.arange(positions.shape[0]) - xp.searchsorted(ordered, ordered, side="left")
    return ranks


def _reduce_into(out, flat_key, values, how):
    """out.reshape(-1)[flat_key] combined with values by ``how`` (sum, prod, amax, amin), repeated places included."""
    if how == "sum":
        _be.scatter_add(out, flat_key, values)
        return
    xp = array_module(out)
    combine = {"prod": xp.multiply, "amax": xp.maximum, "amin": xp.minimum}[how]
    ranks = _group_ranks(xp, flat_key)
    for r in range(int(ranks.max()) + 1 if ranks.size else 0):
        at = ranks == r
        where_ = flat_key[at]
        out[where_] = combine(out[where_], values[at])


@register("scatter_reduce", methods=("scatter_reduce",), promote=(0, 3), same_dtype=True,
          saves=("input", "index", "src", "output"))
def scatter_reduce(ctx, input, dim, index, src, reduce, *, include_self=True):
    """A copy of input where every place index reaches holds the reduction (sum, prod, mean, amax, amin) of the
    src values sent there, and of input's own value when include_self."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"scatter_reduce: reduce must be one of {', '.join(_REDUCES)}, got {reduce!r}")
    shape, (input_, index_, src_) = input.shape, _one_d(input, index, src)
    ctx.dim, key = _scatter_key("scatter_reduce", input_, dim, index_, src_.shape)
    ctx.how, ctx.include_self, ctx.in_shape = reduce, include_self, input_.shape
    xp = array_module(input)
    wide = compute_dtype(input.dtype, ints="keep")
    flat_key = xp.ravel_multi_index(tuple(xp.broadcast_to(k, index_.shape).reshape(-1) for k in key), input_.shape)
    values = _used(src_, index_).reshape(-1).astype(wide)
    out = input_.reshape(-1).astype(wide)
    hit = xp.zeros(out.shape, dtype=np.bool_)
    hit[flat_key] = True
    if not include_self:
        out[hit] = {"sum": 0, "mean": 0, "prod": 1}.get(reduce, 0)
        if reduce in ("amax", "amin"):  # the first value sent to each place starts it
            first = _group_ranks(xp, flat_key) == 0
            out[flat_key[first]] = values[first]
    _reduce_into(out, flat_key, values, "sum" if reduce == "mean" else reduce)
    if reduce == "mean":
        count = xp.zeros(out.shape, dtype=wide)
        _be.scatter_add(count, flat_key, xp.ones(flat_key.shape, dtype=wide))
        count += 1 if include_self else 0
        count = xp.maximum(count, 1)
        out = out // count if out.dtype.kind in "iu" else out / count
    return out.astype(input.dtype).reshape(shape)


def _scatter_reduce_weights(ctx):
    """(w_self, w_src): d out / d input at each place, and d out / d src at each used src place (gathered from the
    place it went to). Both rules use them: the gradient is g * w_self and g.gather(index) * w_src."""
    x, index, src = (t.reshape(1) if t.ndim == 0 else t for t in (ctx.inputs[0], ctx.inputs[2], ctx.inputs[3]))
    out = ctx.output.reshape(ctx.in_shape)
    d, how, include = ctx.dim, ctx.how, ctx.include_self
    src = _used(src, index)
    ones = Tensor._wrap(array_module(x._array).ones(index.shape, dtype=x.dtype))
    hit = _zeros_of(x, x.shape).scatter_add(d, index, ones) > 0
    keep = (~hit).to(x.dtype)  # untouched places pass input through
    if how == "sum":
        f_self, f_src = 1.0, ones
    elif how == "mean":
        count = _zeros_of(x, x.shape).scatter_add(d, index, ones) + (1.0 if include else 0.0)
        f_self, f_src = 1.0 / count, (1.0 / count).gather(d, index)
    elif how in ("amax", "amin"):
        src_wins = (src == out.gather(d, index)).to(x.dtype)
        ties = _zeros_of(x, x.shape).scatter_add(d, index, src_wins)
        self_wins = (x == out).to(x.dtype) if include else 0.0
        ties = ties + self_wins  # the values equal to the result share its gradient; a NaN result, which no
        f_self, f_src = self_wins / ties, src_wins / ties.gather(d, index)  # value equals, gets 0/0 = NaN (torch)
    else:  # prod: the product of the other factors, also where some are zero
        zero_self = (x == 0).to(x.dtype) if include else _zeros_of(x, x.shape)
        zeros = zero_self.scatter_add(d, index, (src == 0).to(x.dtype))
        nonzero = scatter_reduce(where(x == 0, 1.0, x), d, index, where(src == 0, 1.0, src), "prod",
                                 include_self=include)

        def others(v, z, p):
            return where(v == 0, (z == 1).to(x.dtype) * p, (z == 0).to(x.dtype) * p / where(v == 0, 1.0, v))
        f_self = others(x, zeros, nonzero) if include else 0.0
        f_src = others(src, zeros.gather(d, index), nonzero.gather(d, index))
    return keep + (1 - keep) * (f_self if include else 0.0), f_src


def _as_1d(t):
    return t.reshape(1) if t.ndim == 0 else t


@scatter_reduce.grad
def _(ctx, g):
    w_self, w_src = _scatter_reduce_weights(ctx)
    index, src = _as_1d(ctx.inputs[2]), ctx.inputs[3]
    g1 = _as_1d(g)
    g_src = _src_grad(g1.gather(ctx.dim, index) * w_src, _as_1d(src).shape, index)
    return (g1 * w_self).reshape(g.shape), None, None, g_src.reshape(src.shape), None


@scatter_reduce.jvp
def _(ctx, t_input, _dim, _index, t_src, _reduce):
    w_self, w_src = _scatter_reduce_weights(ctx)
    index = _as_1d(ctx.inputs[2])
    spread = _as_1d(t_input) * w_self
    return spread.scatter_add(ctx.dim, index, _used(_as_1d(t_src), index) * w_src).reshape(t_input.shape)


@register("index_reduce", methods=("index_reduce",), promote=(0, 3), same_dtype=True, composite=True)
def index_reduce(ctx, input, dim, index, source, reduce, *, include_self=True):
    """scatter_reduce of whole slices: slice k of source along dim goes to slice index[k] of input."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce: reduce must be one of prod, mean, amax, amin, got {reduce!r}")
    d, flat = _index_along("index_reduce", input._array, dim, index._array)
    if input.ndim == 0:
        return scatter_reduce(input, 0, index.reshape(()), source.reshape(()), reduce, include_self=include_self)
    expected = input.shape[:d] + (flat.shape[0],) + input.shape[d + 1:]
    if source.shape != expected:
        raise RuntimeError(f"index_reduce: source of shape {source.shape} does not fit: expected {expected}")
    # a copy: a Tensor of its own over index's memory would not see an in-place edit of index before backward
    spread = Tensor._wrap(flat.reshape((-1,) + (1,) * (input.ndim - d - 1)).copy()).expand(expected)
    return scatter_reduce(input, d, spread, source, reduce, include_self=include_self)


# ---------------------------------------------------------------- aten's masked indexing and chunked join
def _clamped(indices, shape):
    """Each index tensor clamped into its dim's range [-size, size - 1] (None kept: the whole dim)."""
    return tuple(None if i is None else i.clamp(-n, n - 1) for i, n in zip(indices, shape))


def _key(indices):
    """An index list with None for whole dims as a getitem key."""
    return tuple(slice(None) if i is None else i for i in indices)


@register("_unsafe_masked_index", promote=(0,), composite=True)
def _unsafe_masked_index(ctx, input, mask, indices, fill):
    """input[indices] where mask is True and ``fill`` elsewhere; indices are clamped into range, so places mask
    leaves out may hold any index."""
    _bool_mask("_unsafe_masked_index", mask)
    return where(mask, input[_key(_clamped(indices, input.shape))], fill)


@register("_unsafe_masked_index_put_accumulate", promote=(0, 3), same_dtype=True, composite=True)
def _unsafe_masked_index_put_accumulate(ctx, input, mask, indices, values):
    """index_put(accumulate=True) of values where mask is True (indices clamped into range, as above)."""
    _bool_mask("_unsafe_masked_index_put_accumulate", mask)
    return index_put(input, _key(_clamped(indices, input.shape)), where(mask, values, 0.0), accumulate=True)


@register("_chunk_cat", promote=(0,), composite=True)
def _chunk_cat(ctx, tensors, dim, num_chunks):
    """Each tensor cut into num_chunks chunks along dim (zero-padded to a multiple), each chunk flattened from dim
    on, and the chunks of all the tensors joined: shape (*leading dims, num_chunks, sum of flat chunk sizes)."""
    if not tensors or num_chunks < 1:
        raise RuntimeError("_chunk_cat: expected a non-empty list of tensors and num_chunks >= 1")
    lead = tensors[0].shape[:dim_index(dim, tensors[0].ndim, "_chunk_cat")]
    d = len(lead)
    parts = []
    for t in tensors:
        if t.shape[:d] != lead:
            raise RuntimeError(f"_chunk_cat: shapes {tensors[0].shape} and {t.shape} differ before dim {d}")
        n = t.shape[d]
        size = -(-n // num_chunks)
        if size * num_chunks != n:
            pad = Tensor._wrap(array_module(t._array).zeros(lead + (size * num_chunks - n,) + t.shape[d + 1:],
                                                            dtype=t.dtype))
            t = cat([t, pad], d)
        parts.append(t.reshape(lead + (num_chunks, size * int(np.prod(t.shape[d + 1:])))))
    return cat(parts, d + 1)


# ---------------------------------------------------------------- the in-place twins
for _name in ("masked_fill", "masked_scatter", "put", "index_fill", "scatter", "scatter_reduce", "index_reduce"):
    setattr(Tensor, _name + "_", _inplace(_name + "_", _name))
