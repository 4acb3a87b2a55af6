"""Creation functions, and the Tensor methods that make a tensor like another (``mp.tensor`` itself, which
``Tensor(data)`` calls, is tensor.py's).

    mp.zeros(2, 3)   mp.full((2,), 7.0)   mp.arange(5)   mp.eye(3)   mp.as_tensor(array)   mp.zeros_like(x)
    mp.triu_indices(3, 3)            mp.logspace(0, 2, 3)          mp.unravel_index(idx, (2, 3))
    mp.empty_strided((2, 3), (1, 2)) mp.empty_permuted((2, 3), (1, 0))   mp.scalar_tensor(1.5)
    x.new_zeros(2, 3)   x.new_full((2,), 7)   x.new_empty_strided((2, 2), (1, 2))   x.resize_(4)

Nothing here differentiates: each makes a new leaf (``requires_grad=`` where torch has it).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from . import backend as _be
from . import dtypes as _dt
from .backend import devices, dlpack, float8 as _f8
from .backend.bfloat16 import require_dtype_support
from .tensor import Tensor, _finish, tensor


# ---------------------------------------------------------------- the basic ones
def _resolve(dtype, device, default_dtype=_dt.float32):
    dtype = _dt.as_dtype(dtype) if dtype is not None else default_dtype
    device = devices.as_device(device) if device is not None else devices.get_default_device()
    require_dtype_support(dtype, device)
    return dtype, device


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like tensor() but shares memory when data already is a Tensor/array of the right kind."""
    if isinstance(data, Tensor) and (dtype is None or _dt.as_dtype(dtype) == data.dtype) \
            and (device is None or devices.as_device(device) == data.device):
        return data
    if _be.is_array(data) and (dtype is None or _dt.as_dtype(dtype) == data.dtype) \
            and (device is None or devices.as_device(device) == devices.device_of_array(data)):
        _dt.as_dtype(data.dtype)
        return Tensor._wrap(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a NumPy array (dtype kept)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    _dt.as_dtype(array.dtype)
    return Tensor._wrap(array)


def from_dlpack(obj) -> Tensor:
    """Zero-copy import of anything with __dlpack__ (NumPy, CuPy, PyTorch, JAX, ...)."""
    if isinstance(obj, Tensor):
        return obj.detach()
    arr = dlpack.from_dlpack(obj)
    _dt.as_dtype(arr.dtype)
    return Tensor._wrap(arr)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"sizes must be non-negative integers, got {size}")
    return tuple(int(s) for s in size)


def _filled(value, size, dtype, device, requires_grad):
    if dtype is None and not isinstance(value, float):
        dtype = _dt.scalar_dtype(value)
    dtype, device = _resolve(dtype, device)
    _dt.check_fits(value, dtype, "full")
    with devices.on_device(device):
        arr = _be.xp_of(device).full(_shape(size), _f8.fill_value(value, dtype), dtype=dtype)
    return _finish(arr, device, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _filled(0.0, size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _filled(1.0, size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    dtype, device = _resolve(dtype, device)
    with devices.on_device(device):
        arr = _be.xp_of(device).empty(_shape(size), dtype=dtype)
    return _finish(arr, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    size = (size,) if isinstance(size, int) else tuple(size)
    return _filled(fill_value, size, dtype, device, requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = _dt.float32 if any(isinstance(v, float) for v in (start, end, step)) else _dt.int64
    dtype, device = _resolve(dtype, device)
    if dtype == _dt.bool_:
        raise TypeError("arange: dtype bool is not supported; use an integer or floating dtype")
    if step == 0 or (end - start) * step < 0:
        raise RuntimeError(f"arange: step must be nonzero and lead from start to end, got start={start}, end={end}, "
                           f"step={step}")
    with devices.on_device(device):
        arr = _be.xp_of(device).arange(start, end, step, dtype=np.float64 if _dt.is_floating(dtype) else dtype)
    return _finish(arr.astype(dtype, copy=False), device, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False) -> Tensor:
    dtype, device = _resolve(dtype, device)
    with devices.on_device(device):
        arr = _be.xp_of(device).linspace(start, end, steps).astype(dtype)
    return _finish(arr, device, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    dtype, device = _resolve(dtype, device)
    with devices.on_device(device):
        arr = _be.xp_of(device).eye(n, m, dtype=dtype)
    return _finish(arr, device, requires_grad)


def _made_like(fn):
    def like(t, dtype=None, device=None, requires_grad=False, **kw):
        return fn(*t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad, **kw)
    like.__name__ = fn.__name__ + "_like"
    like.__doc__ = f"{fn.__name__}() with the shape, dtype and device of a tensor."
    return like


zeros_like, ones_like, empty_like = map(_made_like, (zeros, ones, empty))


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False):
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def _size(size, name):
    try:
        return _shape(size)
    except (TypeError, ValueError):
        raise RuntimeError(f"{name}: sizes must be non-negative ints, got {size}") from None


# ---------------------------------------------------------------- index tensors
def _tri_indices(name, row, col, offset, dtype, device, lower):
    if row < 0 or col < 0:
        raise RuntimeError(f"{name}: row and col must be non-negative, got {row} and {col}")
    dtype, device = _resolve(dtype if dtype is not None else _dt.int64, device)
    r, c = np.tril_indices(row, offset, col) if lower else np.triu_indices(row, offset, col)
    return _finish(devices.to_device(np.stack([r, c]).astype(dtype), device), device, False)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (row, col) indices of the upper triangle of a row x col matrix (from diagonal ``offset`` on), as a
    2 x N tensor in row-major order."""
    return _tri_indices("triu_indices", row, col, offset, dtype, device, lower=False)


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (row, col) indices of the lower triangle of a row x col matrix (up to diagonal ``offset``), as a
    2 x N tensor in row-major order."""
    return _tri_indices("tril_indices", row, col, offset, dtype, device, lower=True)


def unravel_index(indices, shape):
    """The coordinates, in a tensor of ``shape``, of flat (row-major) indices: a tuple of int64 tensors shaped
    like indices. As torch, an index outside the shape wraps around (a negative one counts from the end)."""
    if not isinstance(indices, Tensor) or indices.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must be an integer tensor, got "
                        f"{indices.dtype.name if isinstance(indices, Tensor) else type(indices).__name__}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(operator.index(n) < 0 for n in shape):
        raise ValueError(f"unravel_index: sizes of shape must be non-negative, got {shape}")
    if 0 in shape and indices.numel():
        raise ValueError(f"unravel_index: a shape with a size 0 {shape} has no places to index")
    if math.prod(shape) > 2 ** 63 - 1:
        raise RuntimeError(f"unravel_index: the shape {shape} holds more elements than int64 counts")
    flat = indices._array.astype(np.int64)
    out = []
    for n in reversed(shape):
        out.append(Tensor._wrap(flat % n))
        flat = flat // n
    return tuple(reversed(out))


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``steps`` values from base**start to base**end, evenly spaced in the exponent (start and end may be 0-d
    tensors)."""
    start, end = (float(v) if isinstance(v, Tensor) else v for v in (start, end))
    if operator.index(steps) < 0:
        raise RuntimeError(f"logspace: steps must be non-negative, got {steps}")
    dtype, device = _resolve(dtype, device)
    exponents = np.linspace(start, end, steps)
    values = np.power(float(base), exponents)
    if dtype.kind in "iu":  # torch computes integer results from the float values, truncated
        values = np.trunc(values)
    return _finish(devices.to_device(values.astype(dtype), device), device, requires_grad)


# ---------------------------------------------------------------- memory laid out on request
def _strided(name, size, stride, dtype, device, requires_grad):
    size, stride = _size(size, name), tuple(operator.index(s) for s in stride)
    if len(size) != len(stride) or any(s < 0 for s in stride):
        raise RuntimeError(f"{name}: stride {list(stride)} must be non-negative and as long as size {list(size)}")
    dtype, device = _resolve(dtype, device)
    n = 1 + sum((k - 1) * s for k, s in zip(size, stride)) if all(size) else 0
    xp = _be.xp_of(device)
    with devices.on_device(device):
        buffer = xp.empty(n, dtype=dtype)
    array = xp.lib.stride_tricks.as_strided(buffer, size, tuple(s * buffer.itemsize for s in stride))
    return _finish(array, device, requires_grad)


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor with the given sizes and strides (in elements)."""
    return _strided("empty_strided", size, stride, dtype, device, requires_grad)


def empty_permuted(size, physical_layout, *, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of ``size`` whose dims lie in memory in the order ``physical_layout`` (outermost
    first)."""
    size, layout = _size(size, "empty_permuted"), tuple(physical_layout)
    if sorted(layout) != list(range(len(size))):
        raise RuntimeError(f"empty_permuted: physical_layout {list(layout)} is not a permutation of the "
                           f"{len(size)} dims of size {list(size)}")
    dtype, device = _resolve(dtype, device)
    with devices.on_device(device):
        physical = _be.xp_of(device).empty(tuple(size[d] for d in layout), dtype=dtype)
    return _finish(physical.transpose(np.argsort(layout)), device, requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor holding the number ``s`` (float32 by default, whatever the number's type)."""
    if not isinstance(s, (bool, int, float, np.number)):
        raise TypeError(f"scalar_tensor: s must be a number, got {type(s).__name__}")
    return full((), s, dtype=dtype if dtype is not None else _dt.float32, device=device, requires_grad=requires_grad)


# ---------------------------------------------------------------- Tensor.new_*: another tensor's dtype and device
def _like(self, dtype, device):
    return dict(dtype=self.dtype if dtype is None else dtype, device=self.device if device is None else device)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros of ``size``, with this tensor's dtype and device unless given."""
    return zeros(*size, **_like(self, dtype, device), requires_grad=requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    """A tensor of ones of ``size``, with this tensor's dtype and device unless given."""
    return full(_size(size, "new_ones"), 1, **_like(self, dtype, device), requires_grad=requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of ``size``, with this tensor's dtype and device unless given."""
    return empty(*size, **_like(self, dtype, device), requires_grad=requires_grad)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A tensor of ``size`` filled with ``fill_value``, with this tensor's dtype and device unless given."""
    kw = _like(self, dtype, device)
    if kw["dtype"].kind in "iub" and isinstance(fill_value, float):  # torch converts the value to the dtype
        fill_value = kw["dtype"].type(fill_value).item()
    return full(_size((size,), "new_full"), fill_value, **kw, requires_grad=requires_grad)


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False):
    """empty_strided() with this tensor's dtype and device unless given."""
    kw = _like(self, dtype, device)
    return _strided("new_empty_strided", size, stride, kw["dtype"], kw["device"], requires_grad)


# ---------------------------------------------------------------- resizing in place
def resize_(self, *size, memory_format=None):
    """Give this tensor ``size`` in place: its first elements (in memory order) keep their values, elements
    beyond its old ones are uninitialised. Tensors autograd tracks and views cannot be resized."""
    size = _size(size, "resize_")
    if self.requires_grad:
        raise RuntimeError("resize_: cannot resize a tensor that requires grad; resize a detached clone")
    if self._view is not None and size != self.shape:
        raise RuntimeError("resize_: cannot resize a view of another tensor; resize a clone")
    n, xp = math.prod(size), _be.xp_of(self.device)
    flat = self._array.reshape(-1)
    if n > flat.size:
        with devices.on_device(self.device):
            grown = xp.empty(n, dtype=self.dtype)
        grown[:flat.size] = flat
        flat = grown
    self._array = flat[:n].reshape(size)
    self._bump_version()
    return self


def resize_as_(self, other, memory_format=None):
    """resize_() to ``other``'s shape."""
    return resize_(self, other.shape)


for _fn in (new_zeros, new_ones, new_empty, new_full, new_empty_strided, resize_, resize_as_):
    setattr(Tensor, _fn.__name__, _fn)
