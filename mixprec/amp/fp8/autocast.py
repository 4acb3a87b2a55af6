"""The FP8 region: ``with mp.amp.fp8_autocast(recipe=...)`` runs every nn.Linear's and convolution module's GEMM
on FP8 values, and, under the stateless recipes, the functional GEMMs' (ops/fp8_gemms.py).

Inside the region a Linear computes, from three differentiable pieces,

    y = QG( QX(x) @ QW(w).T ) + bias          in float32, then cast to the output dtype

- QX, QW quantize the GEMM's input and weight to the recipe's forward format (E4M3 under
  HYBRID) and dequantize at once; their backward is the identity (straight-through), as in
  Transformer Engine, whose GEMM input gradients are not quantized.
- QG is the identity forward; its backward quantizes the incoming gradient to the
  recipe's backward format (E5M2 under HYBRID) and dequantizes it; an inf or NaN passes
  as it is, so a GradScaler still sees an overflow.
- A forward under no_grad (evaluation) records no amax, and a region left with grad mode
  off updates nothing. Attention's two products are never quantized (ops/attention.py).
- The matrix product saves its (dequantized) inputs, so its backward computes
  dgrad = QG(g) @ QW(w) and wgrad = QG(g).T @ QX(x): Transformer Engine's FP8 backward GEMMs.
  The bias gradient is the sum of the unquantized gradient, as Transformer Engine's bgrad.

What runs: dequantization is ``q / scale`` rounded once to float32 (exact when the scale is
a power of two), and the GEMM multiplies and accumulates these float32 values in float32.
A GEMM on FP8 hardware multiplies the FP8 values exactly and applies both inverse scales
at the end; the two differ only by float32 rounding. No FP8 tensor-core path runs.

Output dtype: the dtype of an enclosing ``mp.autocast`` region (bfloat16, say) when one is
enabled for the input's device, else the input's dtype.

Recipes:
- DelayedScaling: each Linear (and convolution module) gets three float32 buffers when first run in a
  region, ``fp8_amax_history`` (3, amax_history_len), ``fp8_scale`` (3,) and ``fp8_amax`` (3,) (the amaxes
  recorded since its last update), rows input, weight, grad_output; all are in its state_dict. A cast
  uses the scale as it stands and folds its amax into fp8_amax; when the outermost enabled region exits
  (whatever its recipe), every module that recorded is updated with the recipe of its own casts (the
  innermost region's): one ``scaling.delayed_update`` call per recipe and device. Gradient amaxes, seen
  during backward (after the region), wait in fp8_amax (so a checkpoint or a move keeps them) and are
  folded in at the next region's exit, as Transformer Engine does. In a data-parallel run
  (mp.distributed initialized with more than one rank) the recorded amaxes of the modules whose recipe
  has reduce_amax are first all-reduced with MAX in one flat buffer, so every rank takes the same scales
  (Transformer Engine's reduce_amax over its fp8_group).
- CurrentScaling: amax and scale from each tensor just before its cast; no state.
- MXFP8BlockScaling: one E8M0 scale per 32 values along each GEMM's contraction dimension.
  The backward GEMMs contract over other dimensions than the forward (dgrad over
  out_features, wgrad over the batch), so, as in Transformer Engine, x and w are quantized
  again in blocks along those (columnwise): one Function (MXMatmul) does the forward and both
  backward GEMMs, and every dimension a GEMM contracts must be a multiple of 32 (in_features,
  out_features, and the batch when the weight's gradient is computed).

Convolution modules (nn.Conv{1,2,3}d, nn.ConvTranspose{1,2,3}d) run QG(conv(QX(x), QW(w))) + bias from the same
pieces and state; MXFP8BlockScaling refuses them (its blocks would run along an im2col copy of the input).

Functional GEMMs (F.linear, matmul/@, mm, bmm, addmm, F.conv*): quantized under CurrentScaling and
MXFP8BlockScaling, through the hook of ops/fp8_gemms.py (_FunctionalGEMMs); under DelayedScaling they follow
autocast, as in Transformer Engine: a delayed scale is one recurring tensor's history, and only a module names one.
The FP8 path's own ops run with that hook off (_inner_ops), so they are not quantized twice.

Every cast is shown to the watchers of mixprec.amp.fp8.watch, when there are any (mp.amp.inspect's
FP8 section); with none, that costs one check of a list per cast. A functional GEMM's casts name its op
("matmul", "conv2d", ...) where a module's name the module.
"""
from __future__ import annotations

import contextlib
import threading
import weakref

import ml_dtypes
import numpy as np

from ... import backend as _be
from ...autograd.engine import grad as _grad
from ...autograd.function import Function, once_differentiable
from ...autograd.grad_mode import is_grad_enabled
from ...backend import devices
from ...distributed import process_group as _pg
from ...ops import fp8_gemms
from ...tensor import Tensor
from ..autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from . import scaling, watch
from .recipes import CurrentScaling, DelayedScaling, MXFP8BlockScaling

__all__ = ["fp8_autocast", "active", "linear", "conv"]

INPUT, WEIGHT, GRAD_OUTPUT = 0, 1, 2   # rows of a module's fp8_amax_history and fp8_scale
ROLES = ("input", "weight", "grad_output")
_QUANTIZABLE = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_local = threading.local()   # .regions: the fp8_autocast objects entered on this thread; .pending: _pending()


# ---- the region ----
class fp8_autocast:
    """``with mp.amp.fp8_autocast(enabled=True, recipe=None):`` run the GEMMs of Linear and convolution modules
    (and, under CurrentScaling and MXFP8BlockScaling, the functional GEMMs) on FP8 values.

    recipe: a DelayedScaling (the default, DelayedScaling()), CurrentScaling or MXFP8BlockScaling.
    Regions nest; the innermost decides, also how a module's delayed scales are updated (the
    recipe its casts used). Delayed scaling's update runs when the outermost enabled region,
    whatever its recipe, exits without an exception (an exception leaves the recorded amaxes
    for the next exit) and with grad mode on: a forward under no_grad (evaluation) uses the
    scales and records no amax, and its region's exit updates nothing, as in Transformer
    Engine, so evaluating leaves the FP8 state as training left it.
    fp8_group: Transformer Engine's group over which the amaxes are all-reduced (MAX) before
    that update. mixprec.distributed has one process group, all ranks, so only None (that
    group) is accepted; the reduction runs when it is initialized with more than one rank
    and a module's recipe has reduce_amax=True. Every rank must then exit its regions in step, as
    the same training loop on every rank does.
    """

    def __init__(self, enabled=True, recipe=None, fp8_group=None):
        if fp8_group is not None:
            raise ValueError("fp8_autocast: fp8_group must be None: mixprec.distributed has one process group "
                             f"(all ranks), over which the amaxes are reduced; got {fp8_group!r}")
        if not isinstance(enabled, bool):
            raise TypeError(f"fp8_autocast: enabled must be a bool, got {enabled!r}")
        recipe = DelayedScaling() if recipe is None else recipe
        if not isinstance(recipe, (DelayedScaling, CurrentScaling, MXFP8BlockScaling)):
            raise TypeError("fp8_autocast: recipe must be a mixprec.amp.DelayedScaling, CurrentScaling or "
                            f"MXFP8BlockScaling (or None for DelayedScaling()), got {type(recipe).__name__}")
        self.enabled, self.recipe = enabled, recipe
        self._outer = []   # per entry: the functional-GEMM object this region replaced (ops/fp8_gemms.py)

    def __enter__(self):
        _regions().append(self)
        self._outer.append(fp8_gemms.enter(_functional_gemms(self)))
        return self

    def __exit__(self, exc_type, *exc):
        fp8_gemms.leave(self._outer.pop())
        regions = _regions()
        regions.remove(self)
        if exc_type is None and self.enabled and not any(r.enabled for r in regions) and is_grad_enabled():
            _update_delayed()
        return False

    def __repr__(self):
        return f"fp8_autocast(enabled={self.enabled}, recipe={self.recipe!r})"


def _regions():
    if not hasattr(_local, "regions"):
        _local.regions = []
    return _local.regions


def active():
    """The recipe of the innermost fp8_autocast region on this thread if it is enabled, else None."""
    regions = getattr(_local, "regions", None)
    return regions[-1].recipe if regions and regions[-1].enabled else None


# ---- quantize-dequantize on arrays ----
_TABLES = {}


def _fp8_values(bits, fp8, xp):
    """float32 values of FP8 (or E8M0) bit patterns (uint8): a 256-entry table, so NumPy and CuPy read them alike."""
    key = (fp8, xp.__name__, None if xp is np else bits.device.id)
    if key not in _TABLES:
        table = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, fp8)).astype(np.float32)
        _TABLES[key] = table if xp is np else xp.asarray(table)
    return _TABLES[key][bits.astype(np.int32)]


def _dequantize(data, scale, fp8):
    """q / scale in float32: the values the FP8 GEMM sees."""
    xp = _be.array_module(data)
    bits = data.view(np.uint8) if xp is np else data
    return _fp8_values(bits, fp8, xp) / scale.reshape(())


def _mx_dequantize(a, fp8, seen, role, columnwise=False):
    """MXFP8 quantize-dequantize of a 2-D array in 32-blocks along its last dimension: q * 2**(e - 127).
    seen: (module, recipe), what watchers are told (mixprec.amp.fp8.watch) with role and columnwise."""
    xp = _be.array_module(a)
    if watch.WATCHERS and watch.skipped():  # a watcher's float32 reference: no cast
        return a.astype(np.float32)
    q = scaling.quantize_mxfp8(xp.ascontiguousarray(a), fp8)
    if watch.WATCHERS:
        watch.seen(seen[0], role, fp8, seen[1], a, q.scale, q.data, columnwise)
    bits = q.data.view(np.uint8) if xp is np else q.data
    values = _fp8_values(bits, fp8, xp).reshape(a.shape[0], a.shape[1] // scaling.MX_BLOCK, scaling.MX_BLOCK)
    block_scale = _fp8_values(q.scale, "float8_e8m0fnu", xp)[..., None]   # 2**(e - 127); NaN for 0xff
    return (values * block_scale).reshape(a.shape)


class _Quantizer:
    """Quantize-dequantize the GEMM operand `row` of `module` with a per-tensor scale (cast: the recipe's
    rule); each cast is shown to the watchers of mixprec.amp.fp8.watch."""

    def __init__(self, module, row, fp8, recipe):
        self.module, self.row, self.fp8, self.recipe = module, row, fp8, recipe

    def __call__(self, a):
        if watch.WATCHERS and watch.skipped():  # a watcher's float32 reference: no cast, no state change
            return a.astype(np.float32)
        data, scale = self.cast(a)
        if watch.WATCHERS:
            watch.seen(self.module, ROLES[self.row], self.fp8, self.recipe, a, scale, data)
        return _dequantize(data, scale, self.fp8)


class _Delayed(_Quantizer):
    """With row `row` of the module's delayed-scaling state, folding the amax into its pending amaxes. Made in the
    forward: under no_grad (an evaluation) it only uses the scales and records nothing."""

    def __init__(self, module, row, fp8, recipe):
        super().__init__(module, row, fp8, recipe)
        self.records = is_grad_enabled()

    def cast(self, a):
        scale = self.module.fp8_scale._array[self.row:self.row + 1].astype(np.float32)  # a copy: the scale now
        amax = _record(self.module, self.recipe)[self.row:self.row + 1] if self.records else None
        return scaling.cast_to_fp8(a, scale, self.fp8, amax=amax)[0], scale


class _Current(_Quantizer):
    def cast(self, a):
        q = scaling.quantize_tensorwise(a, self.fp8, use_power_2_scales=self.recipe.use_power_2_scales)
        return q.data, q.scale


# ---- the differentiable pieces ----
class QuantizeForward(Function):
    """QX / QW: forward = dequantize(quantize(x)) in float32; backward = identity (straight-through)."""

    @staticmethod
    def forward(ctx, x, quantizer):
        ctx.dtype = x.dtype
        return Tensor._wrap(quantizer(x._array))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return Tensor._wrap(grad._array.astype(ctx.dtype, copy=False)), None


class QuantizeGrad(Function):
    """QG: forward = identity; backward = dequantize(quantize(grad)) with the backward format, except that an
    inf or NaN gradient passes as it is: a saturating cast would turn an overflow into the format's max, and a
    GradScaler would then step on it instead of skipping."""

    @staticmethod
    def forward(ctx, y, quantizer):
        ctx.quantizer = quantizer
        return Tensor._wrap(y._array.view())

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        g = grad._array
        xp = _be.array_module(g)
        q = ctx.quantizer(g)
        return Tensor._wrap(xp.where(xp.isfinite(g), q, g.astype(q.dtype, copy=False))), None


# ---- delayed scaling's state ----
_STATE = ("fp8_amax_history", "fp8_scale", "fp8_amax")   # a module's buffers; all three float32, in its state_dict


def _pending():
    """This thread's modules with amaxes recorded since its last update (module -> the recipe of its latest cast),
    in the order they first recorded. Per thread, as the regions are: a thread's exit updates what that thread
    recorded (a backward runs in the thread that calls it), never a module another thread is in the middle of."""
    if not hasattr(_local, "pending"):
        _local.pending = weakref.WeakKeyDictionary()
    return _local.pending


def _record(module, recipe):
    """The amaxes buffer a recording cast folds its amax into; the module joins those the next update takes, with
    the recipe of its latest cast (a module keeps its place: the order in which the modules first recorded)."""
    _pending()[module] = recipe
    return module.fp8_amax._array


def _ensure_state(module, recipe):
    """Give module its FP8 buffers (_register_state) on first use; a history of another length is refused."""
    n = recipe.amax_history_len
    history = getattr(module, "fp8_amax_history", None)
    if history is None:
        _register_state(module, n)
    elif tuple(history.shape) != (3, n):
        raise ValueError(f"fp8_autocast: {module!r} has an fp8_amax_history of shape {tuple(history.shape)}, but the "
                         f"recipe's amax_history_len={n} needs (3, {n}); use the recipe it was trained with")


def load_state_hook(module, state_dict, prefix, *args):
    """The load_state_dict pre-hook of Linear and the convolution modules: a checkpoint's FP8 state is checked,
    then creates the buffers it fills (Module.load_state_dict takes them back if the load fails). A scale of 0,
    inf or NaN, or a negative or non-finite history entry, would make every later output non-finite, and a
    history must be (3, n) with n >= 1: refused with a ValueError. A checkpoint with a history and a scale but
    no fp8_amax gets all three buffers, so a strict load names the missing key and strict=False keeps the two."""
    for name, finite, positive in (("fp8_scale", True, True), ("fp8_amax_history", True, False),
                                   ("fp8_amax", False, False)):   # a pending amax may be inf/NaN: that row skips
        value = state_dict.get(prefix + name)
        a = value._array if isinstance(value, Tensor) else value
        if getattr(a, "dtype", None) is None or not (a.dtype.kind in "biuf" or a.dtype in _QUANTIZABLE):
            continue   # not an array of real numbers: the load's own checks refuse it
        xp = _be.array_module(a)
        bad = (a <= 0 if positive else a < 0) | (~xp.isfinite(a) if finite else False)
        if bool(bad.any()):
            what = "finite and > 0" if positive else "finite and >= 0" if finite else ">= 0"
            raise ValueError(f"{type(module).__name__}.load_state_dict: {prefix + name} must be {what}, the checkpoint "
                             f"holds {a[bad].ravel()[:4].tolist()}: no FP8 training writes that, and a scale of 0, "
                             "inf or NaN would make every later output non-finite")
    history = state_dict.get(prefix + "fp8_amax_history")
    shape = tuple(getattr(history, "shape", ()))
    if history is not None and (len(shape) != 2 or shape[0] != 3 or shape[1] < 1):
        raise ValueError(f"{type(module).__name__}.load_state_dict: {prefix}fp8_amax_history must have shape "
                         f"(3, amax_history_len) with amax_history_len >= 1, the checkpoint's has {shape}")
    if getattr(module, "fp8_amax_history", None) is None and all(prefix + n in state_dict for n in _STATE[:2]):
        _register_state(module, shape[1])


def _register_state(module, n):
    """The module's fp8_amax_history (3, n) of zeros, fp8_scale (3,) of ones and fp8_amax (3,) of zeros (the amaxes
    recorded since its last update; 0: none), float32 on its weight's device, rows input, weight, grad_output.
    Module.to(dtype), half() and bfloat16() keep them float32 (_fixed_dtype_buffers)."""
    xp = _be.array_module(module.weight._array)
    module.register_buffer("fp8_amax_history", Tensor._wrap(xp.zeros((3, n), np.float32)))
    module.register_buffer("fp8_scale", Tensor._wrap(xp.ones(3, np.float32)))
    module.register_buffer("fp8_amax", Tensor._wrap(xp.zeros(3, np.float32)))
    module._fixed_dtype_buffers = module._fixed_dtype_buffers | set(_STATE)


def _update_delayed():
    """Every module that recorded an amax since the last update gets its histories and scales updated with the
    recipe of its latest cast: one scaling.delayed_update call per (device, recipe) (one for a model on one device
    under one recipe), then the buffers take the result and the module's fp8_amax is zeroed. The modules come in
    the order they first recorded: so on ranks running the same loop they are the same modules in the same order,
    and the amaxes of the groups whose recipe has reduce_amax are first MAX-reduced across ranks, in one flat
    buffer per device (_reduce_amaxes), so every rank takes the same update."""
    pending = _pending()
    groups = {}   # (device, recipe) -> modules
    for m, recipe in list(pending.items()):
        if getattr(m, "fp8_amax", None) is not None:
            groups.setdefault((str(m.fp8_scale.device), recipe), []).append(m)
    taken = {key: _be.array_module(group[0].fp8_amax._array).concatenate([m.fp8_amax._array for m in group])
             for key, group in groups.items()}   # (copies)
    for device in dict.fromkeys(key[0] for key in groups):   # a refused reduction leaves the amaxes for next time
        reduced = [key for key in groups if key[0] == device and key[1].reduce_amax]
        for key, amaxes in zip(reduced, _reduce_amaxes([taken[key] for key in reduced], device)):
            taken[key] = amaxes
    pending.clear()
    for group in groups.values():
        for m in group:
            m.fp8_amax._array.fill(0)   # the next cast starts a new entry
    for (device, recipe), group in groups.items():
        xp = _be.array_module(group[0].fp8_scale._array)
        history = xp.concatenate([m.fp8_amax_history._array for m in group]).astype(np.float32)
        scales = xp.concatenate([m.fp8_scale._array for m in group]).astype(np.float32)
        fmt = recipe.fp8_format
        scaling.delayed_update(history, scales, taken[device, recipe], [fmt.forward, fmt.forward, fmt.backward] *
                               len(group), margin=recipe.margin, amax_compute_algo=recipe.amax_compute_algo)
        for i, m in enumerate(group):
            m.fp8_amax_history._array[...] = history[3 * i:3 * i + 3]
            m.fp8_scale._array[...] = scales[3 * i:3 * i + 3]


def _reduce_amaxes(parts, device):
    """The amaxes (float32 arrays on `device`, each a group of modules' rows) as the MAX over all ranks, in one
    all-reduce of their concatenation when mp.distributed is initialized with more than one rank (else as they
    are). A NaN amax is sent as inf: a MAX collective may drop a NaN, and the update skips an inf row as a NaN one."""
    if not parts or not _pg.is_initialized() or _pg.get_world_size() < 2:
        return parts
    if _pg.get_backend() == "nccl" and devices.as_device(device) != _pg.get_device():
        raise RuntimeError(f"fp8_autocast: the amaxes of FP8 modules on {device} cannot be all-reduced by the nccl "
                           f"backend of rank {_pg.get_rank()}, which communicates on {_pg.get_device()}; move the "
                           "model there (mp.distributed.get_device())")
    xp = _be.array_module(parts[0])
    flat = xp.concatenate(parts)
    flat = xp.where(flat >= 0, flat, float("inf"))
    _pg.all_reduce_array(flat, "max")
    return xp.split(flat, np.cumsum([p.size for p in parts])[:-1].tolist())


# ---- the GEMM on quantized operands: shared by the modules and the functional ops ----
def _gemm_quantizers(module, recipe):
    """(QX, QW, QG) of a per-tensor recipe: for DelayedScaling, quantizers on the module's state (created on
    first use); for CurrentScaling, stateless ones. module is what watchers are told the casts fed."""
    fmt = recipe.fp8_format
    if isinstance(recipe, DelayedScaling):
        _ensure_state(module, recipe)
    kind = _Delayed if isinstance(recipe, DelayedScaling) else _Current
    return tuple(kind(module, row, fp8, recipe) for row, fp8 in
                 ((INPUT, fmt.forward), (WEIGHT, fmt.forward), (GRAD_OUTPUT, fmt.backward)))


def _quantized(product, x, w, quantizers):
    """QG(product(QX(x), QW(w))): the GEMM on the quantized operands, in float32; its output gradient quantized."""
    qx, qw, qg = quantizers
    return QuantizeGrad.apply(product(QuantizeForward.apply(x, qx), QuantizeForward.apply(w, qw)), qg)


@contextlib.contextmanager
def _inner_ops(device_type):
    """The FP8 path's own ops: not autocast (their operands are decided) and not quantized again."""
    previous = fp8_gemms.enter(None)
    try:
        with autocast(device_type, enabled=False):
            yield
    finally:
        fp8_gemms.leave(previous)


def _finish(run, x, out_dtype=None):
    """run() (the quantized GEMM and its bias, in float32) cast to the output dtype: a module's is that of an
    enclosing enabled autocast region for x's device, else x's; a functional op's (out_dtype) its inputs', which
    autocast has already decided."""
    device = x.device.type
    if out_dtype is None:
        out_dtype = get_autocast_dtype(device) if is_autocast_enabled(device) else x.dtype
    with _inner_ops(device):
        return run().to(out_dtype)


def _check_dtypes(who, x, w):
    for name, t in (("input", x), ("weight", w)):
        if t.dtype not in _QUANTIZABLE:
            raise TypeError(f"fp8_autocast: {who} got {name} of dtype {t.dtype.name}; FP8 quantization takes "
                            "float32, float16 or bfloat16")


# ---- the modules' FP8 paths ----
def linear(module, x):
    """nn.Linear's forward inside an fp8_autocast region (Linear.forward calls it)."""
    recipe = active()
    _check_dtypes(repr(module), x, module.weight)
    if isinstance(recipe, MXFP8BlockScaling):
        for name, n in (("in_features", module.in_features), ("out_features", module.out_features)):
            if n % scaling.MX_BLOCK:
                raise ValueError(f"fp8_autocast: MXFP8BlockScaling needs {name} to be a multiple of "
                                 f"{scaling.MX_BLOCK} (one scale per block of {scaling.MX_BLOCK}), {module!r} has {n}")
        rows = x.numel() // module.in_features if module.in_features else 0
        if rows % scaling.MX_BLOCK and is_grad_enabled() and module.weight.requires_grad:   # (dgrad: out_features)
            raise ValueError(f"fp8_autocast: MXFP8BlockScaling needs the batch ({rows} rows) to be a multiple of "
                             f"{scaling.MX_BLOCK} when the weight's gradient is computed (wgrad's blocks run along "
                             "it)")
    else:
        quantizers = _gemm_quantizers(module, recipe)

    def run():
        if isinstance(recipe, MXFP8BlockScaling):
            y = _mx_product(module, x, module.weight.mT, recipe)
        else:
            y = _quantized(lambda a, b: a @ b.mT, x, module.weight, quantizers)
        return y if module.bias is None else y + module.bias.float()
    return _finish(run, x)


_MX_CONV = ("fp8_autocast: MXFP8BlockScaling does not quantize {who}: its blocks of 32 would run along the "
            "convolution's contraction (in_channels/groups x the kernel's positions), which only an im2col copy of "
            "the input lays out; use DelayedScaling or CurrentScaling (per-tensor scales) for convolutions")


def conv(module, x, convolve):
    """nn.Conv{1,2,3}d's and nn.ConvTranspose{1,2,3}d's forward inside a region (their forward calls it):
    ``convolve(x, w)`` is the module's convolution without bias, run on the quantized input and weight."""
    recipe = active()
    _check_dtypes(repr(module), x, module.weight)
    if isinstance(recipe, MXFP8BlockScaling):
        raise NotImplementedError(_MX_CONV.format(who=repr(module)))
    quantizers = _gemm_quantizers(module, recipe)

    def run():
        y = _quantized(convolve, x, module.weight, quantizers)
        return y if module.bias is None else y + module.bias.float().reshape((-1,) + (1,) * module.nd)
    return _finish(run, x)


# ---- the functional GEMMs (ops/fp8_gemms.py) ----
def _functional_gemms(region):
    """What a region hands the functional GEMMs: None when it is disabled or its recipe is DelayedScaling, whose
    amax histories and scales belong to modules (functional GEMMs then follow autocast, as in Transformer
    Engine, which quantizes only its modules)."""
    if not region.enabled or isinstance(region.recipe, DelayedScaling):
        return None
    return _FunctionalGEMMs(region.recipe)


class _FunctionalGEMMs:
    """F.linear, matmul/@, mm, bmm, addmm and the convolutions inside a CurrentScaling or MXFP8BlockScaling region.

    Operands of another dtype than float32, float16 and bfloat16 (float64, integers, complex) are left to the
    op (None), as autocast leaves them."""

    def __init__(self, recipe):
        self.recipe = recipe

    def conv(self, name, convolve, x, w, bias):
        """A functional convolution on Tensors (ops/conv.py): ``convolve(x, w)`` without bias, x batched."""
        if x.dtype not in _QUANTIZABLE or w.dtype not in _QUANTIZABLE:
            return None
        if isinstance(self.recipe, MXFP8BlockScaling):
            raise NotImplementedError(_MX_CONV.format(who=name))
        quantizers = _gemm_quantizers(name, self.recipe)   # (watchers see the op's name where a module's is)

        def run():
            y = _quantized(convolve, x, w, quantizers)
            return y if bias is None else y + bias.float().reshape((-1,) + (1,) * (x.ndim - 2))
        return _finish(run, x, x.dtype)

    def product(self, ctx, name, a, b, c, alpha, beta, transpose_b):
        """alpha * (a @ b) + beta * c on arrays (b.T for F.linear's weight), a and b quantized, c not: the
        result's array, in a's dtype. With grad mode on, the Tensors it is computed from require grad and ctx
        gets the backward of that graph (fp8_gemms.note). The op's forward does not know which of its inputs
        require grad; its backward says (wanted), and MXFP8's backward GEMMs are made for those alone (wants),
        since one not wanted may not fit the blocks (wgrad's, along the rows)."""
        if a.dtype not in _QUANTIZABLE or b.dtype not in _QUANTIZABLE:
            return None
        leaves = tuple(None if v is None else Tensor._wrap(v) for v in (a, b, c))
        record = is_grad_enabled()
        for t in leaves:
            if record and t is not None:
                t.requires_grad_()
        recipe, wants = self.recipe, [True, True]

        def run():
            x, w, add = leaves
            w = w.mT if transpose_b else w
            if isinstance(recipe, MXFP8BlockScaling):
                y = _mx_product(name, x, w, recipe, wants)
            else:
                y = _quantized(lambda p, q: p @ q, x, w, _gemm_quantizers(name, recipe))
            y = y if alpha == 1 else y * alpha
            return y if add is None or beta == 0 else y + (add.float() if beta == 1 else add.float() * beta)
        y = _finish(run, leaves[0], a.dtype)
        if record:
            def backward(g, wanted):
                wants[:] = wanted[:2]
                chosen = [t for t, want in zip(leaves, wanted) if want and t is not None]
                with _inner_ops(y.device.type):
                    found = iter(_grad(y, chosen, g, retain_graph=True, allow_unused=True,   # create_graph: the
                                       create_graph=is_grad_enabled()) if chosen else ())  # quantizers refuse it
                return tuple(next(found) if want and t is not None else None for t, want in zip(leaves, wanted))
            fp8_gemms.note(ctx, backward)
        return y._array


def _mx_product(who, a, b, recipe, wants=(True, True)):
    """a @ b on MXFP8 values (matmul's rules for 1-D operands; a stack of rows times one matrix as one matrix).
    who: the module (a Linear's x @ w.T) or the functional op's name, for watchers and errors; wants: MXMatmul's."""
    if a.ndim == 1 or b.ndim == 1:   # a vector is a matrix of one row (a) or one column (b), dropped after
        y = _mx_product(who, a.unsqueeze(0) if a.ndim == 1 else a, b.unsqueeze(-1) if b.ndim == 1 else b, recipe,
                        wants)
        y = y.squeeze(-1) if b.ndim == 1 else y
        return y.squeeze(-1 if b.ndim == 1 else -2) if a.ndim == 1 else y
    if a.ndim > 2 and b.ndim == 2:   # (sizes spelled out: -1 cannot be resolved for an empty a)
        rows = int(np.prod(a.shape[:-1]))
        return _mx_product(who, a.reshape(rows, a.shape[-1]), b, recipe, wants).reshape(*a.shape[:-1], b.shape[-1])
    return MXMatmul.apply(a, b, recipe, who, wants)


def _mx_along_last(a, fp8, seen, role, columnwise=False):
    """MXFP8 quantize-dequantize of an array of any rank in 32-blocks along its last dimension (_mx_dequantize).
    (Sizes spelled out, not -1, which NumPy cannot resolve for an empty array.)"""
    rows = int(np.prod(a.shape[:-1]))
    return _mx_dequantize(a.reshape(rows, a.shape[-1]), fp8, seen, role, columnwise).reshape(a.shape)


def _mx_fits(name, what, n):
    if n % scaling.MX_BLOCK:
        raise ValueError(f"fp8_autocast: MXFP8BlockScaling needs {what} of {name} to be a multiple of "
                         f"{scaling.MX_BLOCK} (one scale per block of {scaling.MX_BLOCK}), got {n}")


def _sum_to(x, shape):
    """x summed over the batch dims it was broadcast along, back to ``shape``."""
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1)
    return x.sum(axis=axes).reshape(shape) if axes else x


class MXMatmul(Function):
    """a @ b on MXFP8 values, a (..., m, k) and b (..., k, n), batch dims broadcast; who: the module or op name.

    Forward: blocks along k. Backward: the gradient in blocks along n for dgrad and along m for wgrad, and a,
    b quantized again in blocks along those dimensions (Transformer Engine's "columnwise" copies), so every
    GEMM's blocks run along its contraction. A Linear is x @ w.T: m the batch, k in_features, n out_features.
    wants: which of a, b the backward may compute, read when it runs (False: not asked for, though it requires
    grad), beside ctx.needs_input_grad."""

    @staticmethod
    def forward(ctx, a, b, recipe, who, wants=(True, True)):
        fwd = recipe.fp8_format.forward
        name = who if isinstance(who, str) else repr(who)
        _mx_fits(name, "the contracted dimension", a.shape[-1])
        ctx.fmt, ctx.name, ctx.arrays, ctx.dtypes = (fwd, recipe.fp8_format.backward), name, (a._array, b._array), \
            (a.dtype, b.dtype)
        ctx.seen = seen = (who, recipe)   # what watchers are told (mixprec.amp.fp8.watch)
        ctx.wants = wants
        a_blocks = _mx_along_last(a._array, fwd, seen, "input")
        b_blocks = _mx_along_last(b._array.swapaxes(-1, -2), fwd, seen, "weight").swapaxes(-1, -2)  # along k too
        return Tensor._wrap(a_blocks @ b_blocks)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (fwd, bwd), (a, b), seen = ctx.fmt, ctx.arrays, ctx.seen
        g = grad._array.astype(np.float32)
        da = db = None
        need_a, need_b = (need and want for need, want in zip(ctx.needs_input_grad, ctx.wants))
        if not (a.size and b.size and g.size):   # each gradient is empty or a sum of nothing: zeros, no blocks to fit
            xp = _be.array_module(g)
            return tuple(Tensor._wrap(xp.zeros_like(x)) if need else None for x, need in ((a, need_a), (b, need_b))) \
                + (None, None, None)
        if need_a:   # g @ b^T contracts n
            _mx_fits(ctx.name, "the output's last dimension (the input gradient's contraction)", g.shape[-1])
            da = (_mx_along_last(g, bwd, seen, "grad_output")
                  @ _mx_along_last(b, fwd, seen, "weight", True).swapaxes(-1, -2))
            da = Tensor._wrap(_sum_to(da, a.shape).astype(ctx.dtypes[0], copy=False))
        if need_b:   # a^T @ g contracts m
            _mx_fits(ctx.name, "the output's rows (the weight gradient's contraction)", g.shape[-2])
            db = (_mx_along_last(a.swapaxes(-1, -2), fwd, seen, "input", True)
                  @ _mx_along_last(g.swapaxes(-1, -2), bwd, seen, "grad_output", True).swapaxes(-1, -2))
            db = Tensor._wrap(_sum_to(db, b.shape).astype(ctx.dtypes[1], copy=False))
        return da, db, None, None, None
