"""FP8 scale arithmetic on raw arrays: the NumPy twins, and one dispatcher per function.

Each public function takes NumPy or CuPy arrays and decides by their type: a CuPy
array runs the CUDA kernel of kernels/fp8_scaling.cu, a NumPy array its NumPy twin
here (or, inside mixprec.amp._host_build.run_on_host, the kernel built for the host).
Both give the same bits: float32 arithmetic in the same order, IEEE division, the
same round-to-nearest-even FP8 conversion. Nothing is read back to the host: scales,
amaxes and histories are device arrays, so a step can quantize and update without a
sync, and an fp8 region can call these per GEMM input.

    cast_to_fp8(x, scale, fp8_dtype, amax=None)            -> (data, amax)     delayed scaling's cast
    quantize_tensorwise(x, fp8_dtype, margin=0, use_power_2_scales=False) -> Quantized   current scaling
    quantize_rowwise(x, fp8_dtype, margin=0, use_power_2_scales=False)    -> Quantized   a scale per row
    quantize_mxfp8(x, fp8_dtype="float8_e4m3fn")          -> MXQuantized     E8M0 scale per 32 values
    current_scale(amax, fp8_dtype, margin=0, use_power_2_scales=False) -> (scale, scale_inv)
    delayed_update(amax_history, scales, amaxes, fp8_dtypes, ...)              all tensors, one launch

FP8 data comes back as ml_dtypes' float8 dtype for NumPy and as uint8 bits for CuPy
(CuPy has no float8 dtype; ``.get().view(ml_dtypes.float8_e4m3fn)`` reads them). E8M0
scales are uint8 bits for both (value 2**(bits - 127), 0xff NaN; view them as
ml_dtypes.float8_e8m0fnu to read them as numbers).

Casts saturate: values beyond the format's largest finite value, infinities included,
become +-max, and NaN stays NaN, as Transformer Engine's casts (CUDA's __NV_SATFINITE
conversion) do. A NaN is stored as 0x7F with the sign bit of the input element, in both
formats: the bits torch's ``.to(float8)`` gives a NaN (a GPU's multiplication drops a NaN's
sign, so the sign is taken from x rather than from x * scale). Amaxes are max |x| with NaN winning (stored as the
default float32 NaN), of the input before scaling.
"""
from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

from ... import backend as _be
from .. import _host_build, _kernels
from . import kernels as _fp8_kernels
from .recipes import FP8_MAX

__all__ = ["Quantized", "MXQuantized", "cast_to_fp8", "quantize_tensorwise", "quantize_rowwise", "quantize_mxfp8",
           "current_scale", "delayed_update", "MX_BLOCK"]

MX_BLOCK = 32
_FP8 = {name: np.dtype(getattr(ml_dtypes, name)) for name in FP8_MAX}
_FP8_NAN = 0x7F  # both formats' NaN with the sign bit clear (torch's NaN bits; ml_dtypes' E5M2 NaN is 0x7E)
_EMAX_ELEM = {"float8_e4m3fn": 8, "float8_e5m2": 15}  # exponent of the format's largest value (OCP: emax_elem)
_INPUTS = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_F32_NAN, _F32_INF, _F32_MAX = 0x7FC00000, 0x7F800000, 0x7F7FFFFF


class Quantized(NamedTuple):
    """FP8 data with its float32 scales: data = fp8(x * scale), x ~ data * scale_inv; amax = max |x|."""
    data: object
    scale: object
    scale_inv: object
    amax: object


class MXQuantized(NamedTuple):
    """MXFP8 data (x's shape) and E8M0 scale bits (x.shape[:-1] + (x.shape[-1] // 32,)): x ~ data * 2**(scale - 127)."""
    data: object
    scale: object


# ---- validation and dispatch ----
def _fp8_name(fp8_dtype, fn) -> str:
    name = fp8_dtype if isinstance(fp8_dtype, str) else getattr(fp8_dtype, "name", None)
    if name is None:
        try:
            name = np.dtype(fp8_dtype).name
        except TypeError:
            name = None
    if name not in FP8_MAX:
        raise TypeError(f"{fn}: fp8_dtype must be float8_e4m3fn or float8_e5m2 (a name or an ml_dtypes dtype), "
                        f"got {fp8_dtype!r}")
    return name


def _runner(x, fn):
    """The runner for x's kernels: CUDA's for a CuPy array; for a NumPy array the host build inside
    run_on_host, else None (the NumPy twin)."""
    if isinstance(x, np.ndarray):
        return _host_build.host_runner()
    if _be.is_cupy_array(x):
        return _kernels.cuda_runner()
    raise TypeError(f"{fn}: expected a NumPy or CuPy array, got {type(x).__name__}")


def _check_input(x, fn):
    runner = _runner(x, fn)
    if x.dtype not in _INPUTS:
        raise TypeError(f"{fn}: x has dtype {x.dtype.name}; FP8 quantization takes float32, float16 or bfloat16")
    return runner


def _check_like(x, a, name, fn, shape=None, written=True):
    """a must be a float32 contiguous array of x's kind (NumPy, or CuPy on x's device), writeable if written."""
    same = isinstance(a, np.ndarray) if isinstance(x, np.ndarray) else (_be.is_cupy_array(a) and a.device == x.device)
    if not same:
        where = "a NumPy array" if isinstance(x, np.ndarray) else f"a CuPy array on device {x.device.id}"
        raise TypeError(f"{fn}: {name} must be {where}, like the other arrays, got {type(a).__name__}")
    if a.dtype != np.float32:
        raise TypeError(f"{fn}: {name} must be float32, got {a.dtype.name}")
    if shape is not None and a.shape != shape:
        raise ValueError(f"{fn}: {name} must have shape {shape}, got {a.shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{fn}: {name} must be contiguous")
    if written and not getattr(a.flags, "writeable", True):  # (CuPy arrays are always writeable)
        raise ValueError(f"{fn}: {name} is read-only, and this function writes it")


def _check_margin(margin, fn):
    if isinstance(margin, bool) or not isinstance(margin, (int, np.integer)) or not -100 <= margin <= 100:
        raise ValueError(f"{fn}: margin must be an int in [-100, 100] (the scale is divided by 2**margin), "
                         f"got {margin!r}")


def _scaled_max(fp8: str, margin: int) -> float:
    return float(np.float32(np.ldexp(np.float64(FP8_MAX[fp8]), -int(margin))))  # exact: margin in [-100, 100]


def _new(runner, like, shape, dtype):
    xp = _be.array_module(like)
    if xp is np:
        return np.zeros(shape, dtype)
    with xp.cuda.Device(runner.device_id(like)):
        return xp.zeros(shape, dtype)


def _fp8_out(runner, x, fp8):
    """Storage for FP8 results: uint8 for a kernel (viewed as the float8 dtype for NumPy at the end)."""
    return _new(runner, x, x.shape, np.uint8 if runner is not None else _FP8[fp8])


def _as_fp8(data, fp8):
    return data.view(_FP8[fp8]) if isinstance(data, np.ndarray) else data


# ---- the NumPy twins ----
def _abs_bits(x32):
    """|x| as float32 bits, a NaN as the default NaN: their unsigned order is the numeric order, NaN on top."""
    bits = x32.view(np.uint32) & np.uint32(0x7FFFFFFF)
    return np.where(bits > _F32_INF, np.uint32(_F32_NAN), bits)


def _amax_twin(x, amax, seg_len):
    """Fold max |x| over each segment of seg_len elements into amax (in place), as the kernel's atomicMax."""
    if x.size:
        seg = _abs_bits(x.reshape(-1, seg_len).astype(np.float32)).max(axis=1)
        flat = amax.reshape(-1).view(np.uint32)
        np.maximum(flat, seg, out=flat)


def _cast_twin(x, scale_per_seg, seg_len, fp8, out):
    if x.size:
        x32 = x.reshape(-1, seg_len).astype(np.float32)
        with np.errstate(all="ignore"):
            y = x32 * scale_per_seg.reshape(-1, 1)
        top = np.float32(FP8_MAX[fp8])
        q = np.clip(y, -top, top).astype(_FP8[fp8]).view(np.uint8)
        nan_bits = ((x32.view(np.uint32) >> 24) & 0x80).astype(np.uint8) | np.uint8(_FP8_NAN)
        out.reshape(-1).view(np.uint8)[...] = np.where(np.isnan(y), nan_bits, q).reshape(-1)


def _current_scale_twin(amax, scaled_max, power_2, scale, scale_inv):
    bits = amax.view(np.uint32)
    ok = (bits != 0) & (bits < _F32_INF)
    sc = np.ones(amax.shape, np.float32)
    with np.errstate(all="ignore"):
        sc[ok] = np.float32(scaled_max) / amax[ok]
    sc[np.isinf(sc)] = np.array(_F32_MAX, np.uint32).view(np.float32)
    if power_2:
        sc = (sc.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)
    scale[...] = sc
    with np.errstate(all="ignore"):
        scale_inv[...] = np.float32(1.0) / sc


def _mx_scale_twin(amax, emax_elem, e8m0, multiplier):
    bits = amax.view(np.uint32)
    floor_log2 = np.where(bits == 0, -126, np.frexp(amax)[1].astype(np.int64) - 1)  # frexp: m * 2**e, m in [0.5, 1)
    shared = np.clip(floor_log2 - emax_elem, -127, 127)
    bad = bits >= _F32_INF
    e8m0[...] = np.where(bad, 0xFF, shared + 127).astype(np.uint8)
    multiplier[...] = np.where(bad, np.float32(np.nan), np.ldexp(np.float32(1.0), -shared).astype(np.float32))


def _delayed_twin(history, scales, scale_inv, amaxes, scaled_max, most_recent, clear):
    a = amaxes.copy()
    with np.errstate(invalid="ignore"):
        seen = np.isfinite(a) & (a > 0)
    rows = np.concatenate([history[seen, 1:], a[seen, None]], axis=1)
    history[seen] = rows
    use = a[seen] if most_recent else rows.max(axis=1)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(use) & (use > 0)
    idx = np.flatnonzero(seen)[ok]
    with np.errstate(over="ignore"):
        sc = np.asarray(scaled_max, np.float32)[idx] / use[ok]
    sc[np.isinf(sc)] = np.array(_F32_MAX, np.uint32).view(np.float32)
    scales[idx] = sc
    if scale_inv is not None:
        scale_inv[idx] = np.float32(1.0) / sc
    if clear:
        amaxes[...] = 0


# ---- the public functions ----
def cast_to_fp8(x, scale, fp8_dtype, amax=None):
    """Cast x to FP8 with a given per-tensor scale, recording x's amax: Transformer Engine's cast-with-amax.

    data = fp8(saturate(x * scale)) rounded to nearest even. scale: a float32 array with
    one element (the tensor's current scale, left on the device). amax: a float32 (1,)
    array into which max |x| is folded (amax = max(amax, max |x|)), so several casts
    can share it and delayed_update can read it; a zeroed one is made when None.
    Returns (data, amax).
    """
    fn = "cast_to_fp8"
    runner = _check_input(x, fn)
    fp8 = _fp8_name(fp8_dtype, fn)
    _check_like(x, scale, "scale", fn, written=False)
    if scale.size != 1:
        raise ValueError(f"{fn}: scale must have one element (a per-tensor scale), got shape {scale.shape}")
    if amax is None:
        amax = _new(runner, x, (1,), np.float32)
    _check_like(x, amax, "amax", fn, shape=(1,))
    flat = _be.array_module(x).ascontiguousarray(x).reshape(-1)
    out = _fp8_out(runner, x, fp8)
    if runner is None:
        _amax_twin(flat, amax, max(flat.size, 1))
        _cast_twin(flat, scale.reshape(-1), max(flat.size, 1), fp8, out)
    else:
        _fp8_kernels.cast(flat, out, scale, flat.size, fp8, runner, amax=amax)
    return _as_fp8(out, fp8), amax


def current_scale(amax, fp8_dtype, margin=0, use_power_2_scales=False):
    """(scale, scale_inv) from amaxes, elementwise: Transformer Engine's current-scaling rule.

    scale = fp8_max / 2**margin / amax in float32 (the division last, rounded once); an
    amax of 0, inf or NaN gives scale 1, a scale that overflows float32 gives the
    largest float32; use_power_2_scales rounds each scale down to a power of two.
    scale_inv = 1 / scale. amax: a float32 array of non-negative values (or NaN).
    """
    fn = "current_scale"
    runner = _runner(amax, fn)
    fp8 = _fp8_name(fp8_dtype, fn)
    _check_margin(margin, fn)
    _check_like(amax, amax, "amax", fn, written=False)
    scale, scale_inv = (_new(runner, amax, amax.shape, np.float32) for _ in range(2))
    _scale_from(runner, amax, _scaled_max(fp8, margin), bool(use_power_2_scales), scale, scale_inv)
    return scale, scale_inv


def _scale_from(runner, amax, scaled_max, power_2, scale, scale_inv):
    if runner is None:
        _current_scale_twin(amax.reshape(-1), scaled_max, power_2, scale.reshape(-1), scale_inv.reshape(-1))
    else:
        _fp8_kernels.current_scale(amax, scale, scale_inv, scaled_max, power_2, runner)


def _quantize_current(x, fp8_dtype, margin, use_power_2_scales, rowwise, fn):
    runner = _check_input(x, fn)
    fp8 = _fp8_name(fp8_dtype, fn)
    _check_margin(margin, fn)
    if rowwise and x.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one dimension (rows run along the last one)")
    seg_len = x.shape[-1] if rowwise else x.size
    shape = x.shape[:-1] + (1,) if rowwise else (1,)
    flat = _be.array_module(x).ascontiguousarray(x).reshape(-1)
    amax, scale, scale_inv = (_new(runner, x, shape, np.float32) for _ in range(3))
    out = _fp8_out(runner, x, fp8)
    if runner is None:
        _amax_twin(flat, amax, max(seg_len, 1))
    else:
        _fp8_kernels.segment_amax(flat, amax, seg_len, runner)
    _scale_from(runner, amax, _scaled_max(fp8, margin), bool(use_power_2_scales), scale, scale_inv)
    if runner is None:
        _cast_twin(flat, scale, max(seg_len, 1), fp8, out)
    else:
        _fp8_kernels.cast(flat, out, scale, seg_len, fp8, runner)
    return Quantized(_as_fp8(out, fp8), scale, scale_inv, amax)


def quantize_tensorwise(x, fp8_dtype, margin=0, use_power_2_scales=False):
    """Current scaling of a whole tensor: amax = max |x|, scale from it (current_scale), then the cast.

    Three passes on the device (amax, scale, cast), no host sync. Returns Quantized with
    float32 (1,) scale, scale_inv and amax. An empty or all-zero x gets scale 1.
    """
    return _quantize_current(x, fp8_dtype, margin, use_power_2_scales, False, "quantize_tensorwise")


def quantize_rowwise(x, fp8_dtype, margin=0, use_power_2_scales=False):
    """Current scaling per row (the last dimension), as torchao's rowwise float8: each row's scale comes
    from that row's amax. scale, scale_inv and amax have shape x.shape[:-1] + (1,) (torch._scaled_mm's
    rowwise scale_a is scale_inv for a 2-D x)."""
    return _quantize_current(x, fp8_dtype, margin, use_power_2_scales, True, "quantize_rowwise")


def quantize_mxfp8(x, fp8_dtype="float8_e4m3fn"):
    """MXFP8: one E8M0 scale per block of 32 consecutive values along the last dimension (OCP MX v1.0).

    Per block: shared_exp = floor(log2(amax)) - emax_elem (emax_elem = 8 for E4M3, 15
    for E5M2), clamped to E8M0's [-127, 127]; data = fp8(saturate(x / 2**shared_exp)).
    A zero block takes amax = 2**-126 (the smallest normal float32) and so the scale
    2**-127, as the OCP reference code does; a block holding inf or NaN gets the NaN
    scale (bits 0xff) and NaN data. The last dimension must be a multiple of 32. (Transformer Engine's
    MXFP8 kernels round amax / fp8_max up to a power of two instead, which never saturates a block's
    largest values; this follows the specification's text.)
    Returns MXQuantized(data, scale bits as uint8).
    """
    fn = "quantize_mxfp8"
    runner = _check_input(x, fn)
    fp8 = _fp8_name(fp8_dtype, fn)
    if x.ndim == 0 or x.shape[-1] % MX_BLOCK:
        raise ValueError(f"{fn}: the last dimension must be a multiple of {MX_BLOCK} (one scale per block of "
                         f"{MX_BLOCK}), got shape {x.shape}")
    shape = x.shape[:-1] + (x.shape[-1] // MX_BLOCK,)
    flat = _be.array_module(x).ascontiguousarray(x).reshape(-1)
    amax, multiplier = (_new(runner, x, shape, np.float32) for _ in range(2))
    e8m0 = _new(runner, x, shape, np.uint8)
    out = _fp8_out(runner, x, fp8)
    if runner is None:
        _amax_twin(flat, amax, MX_BLOCK)
        _mx_scale_twin(amax.reshape(-1), _EMAX_ELEM[fp8], e8m0.reshape(-1), multiplier.reshape(-1))
        _cast_twin(flat, multiplier, MX_BLOCK, fp8, out)
    else:
        _fp8_kernels.segment_amax(flat, amax, MX_BLOCK, runner)
        _fp8_kernels.mx_scale(amax, e8m0, multiplier, _EMAX_ELEM[fp8], runner)
        _fp8_kernels.cast(flat, out, multiplier, MX_BLOCK, fp8, runner)
    return MXQuantized(_as_fp8(out, fp8), e8m0)


def delayed_update(amax_history, scales, amaxes, fp8_dtypes, *, margin=0, amax_compute_algo="max", scale_inv=None,
                   clear_amaxes=True):
    """Delayed scaling's update after a step, for every tensor at once (one kernel launch), in place.

    amax_history: float32 (n_tensors, history_len), newest amax last; scales: float32
    (n_tensors,); amaxes: float32 (n_tensors,), each tensor's amax of this step (as
    cast_to_fp8 folds it in). fp8_dtypes: one FP8 dtype for all, or one per tensor
    (HYBRID: E4M3 for forward tensors, E5M2 for gradients). Per tensor whose new amax is
    finite and > 0: the history rolls (oldest out, new amax in at the end), then

        amax = max(history)  ("max")   or   the new amax  ("most_recent")
        scale = fp8_max / 2**margin / amax   (float32; past float32's range: its largest value)

    and scale_inv (optional float32 (n_tensors,)) = 1 / scale. A new amax of 0 (the
    tensor was not used) or inf/NaN (an overflow) leaves that tensor's history and scale
    as they were: one bad step neither pins the scale for history_len steps nor leaves a
    non-finite value in the history. clear_amaxes zeroes amaxes for the next step.
    """
    fn = "delayed_update"
    runner = _runner(amax_history, fn)
    _check_like(amax_history, amax_history, "amax_history", fn)
    if amax_history.ndim != 2 or amax_history.shape[1] < 1:
        raise ValueError(f"{fn}: amax_history must have shape (n_tensors, history_len) with history_len >= 1, "
                         f"got {amax_history.shape}")
    n = amax_history.shape[0]
    _check_like(amax_history, scales, "scales", fn, shape=(n,))
    _check_like(amax_history, amaxes, "amaxes", fn, shape=(n,))
    if scale_inv is not None:
        _check_like(amax_history, scale_inv, "scale_inv", fn, shape=(n,))
    _check_margin(margin, fn)
    if amax_compute_algo not in ("max", "most_recent"):
        raise ValueError(f"{fn}: amax_compute_algo must be \"max\" or \"most_recent\", got {amax_compute_algo!r}")
    many = isinstance(fp8_dtypes, (list, tuple))
    names = [_fp8_name(d, fn) for d in fp8_dtypes] if many else [_fp8_name(fp8_dtypes, fn)] * n
    if len(names) != n:
        raise ValueError(f"{fn}: fp8_dtypes has {len(names)} entries for {n} tensors; give one per tensor or one "
                         "for all")
    scaled_max = [_scaled_max(name, margin) for name in names]
    most_recent = amax_compute_algo == "most_recent"
    if runner is None:
        _delayed_twin(amax_history, scales, scale_inv, amaxes, scaled_max, most_recent, bool(clear_amaxes))
    else:
        _fp8_kernels.delayed_update(amax_history, scales, scale_inv, amaxes, scaled_max, most_recent,
                                    bool(clear_amaxes), runner)
