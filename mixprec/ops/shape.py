"""Shape, indexing, joining and dtype/device movement ops."""
from __future__ import annotations

import operator

import numpy as np

from .. import backend as _be
from ..backend import array_module, device_checks, devices, float8 as _f8
from ..backend.bfloat16 import require_dtype_support
from .. import dtypes as _dt
from .opmath import compute_dtype
from .registry import register
from ..tensor import Tensor
from ..autograd.engine import sum_to
from ..autograd.graph import mark_multi_output


def dim_index(dim, ndim, op, new_axis=False):
    """``dim`` as an index in 0..ndim-1 (0..ndim where a new axis is inserted), or an IndexError naming the op."""
    n = ndim + 1 if new_axis else max(ndim, 1)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim!r} is out of range for a tensor with {ndim} dimensions "
                         f"(expected an int in [{-n}, {n - 1}])")
    return int(dim) % n


def broadcasts_to(shape, target) -> bool:
    """Whether an array of ``shape`` broadcasts to exactly ``target`` (a value written into it, a bias added)."""
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


def _size_arg(shape):
    """Accept reshape(2, 3) and reshape((2, 3))."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


@register("_to_copy", methods=("_to_copy",), promote=(), linear=True,
          doc="Copy to another dtype and/or device; the gradient goes back the same way.")
def _to_copy(ctx, input, dtype=None, device=None):
    ctx.src = (input.dtype, devices.device_of_array(input))
    out = input
    if device is not None:
        out = devices.to_device(out, devices.as_device(device))
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
        require_dtype_support(dtype, devices.device_of_array(out))
        if out.dtype == np.bool_ and dtype == _dt.float16 and isinstance(out, np.ndarray):
            # the same values, picked from (0, 1): NumPy converts bool to float16 through float, ~10 ns an element
            out = np.asarray(np.array((0, 1), dtype=dtype).take(out.view(np.uint8)))
        else:
            out = _f8.astype(out, dtype, copy=out is input)
    elif out is input:
        out = out.copy()
    return out


@_to_copy.grad
def _(ctx, g):
    dtype, device = ctx.src
    return _to_copy(g, dtype=dtype if g.dtype != dtype else None, device=device if g.device != device else None),


@register("clone", methods=("clone",), linear=True)
def clone(ctx, input):
    return input.copy()


clone.grad(lambda ctx, g: (g,))


@register("contiguous", methods=("contiguous",), composite=True)
def contiguous(ctx, input):
    """input itself when its memory is in C order already, else a copy that is (as in torch)."""
    return input if input.is_contiguous() else input.clone()


def _reshape_grad(ctx, g):
    return g.reshape(ctx.in_shape),


@register("reshape", methods=("reshape",), view=True, linear=True)
def reshape(ctx, input, *shape):
    """A tensor with the same data and a new shape (-1 infers one size)."""
    shape = _size_arg(shape)
    ctx.in_shape = input.shape
    try:
        return input.reshape(shape)
    except ValueError:
        raise RuntimeError(f"reshape: shape {shape} is invalid for an input of shape {input.shape} "
                           f"({input.size} elements)") from None


reshape.grad(_reshape_grad)


@register("view", methods=("view",), view=True, linear=True)
def view(ctx, input, *shape):
    """reshape() that refuses to copy: the input's memory must already fit the new shape."""
    shape = _size_arg(shape)
    ctx.in_shape = input.shape
    out = input.view()
    try:
        out.shape = shape
    except (AttributeError, ValueError):
        raise RuntimeError(f"view: cannot view an input of shape {input.shape} and strides {input.strides} "
                           f"as {shape}; use reshape() (it copies when needed)") from None
    return out


view.grad(_reshape_grad)


@register("flatten", methods=("flatten",), view=True, linear=True)
def flatten(ctx, input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one."""
    ctx.in_shape = input.shape
    if input.ndim == 0:
        return input.reshape(1)
    s, e = dim_index(start_dim, input.ndim, "flatten"), dim_index(end_dim, input.ndim, "flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    merged = int(np.prod(input.shape[s:e + 1]))  # (not -1: NumPy cannot infer it for an empty input)
    return input.reshape(input.shape[:s] + (merged,) + input.shape[e + 1:])


flatten.grad(_reshape_grad)


@register("transpose", methods=("transpose",), view=True, linear=True)
def transpose(ctx, input, dim0, dim1):
    """Swap two dims."""
    ctx.dims = (dim_index(dim0, input.ndim, "transpose"), dim_index(dim1, input.ndim, "transpose"))
    return array_module(input).swapaxes(input, *ctx.dims) if input.ndim else input.view()  # 0-d: dims 0/-1 only


transpose.grad(lambda ctx, g: (g.transpose(*ctx.dims),))


@register("permute", methods=("permute",), view=True, linear=True)
def permute(ctx, input, *dims):
    """Reorder dims."""
    dims = _size_arg(dims)
    if sorted(d % max(input.ndim, 1) for d in dims) != list(range(input.ndim)):
        raise ValueError(f"permute: dims {dims} are not a permutation of the {input.ndim} dims of the input")
    ctx.dims = dims
    return input.transpose(dims)


permute.grad(lambda ctx, g: (g.permute(*np.argsort([d % g.ndim for d in ctx.dims]).tolist()),))


@register("squeeze", methods=("squeeze",), view=True, linear=True)
def squeeze(ctx, input, dim=None):
    """Drop size-1 dims (only ``dim`` when given, and only if it has size 1)."""
    ctx.in_shape = input.shape
    if dim is None:
        return input.reshape(tuple(n for n in input.shape if n != 1))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    drop = {dim_index(d, input.ndim, "squeeze") for d in dims}
    return input.reshape(tuple(n for i, n in enumerate(input.shape) if not (i in drop and n == 1)))


squeeze.grad(_reshape_grad)


@register("unsqueeze", methods=("unsqueeze",), view=True, linear=True)
def unsqueeze(ctx, input, dim):
    """Insert a size-1 dim at ``dim``."""
    if not -input.ndim - 1 <= dim <= input.ndim:
        raise IndexError(f"unsqueeze: dim {dim} is out of range for a tensor with {input.ndim} dimensions")
    ctx.in_shape = input.shape
    return array_module(input).expand_dims(input, dim)


unsqueeze.grad(_reshape_grad)


@register("expand", methods=("expand",), view=True, linear=True)
def expand(ctx, input, *shape):
    """Broadcast to a larger shape without copying (-1 keeps a dim)."""
    shape = _size_arg(shape)
    lead = len(shape) - input.ndim
    if lead < 0:
        raise RuntimeError(f"expand: cannot expand shape {input.shape} to fewer dims {shape}")
    full = tuple(input.shape[i - lead] if (s == -1 and i >= lead) else s for i, s in enumerate(shape))
    if any(m < 0 for m in full) or not broadcasts_to(input.shape, full):
        raise RuntimeError(f"expand: cannot expand shape {input.shape} to {shape}")
    # a stride of 0 repeats a dim (as broadcast_to's do, but writable: torch's fill_ may write into an expand)
    kept = tuple(0 if n != m else st for n, m, st in zip(input.shape, full[lead:], input.strides))
    return _f8.as_strided(input, full, (0,) * lead + kept)


expand.grad(lambda ctx, g: (g,))  # the engine sums broadcast dims back to the input's shape


@register("flip", methods=("flip",), linear=True)
def flip(ctx, input, dims):
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    ctx.dims = tuple(dim_index(d, input.ndim, "flip") for d in dims)
    return array_module(input).flip(input, axis=ctx.dims).copy()  # a copy, as in torch (NumPy's flip is a view)


flip.grad(lambda ctx, g: (g.flip(ctx.dims),))


# ---------------------------------------------------------------- joining
def _check_join(name, arrays, dim, same_shape):
    """Validate the tensors of cat/stack; returns dim as a non-negative index."""
    if len(arrays) == 0:
        raise ValueError(f"{name}: expected a non-empty list of tensors")
    ref = arrays[0].shape
    dim = dim_index(dim, len(ref), name, new_axis=same_shape)
    for a in arrays[1:]:
        bad = (a.shape != ref) if same_shape else (
            a.ndim != len(ref) or any(x != y for i, (x, y) in enumerate(zip(a.shape, ref)) if i != dim))
        if bad:
            raise RuntimeError(f"{name}: shapes {ref} and {a.shape} do not match "
                               f"{'exactly' if same_shape else f'outside dim {dim}'}")
    return dim


@register("cat", promote=(0,), aliases=("concatenate",), linear=True)
def cat(ctx, tensors, dim=0):
    """Join tensors along an existing dim (inputs promote to one dtype). As torch, a 1-D empty tensor in the
    list is skipped, whatever the others' shape."""
    ctx.skipped = [a.shape == (0,) for a in tensors]
    joined = [a for a, skip in zip(tensors, ctx.skipped) if not skip] or list(tensors)
    dim = _check_join("cat", joined, dim, same_shape=False)
    ctx.sizes = [a.shape[dim] for a in joined]
    ctx.dim = dim
    return array_module(joined[0]).concatenate(joined, axis=dim)


@cat.grad
def _(ctx, g):
    parts = iter(g.split(ctx.sizes, ctx.dim))
    if not any(ctx.skipped) or all(ctx.skipped):
        return list(parts),
    return [_zeros_of(g, (0,)) if skip else next(parts) for skip in ctx.skipped],


@register("stack", promote=(0,), linear=True)
def stack(ctx, tensors, dim=0):
    """Join same-shaped tensors along a new dim."""
    dim = _check_join("stack", tensors, dim, same_shape=True)
    ctx.dim, ctx.n = dim, len(tensors)
    return array_module(tensors[0]).stack(tensors, axis=dim)


@stack.grad
def _(ctx, g):
    return [g.select(ctx.dim, i) for i in range(ctx.n)],


@register("split", methods=("split",), composite=True)
def split(ctx, input, split_size_or_sections, dim=0):
    """Split into chunks of a size (last may be smaller) or into the given section sizes."""
    dim = dim_index(dim, input.ndim, "split")
    n = input.shape[dim]
    if isinstance(split_size_or_sections, int):
        if split_size_or_sections <= 0:
            raise ValueError("split: split size must be positive")
        sizes = [min(split_size_or_sections, n - s) for s in range(0, n, split_size_or_sections)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ValueError(f"split: sections {sizes} do not add up to the size {n} of dim {dim}")
    out, start = [], 0
    index = [slice(None)] * input.ndim
    for s in sizes:
        index[dim] = slice(start, start + s)
        out.append(input[tuple(index)])
        start += s
    mark_multi_output(out)
    return tuple(out)


@register("chunk", methods=("chunk",), composite=True)
def chunk(ctx, input, chunks, dim=0):
    """Split into ``chunks`` pieces of equal size (the last may be smaller)."""
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    n = input.shape[dim_index(dim, input.ndim, "chunk")]
    if n == 0:  # torch: chunks empty pieces
        return split(input, [0] * chunks, dim)
    return split(input, -(-n // chunks), dim)


@register("select", methods=("select",), composite=True)
def select(ctx, input, dim, index):
    """input[..., index, ...] at dim, dropping that dim."""
    d = dim_index(dim, input.ndim, "select")
    n = input.shape[d]
    try:
        i = operator.index(index)  # an int, or a 0-d integer tensor
    except TypeError:
        raise TypeError(f"select: index must be an int, got {type(index).__name__}") from None
    if not -n <= i < n:
        raise IndexError(f"select: index {i} is out of range for dim {d} of size {n} (expected {-n} <= index < {n})")
    key = [slice(None)] * input.ndim
    key[d] = i
    return input[tuple(key)]


@register("narrow", methods=("narrow",), composite=True)
def narrow(ctx, input, dim, start, length):
    """``length`` elements of dim from ``start`` on (a negative start counts from the end): a view."""
    if input.ndim == 0:
        raise RuntimeError("narrow: a 0-d tensor has no dim to narrow")
    d = dim_index(dim, input.ndim, "narrow")
    n = input.shape[d]
    start, length = operator.index(start), operator.index(length)  # ints, or 0-d integer tensors
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} is out of range for dim {d} of size {n} (expected {-n} <= start "
                         f"<= {n})")
    start %= max(n, 1)
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) must lie within dim {d} of size {n}")
    return input[(slice(None),) * d + (slice(start, start + length),)]


@register("unfold", methods=("unfold",), view=True, linear=True)
def unfold(ctx, input, dimension, size, step):
    """Every window of ``size`` elements along ``dimension``, ``step`` apart, as a new last dim (a view)."""
    d = dim_index(dimension, max(input.ndim, 1), "unfold")
    n = input.shape[d] if input.ndim else 1
    if not 0 <= size <= n:
        raise RuntimeError(f"unfold: size {size} does not fit dim {d} of size {n} (expected 0 <= size <= {n})")
    if step <= 0:
        raise RuntimeError(f"unfold: step must be positive, got {step}")
    ctx.in_shape = input.shape
    if input.ndim == 0:
        return input[None][:size]
    shape = input.shape[:d] + ((n - size) // step + 1,) + input.shape[d + 1:] + (size,)
    strides = input.strides[:d] + (input.strides[d] * step,) + input.strides[d + 1:] + (input.strides[d],)
    return _f8.as_strided(input, shape, strides)


@unfold.grad
def _(ctx, g):
    # where each window element came from: the same windows of the input's element numbers
    numbers = Tensor._wrap(array_module(g._array).arange(int(np.prod(ctx.in_shape))).reshape(ctx.in_shape))
    return _gather_transposed(g, numbers.unfold(*ctx.inputs[1:]), ctx.in_shape), None, None, None


def _gather_transposed(g, positions, shape):
    """The gradient of ``x.reshape(-1)[positions]`` for an x of ``shape``: g summed into the positions it came from."""
    flat = _zeros_of(g, (int(np.prod(shape)),))
    return index_put(flat, (positions.reshape(-1),), g.reshape(-1), accumulate=True).reshape(shape)


@register("as_strided", methods=("as_strided",), view=True, saves=())
def as_strided(ctx, input, size, stride, storage_offset=None):
    """A view of input's storage with the given sizes, strides and offset, in elements (as torch counts them).

    The storage is the memory of the array the input views (itself when it views none); the view must lie
    inside it, and strides must not be negative."""
    size, stride = tuple(operator.index(n) for n in size), tuple(operator.index(n) for n in stride)
    storage, start = _storage(input)
    offset = start if storage_offset is None else operator.index(storage_offset)
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided: size {list(size)} and stride {list(stride)} differ in length")
    if any(n < 0 for n in size) or any(st < 0 for st in stride) or offset < 0:
        raise RuntimeError(f"as_strided: sizes, strides and the storage offset must not be negative, got size "
                           f"{list(size)}, stride {list(stride)}, storage_offset {offset}")
    needed = offset + 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else 0
    if needed > storage.size:
        raise RuntimeError(f"as_strided: size {list(size)}, stride {list(stride)} and storage_offset {offset} reach "
                           f"element {needed - 1} of a storage of {storage.size} elements")
    ctx.layout, ctx.size, ctx.stride, ctx.offset = (storage.size, input.shape, _element_strides(input), start), \
        size, stride, offset
    item = input.itemsize
    return array_module(input).lib.stride_tricks.as_strided(storage[offset:], size, tuple(st * item for st in stride))


def _storage(a):
    """(a's storage as a flat array of a's dtype, a's offset in it in elements)."""
    root = _be.owner(a)
    flat = root.ravel(order="K").view(np.uint8).view(a.dtype)  # an owner is one block of memory, in some order
    return flat, (_be.data_ptr(a) - _be.data_ptr(flat)) // a.itemsize


def _element_strides(a):
    return tuple(st // a.itemsize for st in a.strides)


def _storage_positions(like, n, size, stride, offset):
    """Where, in a storage of n elements, each element of an (size, stride, offset) view lies."""
    numbers = array_module(like._array).arange(n)
    return Tensor._wrap(numbers).as_strided(size, stride, offset)


@as_strided.grad
def _(ctx, g):
    n, in_shape, in_stride, start = ctx.layout
    whole = _gather_transposed(g, _storage_positions(g, n, ctx.size, ctx.stride, ctx.offset), (n,))
    return whole[_storage_positions(g, n, in_shape, in_stride, start)], None, None, None


@as_strided.jvp
def _(ctx, t, *_):
    n, in_shape, in_stride, start = ctx.layout
    where = _storage_positions(t, n, in_shape, in_stride, start).reshape(-1)
    return index_put(_zeros_of(t, (n,)), (where,), t.reshape(-1)).as_strided(ctx.size, ctx.stride, ctx.offset)


@register("unbind", methods=("unbind",), view=True, linear=True)
def unbind(ctx, input, dim=0):
    """Every slice of input along dim, a tuple of views without that dim.

    One op for all the slices, so backward stacks their gradients once; slicing
    them one by one (a loop over time steps) would add a full-size gradient per slice.
    """
    if input.ndim == 0:
        raise IndexError("unbind: a 0-d tensor has no dim to unbind")
    ctx.dim = dim_index(dim, input.ndim, "unbind")
    ctx.slice_shape = input.shape[:ctx.dim] + input.shape[ctx.dim + 1:]
    return tuple(input[(slice(None),) * ctx.dim + (i, Ellipsis)] for i in range(input.shape[ctx.dim]))


@unbind.grad
def _(ctx, *grads):
    some = next(g for g in grads if g is not None)
    zeros = None
    if any(g is None for g in grads):  # slices nothing used: zero gradient
        zeros = _zeros_of(some, ctx.slice_shape)
    return stack([zeros if g is None else g for g in grads], ctx.dim),


# ---------------------------------------------------------------- indexing
@register("__getitem__", methods=("__getitem__",), promote=(), view=True, linear=True, saves=("key",))
def getitem(ctx, input, key):
    """Basic indexing (ints, slices, None, ...) views input, as in torch; integer/bool array indexing copies."""
    ctx.in_shape = input.shape
    key = _array_key(input, key)
    check_key("__getitem__", key, input.shape)
    try:
        out = input[key]
    except IndexError as exc:
        raise IndexError(f"__getitem__: {exc} (tensor of shape {input.shape})") from None
    if isinstance(out, np.generic):  # an int for every dim: NumPy gives a scalar, the same index plus ... a view
        out = input[(*key, Ellipsis) if isinstance(key, tuple) else (key, Ellipsis)]
    return out


@getitem.grad
def _(ctx, g):
    key = _array_key(g._array, ctx.inputs[1])
    return index_put(_zeros_of(g, ctx.in_shape), key, g, accumulate=True), None


def _array_key(input, key):
    """The index as NumPy/CuPy should read it: a list is an integer array index (as NumPy >= 1.23 reads it), and a
    0-d integer tensor is an int (torch reads it as one, so the result is a view)."""
    if isinstance(key, list):
        return array_module(input).asarray(key)
    if isinstance(key, tuple):
        return tuple(_int_of_0d(k) for k in key) if any(_is_int_0d(k) for k in key) else key
    return _int_of_0d(key)


def _is_int_0d(k):
    return _be.is_array(k) and k.ndim == 0 and k.dtype.kind in "iu"


def _int_of_0d(k):
    return int(k) if _is_int_0d(k) else k


def _zeros_of(like, shape):
    xp = array_module(like._array)
    return Tensor._wrap(xp.zeros(shape, dtype=like.dtype))


@register("index_put", promote=(0, 2), same_dtype=True, linear=True, saves=("indices",))
def index_put(ctx, input, indices, values, accumulate=False):
    """A copy of input with input[indices] = values (or += values when accumulate)."""
    if isinstance(indices, list):
        indices = tuple(indices)
    ctx.accumulate = accumulate
    check_key("index_put", indices, input.shape)
    out = input.copy()
    try:
        if accumulate:
            _be.scatter_add(out, indices, values)
        else:
            out[indices] = values
    except (IndexError, ValueError) as exc:  # out-of-range index, values that do not fit the indexed part
        raise type(exc)(f"index_put: {exc} (input of shape {input.shape}, values of shape "
                        f"{np.shape(values)})") from None
    ctx.values_shape = np.shape(values)
    return out


@index_put.grad
def _(ctx, g):
    indices = ctx.inputs[1]
    indices = tuple(indices) if isinstance(indices, list) else indices
    gx = g if ctx.accumulate else index_put(g, indices, 0.0)
    gv = g[indices]
    if gv.shape != ctx.values_shape:  # values were broadcast into the indexed slots
        gv = sum_to(gv, ctx.values_shape)
    return gx, None, gv


def _check_index_range(name, index, size, dim, negative=False):
    """IndexError unless every index is in [0, size), never wrapped: gather, scatter and index_select reject
    negative indices, as torch. ``negative``: [-size, size), a negative index counting from the end (x[idx])."""
    low = -size if negative else 0
    bad = (index < low) | (index >= size)
    expected = f"for dimension {dim} with size {size} (expected {low} <= index < {size})"
    if isinstance(bad, np.ndarray):  # on the CPU the error names the first bad index, now
        if bad.any():
            raise IndexError(f"{name}: index {int(index[bad][0])} is out of bounds {expected}")
    else:  # on a GPU it is raised at the next point the host waits anyway (device_checks.check)
        device_checks.check(bad, IndexError, f"{name}: an index is out of bounds {expected}")


def check_key(name, key, shape):
    """Check the array parts of an index into a tensor of ``shape`` before NumPy or CuPy use it.

    Masks must have the shape of the dims they cover (NumPy lets an empty one through) and nothing but
    integers and bools may index. Integer arrays must lie in [-size, size) of their dim (a negative index
    counts from the end): NumPy raises for the others, CuPy would wrap them silently, so on a GPU they are
    checked here (without a host wait: device_checks.check). Ints, slices, None and ... are NumPy's/CuPy's to check.
    """
    parts = key if isinstance(key, tuple) else (key,)
    parts = tuple(np.asarray(p) if isinstance(p, list) else p for p in parts)
    spans = [p.ndim if _be.is_array(p) and p.dtype == np.bool_ else 0 if p is None or p is Ellipsis else 1
             for p in parts]
    d = 0
    for p, span in zip(parts, spans):
        if p is Ellipsis:
            d += max(len(shape) - sum(spans), 0)  # the dims ... stands for
            continue
        if _be.is_array(p) and d + span <= len(shape):
            if p.dtype == np.bool_:
                if tuple(p.shape) != tuple(shape[d:d + span]):
                    raise IndexError(f"{name}: a mask of shape {tuple(p.shape)} does not match the shape "
                                     f"{tuple(shape[d:d + span])} of the dims it covers (from dim {d}) of a tensor "
                                     f"of shape {tuple(shape)}")
            elif p.dtype.kind in "iu":
                if not isinstance(p, np.ndarray):
                    _check_index_range(name, p, shape[d], d, negative=True)
            else:
                raise IndexError(f"{name}: tensors used as indices must be integer or bool tensors, got "
                                 f"{p.dtype.name}")
        d += span


def _along(name, input, dim, index):
    if index.ndim != input.ndim:
        raise RuntimeError(f"{name}: index must have as many dims as the input ({input.ndim}), got {index.ndim}")
    if index.dtype.kind not in "iu":
        raise TypeError(f"{name}: index must be an integer tensor, got {index.dtype.name}")
    d = dim_index(dim, input.ndim, name)
    _check_index_range(name, index, input.shape[d], d)
    return d


@register("gather", methods=("gather",), promote=(0,), linear=True, saves=("index",))
def gather(ctx, input, dim, index):
    """out[i][j] = input[index[i][j]][j] for dim=0 (and so on for other dims)."""
    ctx.in_shape, ctx.dim = input.shape, None
    if index.size == 0:  # as torch: an empty index gathers nothing, whatever its number of dims
        dim_index(dim, max(input.ndim, 1), "gather")
        if index.dtype.kind not in "iu":
            raise TypeError(f"gather: index must be an integer tensor, got {index.dtype.name}")
        return array_module(input).empty(index.shape, dtype=input.dtype)
    if input.ndim == 0 and index.ndim <= 1:  # as torch: a 0-d input is one element, repeated as index asks
        dim_index(dim, 1, "gather")
        if index.dtype.kind not in "iu":
            raise TypeError(f"gather: index must be an integer tensor, got {index.dtype.name}")
        _check_index_range("gather", index, 1, 0)
        return array_module(input).broadcast_to(input, index.shape).copy()
    ctx.dim = _along("gather", input, dim, index)
    if any(i > n for d, (i, n) in enumerate(zip(index.shape, input.shape)) if d != ctx.dim):
        raise RuntimeError(f"gather: index of shape {tuple(index.shape)} must not be larger than the input "
                           f"{tuple(input.shape)} outside dim {ctx.dim}")
    # index may be smaller than the input outside dim: it reads the leading part (take_along_axis would broadcast)
    leading = tuple(slice(None) if d == ctx.dim else slice(0, n) for d, n in enumerate(index.shape))
    return array_module(input).take_along_axis(input[leading], index, axis=ctx.dim)


@gather.grad
def _(ctx, g):
    if not ctx.in_shape:
        return g.sum(), None, None
    if ctx.dim is None:  # an empty index read nothing
        return _zeros_of(g, ctx.in_shape), None, None
    return scatter_add(_zeros_of(g, ctx.in_shape), ctx.dim, ctx.inputs[2], g), None, None


@register("scatter_add", methods=("scatter_add",), promote=(0, 3), same_dtype=True, linear=True,
          saves=("index",))
def scatter_add(ctx, input, dim, index, src):
    """A copy of input with src added at index along dim (repeated indices add up)."""
    shape, ctx.src_shape = input.shape, src.shape
    input, index, src = (a.reshape(1) if a.ndim == 0 else a for a in (input, index, src))  # 0-d: one element
    ctx.dim = _along("scatter_add", input, dim, index)
    if src.ndim != index.ndim or any(i > n for i, n in zip(index.shape, src.shape)) or \
            any(i > n for d, (i, n) in enumerate(zip(index.shape, input.shape)) if d != ctx.dim):
        raise RuntimeError(f"scatter_add: index of shape {index.shape} must not be larger than src "
                           f"{src.shape}, nor than the input {input.shape} outside dim {ctx.dim}")
    xp = array_module(input)
    grids = _be.open_grid(xp, index.shape)
    key = tuple(index if i == ctx.dim else grids[i] for i in range(input.ndim))
    out = input.copy()
    try:
        _be.scatter_add(out, key, src[tuple(slice(0, n) for n in index.shape)])
    except IndexError as exc:
        raise IndexError(f"scatter_add: {exc} (input of shape {input.shape})") from None
    return out.reshape(shape)


@scatter_add.grad
def _(ctx, g):
    index = ctx.inputs[2]
    gsrc = g.gather(ctx.dim, index)
    src_shape = ctx.src_shape
    if gsrc.shape != src_shape:  # src may be larger than index: only the indexed part was used
        pad = _zeros_of(g, src_shape)
        gsrc = index_put(pad, tuple(slice(0, n) for n in index.shape), gsrc)
    return g, None, None, gsrc


# ---------------------------------------------------------------- whole slices picked by a list of indices
def _index_along(name, input, dim, index):
    """dim as an index, and index (0-d or 1-D integers, each in range) as a 1-D array. A 0-d input is one
    slice of one element along dim 0 (as in torch), so its index holds one value."""
    d = dim_index(dim, max(input.ndim, 1), name)
    if index.dtype.kind not in "iu":
        raise TypeError(f"{name}: index must be an integer tensor, got {index.dtype.name}")
    if index.ndim > 1:
        raise RuntimeError(f"{name}: index must be 0-d or 1-D, got shape {tuple(index.shape)}")
    if input.ndim == 0 and index.size != 1:
        raise RuntimeError(f"{name}: the input is 0-d, so index must hold exactly 1 value, got {index.size}")
    index = index.reshape(-1)
    _check_index_range(name, index, input.shape[d] if input.ndim else 1, d)
    return d, index


def _one(a):
    """A 0-d array as the one slice of a 1-D one (how the index ops read a 0-d input); others as they are."""
    return a.reshape(1) if a.ndim == 0 else a


def _check_source(name, input, d, index, source):
    """source holds one slice of input per index: input's shape with dim d of size len(index) (0-d for a
    0-d input)."""
    expected = input.shape[:d] + (len(index),) + input.shape[d + 1:] if input.ndim else ()
    if tuple(source.shape) != expected:
        raise RuntimeError(f"{name}: source of shape {tuple(source.shape)} does not fit: expected {expected} "
                           f"(one slice of the input of shape {tuple(input.shape)} per index, along dim {d})")


@register("index_select", methods=("index_select",), promote=(0,), linear=True, saves=("index",))
def index_select(ctx, input, dim, index):
    """The slices input.select(dim, i) for i in index, joined along dim."""
    ctx.dim, index = _index_along("index_select", input, dim, index)
    ctx.in_shape = input.shape
    out = array_module(input).take(_one(input), index, axis=ctx.dim)
    return out.reshape(()) if input.ndim == 0 else out


@index_select.grad
def _(ctx, g):
    return index_add(_zeros_of(g, ctx.in_shape), ctx.dim, ctx.inputs[2], g), None, None


@register("index_add", methods=("index_add",), promote=(0, 3), same_dtype=True, linear=True, saves=("index",))
def index_add(ctx, input, dim, index, source, alpha=1):
    """A copy of input with alpha * source[k] added to slice index[k] along dim (repeated indices add up)."""
    ctx.dim, index = _index_along("index_add", input, dim, index)
    _check_source("index_add", input, ctx.dim, index, source)
    ctx.alpha = alpha
    if alpha != 1:  # scaled in float32 for half inputs; scatter_add then rounds once
        source = source.astype(compute_dtype(source.dtype, ints="keep")) * alpha
    out = _one(input).copy()
    _be.scatter_add(out, (slice(None),) * ctx.dim + (index,), _one(source))
    return out.reshape(input.shape)


@index_add.grad
def _(ctx, g):
    g_source = g.index_select(ctx.dim, ctx.inputs[2])
    return g, None, None, g_source if ctx.alpha == 1 else g_source * ctx.alpha


@register("index_copy", methods=("index_copy",), promote=(0, 3), same_dtype=True, linear=True,
          saves=("index",))
def index_copy(ctx, input, dim, index, source):
    """A copy of input with slice index[k] along dim replaced by source[k] (with repeated indices, one wins)."""
    ctx.dim, index = _index_along("index_copy", input, dim, index)
    _check_source("index_copy", input, ctx.dim, index, source)
    ctx.source_shape = source.shape
    out = _one(input).copy()
    out[(slice(None),) * ctx.dim + (index,)] = _one(source)
    return out.reshape(input.shape)


@index_copy.grad
def _(ctx, g):
    index = ctx.inputs[2]
    return index_copy(g, ctx.dim, index, _zeros_of(g, ctx.source_shape)), None, None, g.index_select(ctx.dim, index)
