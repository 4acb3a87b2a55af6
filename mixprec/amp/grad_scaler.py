"""GradScaler: dynamic loss scaling with torch.amp.GradScaler's behaviour, on fused kernels."""
from __future__ import annotations

import enum
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping

import numpy as np

from .. import backend as _be
from .. import dtypes as _dt
from . import functional as _F

__all__ = ["GradScaler", "OptState"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_STATE_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")


class OptState(enum.Enum):
    """Where an optimizer is in the current iteration (reset by update())."""
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class _DeviceState:
    """The scaler's arrays, all on the device of the first scaled output.

    flags[0] is set by the update kernel when the scale hits min_scale, and
    flags[1 + k] is the found_inf of the k-th optimizer unscaled in this iteration;
    keeping them in one array lets step() fetch the floor flag with its one read.
    stats: see mixprec.amp.functional.update_scale_.
    """

    def __init__(self, device, scale, growth_tracker, overflow_tracker, history, slots=4):
        xp = _be.xp_of(device)
        self.device = device
        with _be.on_device(device):
            self.scale = xp.full((1,), scale, dtype=np.float32)
            self.inv_scale = xp.full((1,), _inverse(scale), dtype=np.float32)
            self.growth_tracker = xp.full((1,), growth_tracker, dtype=np.int32)
            self.overflow_tracker = xp.full((1,), overflow_tracker, dtype=np.int32)
            self.flags = xp.zeros((1 + slots,), dtype=np.float32)
            self.stats = xp.zeros((5 + 2 * history,), dtype=np.float64)

    def grow_flags(self):
        with _be.on_device(self.device):
            flags = _be.xp_of(self.device).zeros((2 * self.flags.size,), dtype=np.float32)
        flags[:self.flags.size] = self.flags
        self.flags = flags


def _inverse(scale) -> np.float32:
    """inv_scale as torch computes it: the reciprocal in float64, rounded once to float32."""
    return np.float32(1.0 / np.float64(np.float32(scale)))


class GradScaler:
    """Dynamic loss scaling: torch.amp.GradScaler's state machine, with fused kernels on CUDA.

    Each iteration::

        scaler.scale(loss).backward()   # gradients come out multiplied by the scale
        scaler.unscale_(opt)            # optional: to clip or inspect true gradients
        scaler.step(opt)                # unscale (if not done) and skip opt.step() on inf/NaN
        scaler.update()                 # back off after an overflow, grow after growth_interval clean steps

    Arguments are torch's (device="cuda", init_scale=2**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True) plus three rules that
    are off by default, so the defaults behave exactly like torch:
      min_scale / max_scale: bounds for the scale. Hitting the floor (an overflow
        while at min_scale) warns once: the run is then overflowing at every scale.
      hysteresis: back off only on the hysteresis-th consecutive overflow.

    Devices: the scale lives on the device of the first tensor given to scale().
    On CUDA, unscale_ is one fused kernel per gradient dtype and update one
    single-thread kernel; on "cpu" the same state machine runs on NumPy with the
    bit-identical reference. GradScaler() defaults to "cuda" like torch and, like
    torch, warns and disables itself when CUDA is not available; GradScaler("cpu")
    works anywhere.

    Host synchronisation: none in scale(), unscale_() or update(). step() reads the
    optimizer's found_inf once (it must know whether to call optimizer.step()); that
    read also brings back the floor flag. get_scale(), state_dict() and
    statistics() read the device too.

    Hooks for other components:
      found_inf_reducer (default None): called as reducer(found_inf) at the end of
        every unscale_, with that optimizer's found_inf (a one-element float32 array
        on the scale's device). It must reduce it in place with MAX across ranks so
        that every rank skips the same steps (mixprec.distributed sets it).
      Master gradients: mixprec.amp.functional.non_finite_check_and_unscale_ takes
        out=[...] to unscale float16/bfloat16 gradients into float32 arrays in the
        same launch; unscale_ does so for an optimizer set up by mp.amp.initialize at O2
        (_unscale_pairs asks it for (model grad, master grad) pairs).

    Statistics kept on the device and read in one copy by statistics(): updates,
    skipped (overflow) updates, the last overflow, floor hits and the scale history.
    """

    HISTORY = 256  # scale changes kept in the statistics ring

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True, min_scale=None, max_scale=None, hysteresis=1):
        self._device = _device_type(device)
        self._enabled = bool(enabled)
        if self._enabled and self._device == "cuda" and not _be.is_cuda_available():
            warnings.warn(f"GradScaler is enabled for 'cuda', but CUDA is not available "
                          f"({_be.cuda_unavailable_reason()}); disabling it. Use GradScaler('cpu') to scale "
                          "losses on the CPU.", UserWarning, stacklevel=2)
            self._enabled = False
        self._init_scale = _check_scale(init_scale, "init_scale")
        self._growth_factor = _check_growth_factor(growth_factor)
        self._backoff_factor = _check_backoff_factor(backoff_factor)
        self._growth_interval = _check_positive_int(growth_interval, "growth_interval")
        self._hysteresis = _check_positive_int(hysteresis, "hysteresis")
        self._min_scale = None if min_scale is None else _check_scale(min_scale, "min_scale")
        self._max_scale = None if max_scale is None else _check_scale(max_scale, "max_scale")
        lo, hi = self._min_scale or 0.0, self._max_scale or math.inf
        if lo > hi:
            raise ValueError(f"min_scale ({lo}) must not exceed max_scale ({hi})")
        if not lo <= self._init_scale <= hi:
            raise ValueError(f"init_scale ({self._init_scale}) must lie within [min_scale, max_scale] = [{lo}, {hi}]")
        self._init_growth_tracker = 0
        self._init_overflow_tracker = 0
        self._state: _DeviceState | None = None
        self._per_optimizer_states: dict = {}
        self._slots_used = 0
        self._scale_version = [0]  # shared by every scale() multiplier: bumped when the scale changes
        self._last_step_skipped = None
        self._floor_warned = False
        self.found_inf_reducer = None

    # ---- the iteration ----
    def scale(self, outputs):
        """outputs * scale for a Tensor, or for every Tensor in nested lists/tuples (same structure back)."""
        if not self._enabled:
            return outputs
        from ..tensor import Tensor
        per_device = {}

        def apply(val):
            if isinstance(val, Tensor):
                if self._state is None:
                    self._lazy_init(val.device)
                multiplier = per_device.get(val.device)
                if multiplier is None:
                    multiplier = per_device[val.device] = self._scale_tensor(val.device)
                return val * multiplier
            if isinstance(val, (list, tuple)):
                return type(val)(apply(v) for v in val)
            if isinstance(val, Iterable) and not isinstance(val, (str, bytes, Mapping)):
                return map(apply, val)  # torch returns a lazy map for other iterables
            raise ValueError(f"outputs must be a Tensor or an iterable of Tensors, got {type(val).__name__}")
        return apply(outputs)

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale in place (once per optimizer per iteration)."""
        if not self._enabled:
            return
        self._require_state("unscale_")
        opt_state = self._optimizer_state(optimizer)
        if opt_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if opt_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        pairs = self._unscale_pairs(optimizer)
        if pairs:
            slot = self._claim_slot()
            found_inf = self._found_inf(slot)
            in_place = all(src is dst for src, dst in pairs)
            _F.non_finite_check_and_unscale_([src.data for src, _ in pairs], found_inf, self._state.inv_scale,
                                             out=None if in_place else [dst.data for _, dst in pairs])
            for _, dst in pairs:
                dst._bump_version()
            if self.found_inf_reducer is not None:
                self.found_inf_reducer(found_inf)
            opt_state["slot"] = slot
        opt_state["stage"] = OptState.UNSCALED

    def _unscale_pairs(self, optimizer):
        """(gradient, destination) Tensor pairs that unscale_ writes: each gradient in place, except for an
        optimizer that steps float32 master weights (mp.amp.initialize at O2), whose float16 model
        gradients are unscaled into the masters' float32 gradients in the same launch."""
        masters = getattr(optimizer, "_amp_master_weights", None)
        if masters is not None:
            return masters.unscale_pairs()
        return [(g, g) for g in _gradients(optimizer)]

    def step(self, optimizer, *args, **kwargs):
        """unscale_ if not done, then optimizer.step(*args, **kwargs) unless its gradients had inf/NaN.

        Returns what optimizer.step returned, or None when the step was skipped.
        The one host synchronisation of the iteration is here: reading found_inf.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._require_state("step")
        opt_state = self._optimizer_state(optimizer)
        if opt_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if opt_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if opt_state.get("slot") is None:
            raise RuntimeError("No inf checks were recorded for this optimizer: none of its parameters has a "
                               "gradient (was backward() called on the scaled loss?).")
        found = self._read_found_inf(opt_state["slot"])
        retval = None if found else optimizer.step(*args, **kwargs)
        opt_state["stage"] = OptState.STEPPED
        self._last_step_skipped = found
        return retval

    def update(self, new_scale=None):
        """Update the scale from this iteration's found_inf (summed over optimizers), or set new_scale."""
        if not self._enabled:
            return
        self._require_state("update")
        st = self._state
        if new_scale is not None:
            self._set_scale(new_scale)
            st.flags[1:1 + self._slots_used] = 0
        else:
            if self._slots_used == 0:
                raise RuntimeError("No inf checks were recorded prior to update(): call step() or unscale_() "
                                   "on an optimizer with gradients first.")
            _F.update_scale_(st.scale, st.growth_tracker, st.flags[1:1 + self._slots_used], self._growth_factor,
                             self._backoff_factor, self._growth_interval, hysteresis=self._hysteresis,
                             overflow_tracker=st.overflow_tracker, min_scale=self._min_scale,
                             max_scale=self._max_scale, floor_hit=st.flags[0:1], inv_scale=st.inv_scale,
                             stats=st.stats, clear_found_inf=True)
        self._scale_version[0] += 1
        self._per_optimizer_states = {}
        self._slots_used = 0

    @property
    def last_step_skipped(self):
        """Whether the last step() skipped optimizer.step() (None before the first step).

        step() already read found_inf to decide, so reading this costs no synchronisation.
        """
        return self._last_step_skipped

    # ---- getters and setters ----
    def get_scale(self) -> float:
        """The current scale as a Python float (reads the device); 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        if self._state is None:
            return self._init_scale
        return float(_be.to_device(self._state.scale, _be.CPU)[0])

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = _check_growth_factor(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = _check_backoff_factor(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = _check_positive_int(new_interval, "growth_interval")

    def is_enabled(self) -> bool:
        return self._enabled

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        if self._state is None:
            return self._init_growth_tracker
        return int(_be.to_device(self._state.growth_tracker, _be.CPU)[0])

    def _get_overflow_tracker(self) -> int:
        if self._state is None:
            return self._init_overflow_tracker
        return int(_be.to_device(self._state.overflow_tracker, _be.CPU)[0])

    def statistics(self) -> dict:
        """Overflow statistics, kept on the device and read in one copy.

        steps: update() calls that used found_inf; skipped_steps: those that saw an
        overflow; last_overflow_step: index of the last such update (None if none);
        floor_hits: back-offs stopped by min_scale; scale_history: the last
        (update index, new scale) pairs, oldest first, one per change of the scale.
        """
        if self._state is None:
            return {"steps": 0, "skipped_steps": 0, "last_overflow_step": None, "floor_hits": 0,
                    "scale_history": []}
        s = _be.to_device(self._state.stats, _be.CPU)
        changes, ring = int(s[4]), (s.size - 5) // 2
        history = [(int(s[5 + 2 * (i % ring)]), float(s[6 + 2 * (i % ring)]))
                   for i in range(max(0, changes - ring), changes)]
        return {"steps": int(s[0]), "skipped_steps": int(s[1]),
                "last_overflow_step": int(s[2]) - 1 if s[2] else None, "floor_hits": int(s[3]),
                "scale_history": history}

    # ---- checkpoints ----
    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval, _growth_tracker (torch's keys; {} when disabled).

        A scaler with hysteresis or bounds also saves them and its overflow tracker.
        """
        if not self._enabled:
            return {}
        out = {"scale": self.get_scale(), "growth_factor": self._growth_factor,
               "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
               "_growth_tracker": self._get_growth_tracker()}
        if self._hysteresis != 1 or self._min_scale is not None or self._max_scale is not None:
            out.update(hysteresis=self._hysteresis, min_scale=self._min_scale, max_scale=self._max_scale,
                       _overflow_tracker=self._get_overflow_tracker())
        return out

    def load_state_dict(self, state_dict):
        """Restore what state_dict() saved; the scale trajectory continues exactly."""
        if not self._enabled:
            return
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"GradScaler.load_state_dict expects a dict from GradScaler.state_dict(), got "
                            f"{type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        missing = [k for k in _STATE_KEYS if k not in state_dict]
        if missing:
            raise ValueError(f"GradScaler state dict is missing {missing}; it needs the keys {list(_STATE_KEYS)}")
        scale = _check_scale(state_dict["scale"], "state_dict['scale']")
        growth_factor = _check_growth_factor(state_dict["growth_factor"])
        backoff_factor = _check_backoff_factor(state_dict["backoff_factor"])
        growth_interval = _check_positive_int(state_dict["growth_interval"], "state_dict['growth_interval']")
        tracker = _check_tracker(state_dict["_growth_tracker"], "state_dict['_growth_tracker']")
        hysteresis = _check_positive_int(state_dict.get("hysteresis", self._hysteresis), "state_dict['hysteresis']")
        min_scale = state_dict.get("min_scale", self._min_scale)
        max_scale = state_dict.get("max_scale", self._max_scale)
        min_scale = None if min_scale is None else _check_scale(min_scale, "state_dict['min_scale']")
        max_scale = None if max_scale is None else _check_scale(max_scale, "state_dict['max_scale']")
        overflows = _check_tracker(state_dict.get("_overflow_tracker", 0), "state_dict['_overflow_tracker']")
        # everything is valid: apply it all
        self._init_scale, self._init_growth_tracker, self._init_overflow_tracker = scale, tracker, overflows
        self._growth_factor, self._backoff_factor = growth_factor, backoff_factor
        self._growth_interval, self._hysteresis = growth_interval, hysteresis
        self._min_scale, self._max_scale = min_scale, max_scale
        if self._state is not None:
            self._state.scale.fill(np.float32(scale))
            self._state.inv_scale.fill(_inverse(scale))
            self._state.growth_tracker.fill(tracker)
            self._state.overflow_tracker.fill(overflows)
            self._scale_version[0] += 1

    # ---- internals ----
    def _lazy_init(self, device):
        self._state = _DeviceState(device, self._init_scale, self._init_growth_tracker,
                                   self._init_overflow_tracker, self.HISTORY)

    def _require_state(self, funcname):
        if self._state is None:
            raise RuntimeError(f"Attempted {funcname} but the scale has not been created yet. This may indicate "
                               "your script did not use scaler.scale(loss or outputs) earlier in the iteration.")

    def _scale_tensor(self, device):
        """The scale as a 0-d Tensor on `device`: the live array itself on the scaler's device."""
        from ..tensor import Tensor
        if device == self._state.device:
            return Tensor._wrap(self._state.scale.reshape(()), vc=self._scale_version)
        return Tensor._wrap(_be.to_device(self._state.scale, device).reshape(()))

    def _optimizer_state(self, optimizer):
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"expected an optimizer with param_groups (a mixprec.optim.Optimizer), got "
                            f"{type(optimizer).__name__}")
        return self._per_optimizer_states.setdefault(id(optimizer), {"stage": OptState.READY, "slot": None})

    def _claim_slot(self) -> int:
        if 1 + self._slots_used >= self._state.flags.size:
            self._state.grow_flags()
        self._slots_used += 1
        return self._slots_used - 1

    def _found_inf(self, slot):
        return self._state.flags[1 + slot:2 + slot]

    def _read_found_inf(self, slot) -> bool:
        host = _be.to_device(self._state.flags[:2 + slot], _be.CPU)  # the one device-to-host read
        if host[0] and not self._floor_warned:
            self._floor_warned = True
            warnings.warn(f"GradScaler: THE LOSS SCALE HIT ITS FLOOR (min_scale={self._min_scale}). Gradients "
                          "overflow even at the smallest allowed scale, so steps keep being skipped: the model "
                          "or its loss is producing inf/NaN (diverging), not just overflowing float16.",
                          RuntimeWarning, stacklevel=3)
        return bool(host[1 + slot] != 0)

    def _set_scale(self, new_scale):
        from ..tensor import Tensor
        reason = ("new_scale should be a float or a 1-element Tensor with requires_grad=False on the scaler's "
                  "device")
        if isinstance(new_scale, numbers.Real) and not isinstance(new_scale, bool):
            value = _check_scale(new_scale, "new_scale")
            self._state.scale.fill(np.float32(value))
            self._state.inv_scale.fill(_inverse(value))
            return
        if not isinstance(new_scale, Tensor):
            raise TypeError(f"{reason}, got {type(new_scale).__name__}")
        if new_scale.numel() != 1 or new_scale.requires_grad or new_scale.device.type != self._state.device.type:
            raise ValueError(f"{reason}; got shape {new_scale.shape}, requires_grad={new_scale.requires_grad}, "
                             f"device {new_scale.device}")
        if not _dt.is_floating(new_scale.dtype):
            raise TypeError(f"{reason}; got dtype {new_scale.dtype.name}")
        value = _be.to_device(new_scale.data, self._state.device).reshape(1).astype(np.float32)
        self._state.scale[...] = value
        self._state.inv_scale[...] = (1.0 / value.astype(np.float64)).astype(np.float32)


def _gradients(optimizer, allow_float16=False):
    """The gradient Tensors to unscale; float16 ones are refused as torch refuses them
    (allow_float16: mp.amp.StaticGradScaler at scale 1.0, where unscaling is only the check).

    A gradient that is a broadcast view (read-only, or with a zero stride, as the
    gradient of a sum can be) is first given memory of its own, so it can be
    unscaled in place.
    """
    from ..tensor import Tensor
    grads = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if g.dtype == _dt.float16 and not allow_float16:
                raise ValueError("Attempting to unscale FP16 gradients. Keep the parameters in float32 (autocast "
                                 "runs the float16 math) or use bfloat16 parameters.")
            data = g.data
            if 0 in data.strides[:data.ndim] and data.size > 1 or not getattr(data.flags, "writeable", True):
                with _be.on_device(g.device):
                    p.grad = g = Tensor._wrap(data.copy())
            grads.append(g)
    return grads


def _device_type(device) -> str:
    if isinstance(device, _be.Device):
        return device.type
    if isinstance(device, str):
        name, _, index = device.partition(":")
        if name in ("cpu", "cuda") and (not index or (name == "cuda" and index.isdigit())):
            return name
    raise ValueError(f"GradScaler device must be 'cuda', 'cuda:N' or 'cpu', got {device!r}")


def _check_scale(x, name) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or not \
            0 < x <= _FLOAT32_MAX:
        raise ValueError(f"{name} must be a finite positive number that fits float32, got {x!r}")
    return float(x)


def _check_growth_factor(x) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or x <= 1.0:
        raise ValueError(f"The growth factor must be a finite number > 1.0, got {x!r}")
    return float(x)


def _check_backoff_factor(x) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not 0.0 < x < 1.0:
        raise ValueError(f"The backoff factor must be a number in (0, 1), got {x!r}")
    return float(x)


def _check_positive_int(x, name) -> int:
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {x!r}")
    return int(x)


def _check_tracker(x, name) -> int:
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 0 <= x < 2 ** 31:
        raise ValueError(f"{name} must be an integer >= 0, got {x!r}")
    return int(x)
