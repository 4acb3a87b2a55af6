"""The stand-in's ndarray and kernels: NumPy memory behind CuPy's rules.

An ``ndarray`` here holds a NumPy array (its "device memory") and refuses what
CuPy's refuses: implicit conversion to NumPy (``np.asarray``, ``__array__``),
NumPy arrays as operands, reading a value without a counted host read.
Reductions and scalar indexing give 0-d arrays. Elementwise kernels pick their
loop exactly as CuPy does, from the real CuPy ufunc's own loop table (so a
bfloat16 input to a kernel with no bfloat16 loop comes back float32, as on a
GPU). Work goes through ``compute`` (new memory) or ``mutate`` (in place), so
that a stream capture records it instead of running it (see _state.py).
"""
from __future__ import annotations

import numbers
import warnings
import weakref

import numpy as np

from ._state import COUNTS, CURRENT, capturing_here, host_read, library_call, upload
from ._real import real

_NUMPY_REFUSED = "Unsupported type <class 'numpy.ndarray'>"


# ---- memory pools ------------------------------------------------------------------------------
class MemoryPool:
    """CuPy's MemoryPool: device memory comes in blocks rounded up to 512 bytes, and a freed block stays cached
    for the next allocation of its size (so a training loop's arrays get the same addresses step after step,
    as on a GPU) until ``free_all_blocks``. ``used_bytes``: live blocks; ``total_bytes``: cached ones too."""

    def __init__(self, allocator=None):
        _POOLS.add(self)
        self._used = 0
        self._free: dict[int, list] = {}  # block size -> cached blocks, the last freed reused first
        self._address: dict[int, int] = {}  # id(block) -> where it starts
        self._live: dict = {}  # id(user) -> (weak reference to a block's user (see take), its address)

    def malloc(self, size):
        return MemoryPointer(0, CURRENT.device, size, self)

    def take(self, nbytes: int) -> np.ndarray:
        """A block of at least nbytes (a uint8 array), given back to the cache when no view of it is left."""
        size = -(-max(nbytes, 1) // 512) * 512
        cached = self._free.get(size)
        if cached:
            block = cached.pop()
        else:
            block = np.empty(size, np.uint8)
            self._address[id(block)] = block.ctypes.data
        self._used += size
        for hook in HOOKS:
            hook.malloc_postprocess(device_id=CURRENT.device, size=size, mem_size=size, mem_ptr=0, pmem_id=0)
        # what arrays are made from: NumPy points every view of it at it (it does not own its memory, a memoryview
        # does), so when it dies no view is left and the block is free
        user = np.frombuffer(memoryview(block), dtype=np.uint8)
        ref = weakref.ref(user, lambda ref, block=block, key=id(user): self._give_back(ref, block, key))
        self._live[id(user)] = (ref, self._address[id(block)])
        return user

    def _give_back(self, ref, block: np.ndarray, key: int) -> None:
        self._live.pop(key, None)
        _OWNERS.pop(key, None)
        self._used -= block.size
        self._free.setdefault(block.size, []).append(block)

    def used_bytes(self) -> int:
        return self._used

    def total_bytes(self) -> int:
        return self._used + self.free_bytes()

    def free_bytes(self) -> int:
        return sum(size * len(blocks) for size, blocks in self._free.items())

    def free_all_blocks(self, stream=None) -> None:
        for blocks in self._free.values():
            for block in blocks:
                del self._address[id(block)]
        self._free.clear()

    def n_free_blocks(self) -> int:
        return sum(len(blocks) for blocks in self._free.values())

    def set_limit(self, size=None, fraction=None):
        pass

    def get_limit(self) -> int:
        return 0


class MemoryPointer:
    """``ndarray.data``: the address of the memory (a host address here) and its device."""

    def __init__(self, ptr: int, device_id: int, size: int = 0, pool=None):
        self.ptr, self.device_id, self.mem_size = ptr, device_id, size

    @property
    def device(self):
        from ._cuda import Device
        return Device(self.device_id)

    def __int__(self):
        return self.ptr


_POOLS: "weakref.WeakSet" = weakref.WeakSet()  # every pool made (the default one, graphs' private ones)
DEFAULT_POOL = MemoryPool()


def _pool() -> MemoryPool:
    """The pool new memory comes from: the thread's allocator's (a graph's private pool), else the default."""
    allocator = CURRENT.allocator
    pool = getattr(allocator, "__self__", None) if allocator is not None else DEFAULT_POOL
    return pool if isinstance(pool, MemoryPool) else DEFAULT_POOL


def _supported(dtype) -> np.dtype:
    """``dtype``, unless CuPy cannot hold it: of ml_dtypes' dtypes it knows a C type for bfloat16 alone (its
    get_typename), so a float8 or float4 array raises CuPy's ValueError."""
    dtype = np.dtype(dtype)
    if dtype.name.startswith(("float8_", "float6_", "float4_")) or dtype.name in ("int2", "int4", "uint2", "uint4"):
        raise ValueError(f"Unsupported dtype {dtype.name}")
    return dtype


def _allocate(shape, dtype, order="C") -> np.ndarray:
    """New device memory for an array (uninitialised), from the pool in use (register it to use it)."""
    dtype = _supported(dtype)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    count = 1
    for n in shape:
        count *= n
    block = _pool().take(count * dtype.itemsize)
    flat = block[:count * dtype.itemsize].view(dtype)
    return flat.reshape(shape, order="F" if order == "F" else "C")


# ---- wrapping --------------------------------------------------------------------------------------
class _Flags:
    def __init__(self, a: np.ndarray):
        self.c_contiguous = bool(a.flags.c_contiguous)
        self.f_contiguous = bool(a.flags.f_contiguous)
        self.owndata = bool(a.flags.owndata)

    def __getitem__(self, key):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[key]


def _owner(a: np.ndarray) -> np.ndarray:
    """The array at the root of a's views (for the pool's memory, the block's user: see MemoryPool.take)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


_OWNERS: dict = {}  # id(a block's user) -> weak reference to the array that owns that memory (see base)


HOOKS: list = []  # memory hooks entered in this process (cupy.cuda.MemoryHook): told of every allocation


def memory_at(address: int, nbytes: int) -> tuple[np.ndarray, int]:
    """(the device memory holding [address, address + nbytes), the offset in it): how a library call given raw
    pointers (the stand-in's cuBLAS) finds the arrays behind them."""
    for pool in list(_POOLS):
        for ref, start in list(pool._live.values()):
            user = ref()
            if user is not None and start <= address and address + nbytes <= start + user.nbytes:
                return user, address - start
    raise RuntimeError(f"cudaErrorIllegalAddress: no device memory at {address:#x} (+{nbytes} bytes)")


def new(buffer: np.ndarray, device: int | None = None, fresh: bool = True) -> "ndarray":
    """A device array: ``fresh`` results (NumPy's memory) are copied into memory from the pool in use, which
    owns it from then on; otherwise ``buffer`` is device memory already (a view, or the pool's)."""
    out = ndarray.__new__(ndarray)
    out._device = CURRENT.device if device is None else device
    if fresh:
        if not _in_pool(buffer):
            memory = _allocate(buffer.shape, buffer.dtype, _order(buffer))
            np.copyto(memory, buffer, casting="no")
            buffer = memory
        _OWNERS[id(_owner(buffer))] = weakref.ref(out)
    out._a = buffer
    return out


_DEVICES: dict = {}  # index -> its cupy.cuda.Device


def _in_pool(buffer: np.ndarray) -> bool:
    """Whether buffer is the pool's memory: a block's user is the one array made on a memoryview."""
    return isinstance(_owner(buffer).base, memoryview)


def _order(buffer: np.ndarray) -> str:
    return "F" if buffer.flags.f_contiguous and not buffer.flags.c_contiguous else "C"


def _view_of(src: "ndarray", buffer: np.ndarray) -> "ndarray":
    out = ndarray.__new__(ndarray)
    out._a = buffer
    out._device = src._device
    return out


def refuse_host(value, what: str):
    if isinstance(value, np.ndarray):
        raise TypeError(f"{_NUMPY_REFUSED} ({what}: a NumPy array is host memory; copy it to the device with "
                        "cupy.asarray first)")


def unwrap(value, what: str, accept_host: bool = False):
    """An argument as NumPy: device arrays give their memory; host arrays are refused unless accepted (and
    then counted as uploads); lists and tuples are unwrapped item by item."""
    if isinstance(value, ndarray):
        return value._a
    if isinstance(value, np.ndarray):
        if not accept_host:
            refuse_host(value, what)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(unwrap(v, what, accept_host) for v in value)
    return value


def wrap(result, inputs=(), device=None):
    """NumPy results as device arrays: arrays that share an input's memory are views (not charged), NumPy
    scalars become 0-d arrays (CuPy returns no host scalars), tuples and lists are wrapped item by item."""
    if isinstance(result, np.ndarray):
        for inp in inputs:
            if isinstance(inp, np.ndarray) and np.may_share_memory(result, inp):
                if inp.flags.writeable and not result.flags.writeable:
                    _writable(result)
                return new(result, device, fresh=False)
        return new(result, device)
    if isinstance(result, np.generic):
        return new(np.asarray(result), device)
    if isinstance(result, tuple):
        return tuple(wrap(r, inputs, device) for r in result)
    if isinstance(result, list):
        return [wrap(r, inputs, device) for r in result]
    return result


def _writable(view):
    """CuPy has no read-only arrays: a view of writable memory (NumPy's diagonal, broadcast_to) is writable."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            view.flags.writeable = True
        except ValueError:  # (NumPy refuses it for some views; writes into those fail as they would on a host)
            pass


def _poisoned(r):
    """New memory shaped like r holding what a capture leaves in it: garbage (NaN; 0 for integers)."""
    if isinstance(r, np.ndarray):
        out = _allocate(r.shape, r.dtype, _order(r))
        out[...] = np.nan if out.dtype.kind in "fc" or out.dtype.name == "bfloat16" else 0
        return out
    if isinstance(r, tuple):
        return tuple(_poisoned(x) for x in r)
    if isinstance(r, list):
        return [_poisoned(x) for x in r]
    return r


def _as_memory(result):
    """A kernel's result as device memory: NumPy scalars (full reductions) become 0-d arrays."""
    if isinstance(result, np.generic):
        return np.asarray(result)
    if isinstance(result, (tuple, list)):
        return type(result)(_as_memory(r) for r in result)
    return result


def _copy_into(outs, results):
    if isinstance(outs, np.ndarray):
        np.copyto(outs, results, casting="unsafe")
    elif isinstance(outs, (tuple, list)):
        for o, r in zip(outs, results):
            _copy_into(o, r)


def compute(fn, inputs=(), library: str | None = None):
    """Run ``fn`` (NumPy work making new memory) as a kernel: counted, and recorded instead of run while the
    current stream captures. ``inputs`` are the NumPy buffers it reads (results that alias one are views)."""
    if library is not None:
        library_call(library)
    COUNTS.launches += 1
    cap = capturing_here()
    if cap is None:
        return fn()
    with np.errstate(all="ignore"):
        shaped = _as_memory(fn())  # run on the capture-time contents only for the shapes and dtypes
    if isinstance(shaped, np.ndarray) and any(np.may_share_memory(shaped, i) for i in inputs):
        return shaped  # a view: nothing to record
    outs = _poisoned(shaped)

    def replay():
        with np.errstate(all="ignore"):
            _copy_into(outs, _as_memory(fn()))
    cap.records.append(replay)
    cap.keep.append(outs)
    return outs


def mutate(fn, library: str | None = None):
    """Run ``fn`` (NumPy work writing into existing memory) as a kernel: recorded, not run, while capturing."""
    if library is not None:
        library_call(library)
    COUNTS.launches += 1
    cap = capturing_here()
    if cap is None:
        fn()
        return
    cap.records.append(fn)


# ---- elementwise kernels: CuPy's loop choice ----------------------------------------------------------
def _kind_score(t) -> int:
    if issubclass(t, (bool, np.bool_)):
        return 0
    if issubclass(t, (numbers.Integral, np.integer)):
        return 1
    if issubclass(t, (numbers.Number, np.inexact)):
        return 2
    return 3


def _operand(value, what: str):
    """(dtype, weak python type or False, value as NumPy) of a kernel operand, as CuPy classifies it."""
    if isinstance(value, ndarray):
        return value._a.dtype, False, value._a
    if isinstance(value, np.ndarray):
        raise TypeError(f"{_NUMPY_REFUSED} (an operand of {what})")
    if isinstance(value, np.generic):
        return value.dtype, False, value
    if isinstance(value, (bool, int, float, complex)):
        weak = bool if isinstance(value, bool) else int if isinstance(value, int) else \
            float if isinstance(value, float) else complex
        dtype = np.dtype(bool) if weak is bool else np.asarray(value).dtype
        if weak is int and not -2 ** 63 <= value < 2 ** 63:
            raise OverflowError(f"Python int {value} too large to convert to a device scalar ({what})")
        return dtype, weak, value
    raise TypeError(f"Unsupported type {type(value)} (an operand of {what})")


def choose_loop(kernel, operands, what: str, dtype=None):
    """(input dtypes, output dtypes) of the loop the real CuPy kernel picks for these operands."""
    classified = [_operand(v, what) for v in operands]
    in_types = tuple(c[0] for c in classified)
    weaks = tuple(c[1] for c in classified)
    key = (id(kernel), in_types, weaks, dtype)
    op = _LOOPS.get(key)
    if op is None:  # asked of the real kernel once per combination (CuPy caches its choice too)
        if dtype is not None:
            op = kernel._ops._guess_routine_from_dtype(np.dtype(dtype))
        else:
            usable = weaks if any(weaks) and _weak_scalars_apply(in_types, weaks) else (False,) * len(in_types)
            op = kernel._ops._guess_routine_from_in_types(in_types, usable)
        if op is None:
            raise TypeError(f"Wrong type ({dtype if dtype is not None else in_types}) of arguments for {what}")
        _LOOPS[key] = op
    if op.error_func is not None:
        op.error_func()
    return op.in_types, op.out_types, [c[2] for c in classified]


_LOOPS: dict = {}  # (kernel, input dtypes, weak scalars, dtype=) -> the loop the real kernel picked


def _weak_scalars_apply(in_types, weaks) -> bool:
    """CuPy's rule: Python scalars stay weak only beside arrays of at least their kind (int beside int...)."""
    array_kind = scalar_kind = -1
    for t, w in zip(in_types, weaks):
        if w:
            scalar_kind = max(scalar_kind, _kind_score(w))
        else:
            array_kind = max(array_kind, _kind_score(t.type))
    return scalar_kind != -1 and array_kind != -1 and array_kind >= scalar_kind


def _as_loop_input(value, dtype):
    if isinstance(value, np.ndarray):
        return value if value.dtype == dtype else value.astype(dtype)
    return np.asarray(value, dtype=dtype)


def _numpy_call(np_fn, args, out_types, kwargs=None):
    """Call a NumPy ufunc on loop-typed inputs; where NumPy has no loop for a dtype (some of bfloat16's),
    compute in float32 and round to the loop's output type."""
    kwargs = kwargs or {}
    with np.errstate(all="ignore"):
        try:
            result = np_fn(*args, **kwargs)
        except TypeError:
            wide = [a.astype(np.float32) if a.dtype.name == "bfloat16" else a for a in args]
            result = np_fn(*wide, **kwargs)
    if isinstance(result, tuple):
        return tuple(np.asarray(r).astype(t, copy=False) for r, t in zip(result, out_types))
    return np.asarray(result).astype(out_types[0], copy=False)


class ufunc:
    """A CuPy ufunc: the real one's name, arity and loop table; NumPy's arithmetic."""

    def __init__(self, real_ufunc, np_ufunc):
        self._real = real_ufunc
        self._np = np_ufunc
        self.__name__ = real_ufunc.name.replace("cupy_", "")
        self.nin, self.nout = real_ufunc.nin, real_ufunc.nout
        self.types = real_ufunc.types

    def __repr__(self):
        return f"<ufunc '{self._real.name}' (strict CuPy stand-in)>"

    def __call__(self, *args, out=None, dtype=None, casting=None, **kwargs):
        name = self._real.name
        if kwargs:
            raise TypeError(f"Wrong arguments {sorted(kwargs)} for {name}")
        if len(args) == self.nin + self.nout and out is None:
            args, out = args[:self.nin], args[self.nin:]
        if len(args) != self.nin:
            raise TypeError(f"Wrong number of arguments for {name}: {self.nin} expected, {len(args)} given")
        in_types, out_types, values = choose_loop(self._real, args, name, dtype)

        def loop_inputs():  # cast when the kernel runs (a capture records it; the memory is read at replay)
            return [_as_loop_input(v, t) for v, t in zip(values, in_types)]
        outs = None
        if out is not None:
            outs = out if isinstance(out, tuple) else (out,)
            for o, t in zip(outs, out_types):
                if not isinstance(o, ndarray):
                    raise TypeError(f"Output arguments of {name} must be cupy.ndarray, got {type(o)}")
                if not np.can_cast(t, o.dtype, casting or "same_kind"):
                    raise TypeError(f"output (typecode '{t.char}') could not be coerced to provided output "
                                    f"parameter (typecode '{o.dtype.char}') according to the casting rule "
                                    f"''{casting or 'same_kind'}''")
        buffers = [v for v in values if isinstance(v, np.ndarray)]
        if outs is None:
            result = compute(lambda: _numpy_call(self._np, loop_inputs(), out_types), buffers)
            return wrap(result, (), self._device(args))
        targets = [o._a for o in outs]

        def write():
            results = _numpy_call(self._np, loop_inputs(), out_types)
            for target, r in zip(targets, results if isinstance(results, tuple) else (results,)):
                np.copyto(target, np.broadcast_to(r, target.shape), casting="unsafe")
        mutate(write)
        return out

    def _device(self, args):
        return next((a._device for a in args if isinstance(a, ndarray)), None)

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False):
        return _reduction(f"{self.__name__}.reduce", lambda x: self._np.reduce(x, axis=axis, dtype=dtype,
                                                                                keepdims=keepdims), a, out)

    def at(self, a, indices, b=None):
        raise NotImplementedError(f"{self._real.name}.at is not supported by the strict CuPy stand-in "
                                  "(use cupyx.scatter_add)")


def _reduction(what, fn, a, out=None):
    if not isinstance(a, ndarray):
        refuse_host(a, what)
        raise TypeError(f"{what}: expected a cupy.ndarray, got {type(a).__name__}")
    result = compute(lambda: np.asarray(fn(a._a)), (a._a,))
    if out is None:
        return wrap(result, (), a._device)
    target = out._a
    mutate(lambda: np.copyto(target, result))
    return out


# ---- the array -----------------------------------------------------------------------------------------
def _index(key, shape, what="indexing"):
    """An index as CuPy reads it, as a function giving the NumPy index when the kernel runs (a capture records
    it; the index memory is read at replay). Device index arrays are wrapped into range (CuPy wraps an
    out-of-range index silently instead of raising); host arrays and lists are uploads (CuPy copies them to
    the device) and wrap too; a boolean device mask needs its count of True on the host (a host read).
    Python integers are checked on the host and raise, as in CuPy. Returns (resolve, index arrays)."""
    parts = list(key) if isinstance(key, tuple) else [key]
    consumed = [0 if p is None or p is Ellipsis else getattr(p, "ndim", 1) if _is_mask(p) else 1 for p in parts]
    axis, plan, arrays = 0, [], []
    for i, part in enumerate(parts):
        if part is Ellipsis:
            axis = len(shape) - sum(consumed[i + 1:])
            plan.append((part, None))
            continue
        if isinstance(part, ndarray):
            array = part._a
            if array.dtype == np.bool_:
                host_read("a boolean mask index (its number of True elements)")
        elif isinstance(part, (np.ndarray, list)):
            upload(f"{what} with a host array")
            array = np.array(part)
        else:
            plan.append((part, None))
            axis += consumed[i]
            continue
        wrap_to = shape[axis] if array.dtype.kind in "iu" and axis < len(shape) and shape[axis] > 0 else None
        plan.append((array, wrap_to))
        arrays.append(array)
        axis += consumed[i]

    def resolve():
        done = [np.mod(p, n) if n is not None else p for p, n in plan]
        return tuple(done) if isinstance(key, tuple) else done[0]
    return resolve, arrays


def _is_mask(part) -> bool:
    return (isinstance(part, ndarray) and part._a.dtype == np.bool_) or \
        (isinstance(part, np.ndarray) and part.dtype == np.bool_)


def _is_basic(key) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return all(p is None or p is Ellipsis or isinstance(p, (slice, numbers.Integral)) and not isinstance(p, bool)
               for p in parts)


_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
           "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
           "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift"}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
            "ge": "greater_equal"}


def _ufunc(name) -> ufunc:
    from . import _namespace
    return _namespace.ufunc_named(name)


class ndarray:
    """cupy.ndarray, strictly: see the module's docstring."""
    __array_priority__ = real.ndarray.__array_priority__
    __slots__ = ("_a", "_device", "__weakref__")

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is not None or strides is not None:
            raise NotImplementedError("the strict CuPy stand-in makes arrays only from a shape and dtype")
        self._a = _allocate(shape, dtype, order)
        self._device = CURRENT.device
        _OWNERS[id(_owner(self._a))] = weakref.ref(self)

    # -- what an array is
    @property
    def shape(self):
        return self._a.shape

    @shape.setter
    def shape(self, value):  # CuPy's in-place reshape: only where no copy is needed
        try:
            self._a = self._a.reshape(value, copy=False)
        except ValueError:
            raise AttributeError("Incompatible shape for in-place modification. Use `.reshape()` to make a copy "
                                 "with the desired shape.") from None

    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a))

    @property
    def data(self) -> MemoryPointer:
        return MemoryPointer(self._a.__array_interface__["data"][0], self._device, self._a.nbytes)

    @property
    def device(self):
        device = _DEVICES.get(self._device)
        if device is None:
            from ._cuda import Device  # (_cuda builds on this module)
            device = _DEVICES[self._device] = Device(self._device)
        return device

    @property
    def base(self):
        """The array that owns this view's memory (None for an owner), as CuPy's base."""
        root = _owner(self._a)
        ref = _OWNERS.get(id(root))
        owner = ref() if ref is not None else None
        if owner is self or (owner is None and self._a is root):
            return None
        if owner is None or owner._a is not root and _owner(owner._a) is not root:
            owner = new(root, self._device, fresh=False)
            _OWNERS[id(root)] = weakref.ref(owner)
        return owner

    T = property(lambda self: _view_of(self, self._a.T))
    mT = property(lambda self: _view_of(self, np.swapaxes(self._a, -1, -2)))

    @property
    def real(self):
        return _view_of(self, self._a.real) if self.dtype.kind == "c" else self

    @property
    def imag(self):
        if self.dtype.kind == "c":
            return _view_of(self, self._a.imag)
        return new(np.zeros_like(self._a), self._device)

    # -- host conversions: explicit, counted
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                        "NumPy array explicitly.")

    def get(self, stream=None, order="C", out=None, blocking=True):
        host_read("ndarray.get()")
        if out is not None:
            np.copyto(out, self._a)
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr)}")
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError("Shape or dtype mismatch in ndarray.set")
        upload("ndarray.set()")
        np.copyto(self._a, arr)

    def item(self, *args):
        host_read("ndarray.item()")
        return self._a.item(*args)

    def tolist(self):
        host_read("ndarray.tolist()")
        return self._a.tolist()

    def _scalar(self, kind, what):
        host_read(what)
        return kind(self._a)

    def __bool__(self):
        return self._scalar(bool, "bool(array)")

    def __float__(self):
        return self._scalar(float, "float(array)")

    def __int__(self):
        return self._scalar(int, "int(array)")

    def __complex__(self):
        return self._scalar(complex, "complex(array)")

    def __repr__(self):
        host_read("repr(array)")
        text = repr(self._a)
        return text[:text.rindex(")")] + ("" if self._device == 0 else f", device={self._device}") + ")" \
            if text.startswith("array(") else text

    def __str__(self):
        host_read("str(array)")
        return str(self._a)

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self._scalar(lambda a: a.item(), "format(array)"), spec)
        return format(str(self), spec)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    # -- NumPy meeting this array
    def __array_ufunc__(self, np_ufunc, method, *inputs, **kwargs):
        if method != "__call__":
            return NotImplemented
        try:
            mine = _ufunc(np_ufunc.__name__)
        except AttributeError:
            return NotImplemented
        return mine(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from . import _namespace
        try:
            mine = _namespace.function_named(func.__name__)
        except AttributeError:
            return NotImplemented
        return mine(*args, **kwargs)

    # -- indexing
    def __getitem__(self, key):
        if isinstance(key, ndarray) or isinstance(key, tuple) and any(isinstance(k, ndarray) for k in key) \
                or not _is_basic(key):
            index, indices = _index(key, self.shape)
            a = self._a
            return wrap(compute(lambda: a[index()], (a, *indices)), (), self._device)
        view = self._a[key]
        if isinstance(view, np.generic):  # an int for every dim: CuPy gives a 0-d view, NumPy a scalar
            view = self._a[(*key, Ellipsis) if isinstance(key, tuple) else (key, Ellipsis)]
        return _view_of(self, view)

    def __setitem__(self, key, value):
        index, _ = _index(key, self.shape, "assignment")
        if isinstance(value, np.ndarray):
            upload("assigning a host array into a device array")
        elif isinstance(value, ndarray):
            value = value._a
        elif isinstance(value, (list, tuple)):
            upload("assigning a host list into a device array")
            value = np.asarray(value)
        target = self._a

        def write():
            with np.errstate(all="ignore"):
                target[index()] = value
        mutate(write)

    # -- arithmetic: the real CuPy ufuncs' loop choice
    def _binary(self, name, other, reflected=False):
        if isinstance(other, np.ndarray):
            raise TypeError(f"{_NUMPY_REFUSED} (an operand of {name})")
        if not isinstance(other, (ndarray, np.generic, bool, int, float, complex)):
            return NotImplemented
        return _ufunc(name)(other, self) if reflected else _ufunc(name)(self, other)

    def _inplace(self, name, other):
        if isinstance(other, np.ndarray):
            raise TypeError(f"{_NUMPY_REFUSED} (an operand of {name})")
        return _ufunc(name)(self, other, out=self)

    def __matmul__(self, other):
        from . import _namespace
        return _namespace.function_named("matmul")(self, other)

    def __rmatmul__(self, other):
        from . import _namespace
        return _namespace.function_named("matmul")(other, self)

    def __neg__(self):
        return _ufunc("negative")(self)

    def __pos__(self):
        return _ufunc("positive")(self)

    def __abs__(self):
        return _ufunc("absolute")(self)

    def __invert__(self):
        return _ufunc("invert")(self)

    __hash__ = None

    # -- methods: CuPy's names, NumPy's work
    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        dtype = np.dtype(dtype)
        if not copy and dtype == self.dtype:
            return self
        a = self._a
        return wrap(compute(lambda: a.astype(dtype, order=order), (a,)), (), self._device)

    def copy(self, order="C"):
        a = self._a
        return new(compute(lambda: np.array(a, order=order, copy=True), ()), self._device)

    def view(self, dtype=None, array_class=None):
        return _view_of(self, self._a if dtype is None else self._a.view(_supported(dtype)))

    def reshape(self, *shape, order="C"):
        a = self._a
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        r = a.reshape(shape, order=order)
        if np.may_share_memory(r, a):
            return _view_of(self, r)
        return wrap(compute(lambda: a.reshape(shape, order=order).copy(), (a,)), (), self._device)

    def fill(self, value):
        if isinstance(value, ndarray):
            raise TypeError("ndarray.fill takes a scalar (CuPy: a device array here is read on the host)")
        a = self._a
        mutate(lambda: a.fill(value))

    def __getattr__(self, name):
        from . import _namespace
        return _namespace.array_method(self, name)

    def __dir__(self):
        return sorted(set(dir(real.ndarray)))

    def __dlpack_device__(self):
        return (2, self._device)  # kDLCUDA, as CuPy says (the capsule itself holds host memory)

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__(**{k: v for k, v in kwargs.items() if k in ("max_version", "copy")})

    def toDlpack(self):
        return self._a.__dlpack__()

    def __reduce__(self):
        host_read("pickling an array")
        from . import _namespace
        return _namespace.function_named("array"), (self._a.copy(),)


def _make_operators():
    for short, name in _BINARY.items():
        setattr(ndarray, f"__{short}__", lambda self, other, _n=name: self._binary(_n, other))
        setattr(ndarray, f"__r{short}__", lambda self, other, _n=name: self._binary(_n, other, reflected=True))
        setattr(ndarray, f"__i{short}__", lambda self, other, _n=name: self._inplace(_n, other))
    for short, name in _COMPARE.items():
        setattr(ndarray, f"__{short}__", lambda self, other, _n=name: self._binary(_n, other))
    ndarray.__divmod__ = lambda self, other: (self // other, self % other)


_make_operators()
