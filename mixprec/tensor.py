"""The Tensor: one NumPy or CuPy array plus what autograd needs to know about it.

Math lives in the op registry (mixprec/ops); this class holds state, conversions
and the autograd entry points. Operators and most methods are bound onto it by
the registry (mixprec/ops/registry.py), so every op has a single definition.
"""
from __future__ import annotations

import numpy as np

from . import backend as _be
from .backend import devices, dlpack, float8 as _f8
from . import _state, _text
from . import dtypes as _dt

_new = object.__new__  # (Tensor._wrap's allocation, without __init__'s checks)


class Tensor:
    __slots__ = ("_array", "_requires_grad", "_grad_fn", "_vc", "__weakref__", "__dict__")
    __array_priority__ = 1000  # so ndarray + Tensor defers to Tensor.__radd__
    # What most tensors never set, as class-level defaults (set per tensor only when needed):
    output_nr = 0              # which output of grad_fn this tensor is
    _grad = None
    _hooks = None              # a leaf's register_hook callbacks {id: fn} (a non-leaf's live on its grad_fn)
    _post_acc_hooks = None     # register_post_accumulate_grad_hook callbacks {id: fn}
    _retains_grad = False
    _fw = None                 # (dual level, tangent) in forward-mode AD (autograd/forward_ad.py)
    _view = None               # how this tensor views another one's memory (ops/inplace.py ViewInfo)
    _accumulator = None        # this leaf's AccumulateGrad node (autograd/graph.py), which holds the leaf weakly
    _accumulate_into = None    # the leaf a stand-in (an unpacked saved tensor) sends its gradient to
    _inference = False         # made under inference_mode: can never enter autograd

    def __init__(self, data, dtype=None, device=None, requires_grad=False):
        t = tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)
        self._init(t._array, requires_grad=t.requires_grad)

    def _init(self, data, requires_grad=False, grad_fn=None, vc=None):
        self._array = data
        self._requires_grad = requires_grad
        self._grad_fn = grad_fn
        self._vc = vc  # version counter, shared with views (None: version 0, not shared yet; see _version_counter)

    @staticmethod
    def _wrap(data, grad_fn=None, vc=None):
        """Wrap an array without copying or checking (internal fast path; every op's result is made here)."""
        t = _new(Tensor)
        t._array = data
        t._requires_grad = grad_fn is not None
        t._grad_fn = grad_fn
        t._vc = vc
        return t

    # ---- metadata ----
    @property
    def shape(self) -> tuple:
        return self._array.shape

    @property
    def ndim(self) -> int:
        return self._array.ndim

    def dim(self) -> int:
        return self._array.ndim

    def size(self, dim=None):
        return self._array.shape if dim is None else self._array.shape[dim]

    def numel(self) -> int:
        return int(self._array.size)

    # the memory layout in torch's terms (strides and offsets count elements)
    def stride(self, dim=None):
        strides = tuple(s // self._array.itemsize for s in self._array.strides)
        return strides if dim is None else strides[dim]

    def storage_offset(self) -> int:
        return (self.data_ptr() - _be.data_ptr(_be.owner(self._array))) // self._array.itemsize

    def is_contiguous(self) -> bool:
        return bool(self._array.flags.c_contiguous)

    def data_ptr(self) -> int:
        return _be.data_ptr(self._array)

    def untyped_storage(self):
        return _be.Storage(self._array)

    @property
    def _base(self):
        """The tensor this one is a view of (the first one, for a view of a view), or None."""
        return None if self._view is None else self._view.base

    def _is_view(self) -> bool:
        return self._view is not None

    def __len__(self):
        if self._array.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._array.shape[0]

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def device(self) -> devices.Device:
        return devices.CPU if isinstance(self._array, np.ndarray) else devices.device_of_array(self._array)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def is_floating_point(self) -> bool:
        return _dt.is_floating(self.dtype) or self.dtype in _dt.IS_FLOAT8

    def is_complex(self) -> bool:
        return _dt.is_complex(self.dtype)

    def is_inference(self) -> bool:
        """Whether this tensor was made under mp.inference_mode() (it can never enter autograd)."""
        return self._inference

    @property
    def is_leaf(self) -> bool:
        """No grad_fn: made by the user (or by ops on tensors that do not require grad), not by a recorded op."""
        return self.grad_fn is None

    @property
    def grad_fn(self):
        """The graph node that made this tensor (None for a leaf)."""
        if self._view is not None:
            _graph.refresh_view(self)
        return self._grad_fn

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, mode):
        self.requires_grad_(mode)

    @property
    def _version(self) -> int:
        """Bumped by every in-place change; views share the counter with their base."""
        vc = self._vc
        return 0 if vc is None else vc[0]

    def _version_counter(self) -> list:
        """The counter as a one-item list, to share (with a view, a saved tensor). Made on first use: most
        tensors are never changed in place nor viewed, and every op result would otherwise allocate one."""
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        return vc

    def _bump_version(self):
        self._version_counter()[0] += 1

    # ---- gradients ----
    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad must be a Tensor or None, got {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has shape {value.shape}, but the tensor has shape {self.shape}")
            if value.dtype != self.dtype:
                raise RuntimeError(f"assigned grad has dtype {value.dtype.name}, but the tensor has dtype "
                                   f"{self.dtype.name}")
            if value.device != self.device:
                raise RuntimeError(f"assigned grad is on {value.device}, but the tensor is on {self.device}")
        self._grad = value

    def requires_grad_(self, mode: bool = True):
        """Make this leaf record gradients (floating and complex dtypes only), or stop."""
        if not isinstance(mode, bool):
            raise TypeError(f"requires_grad must be True or False, got {mode!r}")
        if mode and not _dt.is_differentiable(self.dtype):
            raise RuntimeError(f"only floating-point and complex tensors can require gradients, this one is "
                               f"{self.dtype.name}")
        if mode and self._inference:
            if not _state.modes().inference:
                raise RuntimeError("setting requires_grad=True on an inference tensor outside inference mode is not "
                                   "allowed (it was made under mp.inference_mode()); clone() it first")
        if self._grad_fn is not None and not mode:
            raise RuntimeError("you can only change requires_grad flags of leaf tensors; to use a computed "
                               "tensor without its graph, use t.detach()")
        if mode != self._requires_grad:  # (a tensor with a grad_fn requires grad: only a leaf gets here)
            _graph.stop_following(self)  # a leaf from now on: it no longer follows its base in autograd
            _graph.make_leaf(self, mode)
        return self

    def retain_grad(self):
        """Keep .grad on a non-leaf tensor after backward (a leaf always keeps it)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that does not require grad")
        if self.grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        self._grad_fn._retain(self.output_nr, self)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def register_hook(self, hook):
        """Call hook(grad) when this tensor's gradient is computed; a non-None return replaces it.

        On a non-leaf the hook belongs to its grad_fn (the value it has now): an
        in-place change afterwards does not move it. Returns a handle with .remove().
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that does not require grad")
        fn = self.grad_fn
        if fn is not None:
            return fn._add_tensor_hook(self.output_nr, hook)
        self._hooks, handle = _graph.add_hook(self._hooks, hook, "register_hook")
        return handle

    def register_post_accumulate_grad_hook(self, hook):
        """Call hook(tensor) on this leaf right after backward accumulated into its .grad (DDP's trigger)."""
        if not self.is_leaf:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that does not require grad")
        self._post_acc_hooks, handle = _graph.add_hook(self._post_acc_hooks, hook,
                                                       "register_post_accumulate_grad_hook")
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into every leaf's .grad (gradient defaults to 1 for one-element tensors)."""
        _engine.backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    def detach(self):
        """The same data (shared, with the same version counter) cut from the graph."""
        return Tensor._wrap(self._array, vc=self._version_counter())

    @property
    def data(self):
        """The same memory as a new tensor outside autograd, with a version counter of its own: a write through
        it is invisible to autograd (torch's ``.data``; ``detach()`` is the safe form, sharing the counter)."""
        return Tensor._wrap(self._array)

    @data.setter
    def data(self, value):
        # torch's set_data: this tensor now uses value's memory (any shape, dtype or device), keeping its identity
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data must be set to a Tensor, got {type(value).__name__}")
        if self._requires_grad and not _dt.is_differentiable(value.dtype):
            raise RuntimeError(f"Tensor.data: a tensor that requires grad must hold floating point or complex "
                               f"data, got {value.dtype}")
        self._array = value._array

    def detach_(self):
        """Cut this tensor from its graph in place (it becomes a leaf that does not require grad)."""
        if self._view is not None and self._view.base._requires_grad:
            raise RuntimeError("can't detach views in-place; use detach() instead")
        _graph.make_leaf(self, False)
        return self

    # ---- conversions ----
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array: shared memory on the CPU, a copy from the GPU (as torch's force=True)."""
        return devices.to_device(self._array, devices.CPU)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        if self._array.size != 1:
            raise RuntimeError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        value = self.numpy().reshape(())  # (a copy from the GPU also reports the checks it made: device_checks)
        return float(value) if self.dtype in _dt.ML_DTYPES else value.item()

    def tolist(self):
        arr = self.numpy()
        return (arr if self.dtype not in _dt.ML_DTYPES else arr.astype(np.float32)).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self._array.size != 1:
            raise RuntimeError(f"the truth value of a tensor with {self._array.size} elements is ambiguous")
        return bool(self.item())

    def __index__(self):
        if self.dtype.kind not in "biu" or self._array.size != 1:
            raise TypeError(f"only integer tensors of a single element can be converted to an index, this one is "
                            f"{self.dtype.name} with {self._array.size} elements")
        return int(self.item())

    def __format__(self, spec):
        # a 0-d tensor formats as its number (f"{loss:.3f}"); any other as an object: only "" (str) works, as torch
        return format(self.item(), spec) if self._array.ndim == 0 else object.__format__(self, spec)

    def __contains__(self, element):
        """``x in t``: whether any element of t equals x (a number or a tensor broadcast against t), as torch."""
        if not isinstance(element, (Tensor, int, float, complex, np.generic)):
            raise RuntimeError(f"Tensor.__contains__ takes a Tensor or a number, got {type(element).__name__}")
        return bool((self == element).any())

    def positive(self):
        """``+t``: this tensor itself, as torch; refused for bool tensors (as torch)."""
        if self.dtype == _dt.bool_:
            raise RuntimeError("positive: the `+` operator on a bool tensor is not supported (as in torch)")
        return self

    __pos__ = positive

    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False):
        """to(dtype), to(device), to(device, dtype) or to(other_tensor), each then optionally non_blocking and
        copy (positional after a dtype or tensor, as torch's); differentiable. non_blocking is a hint only."""
        k = next((i for i, a in enumerate(args) if isinstance(a, bool)), len(args))
        args, flags = args[:k], args[k:]
        if flags and (len(flags) > 2 or not all(isinstance(f, bool) for f in flags) or not args
                      or (isinstance(args[-1], (str, devices.Device)) and str(args[-1]) not in _dt._BY_NAME)):
            raise TypeError(f"to(): got {(*args, *flags)!r}; non_blocking and copy (bools) follow a dtype or tensor")
        copy = flags[1] if len(flags) == 2 else copy
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, devices.Device):
                device = a
            elif isinstance(a, str) and a not in _dt._BY_NAME:
                if a.partition(":")[0] not in ("cpu", "cuda"):
                    raise TypeError(f"to(): {a!r} is neither a device ('cpu', 'cuda', 'cuda:N') nor a supported "
                                    f"dtype ({', '.join(d.name for d in _dt.SUPPORTED)})")
                device = a
            else:
                dtype = a
        dtype = _dt.as_dtype(dtype) if dtype is not None else None
        device = devices.as_device(device) if device is not None else None
        if (dtype is None or dtype == self.dtype) and (device is None or device == self.device) and not copy:
            return self
        return self._to_copy(dtype=dtype, device=device)  # the registry's differentiable copy op

    def half(self):
        return self.to(_dt.float16)

    def float(self):
        return self.to(_dt.float32)

    def double(self):
        return self.to(_dt.float64)

    def bfloat16(self):
        return self.to(_dt.bfloat16)

    def long(self):
        return self.to(_dt.int64)

    def int(self):
        return self.to(_dt.int32)

    def bool(self):
        return self.to(_dt.bool_)

    def type(self, dtype=None):
        return self.dtype.name if dtype is None else self.to(dtype)

    def cpu(self):
        return self.to(device=devices.CPU)

    def cuda(self, index=None):
        return self.to(device="cuda" if index is None else f"cuda:{index}")

    # ---- DLPack ----
    def __dlpack__(self, *args, **kwargs):
        if self.requires_grad:
            raise RuntimeError("cannot export a tensor that requires grad via DLPack; call .detach() first")
        return dlpack.to_dlpack(self._array, *args, **kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    # ---- in-place updates ----
    # The in-place methods (add_, mul_, copy_, __setitem__, __iadd__, ...) are bound by mixprec/ops/inplace.py,
    # which also holds the autograd rules of in-place changes and views.
    def _write(self, what, value, any_cast=False):
        """Write ``value`` (an array or number, broadcast to this shape) into this tensor's memory and bump
        its version. The raw write under every in-place op; no autograd. Like torch, an arithmetic in-place
        op refuses a result of a higher category (floating into integer, integer into bool: dtypes.can_cast);
        copies (any_cast) cast anything."""
        if isinstance(value, Tensor):
            value = value._array
        if _be.is_array(value) and devices.device_of_array(value) != self.device:
            value = devices.to_device(value, self.device)
        value = _be.xp_of(self.device).asarray(value)
        if not any_cast:
            self._check_cast(value.dtype, what)
        self._check_overlap(what)
        try:
            _be.xp_of(self.device).copyto(self._array, _f8.astype(value, self.dtype, copy=False), casting="unsafe")
        except ValueError:
            raise RuntimeError(f"{what}: a value of shape {tuple(value.shape)} cannot be written into a tensor "
                               f"of shape {self.shape} (it must broadcast to that shape)") from None
        self._bump_version()

    def _check_cast(self, dtype, what):
        if not _dt.can_cast(dtype, self.dtype):
            raise RuntimeError(f"{what}: result type {_dt.as_dtype(dtype).name} can't be cast to the desired output "
                               f"type {self.dtype.name}")

    def _check_overlap(self, what):
        # fill_ and zero_ give every element one value, so torch lets them write where elements share memory
        if what not in ("fill_", "zero_") and any(st == 0 and n > 1 for st, n in zip(self._array.strides, self.shape)):
            raise RuntimeError(f"{what}: unsupported operation: more than one element of the written-to tensor "
                               "refers to a single memory location (an expand() view); clone() it first")

    def _assign(self, what, value):
        """Set this tensor's values to ``value`` (cast to its dtype), as copy_ does; for mixprec's own state
        updates (initialisation, running statistics, checkpoint loads), made under no_grad."""
        return self.copy_(value if isinstance(value, Tensor) else Tensor._wrap(_be.xp_of(self.device).asarray(value)))

    # ---- misc ----
    __hash__ = object.__hash__

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def t(self):
        """The transpose of a matrix (a vector or a scalar as it is), as a view."""
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but this one is {self.ndim}-D; use "
                               "transpose(dim0, dim1) or mT")
        return self.transpose(0, 1) if self.ndim == 2 else self.view(self.shape)

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def __repr__(self):
        return _text.tensor_repr(self)


# ----------------------------------------------------------- mp.tensor, and the leaf every creation function returns
def _finish(array, device, requires_grad):
    if requires_grad and not _dt.is_differentiable(array.dtype):
        raise RuntimeError(f"only floating-point and complex tensors can require gradients, got dtype "
                           f"{array.dtype.name}")
    t = Tensor._wrap(array)
    _graph.make_leaf(t, requires_grad)
    if _state.modes().inference:
        t._inference = True
    return t


def tensor(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A new leaf tensor copied from data.

    Arrays keep their dtype; Python floats become float32, ints int64, bools bool.
    """
    if isinstance(data, Tensor):
        src_dtype, arr = data.dtype, data._array
        src_device = data.device
    elif _be.is_array(data):
        arr, src_dtype, src_device = data, _dt.as_dtype(data.dtype), devices.device_of_array(data)
    else:
        try:
            arr = np.asarray(data.numpy() if hasattr(data, "numpy") and not isinstance(data, (list, tuple)) else data)
        except ValueError:
            arr = np.empty(0, dtype=object)
        arr = _dt.python_numbers(data, arr, dtype)
        if arr.dtype == object:
            raise TypeError(f"cannot make a tensor from {type(data).__name__} holding mixed or ragged data "
                            "(nested lists must have the same length at each level)")
        if arr.dtype.kind in "fc" and not isinstance(data, np.generic):  # Python floats: float32, complex: complex64
            src_dtype = {np.float64: _dt.float32, np.complex128: _dt.complex64}.get(arr.dtype.type) or \
                _dt.as_dtype(arr.dtype)
        elif arr.dtype.kind in "iu":
            src_dtype = _dt.int64
        else:
            src_dtype = _dt.as_dtype(arr.dtype)
        src_device = devices.CPU
    dtype = _dt.as_dtype(dtype) if dtype is not None else src_dtype
    device = devices.as_device(device) if device is not None else (
        src_device if isinstance(data, Tensor) or _be.is_array(data) else devices.get_default_device())
    with devices.on_device(device):
        out = devices.to_device(arr, device)
        out = _f8.astype(out, dtype, copy=out is arr)
    return _finish(out, device, requires_grad)


# Imported last, not inside backward() (an import statement costs a microsecond per call, and backward() runs in
# every training step): the autograd package imports this module.
from .autograd import engine as _engine, graph as _graph  # noqa: E402
