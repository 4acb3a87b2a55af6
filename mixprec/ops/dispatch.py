"""Dispatch: what happens on every op call — ``mp.add(a, b)``, ``a.add(b)`` and ``a + b`` alike.

    dispatch(op, args, kwargs)
      1. bind:     data arguments given by keyword join the positional ones
      2. find:     the Tensors among the arguments (raw arrays in data positions become Tensors)
      3. device:   they must share one device
      4. autocast: inside a region for that device type, cast the data inputs by the op's
                   policy (ops/autocast.py); a composite whose own policy applied runs its
                   inner ops with autocast off
      5. promote:  the data inputs to one dtype (dtypes.result_type; scalars adopt it)
      6. forward:  run on arrays, wrap the result; record a graph node when grad mode is on
                   and an input requires grad (reverse mode), and attach the output's tangent
                   when an input carries one (forward mode, autograd/forward_ad.py)

Observers (mp.amp.trace, mp.profiler, the numerics inspector mp.amp.inspect) watch the calls
through mixprec/observers.py; when none is active they cost one attribute read per op call.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .._state import PER_THREAD
from ..backend import is_array
from ..backend import array_module as _array_module
from ..backend import owner as _owner
from ..backend.devices import CPU
from ..backend.devices import on_device as _on
from ..autograd import forward_ad as _fwad
from ..autograd.grad_mode import no_grad as _no_grad
from ..autograd.graph import Notes, RuleCtx, make_view, refresh_view
from ..autograd.graph import record as record_call
from ..tensor import Tensor
from ..tensor import tensor as _make_tensor
from ..observers import Call, run_observed
from . import autocast as _autocast, float8 as _float8

# Python and NumPy scalars are "weak": they adopt the dtype of the tensors they meet.
SCALARS = (int, float, complex, np.generic)  # np.generic: NumPy and ml_dtypes (bfloat16) scalars
_DIFFERENTIABLE, _FLOAT8 = frozenset(_dt.FLOATING + _dt.COMPLEX + _dt.FLOAT8), _dt.IS_FLOAT8  # (grads flow in 1st)


# ---------------------------------------------------------------- dispatch
# Every op call runs this code, and on small tensors it is most of the time a training step takes
# (benchmarks/dispatch.py). So the common case is kept cheap: one pass over the arguments (_find_tensors) finds
# the tensors, their device, whether one requires grad, whether promotion has anything to do and the arrays forward
# runs on; autocast, observers, forward AD and anomaly mode cost one check each when they are off (all read from
# this thread's Modes, fetched once per call: _state.py says why).
def dispatch(op, args, kwargs):
    """Run one call of ``op`` (the steps are listed in the module docstring)."""
    if op.custom:
        return _dispatch_custom(op, args, kwargs)
    if kwargs:
        if "out" in kwargs and not op.takes_out:
            return _dispatch_out(op, args, kwargs)
        if op.arg_names:
            args, kwargs = _keyword_args_to_positional(op, args, kwargs)
    if len(args) > op.max_args:
        raise TypeError(f"{op.name}() takes at most {op.max_args} positional arguments "
                        f"({', '.join(op.arg_names)}) but {len(args)} were given")
    found = (len(args) == 2 and _find_two_host_tensors(args)) or _find_tensors(op, args)
    _, _, device, _, uniform = found
    if device is None:  # no Tensor at all
        found = _scalars_to_tensors(op, args)
        _, _, device, _, uniform = found
    m = PER_THREAD.modes
    if m.observers:
        return _dispatch_observed(op, kwargs, found, m)
    if uniform and not m.autocast_regions and not op.composite:  # nothing for _dispatch to cast: run it
        return _run(op, kwargs, found, m)
    return _dispatch(op, kwargs, found, None, m)


def _dispatch(op, kwargs, found, call, m):
    """Autocast, promotion and forward; ``found`` is what _find_tensors found, ``call`` the observed Call, ``m`` this
    thread's Modes."""
    found_args, _, device, _, uniform = found
    args = found_args
    decision = None
    regions = m.autocast_regions
    if regions and device.type in regions and not op.inplace and not explicit_dtype_or_out(op, args, kwargs):
        if call is not None:
            call.casting = True
        args, decision = _autocast.cast_inputs(op, args, data_tensors(op, args), device.type)
        if call is not None:
            call.casting, call.autocast = False, decision
    if op.composite:
        if call is not None:
            call.run_args = args
        if decision is None:
            return op.forward(None, *args, **kwargs)
        with _autocast.suspended():  # the op's own policy applied, once, at the top (as torch does)
            return op.forward(None, *args, **kwargs)
    if op.promote and not (uniform and decision is None):
        args = _promote(op, args)
    if call is not None:
        call.run_args = args
    if args is not found_args:  # autocast or promotion put casts in: look at the arguments again
        found = _find_tensors(op, args)
    return _run(op, kwargs, found, m)


def _dispatch_observed(op, kwargs, found, m):
    args, _, device, _, _ = found
    calls = m.calls
    call = Call(op, args, kwargs, device, calls[-1] if calls else None, len(calls))
    return run_observed(call, lambda: _dispatch(op, kwargs, found, call, m), m.observers)


def _dispatch_custom(op, args, kwargs):
    """A custom autograd.Function: its forward runs on the Tensors as given (no binding, promotion or autocast of
    its inputs; its inner ops follow the rules), then the graph records it like any op (autograd/function.py)."""
    m = PER_THREAD.modes
    if not m.observers:
        return op.call(args, kwargs)
    calls = m.calls
    device = next((t.device for t in tensors_in(args)), None)
    call = Call(op, args, kwargs, device, calls[-1] if calls else None, len(calls))
    call.run_args = args
    return run_observed(call, lambda: op.call(args, kwargs), m.observers)


def _run(op, kwargs, found, m):
    """Forward on arrays, then the autograd bookkeeping of both modes."""
    args, arrays, device, requires_grad, _ = found
    record = requires_grad and op.differentiable and m.grad
    tangents = m.dual_level is not None and op.differentiable and _any_tangent(args)
    ctx = Notes()
    try:
        if device is CPU:
            data = op.forward(ctx, *arrays, **kwargs) if kwargs else op.forward(ctx, *arrays)
        else:
            with _on(device):
                data = op.forward(ctx, *arrays, **kwargs)
    except ValueError:
        if op.broadcast:
            _check_broadcast(op, arrays)
        raise
    several = False
    if type(data) is _NDARRAY and not op.view:  # one new host array, as most calls return (what _wrap would do)
        out = _new_tensor(data)
    elif type(data) is tuple:
        several = True
        out = tuple(_wrap(op, d, args, arrays, kwargs, m, i) for i, d in enumerate(data))
    else:
        out = _wrap(op, data, args, arrays, kwargs, m)
    if m.inference:
        for o in (out if several else (out,)):
            o._inference = True
    if not (record or tangents):
        return out
    outs = out if several else (out,)
    floating = any(o._array.dtype in _DIFFERENTIABLE for o in outs) if several else out._array.dtype in _DIFFERENTIABLE
    if not floating:  # (an integer result has no gradient)
        return out
    attach = (lambda rule_ctx: _fwad.attach_tangents(rule_ctx, args, out)) if tangents else None
    if record:
        record_call(op, ctx, args, kwargs, outs, None, None, attach, m.anomaly)
    else:
        attach(RuleCtx(op, ctx, args, outs, kwargs, None))
    return out


def _wrap(op, data, args, arrays, kwargs, m, output=None):
    """The Tensor of one result array (result ``output`` of several): a view of its input for a view op that
    returned one."""
    if isinstance(data, np.generic):
        data = np.asarray(data)  # NumPy reductions return scalars, not 0-d arrays
    if op.view and _is_view_of(data, arrays[0]):
        source = args[0]
        out = Tensor._wrap(data, vc=source._version_counter())
        make_view(out, source, op, args[1:], kwargs, not m.grad, output)
        return out
    return Tensor._wrap(data)


def _any_tangent(args):
    return any(_fwad.tangent_of(t) is not None for t in tensors_in(args))


def _is_view_of(out, a):
    """Whether array ``out`` views ``a``'s memory: both lead to the same owner through .base (NumPy and CuPy keep
    the array a view was made from there), or, for a view made from raw strides (as_strided: NumPy passes it
    through a holder object, CuPy keeps no base), its memory overlaps a's (a view op's other results are new)."""
    return _owner(out) is _owner(a) or _array_module(out).may_share_memory(out, a)


_NDARRAY = np.ndarray
_new_tensor = Tensor._wrap  # (read from the module, not the class: every op call makes its result here)


# ---------------------------------------------------------------- out=
def _dispatch_out(op, args, kwargs):
    """``op(..., out=t)``: compute, then write into ``t`` (a tuple of tensors for several outputs).

    As in torch, such a call is not autocast (it runs in the types it is given)
    and not differentiable: with grad mode on it refuses inputs (or an out
    tensor) that require grad. The result is cast to out's dtype when that is
    the same kind or wider (float32 into float64, not float into int); out must
    have the result's shape and device.
    """
    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    if out is None:
        return dispatch(op, args, kwargs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"{op.name}(): out= must be a Tensor (or a tuple of them), got {type(o).__name__}")
    if PER_THREAD.modes.grad and (any(o._requires_grad for o in outs) or any(t._requires_grad for t in tensors_in(args))
                            or any(isinstance(v, Tensor) and v._requires_grad for v in kwargs.values())):
        raise RuntimeError(f"{op.name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad")
    with _autocast.suspended(), _no_grad():
        result = dispatch(op, args, kwargs)
    results = result if isinstance(result, tuple) else (result,)
    if len(results) != len(outs):
        raise TypeError(f"{op.name}(): out= needs {len(results)} tensor(s) for its {len(results)} output(s), got "
                        f"{len(outs)}")
    for i, (o, r) in enumerate(zip(outs, results)):
        what = f"{op.name}(): out={'' if len(outs) == 1 else f'[{i}]'}"
        if o.shape != r.shape:
            raise RuntimeError(f"{what} has shape {o.shape}, but the result has shape {r.shape}")
        if o.device != r.device:
            raise RuntimeError(f"{what} is on {o.device}, but the result is on {r.device}")
        if not np.can_cast(r.dtype, o.dtype, casting="same_kind"):
            raise RuntimeError(f"{what}: result type {r.dtype.name} can't be cast to the desired output type "
                               f"{o.dtype.name}")
        o._write(f"{op.name}(out=)", r._array)
    return out


# ---------------------------------------------------------------- forward mode for linear ops
def linear_tangent(ctx, *tangents):
    """The tangent rule of an op that is linear in its floating inputs: the op applied to their tangents.

    Every floating Tensor argument (also inside a list) is replaced by its tangent
    and a number in a data position by 0 (a constant: ``x + 2`` moves like ``x``);
    index tensors, shapes and options stay as they were.
    """
    op = ctx.op

    def swap(i, a, t):
        if isinstance(a, Tensor):
            return t if a.dtype in _DIFFERENTIABLE else a
        if isinstance(a, (list, tuple)) and isinstance(t, (list, tuple)):
            return type(a)(swap(i, x, y) for x, y in zip(a, t))
        if i in data and isinstance(a, SCALARS):
            return 0
        return a
    data = data_positions(op, len(ctx.inputs))
    return op(*(swap(i, a, t) for i, (a, t) in enumerate(zip(ctx.inputs, tangents))), **ctx.kwargs)


# ---------------------------------------------------------------- argument handling
def explicit_dtype_or_out(op, args, kwargs):
    """True when a call passed dtype= or out= (positionally or by keyword): such calls are not autocast."""
    if kwargs and (kwargs.get("dtype") is not None or kwargs.get("out") is not None):
        return True
    return any(i < len(args) and args[i] is not None for i in op.dtype_out_positions)


def tensors_in(args):
    """The Tensors among positional args, looking one level into lists and tuples (cat, stack)."""
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, Tensor))


def data_positions(op, n):
    """The data positions of a call with ``n`` positional args: ``op.promote``, and every variadic
    argument of an op whose forward takes its data as ``*args`` (``chain_matmul(*matrices)``)."""
    if op.variadic_data:
        return op.promote + tuple(range(op.promote[-1] + 1, n))
    return op.promote


def data_tensors(op, args):
    """(arg index, list index or None, tensor) for each Tensor in a data position (``op.promote``)."""
    found = []
    for i in data_positions(op, len(args)):
        if i >= len(args):
            break
        a = args[i]
        if isinstance(a, Tensor):
            found.append((i, None, a))
        elif isinstance(a, (list, tuple)):
            found.extend((i, j, x) for j, x in enumerate(a) if isinstance(x, Tensor))
    return found


def _find_tensors(op, args):
    """Look at each positional arg once, also into lists (cat, stack). Returns
    (args, arrays, device, requires_grad, uniform):

    args: as given, but a raw NumPy/CuPy array in a data position (``op.promote``)
    wrapped as a Tensor, so ``t + ndarray`` follows the same dtype and device
    rules as two tensors; arrays: what forward gets (each Tensor's array, also
    inside a list; anything else as it is); device: the one device the Tensors
    share (None: there is no Tensor); requires_grad: whether one of them does;
    uniform: the Tensors have one dtype and no data position holds anything else
    (but None), so promotion has nothing to do.

    A view whose base was changed in place since is refreshed first (it follows its base).
    """
    data = None  # the data positions, found when a non-Tensor argument needs them
    arrays = []
    any_tensor = off_host = requires_grad = False  # off_host: a Tensor's array is not NumPy's (not the CPU)
    dtype, uniform = None, True
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            if a._view is not None:
                refresh_view(a)
            x = a._array
            arrays.append(x)
            if not isinstance(x, _NDARRAY):
                off_host = True
            if a._requires_grad:
                requires_grad = True
            if dtype is None:
                dtype = x.dtype
                if dtype in _FLOAT8:  # (the one dtype check a call pays: ops/float8.py says which ops take these)
                    _float8.check(op, dtype, args)
            elif x.dtype is not dtype and x.dtype != dtype:
                uniform = False
            continue
        if data is None:
            data = op.promote if not op.variadic_data else data_positions(op, len(args))
        if i in data and a is not None:  # a number, a list (cat) or an array in a data position
            uniform = False
            if not isinstance(a, SCALARS) and is_array(a):
                _dt.as_dtype(a.dtype)  # names an unsupported dtype
                args = tuple(args[:i]) + (Tensor._wrap(a),) + tuple(args[i + 1:])
                arrays.append(a)
                any_tensor = True
                off_host = off_host or not isinstance(a, np.ndarray)
                continue
        if isinstance(a, (list, tuple)):
            has_tensors = False
            for x in a:
                if isinstance(x, Tensor):
                    if x._view is not None:
                        refresh_view(x)
                    has_tensors = True
                    off_host = off_host or not isinstance(x._array, np.ndarray)
                    requires_grad = requires_grad or x._requires_grad
            if has_tensors:
                any_tensor = True
                a = type(a)(x._array if isinstance(x, Tensor) else x for x in a)
        arrays.append(a)
    if dtype is None and not any_tensor:
        device = None
    elif not off_host:
        device = CPU  # without building Device objects
    else:
        device = _common_device(op, list(tensors_in(args)))
    return args, arrays, device, requires_grad, uniform


def _find_two_host_tensors(args):
    """_find_tensors for the commonest call, two CPU Tensors of one dtype that are not views (``a + b``), in one
    step; None for anything else."""
    a, b = args
    if type(a) is Tensor is type(b) and a._view is None and b._view is None:
        x, y = a._array, b._array
        if type(x) is _NDARRAY is type(y) and x.dtype is y.dtype and x.dtype not in _FLOAT8:
            return args, [x, y], CPU, a._requires_grad or b._requires_grad, True
    return None


def _scalars_to_tensors(op, args):
    """No tensor at all (``mp.exp(1.0)``): data-position scalars become tensors on the default device."""
    data = data_positions(op, len(args))
    args = tuple(_make_tensor(a) if i in data and isinstance(a, SCALARS) else a for i, a in enumerate(args))
    found = _find_tensors(op, args)
    _, _, device, _, _ = found
    if device is None:
        raise TypeError(f"{op.name}: expected a Tensor argument")
    return found


def _common_device(op, tensors):
    device = tensors[0].device
    for t in tensors:
        if t.device is not device and t.device != device:
            raise RuntimeError(f"{op.name}: expected all tensors on one device, got {device} and {t.device}")
    return device


def _keyword_args_to_positional(op, args, kwargs):
    """Data params (``op.promote``) and tensors given by keyword join the positional args.

    ``clamp(x, max=t)`` then reaches forward and backward with ``t`` in its
    position (defaults fill the gap); plain options such as ``dim=`` and an
    ``out=`` buffer stay keywords.
    """
    for n, v in kwargs.items():
        if n in op.data_names or isinstance(v, Tensor):
            return _move_keywords(op, args, kwargs)
    return args, kwargs  # options only (dim=, keepdim=, dtype=): _move_keywords would leave them too


def _move_keywords(op, args, kwargs):
    """_keyword_args_to_positional for a call that passes a data param or a tensor by keyword."""
    start = len(args)
    last = -1
    for k, n in enumerate(op.arg_names[start:], start):
        if n in kwargs and n != "out" and (k in op.promote or isinstance(kwargs[n], Tensor)):
            last = k
    if last < 0:
        return args, kwargs
    kwargs = dict(kwargs)
    extra = []
    for n in op.arg_names[start:last + 1]:
        if n in kwargs:
            extra.append(kwargs.pop(n))
        elif n in op.defaults:
            extra.append(op.defaults[n])
        else:
            raise TypeError(f"{op.name}: missing argument {n!r}")
    return tuple(args) + tuple(extra), kwargs


def _promote(op, args):
    """Cast the data args (op.promote) to one dtype; scalars become scalars of that dtype.

    Two common cases are decided here, the rest by _promote_mixed: every data arg
    is a Tensor (or None) of one dtype (nothing to do), and Python ints and floats
    beside Tensors of one dtype (``x * 2.0``, ``1 - p``, ``target != -100``): they
    are weak, so they take that dtype (dtypes.result_type's rule for this case).
    """
    if not op.bools:
        _refuse_bools(op, args)
    target = None
    numbers = None  # positions of Python ints and floats (not bools: they follow the general rule)
    floats = False
    n = len(args)
    for i in (op.promote if not op.variadic_data else data_positions(op, n)):
        if i >= n:
            break
        a = args[i]
        if isinstance(a, Tensor):
            d = a._array.dtype
            if target is None:
                target = d
            elif d is not target and d != target:
                return _promote_mixed(op, args)
        elif type(a) is int or type(a) is float:
            numbers = (numbers or ()) + (i,)
            floats = floats or type(a) is float
        elif a is not None:
            return _promote_mixed(op, args)
    if numbers is None:
        return args
    # weak numbers keep the tensors' dtype unless they are of a higher kind: a float beside integer tensors,
    # an int beside bool ones (then, and with no tensor at all, result_type decides)
    if target is None or not (target.kind in "fc" or (target.kind in "iu" and not floats)):
        return _promote_mixed(op, args)
    args = list(args)
    for i in numbers:
        args[i] = _scalar(op, args[i], target)
    return tuple(args)


def _promote_mixed(op, args):
    """_promote for mixed dtypes, scalars and lists: one target dtype by dtypes.result_type."""
    operands = []
    data = [i for i in data_positions(op, len(args)) if i < len(args)]
    for i in data:
        a = args[i]
        for x in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(x, (Tensor, SCALARS)):
                operands.append(x)
            elif x is not None and not isinstance(x, (list, tuple)):
                raise TypeError(f"{op.name}: expected a Tensor or a number, got {type(x).__name__}")
    if not operands:
        return args
    if op.same_dtype:
        dts = {x.dtype for x in operands if isinstance(x, Tensor)}
        if len(dts) > 1:
            raise TypeError(f"{op.name}: expected all inputs to have the same dtype, got "
                            f"{' and '.join(sorted(d.name for d in dts))} (cast one with .to(dtype), "
                            "or run under mp.autocast)")
    target = _dt.result_type(*operands)
    args = list(args)
    for i in data:
        a = args[i]
        if isinstance(a, (list, tuple)):
            args[i] = [_cast_or_scalar(op, x, target) for x in a]
        else:
            args[i] = _cast_or_scalar(op, a, target)
    return tuple(args)


def _refuse_bools(op, args):
    """RuntimeError if a data arg is a bool tensor or a Python bool (ops registered with bools=False)."""
    for i in data_positions(op, len(args)):
        x = args[i] if i < len(args) else None
        if isinstance(x, bool) or (isinstance(x, Tensor) and x.dtype == np.bool_):
            raise RuntimeError(f"{op.name}: bool operands are not supported (as in torch); to invert a mask use ~ or "
                               "logical_not(), to count with one convert it first: mask.to(dtype)")


def _cast_or_scalar(op, x, dtype):
    if isinstance(x, Tensor):
        return x if x.dtype == dtype else x.to(dtype)
    if isinstance(x, SCALARS):
        return _scalar(op, x, dtype)
    return x


def _scalar(op, x, dtype):
    """A weak number as a scalar of ``dtype``. An int the integer dtype cannot hold wraps around, as in torch's
    arithmetic (``int8 + 1000``); an op registered ``exact_scalars`` refuses it instead (``clamp(max=1000)``)."""
    try:
        return dtype.type(x) if dtype not in _FLOAT8 else _float8.scalar(x, dtype)
    except OverflowError:
        if op is not None and op.exact_scalars:
            _dt.check_fits(x, dtype, op.name)
        return _dt.as_integer(x, dtype)


def _check_broadcast(op, arrays):
    """Turn NumPy's/CuPy's broadcasting ValueError into one that names the op and the shapes."""
    shapes = [tuple(a.shape) for a in arrays if is_array(a)]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        listed = ", ".join(map(str, shapes[:-1])) + f" and {shapes[-1]}"
        raise RuntimeError(f"{op.name}: shapes {listed} cannot be broadcast together "
                           "(each dimension, counted from the right, must be equal or 1)") from None
