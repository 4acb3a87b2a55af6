"""The stand-in's modules: every name the real CuPy has, and no other.

A name is looked up in the real package first: missing there, it is missing
here (``AttributeError``), so code calling an API CuPy lacks fails as it would
on a GPU. A real ufunc becomes a stand-in ufunc with its loop table; a real
function becomes NumPy's function of that name behind the real signature (a
keyword CuPy does not take is a ``TypeError``), with host arrays refused and
the result's dtype set by the real inner kernel where CuPy's Python routes
through one (``where``, ``tril``, ``clip``...). Types and constants are the
real ones (CuPy's are NumPy's).
"""
from __future__ import annotations

import importlib
import inspect
import types

import numpy as np

from . import _array, _cuda, _state
from ._array import choose_loop, compute, mutate, new, ndarray, refuse_host, unwrap, wrap
from ._real import real

LOW = (np.dtype(np.float16), np.dtype("bfloat16") if "bfloat16" in np.sctypeDict else None)

# Functions that call a CUDA library CuPy refuses to call while a stream captures.
CUBLAS = {"matmul", "dot", "tensordot", "inner", "vdot", "einsum", "outer"}
CUSOLVER = {"cholesky", "qr", "svd", "eigh", "eigvalsh", "inv", "solve", "lstsq", "det", "slogdet", "pinv", "eig",
            "eigvals", "matrix_rank", "tensorinv", "tensorsolve", "cond", "matrix_power"}

# Reductions CuPy accumulates in float32 for half inputs, rounding once (as its cuBLAS products do).
HALF_SUMS = {"sum", "prod", "mean", "cumsum"}
# Functions that take host data and copy it to the device (counted), or read only a host array's shape.
UPLOADS = {"asarray", "array", "asanyarray", "ascontiguousarray"}
SHAPE_ONLY = {"zeros_like", "ones_like", "empty_like", "full_like"}
# Functions whose result's size depends on the data: CuPy reads a count back to the host.
DATA_DEPENDENT = {"nonzero", "argwhere", "flatnonzero", "unique", "compress", "extract"}


def _inner_where(args, kwargs):
    values = list(args) + [kwargs.get("x"), kwargs.get("y")][len(args) - 1:]
    return (np.True_, values[1], values[2])  # CuPy casts the condition to a bool array first


def _inner_tri(args, kwargs):
    m = args[0]
    return (np.True_, m, m.dtype.type(0)) if isinstance(m, ndarray) else None  # where(tri mask, m, zero)


# CuPy's Python functions whose result dtype an inner kernel decides (read from CuPy's source): the real
# kernel, and the operands CuPy hands it.
INNER = {
    "where": ("cupy._sorting.search", "_where_ufunc", _inner_where),
    "tril": ("cupy._sorting.search", "_where_ufunc", _inner_tri),
    "triu": ("cupy._sorting.search", "_where_ufunc", _inner_tri),
    "clip": ("cupy._core._routines_math", "_clip", lambda args, kwargs: tuple(args[:3])),
    "angle": ("cupy._core", "angle", lambda args, kwargs: tuple(args[:1])),
}

_ufuncs: dict = {}
_functions: dict = {}


def ufunc_named(name: str) -> _array.ufunc:
    made = _ufuncs.get(name)
    if made is None:
        real_u = getattr(real, name, None)
        if not isinstance(real_u, type(real.add)):
            raise AttributeError(f"cupy has no ufunc {name!r}")
        made = _ufuncs[name] = _array.ufunc(real_u, getattr(np, name))
    return made


def function_named(name: str):
    return ROOT.__getattr__(name)


def _quick_fit(sig):
    """A fast test that a call fits a signature: no more positional arguments than it takes, and only keywords
    it names. (What it lets through, Signature.bind would too, except a missing required argument, which the
    NumPy function reports.)"""
    if sig is None:
        return lambda args, kwargs: True
    kinds = inspect.Parameter
    params = list(sig.parameters.values())
    var_pos = any(p.kind is kinds.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind is kinds.VAR_KEYWORD for p in params)
    positional = sum(p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD) for p in params)
    keywords = {p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)}

    def fits(args, kwargs):
        return (var_pos or len(args) <= positional) and (var_kw or keywords.issuperset(kwargs))
    return fits


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _device_memory(values):
    """The memory of the device arrays among values (in lists and tuples too)."""
    for v in values:
        if isinstance(v, ndarray):
            yield v._a
        elif isinstance(v, (list, tuple)):
            yield from _device_memory(v)


def _device_of(values):
    for v in values:
        if isinstance(v, ndarray):
            return v._device
        if isinstance(v, (list, tuple)):
            d = _device_of(v)
            if d is not None:
                return d
    return None


def _low(dtype) -> bool:
    return dtype is not None and np.dtype(dtype) in LOW


def make_function(qualname: str, real_fn, np_fn):
    """A CuPy function, strictly: the real signature, NumPy's work (see the module's docstring)."""
    name = qualname.rsplit(".", 1)[-1]
    sig = _signature(real_fn)
    library = "cuBLAS" if name in CUBLAS else "cuSOLVER" if name in CUSOLVER and ".linalg" in qualname else None
    accept_host = name in UPLOADS
    inner = INNER.get(name) if qualname.count(".") == 1 else None

    fits = _quick_fit(sig)

    def call(*args, **kwargs):
        if sig is not None and not fits(args, kwargs):  # the full check only when the quick one doubts
            try:
                sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{qualname}() {exc}") from None
        if name in DATA_DEPENDENT or (name == "where" and len(args) + len(kwargs) == 1):
            _state.host_read(f"{qualname} (the size of its result depends on the data)")
        if name in SHAPE_ONLY and args and isinstance(args[0], np.ndarray):
            args = (new(np.empty(args[0].shape, args[0].dtype), fresh=False),) + args[1:]
        np_args = [unwrap(a, qualname, accept_host) for a in args]
        if accept_host and args and not isinstance(args[0], ndarray):
            _state.upload(f"{qualname} of host data")
            np_args[0] = np.array(np_args[0], copy=True)  # device memory of its own, never the host's
        out = kwargs.pop("out", None)
        np_kwargs = {k: unwrap(v, qualname, accept_host) for k, v in kwargs.items()}
        buffers = list(_device_memory(args)) + list(_device_memory(kwargs.values()))  # (host data is not)
        result_dtype = None
        if inner is not None:
            module, kernel, operands = inner
            picked = operands(args, kwargs)
            if picked is not None:
                result_dtype = choose_loop(getattr(importlib.import_module(module), kernel), picked, qualname)[1][0]

        def work():
            with np.errstate(all="ignore"):
                result = _numpy_work(np_fn, name, np_args, np_kwargs)
            if result_dtype is not None and isinstance(result, np.ndarray):
                result = result.astype(result_dtype, copy=False)
            return result
        device = _device_of(args)
        if library == "cuSOLVER" and _state.ERRSTATE.linalg == "raise":
            _state.host_read(f"{qualname} under cupyx.errstate(linalg='raise') (cuSOLVER's status is read back)")
        result = compute(work, buffers, library)
        if out is not None:
            if not isinstance(out, ndarray):
                refuse_host(out, qualname)
                raise TypeError(f"{qualname}: out must be a cupy.ndarray")
            target = out._a
            mutate(lambda: np.copyto(target, result, casting="unsafe"))
            return out
        return wrap(result, buffers, device)
    call.__name__ = name
    call.__qualname__ = qualname
    call.__doc__ = f"{qualname} (strict CuPy stand-in: NumPy's work behind CuPy's signature)"
    return call


def _numpy_work(np_fn, name, args, kwargs):
    """NumPy's function, computing half-precision products and sums in float32 and rounding once, as CuPy's
    cuBLAS calls and reductions do (NumPy itself would round at every step); take and take_along_axis wrap
    out-of-range indices, as CuPy's do, where NumPy raises."""
    if name == "take":
        kwargs = dict(kwargs, mode="wrap")
    if name == "take_along_axis" and len(args) >= 2 and args[0].ndim and args[1].dtype.kind in "iu":
        axis = args[2] if len(args) > 2 else kwargs.get("axis", -1)
        if axis is not None:
            args = [args[0], np.mod(args[1], max(args[0].shape[axis], 1)), *args[2:]]
    floats = [a for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    if name in CUBLAS | HALF_SUMS and floats and all(_low(a.dtype) for a in floats) \
            and kwargs.get("dtype") is None:
        out_dtype = np.result_type(*[a.dtype for a in floats])
        wide = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args]
        return np.asarray(np_fn(*wide, **kwargs)).astype(out_dtype)
    try:
        return np_fn(*args, **kwargs)
    except TypeError:
        if not any(isinstance(a, np.ndarray) and a.dtype.name == "bfloat16" for a in args):
            raise
        wide = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.name == "bfloat16" else a for a in args]
        result = np_fn(*wide, **kwargs)
        return result.astype("bfloat16") if isinstance(result, np.ndarray) and result.dtype == np.float32 else result


# ---- special functions ---------------------------------------------------------------------------------
def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    return np.asarray(a, order=order) if out is None else np.copyto(out, a) or out


def get_array_module(*args):
    return ROOT if any(isinstance(a, ndarray) for a in args) else np


class _HostCapsule:
    """A stand-in array's capsule as NumPy takes it: the memory is host memory, whatever the device says."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def from_dlpack(array, *, device=None, copy=None):
    """Zero-copy import of a stand-in array, or of a producer exporting one (a mixprec tensor on "cuda")."""
    if isinstance(array, ndarray):
        return _array._view_of(array, array._a)
    kind = array.__dlpack_device__()[0] if hasattr(array, "__dlpack_device__") else None
    if kind != 2 or not hasattr(array, "__dlpack__"):
        raise TypeError("the strict CuPy stand-in imports DLPack only from its own arrays (kDLCUDA producers "
                        f"whose memory is the stand-in's); got {type(array).__name__} on device type {kind}")
    try:  # a versioned capsule: NumPy makes legacy ones read-only
        capsule = array.__dlpack__(max_version=(1, 0))
    except TypeError:
        capsule = array.__dlpack__()
    return new(np.from_dlpack(_HostCapsule(capsule)), fresh=False)


def _random_state(*args, **kwargs):
    return _cuda.RandomState(*args, **kwargs)


def _random_seed(seed=None):
    _cuda.RandomState.default().seed(seed)


OVERRIDES = {
    "cupy": {"ndarray": ndarray, "asnumpy": asnumpy, "get_array_module": get_array_module,
             "from_dlpack": from_dlpack, "get_default_memory_pool": lambda: _array.DEFAULT_POOL,
             "get_default_pinned_memory_pool": lambda: _array.MemoryPool()},
    "cupy.random": {"RandomState": _random_state, "seed": _random_seed},
}


def _array_method_names():
    return set(dir(real.ndarray))


IN_PLACE_METHODS = {"sort", "put", "partition", "byteswap"}


def array_method(arr: ndarray, name: str):
    """``arr.name``: CuPy's method names; NumPy's work (views stay views; in-place methods are recorded)."""
    if name.startswith("__") or name not in _array_method_names():
        raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r}")
    a = arr._a
    if name in DATA_DEPENDENT:
        _state.host_read(f"ndarray.{name} (the size of its result depends on the data)")
    if name in ("scatter_add", "scatter_max", "scatter_min"):
        ufunc = {"scatter_add": np.add, "scatter_max": np.maximum, "scatter_min": np.minimum}[name]

        def scatter(slices, value):
            index, _ = _array._index(slices, a.shape)
            v = unwrap(value, f"ndarray.{name}")
            mutate(lambda: ufunc.at(a, index(), v))
        return scatter
    np_method = getattr(a, name, None)
    if np_method is None:
        raise AttributeError(f"the strict CuPy stand-in does not implement cupy.ndarray.{name}")

    def method(*args, **kwargs):
        np_args = [unwrap(v, f"ndarray.{name}") for v in args]
        out = kwargs.pop("out", None)
        np_kwargs = {k: unwrap(v, f"ndarray.{name}") for k, v in kwargs.items()}
        if name in IN_PLACE_METHODS:
            mutate(lambda: getattr(a, name)(*np_args, **np_kwargs))
            return None
        buffers = [a, *_device_memory(args), *_device_memory(kwargs.values())]

        def work():
            with np.errstate(all="ignore"):
                if name in HALF_SUMS:  # np.sum(a, ...) is a.sum(...): the functions' float32 rule applies
                    return _numpy_work(getattr(np, name), name, [a, *np_args], np_kwargs)
                return getattr(a, name)(*np_args, **np_kwargs)
        result = compute(work, buffers)
        if out is not None:
            target = out._a
            mutate(lambda: np.copyto(target, result, casting="unsafe"))
            return out
        return wrap(result, (a,), arr._device)
    method.__name__ = name
    return method


# ---- modules -----------------------------------------------------------------------------------------
class Namespace(types.ModuleType):
    """One stand-in module mirroring one real module (``cupy``, ``cupy.linalg``, ``cupyx``...)."""

    def __init__(self, qualname: str, real_module, numpy_module, extra: dict | None = None):
        super().__init__(qualname.replace("cupy", "strict_cupy", 1) if qualname.startswith("cupy") else qualname)
        self._qualname = qualname
        self._real = real_module
        self._numpy = numpy_module
        self._extra = dict(OVERRIDES.get(qualname, {}), **(extra or {}))
        self._made: dict = {}

    def __getattr__(self, name: str):
        made = self._made.get(name)
        if made is not None:
            return made
        if name in self._extra:
            made = self._extra[name]
        elif name.startswith("__"):
            raise AttributeError(name)
        else:
            made = self._resolve(name)
        self._made[name] = made
        return made

    def _resolve(self, name):
        try:
            real_value = getattr(self._real, name)
        except AttributeError:
            raise AttributeError(f"module '{self._qualname}' has no attribute '{name}' (not in the real CuPy "
                                 f"{real.__version__} either)") from None
        if isinstance(real_value, (type, np.dtype, int, float, complex, str, type(None))) \
                and not isinstance(real_value, type(real.add)):
            if isinstance(real_value, type) and issubclass(real_value, real.ndarray):
                return ndarray
            return real_value
        if isinstance(real_value, type(real.add)):
            np_fn = getattr(self._numpy if self._numpy is not None else np, name, None)
            if not isinstance(np_fn, np.ufunc):
                raise AttributeError(f"the strict CuPy stand-in has no NumPy twin for the ufunc {self._qualname}."
                                     f"{name}")
            return ufunc_named(name) if self._qualname == "cupy" else _array.ufunc(real_value, np_fn)
        if isinstance(real_value, types.ModuleType):
            raise AttributeError(f"the strict CuPy stand-in does not provide the module {self._qualname}.{name}")
        np_fn = getattr(self._numpy, name, None) if self._numpy is not None else None
        if callable(real_value) and callable(np_fn):
            return make_function(f"{self._qualname}.{name}", real_value, np_fn)
        raise AttributeError(f"the strict CuPy stand-in does not implement {self._qualname}.{name}")

    def __dir__(self):
        return sorted(set(dir(self._real)) | set(self._extra))


ROOT = Namespace("cupy", real, np)
