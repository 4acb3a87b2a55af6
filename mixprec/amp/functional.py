"""Loss-scaling primitives on raw arrays, framework-agnostic.

    non_finite_check_and_unscale_(arrays, found_inf, inv_scale, out=None)
    update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval, ...)

They take NumPy arrays (run by the NumPy reference, mixprec.amp._reference) or
CuPy arrays (run by the fused kernels in kernels/, mixprec.amp._kernels);
both give the same bits. Nothing is read back to the host: found_inf, inv_scale,
scale and the trackers are one-element device arrays, so a training loop can
check, unscale and update without waiting for the GPU.
"""
from __future__ import annotations

import numpy as np

from .. import backend as _be
from ..backend import devices
from .. import dtypes as _dt
from . import _host_build, _kernels, _reference
from ._layout import ScaleRule, Stat, UpdateScaleArgs

__all__ = ["non_finite_check_and_unscale_", "update_scale_"]

_UNSCALABLE = (_dt.float32, _dt.float16, _dt.bfloat16, _dt.float64)
_OUT_DTYPES = {_dt.float32: (_dt.float32,), _dt.float64: (_dt.float64,),
               _dt.float16: (_dt.float16, _dt.float32), _dt.bfloat16: (_dt.bfloat16, _dt.float32)}


def non_finite_check_and_unscale_(arrays, found_inf, inv_scale, out=None):
    """Multiply every array by inv_scale and set found_inf[0] = 1.0 if any element is inf or NaN.

    arrays: a list of float16, bfloat16, float32 or float64 arrays (NumPy or CuPy;
      devices and dtypes may be mixed: each (device, dtype) group is one launch).
      Each element is widened to float32 (float64 stays float64), multiplied and
      rounded back to nearest even; a NaN result is stored as the dtype's default NaN.
    found_inf: float32 array of shape (1,); set to 1.0 on a non-finite element,
      otherwise left as it was (so several calls can share it).
    inv_scale: float32 array with one element, normally float32(1 / float64(scale)).
    out: optional list of destination arrays, one per input, of the same shape and
      of the input's dtype or float32 (float16/bfloat16 model gradients written
      into float32 master gradients in the same pass). Default: in place.
    """
    arrays = _array_list(arrays, "arrays")
    _check_array(found_inf, "found_inf", _dt.float32, shape=(1,))
    _check_array(inv_scale, "inv_scale", _dt.float32, size=1)
    if out is None:
        outs = arrays
    else:
        outs = _array_list(out, "out")
        if len(outs) != len(arrays):
            raise ValueError(f"out has {len(outs)} arrays but arrays has {len(arrays)}; give one destination each")
    groups: dict = {}
    for i, (src, dst) in enumerate(zip(arrays, outs)):
        if src.dtype not in _UNSCALABLE:
            raise TypeError(f"arrays[{i}] has dtype {src.dtype.name}; only float16, bfloat16, float32 and "
                            "float64 arrays can be unscaled")
        if dst is not src:
            _check_destination(i, src, dst)
        if not _writeable(dst):
            raise ValueError(f"{'out' if out is not None else 'arrays'}[{i}] is read-only")
        if src.size:  # group key: None for NumPy, the GPU's index for CuPy (cheap for 10,000 arrays)
            key = (None if isinstance(src, np.ndarray) else src.device.id, src.dtype, dst.dtype)
            groups.setdefault(key, []).append((src, dst))
    flag_device = devices.device_of_array(found_inf)
    for (index, _, _), pairs in groups.items():
        device = devices.CPU if index is None else devices.as_device(f"cuda:{index}")
        inv = devices.to_device(inv_scale, device)
        if device == flag_device:
            _unscale_on(device, pairs, found_inf, inv)
        else:  # check on the arrays' device, then fold that flag into found_inf (a copy between devices)
            with devices.on_device(device):
                flag = _be.xp_of(device).zeros((1,), dtype=np.float32)
            _unscale_on(device, pairs, flag, inv)
            _be.array_module(found_inf).maximum(found_inf, devices.to_device(flag, flag_device), out=found_inf)


def _unscale_on(device, pairs, found_inf, inv_scale):
    if device.type == "cpu":
        runner = _host_build.host_runner()  # normally None: the NumPy reference
        if runner is None:
            _reference.unscale(pairs, found_inf, inv_scale)
        else:
            _kernels.unscale(pairs, found_inf, inv_scale, runner)
        return
    with devices.on_device(device):  # the contiguous copies of strided arrays are made on their device
        _kernels.unscale(pairs, found_inf, inv_scale)


def update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval, *,
                  hysteresis=1, overflow_tracker=None, min_scale=None, max_scale=None,
                  floor_hit=None, inv_scale=None, stats=None, clear_found_inf=False):
    """Update the loss scale in place from found_inf, on the device (torch._amp_update_scale_ rule).

    found_inf (float32, shape (n,)): any non-zero entry means an overflow (torch sums
    the flags of several optimizers; same thing for 0/1 flags), so
    scale *= backoff_factor and growth_tracker = 0; otherwise growth_tracker += 1
    and, when it reaches growth_interval, scale *= growth_factor (only if the result
    is finite) and growth_tracker = 0. The products are taken in float64 and
    rounded once to float32. scale: float32, growth_tracker: int32, one element each.

    Options beyond torch (the defaults reproduce torch exactly):
      hysteresis: back off only on the hysteresis-th consecutive overflow; needs
        overflow_tracker (int32, one element) to count them across calls.
      min_scale / max_scale: bounds; a back-off below min_scale stops at it and
        sets floor_hit[0] = 1.0 (floor_hit: optional float32, one element).
      inv_scale: optional float32 one-element array that receives
        float32(1 / float64(new scale)) for the next unscale.
      stats: optional zero-initialised float64 array laid out as mixprec.amp._layout.Stat
        (counters, then a ring of (update index, new scale) pairs).
      clear_found_inf: zero found_inf after reading it, ready for the next iteration.
    """
    rule = ScaleRule(growth_factor, backoff_factor, growth_interval, hysteresis, min_scale, max_scale)
    _check_array(scale, "scale", _dt.float32, size=1)
    device = devices.device_of_array(scale)
    _check_array(growth_tracker, "growth_tracker", _dt.int32, size=1, device=device)
    _check_array(found_inf, "found_inf", _dt.float32, device=device)
    if found_inf.ndim != 1 or found_inf.size == 0:
        raise ValueError(f"found_inf must have shape (n,) with n >= 1, got shape {found_inf.shape}")
    if overflow_tracker is not None:
        _check_array(overflow_tracker, "overflow_tracker", _dt.int32, size=1, device=device)
    elif rule.hysteresis > 1:
        raise ValueError("hysteresis > 1 needs overflow_tracker (an int32 one-element array) to count "
                         "consecutive overflows across calls")
    for name, arr in (("floor_hit", floor_hit), ("inv_scale", inv_scale)):
        if arr is not None:
            _check_array(arr, name, _dt.float32, size=1, device=device)
    if stats is not None:
        _check_array(stats, "stats", _dt.float64, device=device)
        if stats.ndim != 1 or stats.size < Stat.RING or (stats.size - Stat.RING) % 2:
            raise ValueError(f"stats must be a float64 array of shape ({int(Stat.RING)} + 2*k,), got shape "
                             f"{stats.shape}")
    arrays = dict(scale=scale, growth_tracker=growth_tracker, found_inf=found_inf, overflow_tracker=overflow_tracker,
                  floor_hit=floor_hit, inv_scale=inv_scale, stats=stats)
    for name, arr in arrays.items():
        if arr is not None and not arr.flags.c_contiguous:
            raise ValueError(f"{name} must be contiguous")
    flat = {name: None if arr is None else arr.reshape(-1) for name, arr in arrays.items()}
    apply_update(UpdateScaleArgs(rule=rule, clear_found_inf=bool(clear_found_inf), **flat))


def apply_update(args: UpdateScaleArgs):
    """Run one update on checked arguments: the NumPy reference on the CPU, the kernel on CUDA."""
    if not isinstance(args.scale, np.ndarray):
        _kernels.update_scale(args)
    elif _host_build.host_runner() is None:
        _reference.update_scale(args)
    else:
        _kernels.update_scale(args, _host_build.host_runner())


# ---- argument checks: each names what was wrong and what was expected ----
def _array_list(arrays, name):
    if _be.is_array(arrays) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple of NumPy/CuPy arrays, got {type(arrays).__name__}")
    for i, a in enumerate(arrays):
        if not _be.is_array(a):
            hint = " (pass arrays: t.numpy() on the CPU, cupy.from_dlpack(t) on a GPU; or use GradScaler)" if hasattr(a, "grad_fn") else ""
            raise TypeError(f"{name}[{i}] must be a NumPy or CuPy array, got {type(a).__name__}{hint}")
    return list(arrays)


def _check_array(a, name, dtype, shape=None, size=None, device=None):
    if not _be.is_array(a):
        raise TypeError(f"{name} must be a NumPy or CuPy array of dtype {dtype.name}, got {type(a).__name__}")
    if a.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype.name}, got {a.dtype.name}")
    if shape is not None and a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    if size is not None and a.size != size:
        raise ValueError(f"{name} must have exactly {size} element, got shape {a.shape}")
    if device is not None and devices.device_of_array(a) != device:
        raise ValueError(f"{name} is on {devices.device_of_array(a)} but scale is on {device}; keep the scaler's "
                         "arrays on one device")


def _check_destination(i, src, dst):
    if dst.shape != src.shape:
        raise ValueError(f"out[{i}] has shape {dst.shape} but arrays[{i}] has shape {src.shape}")
    allowed = _OUT_DTYPES.get(src.dtype, ())
    if dst.dtype not in allowed:
        raise TypeError(f"out[{i}] has dtype {dst.dtype.name}; for a {src.dtype.name} source it must be "
                        + " or ".join(d.name for d in allowed))
    if devices.device_of_array(dst) != devices.device_of_array(src):
        raise ValueError(f"out[{i}] is on {devices.device_of_array(dst)} but arrays[{i}] is on "
                         f"{devices.device_of_array(src)}")
    if _be.array_module(src).may_share_memory(src, dst):
        raise ValueError(f"out[{i}] overlaps arrays[{i}]; pass the array itself (or out=None) to unscale in place")


def _writeable(a):
    return a.flags.writeable if isinstance(a, np.ndarray) else True
