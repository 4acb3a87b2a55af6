"""Rearranging, repeating, splitting and joining tensors, built from the views and joins of shape.py.

Every op here is a composite: its forward calls other ops, so its gradient and tangent come from
theirs, and an op that returns part of its input's memory (view_as, movedim, broadcast_to, meshgrid,
the splits...) returns a real view of it, with the version counter that goes with one.
"""
from __future__ import annotations

import itertools
import operator

import numpy as np

from .. import backend as _be
from ..backend import array_module
from ..tensor import Tensor
from ..autograd.graph import mark_multi_output
from .registry import register
from .shape import _size_arg, broadcasts_to, cat, dim_index, index_select, split, stack


def _composite(name, methods=(), **options):
    """register() for a composite op that torch has as a function and, with ``methods``, a Tensor method."""
    return register(name, methods=methods, composite=True, **options)


def _dims(dims, ndim, op):
    """An int or a sequence of them as a tuple of non-negative dims, each given once."""
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    out = tuple(dim_index(d, ndim, op) for d in dims)
    if len(set(out)) != len(out):
        raise RuntimeError(f"{op}: dims {dims} repeat a dim")
    return out


# ---------------------------------------------------------------- another tensor's shape
@_composite("view_as", methods=("view_as",), promote=())
def view_as(ctx, input, other):
    """input.view(other.shape)."""
    return input.view(other.shape)


@_composite("reshape_as", methods=("reshape_as",), promote=())
def reshape_as(ctx, input, other):
    """input.reshape(other.shape)."""
    return input.reshape(other.shape)


@_composite("expand_as", methods=("expand_as",), promote=())
def expand_as(ctx, input, other):
    """input.expand(other.shape)."""
    return input.expand(other.shape)


@_composite("ravel", methods=("ravel",))
def ravel(ctx, input):
    """The elements as one dim (a view where the memory allows it, as reshape)."""
    return input.reshape(-1)


@_composite("movedim", methods=("movedim",), aliases=("moveaxis",))
def movedim(ctx, input, source, destination):
    """input with dims ``source`` moved to positions ``destination`` (the others keep their order): a view."""
    n = input.ndim
    src, dst = _dims(source, n, "movedim"), _dims(destination, n, "movedim")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: source {source} and destination {destination} name different numbers of dims")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    return input.permute(*[next(rest) if o is None else o for o in order])


@_composite("unflatten", methods=("unflatten",))
def unflatten(ctx, input, dim, sizes):
    """Dim ``dim`` split into dims of ``sizes`` (one may be -1): a view."""
    d = dim_index(dim, input.ndim, "unflatten")
    sizes = tuple(operator.index(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = input.shape[d]
    known = int(np.prod([s for s in sizes if s != -1]))
    if sizes.count(-1) > 1 or (-1 in sizes and (known == 0 or n % known)) or (-1 not in sizes and known != n):
        raise RuntimeError(f"unflatten: sizes {list(sizes)} do not multiply to the size {n} of dim {d}")
    sizes = tuple(n // known if s == -1 else s for s in sizes)
    return input.reshape(input.shape[:d] + sizes + input.shape[d + 1:])


# ---------------------------------------------------------------- broadcasting
def broadcast_shapes(*shapes):
    """The shape tensors of ``shapes`` broadcast to (each a sequence of sizes, or an int for a 1-D shape)."""
    shapes = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    for s in shapes:
        if any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) for n in s) or any(n < 0 for n in s):
            raise RuntimeError(f"broadcast_shapes: a shape must hold non-negative ints, got {s}")
    try:
        return tuple(int(n) for n in np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuntimeError(f"broadcast_shapes: shapes {', '.join(map(str, shapes))} do not broadcast "
                           "(each dim, counted from the last, must be equal or 1 in each)") from None


@_composite("broadcast_to", methods=("broadcast_to",))
def broadcast_to(ctx, input, size):
    """input.expand(size): a view."""
    return input.expand(size)


@_composite("broadcast_tensors", promote=())
def broadcast_tensors(ctx, *tensors):
    """Every tensor expanded to their common shape, as views (dtypes as they are)."""
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(shape) for t in tensors)


def _atleast(name, n, lift):
    def forward(ctx, *tensors):
        seq = len(tensors) == 1 and isinstance(tensors[0], (list, tuple))
        many = tensors[0] if seq else tensors
        out = tuple(t if t.ndim >= n else lift(t) for t in many)
        return out if seq or len(out) != 1 else out[0]
    forward.__name__ = name
    forward.__doc__ = f"Each tensor with at least {n} dims (a tuple for several, or for a list of them)."
    return _composite(name, promote=())(forward)


atleast_1d = _atleast("atleast_1d", 1, lambda t: t.reshape(1))
atleast_2d = _atleast("atleast_2d", 2, lambda t: t.reshape(1, -1) if t.ndim else t.reshape(1, 1))
atleast_3d = _atleast("atleast_3d", 3, lambda t: t.reshape((1, 1, 1) if t.ndim == 0 else (1, t.shape[0], 1)
                                                             if t.ndim == 1 else t.shape + (1,)))


# ---------------------------------------------------------------- flips, rolls, rotations
@_composite("fliplr", methods=("fliplr",))
def fliplr(ctx, input):
    """input flipped along dim 1 (columns), a copy."""
    if input.ndim < 2:
        raise RuntimeError(f"fliplr: the input must have at least 2 dims, got {input.ndim}")
    return input.flip(1)


@_composite("flipud", methods=("flipud",))
def flipud(ctx, input):
    """input flipped along dim 0 (rows), a copy."""
    if input.ndim < 1:
        raise RuntimeError("flipud: the input must have at least 1 dim, got a 0-d tensor")
    return input.flip(0)


@_composite("roll", methods=("roll",))
def roll(ctx, input, shifts, dims=None):
    """Elements shifted ``shifts`` places along ``dims`` (wrapping around); without dims, over the flattened input."""
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll: without dims, shifts must be one int, got {shifts}")
        return roll(input.reshape(-1), shifts, 0).reshape(input.shape)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts {shifts} and dims {dims} differ in length")
    out = input
    for s, d in zip(shifts, dims):
        d = dim_index(d, input.ndim, "roll")
        n = input.shape[d]
        s = operator.index(s) % n if n else 0
        if s:
            out = cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out if out is not input else input.clone()


@_composite("rot90", methods=("rot90",))
def rot90(ctx, input, k=1, dims=(0, 1)):
    """input rotated by k quarter turns in the plane of ``dims``, from the first dim towards the second."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"rot90: dims must name 2 dims, got {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"rot90: the input must have at least 2 dims, got {input.ndim}")
    a, b = _dims(dims, input.ndim, "rot90")
    k = operator.index(k) % 4
    if k == 1:
        return input.flip(b).transpose(a, b)
    if k == 2:
        return input.flip((a, b))
    if k == 3:
        return input.flip(a).transpose(a, b)
    return input.clone()


# ---------------------------------------------------------------- repeating
@_composite("repeat", methods=("repeat",))
def repeat(ctx, input, *sizes):
    """input tiled ``sizes[i]`` times along dim i (sizes may add leading dims), a copy."""
    sizes = tuple(operator.index(s) for s in _size_arg(sizes))
    if len(sizes) < input.ndim:
        raise RuntimeError(f"repeat: sizes {list(sizes)} must name at least the {input.ndim} dims of the input")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"repeat: sizes must not be negative, got {list(sizes)}")
    shape = (1,) * (len(sizes) - input.ndim) + input.shape
    spread = tuple(x for n in shape for x in (1, n))           # a size-1 dim before each dim...
    target = tuple(x for r, n in zip(sizes, shape) for x in (r, n))  # ...expanded to the repeat count
    out = input.reshape(spread).expand(target).reshape(tuple(r * n for r, n in zip(sizes, shape)))
    return out.clone() if _be.owner(out._array) is _be.owner(input._array) else out  # a copy, as torch's


@_composite("tile", methods=("tile",))
def tile(ctx, input, dims):
    """repeat() where dims shorter than the input's count for its last dims."""
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


@_composite("repeat_interleave", methods=("repeat_interleave",), promote=())
def repeat_interleave(ctx, input, repeats=None, dim=None, *, output_size=None):
    """Each element (each slice along ``dim``) repeated ``repeats`` times in place; with a tensor alone, the
    indices 0, 1, ... each repeated as often as it says."""
    if repeats is None:  # repeat_interleave(counts)
        if input.dtype.kind not in "iu" or input.ndim > 1:
            raise RuntimeError("repeat_interleave: with one argument it must be a 0-d or 1-D integer tensor of counts")
        counts = input.reshape(-1)
        return repeat_interleave(Tensor._wrap(array_module(counts._array).arange(counts.shape[0])), counts, 0)
    if dim is None:
        input, dim = input.reshape(-1), 0
    d = dim_index(dim, input.ndim, "repeat_interleave")
    n = input.shape[d] if input.ndim else 1
    if isinstance(repeats, Tensor) and (repeats.dtype.kind not in "iu" or repeats.ndim > 1):
        raise RuntimeError(f"repeat_interleave: repeats must be an int or a 0-d/1-D integer tensor, got "
                           f"{repeats.dtype.name} of shape {repeats.shape}")
    # the counts on the host: the output's size depends on them (CuPy's repeat takes no device array either)
    counts = np.asarray(repeats.tolist() if isinstance(repeats, Tensor) else operator.index(repeats),
                        dtype=np.int64).reshape(-1)
    if counts.shape[0] not in (1, n):
        raise RuntimeError(f"repeat_interleave: repeats holds {counts.shape[0]} counts for a dim of size {n}")
    if (counts < 0).any():
        raise RuntimeError("repeat_interleave: repeats must not be negative")
    index = np.repeat(np.arange(n), counts if counts.shape[0] == n else counts[0])
    if output_size is not None and output_size != index.shape[0]:
        raise RuntimeError(f"repeat_interleave: output_size {output_size} differs from the {index.shape[0]} "
                           "repeated elements")
    return index_select(input, d, Tensor._wrap(array_module(input._array).asarray(index)))


# ---------------------------------------------------------------- diagonals and products of vectors
@_composite("diag", methods=("diag",))
def diag(ctx, input, diagonal=0):
    """A 1-D input as the ``diagonal``-th diagonal of a square matrix; a 2-D input's ``diagonal``-th diagonal."""
    if input.ndim == 1:
        return input.diag_embed(diagonal, 0, 1)
    if input.ndim == 2:
        return input.diagonal(diagonal).clone()
    raise RuntimeError(f"diag: the input must be 1-D or 2-D, got {input.ndim}-D")


@_composite("diagflat", methods=("diagflat",))
def diagflat(ctx, input, offset=0):
    """The flattened input as the ``offset``-th diagonal of a square matrix."""
    return input.reshape(-1).diag_embed(offset, 0, 1)


def _vector(name, t, what):
    if t.ndim != 1:
        raise RuntimeError(f"{name}: {what} must be 1-D, got {t.ndim}-D")


@_composite("outer", methods=("outer",), aliases=("ger",), promote=(0, 1))
def outer(ctx, input, vec2):
    """out[i, j] = input[i] * vec2[j]."""
    _vector("outer", input, "input")
    _vector("outer", vec2, "vec2")
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


@_composite("inner", methods=("inner",), promote=(0, 1))
def inner(ctx, input, other):
    """Sums of products over the last dim of both (a product when one is 0-d)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner: the last dims of shapes {input.shape} and {other.shape} differ")
    k = input.shape[-1]
    rows = int(np.prod(input.shape[:-1]))  # (counted, not -1: with k = 0 the element count cannot tell)
    out = input.reshape(rows, k).matmul(other.reshape(int(np.prod(other.shape[:-1])), k).mT)
    return out.reshape(input.shape[:-1] + other.shape[:-1])


@_composite("kron", methods=("kron",), promote=(0, 1))
def kron(ctx, input, other):
    """The Kronecker product: a block per element of input, that element times other."""
    n = max(input.ndim, other.ndim)
    a = (1,) * (n - input.ndim) + input.shape
    b = (1,) * (n - other.ndim) + other.shape
    spread_a = tuple(x for s in a for x in (s, 1))
    spread_b = tuple(x for s in b for x in (1, s))
    return (input.reshape(spread_a) * other.reshape(spread_b)).reshape(tuple(x * y for x, y in zip(a, b)))


@_composite("block_diag", promote=(0,))
def block_diag(ctx, *tensors):
    """The tensors (0-d, 1-D as a row, or 2-D) as the diagonal blocks of a matrix of zeros elsewhere."""
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: tensor {i} must have at most 2 dims, got {t.ndim}")
        blocks.append(t.reshape(1, -1) if t.ndim == 1 else t.reshape(1, 1) if t.ndim == 0 else t)
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    xp = array_module(blocks[0]._array)
    for b in blocks:
        r, c = b.shape
        pad = lambda w: Tensor._wrap(xp.zeros((r, w), dtype=b.dtype))  # noqa: E731
        rows.append(cat([pad(left), b, pad(width - left - c)], 1))
        left += c
    return cat(rows, 0)


def _adjoint(t, name, matrix_only):
    if matrix_only and t.ndim != 2:
        raise RuntimeError(f"{name}: only matrices (2-D tensors) have one, got {t.ndim}-D; use mH for a batch of "
                           "matrices")
    if t.ndim < 2 and not matrix_only:
        raise RuntimeError(f"{name}: the tensor must have at least 2 dims, got {t.ndim}")
    out = t.mT
    return out.conj() if out.dtype.kind == "c" else out


# The conjugate transposes, as properties beside T and mT (views; a real tensor's is its transpose).
Tensor.H = property(lambda self: _adjoint(self, "H", True), doc="The conjugate transpose of a matrix: a view.")
Tensor.mH = property(lambda self: _adjoint(self, "mH", False),
                     doc="The conjugate transpose of each matrix (the last two dims): a view.")


@_composite("slice", promote=())
def slice_(ctx, input, dim=0, start=None, end=None, step=1):
    """input[..., start:end:step, ...] at ``dim``: a view (aten's slice)."""
    d = dim_index(dim, input.ndim, "slice")
    if operator.index(step) <= 0:
        raise RuntimeError(f"slice: step must be positive, got {step}")
    return input[(slice(None),) * d + (slice(start, end, step),)]


# ---------------------------------------------------------------- splitting
def _sections(n, sections, name):
    if sections <= 0:
        raise RuntimeError(f"{name}: the number of sections must be positive, got {sections}")
    small, extra = divmod(n, sections)
    return [small + 1] * extra + [small] * (sections - extra)


@_composite("tensor_split", methods=("tensor_split",), promote=())
def tensor_split(ctx, input, indices_or_sections, dim=0):
    """Views along dim: ``sections`` nearly equal parts (the first ones one larger), or the parts between the
    given indices."""
    d = dim_index(dim, input.ndim, "tensor_split")
    n = input.shape[d]
    how = indices_or_sections
    if isinstance(how, Tensor):
        if how.dtype.kind not in "iu" or how.ndim > 1:
            raise RuntimeError("tensor_split: a tensor of indices_or_sections must be a 0-d or 1-D integer tensor, "
                               f"got {how.dtype.name} of shape {how.shape}")
        how = int(how) if how.ndim == 0 else how.tolist()
    if isinstance(how, (int, np.integer)):
        sizes = _sections(n, int(how), "tensor_split")
    else:
        bounds = [min(max(int(i) if i >= 0 else int(i) + n, 0), n) for i in how]
        sizes = [max(e - s, 0) for s, e in zip([0] + bounds, bounds + [n])]
        starts = [0] + bounds
        out = tuple(input.narrow(d, min(s, n), z) for s, z in zip(starts, sizes))
        mark_multi_output(list(out))
        return out
    return split(input, sizes, d)


def _split_by(name, dim, min_ndim):
    def forward(ctx, input, indices_or_sections):
        if input.ndim < min_ndim:
            raise RuntimeError(f"{name}: the input must have at least {min_ndim} dims, got {input.ndim}")
        d = dim if input.ndim > 1 or name != "hsplit" else 0
        if isinstance(indices_or_sections, (int, np.integer)) and indices_or_sections > 0 and \
                input.shape[d] % indices_or_sections:
            raise RuntimeError(f"{name}: dim {d} of size {input.shape[d]} does not split into "
                               f"{indices_or_sections} equal parts")
        return tensor_split(input, indices_or_sections, d)
    forward.__name__ = name
    forward.__doc__ = f"tensor_split along dim {dim}; a number of sections must divide that dim evenly."
    return _composite(name, methods=(name,), promote=())(forward)


hsplit = _split_by("hsplit", 1, 1)
vsplit = _split_by("vsplit", 0, 2)
dsplit = _split_by("dsplit", 2, 3)


@_composite("split_with_sizes", methods=("split_with_sizes",), promote=())
def split_with_sizes(ctx, input, split_sizes, dim=0):
    """split() into parts of the given sizes (they must add up to the dim's size)."""
    return split(input, list(split_sizes), dim)


@_composite("unsafe_split", methods=("unsafe_split",), promote=())
def unsafe_split(ctx, input, split_size, dim=0):
    """split() (torch's version that skips its view checks; the views here are ordinary ones)."""
    return split(input, split_size, dim)


@_composite("unsafe_chunk", methods=("unsafe_chunk",), promote=())
def unsafe_chunk(ctx, input, chunks, dim=0):
    """chunk() (torch's version that skips its view checks; the views here are ordinary ones)."""
    return input.chunk(chunks, dim)


# ---------------------------------------------------------------- joining
def _list(name, tensors):
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise RuntimeError(f"{name}: expected a non-empty list or tuple of tensors")
    return list(tensors)


@_composite("hstack")
def hstack(ctx, tensors):
    """The tensors (at least 1-D) joined along dim 1, or dim 0 where they are 1-D."""
    ts = atleast_1d(_list("hstack", tensors))
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


@_composite("vstack", aliases=("row_stack",))
def vstack(ctx, tensors):
    """The tensors (at least 2-D) joined along dim 0."""
    return cat(atleast_2d(_list("vstack", tensors)), 0)


@_composite("dstack")
def dstack(ctx, tensors):
    """The tensors (at least 3-D) joined along dim 2."""
    return cat(atleast_3d(_list("dstack", tensors)), 2)


@_composite("column_stack")
def column_stack(ctx, tensors):
    """The tensors joined as columns: 0-d and 1-D ones as one column each, others along dim 1."""
    return cat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in _list("column_stack", tensors)], 1)


@_composite("meshgrid", promote=())
def meshgrid(ctx, *tensors, indexing="ij"):
    """Each 1-D (or 0-d) tensor expanded along its own dim of the grid they span, as views."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if any(t.ndim > 1 for t in tensors):
        raise RuntimeError("meshgrid: every tensor must be 0-d or 1-D")
    if len({t.dtype for t in tensors}) > 1 or len({t.device for t in tensors}) > 1:
        raise RuntimeError("meshgrid: every tensor must have the same dtype and device")
    sizes = [t.numel() for t in tensors]
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, t in enumerate(tensors):
        at = {0: 1, 1: 0}.get(i, i) if swap else i
        shape = [1] * len(tensors)
        shape[at] = -1
        out.append(t.reshape(shape).expand(sizes))
    return tuple(out)


@_composite("cartesian_prod", promote=())
def cartesian_prod(ctx, *tensors):
    """Every combination of one element of each 1-D tensor, as rows (a single tensor as it is)."""
    if len(tensors) == 1:
        if tensors[0].ndim != 1:
            raise RuntimeError("cartesian_prod: the tensor must be 1-D")
        return tensors[0]
    if any(t.ndim != 1 for t in tensors):
        raise RuntimeError("cartesian_prod: every tensor must be 1-D")
    return stack([g.reshape(-1) for g in meshgrid(*tensors)], 1)


@_composite("combinations", promote=())
def combinations(ctx, input, r=2, with_replacement=False):
    """Every length-r combination of the elements of a 1-D tensor, as rows (itertools' order)."""
    if input.ndim != 1:
        raise RuntimeError(f"combinations: the input must be 1-D, got {input.ndim}-D")
    if r < 0:
        raise RuntimeError(f"combinations: r must be non-negative, got {r}")
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if r == 0:
        return input[:0].clone()  # torch: an empty 1-D tensor
    if not rows:
        return input[:0].reshape(0, r)
    xp = array_module(input._array)
    index = Tensor._wrap(xp.asarray(np.array(rows, dtype=np.int64).reshape(-1)))
    return input[index].reshape(len(rows), r)


@_composite("sum_to_size", methods=("sum_to_size",))
def sum_to_size(ctx, input, *size):
    """input summed down to ``size`` (a shape input expands to): the gradient of an expand."""
    size = tuple(_size_arg(size))
    if not broadcasts_to(size, input.shape):
        raise RuntimeError(f"sum_to_size: size {list(size)} is not expandable to the input's shape {input.shape}")
    lead = input.ndim - len(size)
    out = input.sum(tuple(range(lead))) if lead else input
    keep = tuple(i for i, n in enumerate(size) if n == 1 and out.shape[i] != 1)
    return out.sum(keep, keepdim=True) if keep else out

