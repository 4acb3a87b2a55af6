"""fused=True: each step updates an optimizer's parameters in one multi-tensor launch per (device, dtype).

Optimizer.step hands every parameter group with gradients to ``step``. Its parameters are sorted
into buckets of one device, one dtype and one weight-copy dtype, and each bucket is one call of
the kernel the optimizer names (``fused_kind``, a key of mixprec.amp._layout.LISTS):

* CUDA: kernels/multi_tensor_optimizers.cu, launched by mixprec.amp._kernels.optimizer_step
  (Adam: two launches, the step counts first; SGD: one);
* CPU: the kernels' NumPy twin, mixprec.amp._reference.optimizer_step, vectorised over the
  bucket and equal to the kernel bit for bit (inside mixprec.amp._host_build.run_on_host, the
  kernels' own code built for the host instead: that is how tests compare the two).

The optimizer state a bucket uses (moments, momentum buffers, step counts) is laid out flat: one
buffer per state list, each parameter's state a view of it, in bucket order. The kernel does not
care (it reads pointers), but the twin then works on the buffer in place instead of gathering and
scattering every parameter's state. A state array replaced from outside (load_state_dict) is copied
into a new buffer at the next step.

With a GradScaler (torch's fused contract): grad_scale and found_inf are one-element float32
arrays on the device; the kernel divides each gradient by grad_scale, writes the unscaled
gradient back, and changes nothing at all when found_inf is non-zero. Nothing is read back to
the host, and a steady loop allocates nothing: the chunk tables and argument blocks stay cached
on the device (mixprec.amp._kernels.DeviceTables), so the step can be captured in a CUDA graph.
"""
from __future__ import annotations

import numpy as np

from .. import backend as _be
from ..backend import devices
from .. import dtypes as _dt
from ..amp import _host_build, _kernels, _layout, _reference


def step(kind, rule, params, grads, state, uses, copies, layouts, grad_scale=None, found_inf=None):
    """One fused step of one parameter group.

    params, grads: the parameters with a gradient and those gradients (contiguous, writable);
    state: the optimizer's state (parameter -> dict); uses: {list name: state key} of the state
    lists this step reads ("STEP" is a step count, the others arrays shaped like the parameter;
    missing ones start at zero); copies: {id(parameter): its low-precision weight copy} (a step
    extension's weight_copies); layouts: the group's record of the flat state buffers it made.
    """
    buckets = {}
    for p, grad in zip(params, grads):
        data, copy = p._array, copies.get(id(p))
        if copy is not None or not data.flags.c_contiguous:
            _check(p, copy)
        key = (p.device, data.dtype, None if copy is None else copy.dtype)
        bucket = buckets.get(key)
        if bucket is None:
            bucket = buckets[key] = ([], [], [], [])
        bucket[0].append(p)
        bucket[1].append(data)
        bucket[2].append(grad._array)
        bucket[3].append(None if copy is None else copy._array)
    for key, (ps, data, gs, cs) in buckets.items():
        lists = dict.fromkeys(_layout.LISTS[kind])
        lists.update(PARAM=data, GRAD=gs, WEIGHT_COPY=cs)
        flat = {}
        for name in lists:
            if name in uses:
                lists[name], flat[name] = _flat_state(ps, state, uses[name], name == "STEP", layouts, key + (name,))
            elif lists[name] is None:
                lists[name] = [None] * len(ps)
        run(kind, lists, rule, *(None if a is None else devices.to_device(a, key[0]) for a in (grad_scale, found_inf)),
            flat=flat)
    for p, grad in zip(params, grads):
        p._bump_version()
        if grad_scale is not None:
            grad._bump_version()  # it now holds the unscaled gradient
        if id(p) in copies:
            copies[id(p)]._bump_version()


def run(kind, lists, rule, grad_scale=None, found_inf=None, flat=None):
    """One bucket (arrays of one device and dtype): the kernel on CUDA, its twin (or host build) on the CPU."""
    if isinstance(lists["PARAM"][0], np.ndarray):
        runner = _host_build.host_runner()  # normally None: the NumPy twin
        if runner is None:
            _reference.optimizer_step(kind, lists, rule, grad_scale, found_inf, flat)
        else:
            _kernels.optimizer_step(kind, lists, rule, grad_scale, found_inf, runner)
        return
    with devices.on_device(devices.device_of_array(lists["PARAM"][0])):
        _kernels.optimizer_step(kind, lists, rule, grad_scale, found_inf)


def device_scalar(a, name):
    """grad_scale or found_inf as step() takes it: a one-element float32 array (NumPy or CuPy)."""
    if not _be.is_array(a) or a.dtype != _dt.float32 or a.size != 1:
        what = type(a).__name__ if not _be.is_array(a) else f"a {a.dtype.name} array of shape {a.shape}"
        raise TypeError(f"step(): {name} must be a one-element float32 array on the parameters' device (as "
                        f"GradScaler.step passes it), got {what}")
    return a


def _flat_state(params, state, key, count, layouts, where):
    """The bucket's state arrays under key, and the flat buffer they are views of.

    layouts[where] = (buffer, views) records the last layout made here: while every parameter's
    state is still that view, it is used as it is. Otherwise (first step, a state loaded or
    assigned, another set of parameters with gradients) a new buffer is made, each parameter's
    current value (zero if it has none; a step count from an int) copied in, and the state re-pointed
    at its views. A count is int64, one element per parameter.
    """
    entries = [state.setdefault(p, {}) for p in params]
    arrays = [entry.get(key) for entry in entries]
    made = layouts.get(where)
    if made is not None and len(made[1]) == len(arrays) and all(a is v for a, v in zip(arrays, made[1])):
        return arrays, made[0]
    first = params[0]
    shapes = [(1,) if count else p.shape for p in params]
    sizes = [int(np.prod(s)) for s in shapes]
    with devices.on_device(first.device):
        buffer = _be.xp_of(first.device).zeros(sum(sizes), dtype=np.int64 if count else first.dtype)
    views, start = [], 0
    for entry, old, shape, n in zip(entries, arrays, shapes, sizes):
        view = buffer[start:start + n].reshape(shape)
        if old is not None:
            view[...] = old
        entry[key] = view
        views.append(view)
        start += n
    layouts[where] = (buffer, tuple(views))
    return views, buffer


def _check(p, copy):
    """What the kernel needs of one parameter and its weight copy (the gradient has the parameter's dtype, shape
    and device: Tensor.grad's setter guarantees it); errors name the parameter."""
    if not p._array.flags.c_contiguous:
        raise ValueError(f"a fused optimizer's parameter of shape {tuple(p.shape)} ({p.dtype.name}) is not "
                         "contiguous: the fused kernel updates parameters through their memory (make it contiguous "
                         "before building the optimizer, or use fused=False)")
    if copy is not None and ((p.dtype.name, copy.dtype.name) not in _kernels.OPTIMIZER_TYPES
                             or copy.shape != p.shape or copy.device != p.device or not copy._array.flags.c_contiguous):
        raise TypeError(f"a fused optimizer's parameter of shape {tuple(p.shape)} ({p.dtype.name}): its weight copy "
                        f"({copy.dtype.name}, shape {tuple(copy.shape)}, on {copy.device}) must be a contiguous "
                        "float16 or bfloat16 tensor of a float32 parameter's shape and device")
