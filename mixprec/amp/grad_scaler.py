"""GradScaler: dynamic loss scaling with torch.amp.GradScaler's behaviour, on fused kernels; StaticGradScaler."""
from __future__ import annotations

import enum
import numbers
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from .. import backend as _be
from ..backend import availability, capture, devices
from .. import dtypes as _dt
from . import functional as _F
from ._layout import ScaleRule, Stat, UpdateScaleArgs, check_scale, check_tracker, read_statistics
from ..tensor import Tensor
from ..optim import Optimizer

__all__ = ["GradScaler", "StaticGradScaler", "OptState"]

_STATE_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")


class OptState(enum.Enum):
    """Where an optimizer is in the current iteration (reset by update())."""
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class _DeviceState:
    """The scaler's arrays, all on the device of the first scaled output.

    flags = [floor_hit, found_inf of the first optimizer unscaled this iteration, of the
    second, ...]: step() fetches its optimizer's found_inf and the floor flag in one
    read. The update reads every found_inf slot (the unused ones are zero) and clears
    them, so its arguments stay the same from one iteration to the next.
    """
    FLOOR = 0

    def __init__(self, device, scale, growth_tracker, overflow_tracker, history, slots=4):
        xp = _be.xp_of(device)
        self.device = device
        with devices.on_device(device):
            self.scale = xp.full((1,), scale, dtype=np.float32)
            self.inv_scale = xp.full((1,), _inverse(scale), dtype=np.float32)
            self.one = xp.ones((1,), dtype=np.float32)  # the inv_scale of a check that only looks for inf/NaN
            self.growth_tracker = xp.full((1,), growth_tracker, dtype=np.int32)
            self.overflow_tracker = xp.full((1,), overflow_tracker, dtype=np.int32)
            self.flags = xp.zeros((1 + slots,), dtype=np.float32)
            self.stats = xp.zeros((Stat.RING + 2 * history,), dtype=np.float64)

    def update_args(self, rule: ScaleRule) -> UpdateScaleArgs:
        return UpdateScaleArgs(self.scale, self.growth_tracker, self.flags[1:], rule, self.overflow_tracker,
                               floor_hit=self.flags[self.FLOOR:self.FLOOR + 1], inv_scale=self.inv_scale,
                               stats=self.stats, clear_found_inf=True)

    def set_scale(self, value):
        """scale := value (a Python float or a float32 array on the device) and its inverse, torch's way."""
        self.scale[...] = value
        self.inv_scale[...] = (1.0 / self.scale.astype(np.float64)).astype(np.float32)

    def grow_flags(self):
        with devices.on_device(self.device):
            flags = _be.xp_of(self.device).zeros((2 * self.flags.size,), dtype=np.float32)
        flags[:self.flags.size] = self.flags
        self.flags = flags


def _inverse(scale) -> np.float32:
    """inv_scale as torch computes it: the reciprocal in float64, rounded once to float32."""
    return np.float32(1.0 / np.float64(np.float32(scale)))


class GradScaler:
    """Dynamic loss scaling: torch.amp.GradScaler's state machine, with fused kernels on CUDA.

    >>> import mixprec as mp
    >>> mp.manual_seed(0)
    >>> model = mp.nn.Linear(4, 2)
    >>> opt = mp.optim.SGD(model.parameters(), lr=0.1)
    >>> scaler = mp.GradScaler("cpu")                 # "cuda" (the default) on a GPU
    >>> with mp.autocast("cpu", dtype=mp.float16):
    ...     loss = model(mp.randn(8, 4)).pow(2).mean()
    >>> scaler.scale(loss).backward()   # gradients come out multiplied by the scale
    >>> scaler.unscale_(opt)            # optional: to clip or inspect the true gradients
    >>> scaler.step(opt)                # unscales (if not done); skips opt.step() on inf/NaN
    >>> scaler.update()                 # backs off after an overflow, grows after growth_interval clean steps
    >>> scaler.get_scale()              # float16 gradients overflowed at 2^16: step skipped, scale halved
    32768.0

    Arguments are torch's (device="cuda", init_scale=2**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True) plus three rules that
    are off by default, so the defaults behave exactly like torch:
      min_scale / max_scale: bounds for the scale. Hitting the floor (an overflow
        while at min_scale) warns once: the run is then overflowing at every scale.
      hysteresis: back off only on the hysteresis-th consecutive overflow.
    They are checked here, once, as a mixprec.amp._layout.ScaleRule.
    GradScaler() defaults to "cuda" like torch and, like torch, warns and disables
    itself when CUDA is not available; GradScaler("cpu") works anywhere.

    The scale lives on the device of the first tensor given to scale(). On CUDA,
    unscale_ is one fused kernel per gradient dtype and update one single-thread
    kernel, and nothing reads the device back (with a fused optimizer, not even
    step()); on the CPU the same state machine runs on a bit-identical NumPy twin.
    found_inf_reducer(found_inf), when set, reduces each optimizer's flag in place
    across ranks (mixprec.distributed sets it). docs/grad-scaler.md has the rest:
    host synchronisation, the optimizer's unscale_pairs() extension point, statistics().
    """

    HISTORY = 256  # scale changes kept in the statistics ring

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True, min_scale=None, max_scale=None, hysteresis=1):
        self._device = _device_type(device)
        self._enabled = bool(enabled)
        if self._enabled and self._device == "cuda" and not availability.is_cuda_available():
            warnings.warn(f"GradScaler is enabled for 'cuda', but CUDA is not available "
                          f"({availability.cuda_unavailable_reason()}); disabling it. Use GradScaler('cpu') to scale "
                          "losses on the CPU.", UserWarning, stacklevel=2)
            self._enabled = False
        self._rule = self._checked(ScaleRule(growth_factor, backoff_factor, growth_interval, hysteresis, min_scale,
                                             max_scale))
        self._init_scale = _scale_within(init_scale, "init_scale", self._rule)
        self._init_growth_tracker = self._init_overflow_tracker = 0
        self._state: _DeviceState | None = None
        self._per_optimizer_states: dict = {}
        self._slots_used = 0
        self._scale_version = [0]  # shared by every scale() multiplier: bumped when the scale changes
        self._last_step_skipped = None
        self._floor_warned = False
        self.found_inf_reducer = None

    def _checked(self, rule: ScaleRule) -> ScaleRule:
        """torch's policy on top of ScaleRule's own checks: a dynamic scale really grows and backs off."""
        if not rule.growth_factor > 1.0:
            raise ValueError(f"The growth factor must be > 1.0, got growth_factor={rule.growth_factor}")
        if not rule.backoff_factor < 1.0:
            raise ValueError(f"The backoff factor must be < 1.0, got backoff_factor={rule.backoff_factor}")
        return rule

    def _unscales_float16(self) -> bool:
        """Whether float16 gradients may be unscaled in place (torch refuses: small ones underflow again)."""
        return False

    # ---- the iteration ----
    def scale(self, outputs):
        """outputs * scale for a Tensor, or for every Tensor in nested lists/tuples (same structure back)."""
        if not self._enabled:
            return outputs
        per_device = {}

        def apply(val):
            if isinstance(val, Tensor):
                if self._state is None:
                    self._state = _DeviceState(val.device, self._init_scale, self._init_growth_tracker,
                                               self._init_overflow_tracker, self.HISTORY)
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
        self._check_and_unscale(optimizer, opt_state, self._state.inv_scale, self._unscales_float16())
        opt_state["stage"] = OptState.UNSCALED

    def _check_and_unscale(self, optimizer, opt_state, inv_scale, allow_float16):
        """One launch per dtype pair over optimizer.unscale_pairs(): multiply by inv_scale (the scale's inverse,
        or one: a check only, as torch's _check_inf_per_device) and record inf/NaN in this optimizer's slot."""
        pairs = optimizer.unscale_pairs()
        if not allow_float16 and any(dst.dtype == _dt.float16 for _, dst in pairs):
            raise ValueError("Attempting to unscale FP16 gradients. Keep the parameters in float32 (autocast "
                             "runs the float16 math) or use bfloat16 parameters.")
        if pairs:
            slot = self._claim_slot()
            found_inf = self._state.flags[1 + slot:2 + slot]
            in_place = all(src is dst for src, dst in pairs)
            _F.non_finite_check_and_unscale_([src._array for src, _ in pairs], found_inf, inv_scale,
                                             out=None if in_place else [dst._array for _, dst in pairs])
            for _, dst in pairs:
                dst._bump_version()
            if self.found_inf_reducer is not None:
                self.found_inf_reducer(found_inf)
            opt_state["slot"] = slot

    def step(self, optimizer, *args, **kwargs):
        """Step the optimizer unless its gradients had inf/NaN; returns what optimizer.step returned.

        An optimizer that supports AMP scaling (fused=True, torch's fused contract): if unscale_
        was not called, the gradients are only checked for inf/NaN here (a multiply by one), and
        optimizer.step(*args, grad_scale=scale, found_inf=found_inf, **kwargs) divides them by the
        scale and skips on the device: nothing is read back to the host, and the call returns what
        step returned even when the update was skipped (last_step_skipped is then None). After
        unscale_, grad_scale is None: the gradients are unscaled already.

        A per-tensor optimizer whose state lives on the device (``state_on_device``: SGD, Adam,
        AdamW) on a GPU: unscale_ if not done, then optimizer.step(*args, found_inf=found_inf,
        **kwargs), which takes the step back on the device where found_inf is set: again nothing
        is read back (last_step_skipped is None). Unless host code must know whether it stepped
        (``step_decided_on_host``, set by a scheduler with skip_unstepped=True): then as below.

        Any other optimizer (and any on the CPU, where reading is free): unscale_ if not done, then
        read found_inf and call optimizer.step(*args, **kwargs) unless it is set; None when the
        step was skipped. Such a step cannot be captured in a CUDA graph.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._require_state("step")
        opt_state = self._optimizer_state(optimizer)
        if opt_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        on_device = optimizer.supports_amp_scaling
        undone_there = (not on_device and optimizer.state_on_device and not optimizer.step_decided_on_host
                        and self._device == "cuda")
        if not (on_device or undone_there) and capture.is_capturing():
            raise RuntimeError(f"GradScaler.step({type(optimizer).__name__}) cannot be captured in a CUDA graph: it "
                               "must read found_inf on the host to decide whether to call optimizer.step(). Build "
                               "the optimizer with fused=True, or use one whose per-tensor state lives on the device "
                               "(SGD, Adam, AdamW): both skip on the device.")
        grad_scale = None
        if opt_state["stage"] is OptState.READY:
            if on_device:
                self._check_and_unscale(optimizer, opt_state, self._state.one, allow_float16=True)
                grad_scale = self._state.scale
            else:
                self.unscale_(optimizer)
        if opt_state.get("slot") is None:
            raise RuntimeError("No inf checks were recorded for this optimizer: none of its parameters has a "
                               "gradient (was backward() called on the scaled loss?).")
        if on_device or undone_there:
            found_inf = self._state.flags[1 + opt_state["slot"]:2 + opt_state["slot"]]
            scale = {"grad_scale": grad_scale} if on_device else {}
            retval = optimizer.step(*args, found_inf=found_inf, **scale, **kwargs)
            found = None  # decided on the device; statistics() counts skipped steps
        else:
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
        if new_scale is not None:
            self._state.set_scale(self._checked_new_scale(new_scale))
            self._state.flags[1:] = 0
        else:
            if self._slots_used == 0:
                raise RuntimeError("No inf checks were recorded prior to update(): call step() or unscale_() "
                                   "on an optimizer with gradients first.")
            _F.apply_update(self._state.update_args(self._rule))
        self._scale_version[0] += 1
        self._per_optimizer_states = {}
        self._slots_used = 0

    @property
    def last_step_skipped(self):
        """Whether the last step() skipped optimizer.step() (None before the first step, and after a step of an
        optimizer that skips on the device: the host never learnt it; statistics() counts those).

        step() already read found_inf to decide, so reading this costs no synchronisation.
        """
        return self._last_step_skipped

    # ---- getters and setters ----
    def get_scale(self) -> float:
        """The current scale as a Python float (reads the device); 1.0 when disabled."""
        return float(self._host_value("scale", self._init_scale)) if self._enabled else 1.0

    def get_growth_factor(self):
        return self._rule.growth_factor

    def set_growth_factor(self, new_factor):
        self._rule = self._checked(replace(self._rule, growth_factor=new_factor))

    def get_backoff_factor(self):
        return self._rule.backoff_factor

    def set_backoff_factor(self, new_factor):
        self._rule = self._checked(replace(self._rule, backoff_factor=new_factor))

    def get_growth_interval(self):
        return self._rule.growth_interval

    def set_growth_interval(self, new_interval):
        self._rule = self._checked(replace(self._rule, growth_interval=new_interval))

    def is_enabled(self) -> bool:
        return self._enabled

    def _get_growth_tracker(self) -> int:
        return int(self._host_value("growth_tracker", self._init_growth_tracker)) if self._enabled else 0

    def _get_overflow_tracker(self) -> int:
        return int(self._host_value("overflow_tracker", self._init_overflow_tracker))

    def _host_value(self, name, initial):
        """One number of the state: read from its device array, or its initial value before the first scale()."""
        return initial if self._state is None else devices.to_device(getattr(self._state, name), devices.CPU)[0]

    def statistics(self) -> dict:
        """Overflow statistics, kept on the device and read in one copy.

        steps: update() calls that used found_inf; skipped_steps: those that saw an
        overflow; last_overflow_step: index of the last such update (None if none);
        floor_hits: back-offs stopped by min_scale; scale_history: the last
        (update index, new scale) pairs, oldest first, one per change of the scale.
        """
        return read_statistics(None if self._state is None else devices.to_device(self._state.stats, devices.CPU))

    # ---- checkpoints ----
    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval, _growth_tracker (torch's keys; {} when disabled).

        A scaler with hysteresis or bounds also saves them and its overflow tracker.
        """
        if not self._enabled:
            return {}
        rule = self._rule
        out = {"scale": self.get_scale(), "growth_factor": rule.growth_factor, "backoff_factor": rule.backoff_factor,
               "growth_interval": rule.growth_interval, "_growth_tracker": self._get_growth_tracker()}
        if rule.hysteresis != 1 or rule.min_scale is not None or rule.max_scale is not None:
            out.update(hysteresis=rule.hysteresis, min_scale=rule.min_scale, max_scale=rule.max_scale,
                       _overflow_tracker=self._get_overflow_tracker())
        return out

    def load_state_dict(self, state_dict):
        """Restore what state_dict() saved; the scale trajectory continues exactly. Nothing changes on an error."""
        if self._enabled:
            self._load_checked(self._checked_state(state_dict))

    def _checked_state(self, state_dict):
        """(rule, scale, growth tracker, overflow tracker) from a state_dict, all checked; or an error."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"GradScaler.load_state_dict expects a dict from GradScaler.state_dict(), got "
                            f"{type(state_dict).__name__}")
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        missing = [k for k in _STATE_KEYS if k not in state_dict]
        if missing:
            raise ValueError(f"GradScaler state dict is missing {missing}; it needs the keys {list(_STATE_KEYS)}")
        try:
            rule = self._checked(ScaleRule(
                state_dict["growth_factor"], state_dict["backoff_factor"], state_dict["growth_interval"],
                state_dict.get("hysteresis", self._rule.hysteresis), state_dict.get("min_scale", self._rule.min_scale),
                state_dict.get("max_scale", self._rule.max_scale)))
            scale = check_scale(state_dict["scale"], "scale")
            tracker = check_tracker(state_dict["_growth_tracker"], "_growth_tracker")
            overflows = check_tracker(state_dict.get("_overflow_tracker", 0), "_overflow_tracker")
        except ValueError as exc:
            raise ValueError(f"{type(self).__name__}.load_state_dict: {exc}") from None
        return rule, scale, tracker, overflows

    def _load_checked(self, checked):
        rule, scale, tracker, overflows = checked
        self._rule = rule
        self._init_scale, self._init_growth_tracker, self._init_overflow_tracker = scale, tracker, overflows
        if self._state is not None:
            self._state.set_scale(scale)
            self._state.growth_tracker.fill(tracker)
            self._state.overflow_tracker.fill(overflows)
            self._scale_version[0] += 1

    # ---- internals ----
    def _require_state(self, funcname):
        if self._state is None:
            raise RuntimeError(f"Attempted {funcname} but the scale has not been created yet. This may indicate "
                               "your script did not use scaler.scale(loss or outputs) earlier in the iteration.")

    def _scale_tensor(self, device):
        """The scale as a 0-d Tensor on `device`: the live array itself on the scaler's device."""
        if device == self._state.device:
            return Tensor._wrap(self._state.scale.reshape(()), vc=self._scale_version)
        return Tensor._wrap(devices.to_device(self._state.scale, device).reshape(()))

    def _optimizer_state(self, optimizer):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"expected an mp.optim.Optimizer (its unscale_pairs() names the gradients of its "
                            f"param_groups), got {type(optimizer).__name__}")
        return self._per_optimizer_states.setdefault(id(optimizer), {"stage": OptState.READY, "slot": None})

    def _claim_slot(self) -> int:
        if 1 + self._slots_used >= self._state.flags.size:
            self._state.grow_flags()
        self._slots_used += 1
        return self._slots_used - 1

    def _found_inf(self, optimizer):
        """Whether this iteration's unscale_(optimizer) saw an inf/NaN (a host read; mp.amp.scale_loss uses it);
        None when it had no gradient to check."""
        slot = self._per_optimizer_states.get(id(optimizer), {}).get("slot")
        return None if slot is None else self._read_found_inf(slot)

    def _read_found_inf(self, slot) -> bool:
        host = devices.to_device(self._state.flags[:2 + slot], devices.CPU)  # the one device-to-host read
        if host[_DeviceState.FLOOR] and not self._floor_warned:
            self._floor_warned = True
            warnings.warn(f"GradScaler: THE LOSS SCALE HIT ITS FLOOR (min_scale={self._rule.min_scale}). Gradients "
                          "overflow even at the smallest allowed scale, so steps keep being skipped: the model "
                          "or its loss is producing inf/NaN (diverging), not just overflowing float16.",
                          RuntimeWarning, stacklevel=3)
        return bool(host[1 + slot] != 0)

    def _checked_new_scale(self, new_scale):
        """update(new_scale)'s argument: a number, or a one-element floating Tensor (as a float32 device array)."""
        reason = ("new_scale should be a float or a 1-element Tensor with requires_grad=False on the scaler's "
                  "device")
        if isinstance(new_scale, numbers.Real) and not isinstance(new_scale, bool):
            return check_scale(new_scale, "new_scale")
        if not isinstance(new_scale, Tensor):
            raise TypeError(f"{reason}, got {type(new_scale).__name__}")
        if new_scale.numel() != 1 or new_scale.requires_grad or new_scale.device.type != self._state.device.type:
            raise ValueError(f"{reason}; got shape {new_scale.shape}, requires_grad={new_scale.requires_grad}, "
                             f"device {new_scale.device}")
        if not _dt.is_floating(new_scale.dtype):
            raise TypeError(f"{reason}; got dtype {new_scale.dtype.name}")
        return devices.to_device(new_scale._array, self._state.device).reshape(1).astype(np.float32)


class StaticGradScaler(GradScaler):
    """A GradScaler whose scale never changes; steps with inf/NaN gradients are still skipped.

    StaticGradScaler(device="cuda", scale=1.0, enabled=True): the default scale of 1
    only checks and skips (what O0 and O3 use); pick a larger one for float16
    gradients that would underflow, small enough never to overflow. Its rule has
    growth and back-off factors of exactly 1: the update's scale * 1.0 rounds to the
    same float32, so the state machine, the statistics (steps, skipped steps) and
    state_dict are GradScaler's. At scale 1.0, unscaling is only the inf/NaN check,
    so float16 gradients (O3) are accepted.
    """

    def __init__(self, device="cuda", scale=1.0, enabled=True):
        super().__init__(device, init_scale=scale, growth_factor=1.0, backoff_factor=1.0, enabled=enabled)

    def _checked(self, rule: ScaleRule) -> ScaleRule:
        if (rule.growth_factor, rule.backoff_factor) != (1.0, 1.0):
            raise ValueError(f"StaticGradScaler: the scale is fixed, so its growth and backoff factors are 1.0; got "
                             f"growth_factor={rule.growth_factor} and backoff_factor={rule.backoff_factor}, a dynamic "
                             "scaler's; load it into mp.amp.GradScaler, or use one, for a scale that changes")
        return rule

    def _unscales_float16(self) -> bool:
        return self._init_scale == 1.0

    def update(self, new_scale=None):
        if new_scale is not None:
            raise ValueError("StaticGradScaler: the scale is fixed, update() takes no new_scale (use "
                             "mp.amp.GradScaler for a scale that changes)")
        super().update()


def _scale_within(x, name, rule: ScaleRule) -> float:
    value = check_scale(x, name)
    if not rule.lowest <= value <= rule.highest:
        raise ValueError(f"{name} ({value}) must lie within [min_scale, max_scale] = [{rule.lowest}, {rule.highest}]")
    return value


def _device_type(device) -> str:
    if isinstance(device, devices.Device):
        return device.type
    if isinstance(device, str):
        name, _, index = device.partition(":")
        if name in ("cpu", "cuda") and (not index or (name == "cuda" and index.isdigit())):
            return name
    raise ValueError(f"GradScaler device must be 'cuda', 'cuda:N' or 'cpu', got {device!r}")
