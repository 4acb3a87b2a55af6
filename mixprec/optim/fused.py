"""fused=True: each step updates an optimizer's parameters in one multi-tensor launch per (device, dtype).

Optimizer.step hands every parameter group with gradients to ``step``. Its parameters are sorted
into buckets of one device, one dtype and one weight-copy dtype, and each bucket is one call of
the kernel the optimizer names (``fused_kind``, a key of mixprec.amp._layout.LISTS):

* CUDA: kernels/multi_tensor_optimizers.cu, launched by mixprec.amp._kernels.optimizer_step
  (Adam: two launches, the step counts first; SGD: one);
* CPU: the kernels' NumPy twin, mixprec.amp._reference.optimizer_step, vectorised over the
  bucket and equal to the kernel bit for bit (inside mixprec.amp._kernels.run_on_host, the
  kernels' own code built for the host instead: that is how tests compare the two).

With a GradScaler (torch's fused contract): grad_scale and found_inf are one-element float32
arrays on the device; the kernel divides each gradient by grad_scale, writes the unscaled
gradient back, and changes nothing at all when found_inf is non-zero. Nothing is read back to
the host, and a steady loop allocates nothing: the chunk tables and argument blocks stay cached
on the device (mixprec.amp._kernels.DeviceTables), so the step can be captured in a CUDA graph.
"""
from __future__ import annotations

import numpy as np

from .. import backend as _be
from .. import dtypes as _dt
from ..amp import _kernels, _layout, _reference


def step(kind, rule, params, grads, states, copies, grad_scale=None, found_inf=None):
    """One fused step of one parameter group.

    params, grads: the parameters with a gradient and those gradients (contiguous, writable);
    states: per parameter, its state arrays by list name (EXP_AVG, STEP, MOMENTUM_BUFFER, ...);
    copies: {id(parameter): its low-precision weight copy} (a step extension's weight_copies).
    """
    buckets = {}
    for p, grad, state in zip(params, grads, states):
        copy = copies.get(id(p))
        _check(p, copy)
        key = (p.device, p.dtype, None if copy is None else copy.dtype)
        lists = buckets.get(key)
        if lists is None:
            lists = buckets[key] = {name: [] for name in _layout.LISTS[kind]}
        entry = dict(state, PARAM=p.data, GRAD=grad.data, WEIGHT_COPY=None if copy is None else copy.data)
        for name, arrays in lists.items():
            arrays.append(entry.get(name))
    for (device, _, _), lists in buckets.items():
        run(kind, lists, rule, *(None if a is None else _be.to_device(a, device) for a in (grad_scale, found_inf)))
    for p, grad in zip(params, grads):
        p._bump_version()
        if grad_scale is not None:
            grad._bump_version()  # it now holds the unscaled gradient
        if id(p) in copies:
            copies[id(p)]._bump_version()


def run(kind, lists, rule, grad_scale=None, found_inf=None):
    """One bucket (arrays of one device and dtype): the kernel on CUDA, its twin (or host build) on the CPU."""
    if isinstance(lists["PARAM"][0], np.ndarray):
        runner = _kernels.host_runner()  # normally None: the NumPy twin
        if runner is None:
            _reference.optimizer_step(kind, lists, rule, grad_scale, found_inf)
        else:
            _kernels.optimizer_step(kind, lists, rule, grad_scale, found_inf, runner)
        return
    with _be.on_device(_be.device_of_array(lists["PARAM"][0])):
        _kernels.optimizer_step(kind, lists, rule, grad_scale, found_inf)


def device_scalar(a, name):
    """grad_scale or found_inf as step() takes it: a one-element float32 array (NumPy or CuPy)."""
    if not _be.is_array(a) or a.dtype != _dt.float32 or a.size != 1:
        what = type(a).__name__ if not _be.is_array(a) else f"a {a.dtype.name} array of shape {a.shape}"
        raise TypeError(f"step(): {name} must be a one-element float32 array on the parameters' device (as "
                        f"GradScaler.step passes it), got {what}")
    return a


def _check(p, copy):
    """What the kernel needs of one parameter and its weight copy (the gradient has the parameter's dtype, shape
    and device: Tensor.grad's setter guarantees it); errors name the parameter."""
    what = f"a fused optimizer's parameter of shape {tuple(p.shape)} ({p.dtype.name})"
    if not p.data.flags.c_contiguous:
        raise ValueError(f"{what} is not contiguous: the fused kernel updates parameters through their memory "
                         "(make it contiguous before building the optimizer, or use fused=False)")
    if copy is None:
        return
    if (p.dtype.name, copy.dtype.name) not in _kernels.OPTIMIZER_TYPES or copy.shape != p.shape \
            or copy.device != p.device or not copy.data.flags.c_contiguous:
        raise TypeError(f"{what}: its weight copy ({copy.dtype.name}, shape {tuple(copy.shape)}, on {copy.device}) "
                        "must be a contiguous float16 or bfloat16 tensor of a float32 parameter's shape and device")
