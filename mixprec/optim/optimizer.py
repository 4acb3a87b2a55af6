"""Optimizer base: parameter groups, per-parameter state, state_dict, the fused step."""
from __future__ import annotations

import copy
import numbers
from collections.abc import Iterable, Mapping

import numpy as np

from .. import dtypes as _dt
from ..autograd.grad_mode import enable_grad, no_grad
from ..backend import array_module, is_array
from ..backend.capture import is_capturing
from ..backend.devices import CPU, on_device, to_device
from ..tensor import Tensor
from . import fused as _fused


class Optimizer:
    """Holds param_groups (dicts with "params" and hyper-parameters) and per-parameter state.

    Subclasses implement ``_update(p, grad, state, group)`` on raw arrays; step()
    does the bookkeeping (a subclass that overrides step() calls super().step()).
    Updates write into parameter memory in place and bump each parameter's version
    counter, so stale autocast casts are never reused.

    fused=True (a subclass that names its kernel in ``fused_kind`` and implements
    ``_fused_rule`` and ``_fused_state``): every parameter of a (device, dtype) group is updated by one
    multi-tensor kernel per step on CUDA, by its vectorised NumPy twin on the CPU
    (mixprec/optim/fused.py). Such an optimizer supports AMP scaling
    (``supports_amp_scaling``, torch's ``_step_supports_amp_scaling``): GradScaler.step
    passes ``step(grad_scale=..., found_inf=...)`` and the kernel unscales and, where
    found_inf is set, skips on the device, without the host waiting for the GPU.

    Extension point: a *step extension* takes part in every step of one optimizer, for
    parameters whose gradients are computed elsewhere. mixprec.amp.master_weights is
    the one mixprec ships: the optimizer steps float32 masters while backward fills
    the float16 model's gradients. Install one with set_step_extension(ext); it
    provides four methods, and nothing else reaches into the optimizer:

        ext.unscale_pairs()          -> (gradient, destination) Tensor pairs: what
                                        unscale_pairs() answers, i.e. what GradScaler writes
        ext.before_update()          step() calls it after the closure, before any update
        ext.after_update()           step() calls it after the updates
        ext.zero_grad(set_to_none)   zero_grad() calls it after clearing param_groups' grads

    and optionally a fifth:

        ext.weight_copies()          -> (stepped parameter, low-precision copy) Tensor pairs: step()
                                        writes each copy, rounded, from its updated parameter (a
                                        fused optimizer in the same pass); O2's float16 model weights
    """

    #: The fused kernel of a subclass ("ADAM", "SGD": a key of mixprec.amp._layout.LISTS); None: no fused=True.
    fused_kind: str | None = None

    def __init__(self, params, defaults: dict, *, fused: bool = False):
        name = type(self).__name__
        if not isinstance(fused, bool):
            raise TypeError(f"{name}: fused must be True or False, got {fused!r}")
        if fused and self.fused_kind is None:
            raise ValueError(f"{name} has no fused implementation (fused=True exists for SGD, Adam and AdamW)")
        self.fused = fused
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        self.state: dict = {}
        self._step_extension = None
        self._skip_next_step = False
        # step() calls that returned, and whether one of them left the decision to skip to the device (found_inf):
        # what a learning-rate scheduler reads to learn whether the optimizer stepped since it last looked
        self._steps_taken = 0
        self._steps_decided_on_device = False
        self._fused_layouts: dict = {}  # id(group) -> the flat state buffers fused steps laid out (fused.py)
        if isinstance(params, Tensor) or not isinstance(params, Iterable):
            raise TypeError(f"{name}: params must be an iterable of Tensors or of parameter-group dicts (such as "
                            f"model.parameters(), or [tensor] for one tensor), got "
                            f"{'a single ' if isinstance(params, Tensor) else 'a '}{type(params).__name__}")
        params = list(params)
        if not params:
            raise ValueError(f"{name}: optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for g in params:
            self.add_param_group(g)

    def add_param_group(self, group: dict):
        what = f"{type(self).__name__}.add_param_group"
        if not isinstance(group, Mapping):
            raise TypeError(f"{what}: a parameter group must be a dict with a 'params' entry, got a "
                            f"{type(group).__name__}")
        if "params" not in group:
            raise KeyError(f"{what}: the parameter group has no 'params' entry (its keys: {sorted(map(str, group))})")
        group = dict(group)
        ps = group["params"]
        if isinstance(ps, (set, frozenset)) or not isinstance(ps, (Tensor, Iterable)):
            raise TypeError(f"{what}: 'params' must be a Tensor or an ordered collection of them (a list; a set's "
                            f"order changes between runs, and checkpoints match parameters by position), got a "
                            f"{type(ps).__name__}")
        group["params"] = [ps] if isinstance(ps, Tensor) else list(ps)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"{what}: optimizer params must be Tensors, got a {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{what}: can't optimize a non-leaf tensor (it is computed from others)")
            if not _dt.is_floating(p.dtype):
                raise TypeError(f"{what}: optimizer params must be floating point, got {p.dtype.name}")
            if id(p) in seen:
                raise ValueError(f"{what}: some parameters appear in more than one parameter group")
            seen.add(id(p))
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True):
        zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)
        if self._step_extension is not None:
            self._step_extension.zero_grad(set_to_none)

    @property
    def supports_amp_scaling(self) -> bool:
        """Whether step() takes grad_scale and found_inf (torch's _step_supports_amp_scaling): fused optimizers."""
        return self.fused

    #: Whether every piece of this optimizer's per-tensor state is a device array (no host counters), so that a
    #: per-tensor step can be undone on the device: step(found_inf=...) then keeps parameters and state where
    #: found_inf is set, and a GradScaler skips such a step without reading found_inf on the host.
    state_on_device: bool = False
    #: Set when host code must learn whether each step ran (a scheduler with skip_unstepped=True): a GradScaler
    #: then reads found_inf and calls step() only when it is clear, rather than undoing it on the device.
    step_decided_on_host: bool = False

    @no_grad()
    def step(self, closure=None, *, grad_scale=None, found_inf=None):
        """Apply one update to every parameter that has a gradient; returns closure() if given.

        grad_scale, found_inf (GradScaler.step passes them): one-element float32 arrays on the
        parameters' device. grad_scale (fused optimizers only): the gradients are divided by it (and
        written back unscaled, as torch's fused optimizers do). found_inf (fused optimizers, and
        per-tensor ones whose state is on the device, ``state_on_device``): where it is non-zero the
        step changes nothing, parameters and state bit for bit (state a skipped per-tensor step would
        have created is left at zero): decided on the device.
        """
        if grad_scale is not None and not self.supports_amp_scaling:
            raise TypeError(f"{type(self).__name__}.step: grad_scale is for optimizers that unscale on the device "
                            "(fused=True); a GradScaler unscales the gradients of this one first")
        if found_inf is not None and not (self.supports_amp_scaling or self.state_on_device):
            raise TypeError(f"{type(self).__name__}.step: found_inf is for optimizers that can skip on the device "
                            "(fused=True, or per-tensor state kept on the device); a GradScaler decides for this one")
        blocker = self._capture_blocker() if is_capturing() else None
        if blocker:
            raise RuntimeError(f"{type(self).__name__}.step() cannot be captured in a CUDA graph: {blocker}. Use "
                               "fused=True: the fused step keeps everything it reads and writes on the device")
        grad_scale, found_inf = (None if a is None else _fused.device_scalar(a, name)
                                 for a, name in ((grad_scale, "grad_scale"), (found_inf, "found_inf")))
        skip = None if found_inf is None or self.fused else found_inf.reshape(()) != 0  # (per-tensor steps)
        if closure is not None and not callable(closure):
            raise TypeError(f"{type(self).__name__}.step: closure must be a function that recomputes the loss, got "
                            f"{_show(closure)}")
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if self._skip_next_step:
            self._skip_next_step = False
            return self._stepped(loss, found_inf)
        extension = self._step_extension
        if extension is not None:
            extension.before_update()
        copies = {}
        if callable(getattr(extension, "weight_copies", None)):
            copies = {id(p): copy for p, copy in extension.weight_copies()}
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            if self.fused:
                rule = self._fused_rule(group, params)
                grads = [writable_grad(p, contiguous=True) for p in params]
                _fused.step(self.fused_kind, rule, params, grads, self.state, self._fused_state(rule), copies,
                            self._fused_layouts.setdefault(id(group), {}), grad_scale, found_inf)
                continue
            for p in params:
                state = self.state.setdefault(p, {})
                undo = _Undo(p._array, state) if skip is not None else None
                self._update(p, p.grad._array, state, group)
                if undo is not None:
                    undo.where(skip)
                p._bump_version()
                if id(p) in copies:
                    copies[id(p)]._assign("refreshing a weight copy from its parameter", p)
        if extension is not None:
            extension.after_update()
        return self._stepped(loss, found_inf)

    def _stepped(self, loss, found_inf):
        """Count a step() call that returned (what schedulers read); returns loss."""
        self._steps_taken += 1
        self._steps_decided_on_device |= found_inf is not None
        return loss

    def skip_next_step(self):
        """Make the next step() change nothing (it still runs its closure): for loops where the code that finds
        an overflow is not the code that calls step(), such as mp.amp.scale_loss (apex's loop)."""
        self._skip_next_step = True

    def _capture_blocker(self) -> str | None:
        """Why step() cannot run inside a CUDA graph capture, or None when it can."""
        return None

    def _fused_rule(self, group, params):
        """The group's AdamRule/SGDRule for this step (params: those with a gradient)."""
        raise NotImplementedError

    def _fused_state(self, rule) -> dict:
        """{kernel list name: state key} of the state the fused kernel reads and writes under this rule."""
        raise NotImplementedError

    # ---- the extension point (see the class docstring) ----
    @property
    def step_extension(self):
        """The installed step extension, or None."""
        return self._step_extension

    def set_step_extension(self, extension):
        """Install the one step extension of this optimizer (before its first step)."""
        missing = [m for m in ("unscale_pairs", "before_update", "after_update", "zero_grad")
                   if not callable(getattr(extension, m, None))]
        if missing:
            raise TypeError(f"a step extension needs the methods {missing}; {type(extension).__name__} lacks them")
        if self._step_extension is not None:
            raise RuntimeError(f"this optimizer already has a step extension ({type(self._step_extension).__name__})")
        self._step_extension = extension

    def unscale_pairs(self) -> list:
        """(gradient, destination) Tensor pairs that GradScaler.unscale_(self) divides by the scale.

        By default every gradient in place (one that cannot be written in place, such as
        the read-only broadcast gradient of a sum, first gets memory of its own); a step
        extension answers for the optimizer when there is one.
        """
        if self._step_extension is not None:
            return self._step_extension.unscale_pairs()
        grads = [writable_grad(p) for g in self.param_groups for p in g["params"] if p.grad is not None]
        return [(g, g) for g in grads]

    def _update(self, p, grad, state, group):
        raise NotImplementedError

    # ---- checkpoints: parameters are referred to by position, not identity ----
    def state_dict(self) -> dict:
        index = {}
        groups = []
        for g in self.param_groups:
            entry = {k: v for k, v in g.items() if k != "params"}
            entry["params"] = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                entry["params"].append(index[id(p)])
            groups.append(entry)
        counts = {k for k, kind in (self.state_layout or {}).items() if kind == "count"}
        state = {index[id(p)]: {k: _export_count(v) if k in counts else _export(v) for k, v in s.items()}
                 for g in self.param_groups for p in g["params"] if (s := self.state.get(p))}
        return {"state": state, "param_groups": groups}

    #: What one parameter's state holds, for load_state_dict's checks: key -> "tensor" (an array shaped like the
    #: parameter, or None) or "count" (an int >= 0). None (a subclass that does not say) accepts any state.
    state_layout: dict | None = None
    #: The keys a parameter's state must have once it has any.
    required_state: tuple = ()

    def load_state_dict(self, state_dict: dict):
        """Restore what state_dict() saved, parameters matched by position.

        Everything is checked before anything changes, so a failed load leaves the
        optimizer exactly as it was. State arrays move to their parameter's device;
        floating ones take the parameter's dtype, as in torch.
        """
        try:
            state, settings = self._checked_load(state_dict)
        except ValueError as exc:  # (the message names the call, and nothing is chained)
            raise ValueError(f"{type(self).__name__}.load_state_dict: {exc}") from None
        self.state = state
        for group, new in zip(self.param_groups, settings):
            group.update(new)

    def _checked_load(self, state_dict):
        """(the new state, each group's new settings) from state_dict, or ValueError naming what is wrong."""
        if not isinstance(state_dict, Mapping) or "param_groups" not in state_dict or "state" not in state_dict:
            raise ValueError("optimizer state_dict must be a dict with keys 'state' and 'param_groups', got "
                             + (f"keys {list(state_dict)}" if isinstance(state_dict, Mapping)
                                else f"a {type(state_dict).__name__}"))
        params, settings = self._checked_groups(state_dict["param_groups"])
        loaded = state_dict["state"]
        if not isinstance(loaded, Mapping):
            raise ValueError(f"optimizer state_dict['state'] must be a dict of parameter index -> state dict, got "
                             f"a {type(loaded).__name__}")
        state = {}
        for key, entry in loaded.items():
            where = f"state_dict['state'][{key!r}]"
            if not _is_int(key) or int(key) not in params:
                raise ValueError(f"{where}: the key must be one of the parameter indices in param_groups "
                                 f"({sorted(params)}), got {_show(key)}")
            if not isinstance(entry, Mapping):
                raise ValueError(f"{where} must be a dict of state name -> value, got a {type(entry).__name__}")
            if entry:
                state[params[int(key)]] = self._checked_state(entry, params[int(key)], where)
        return state, settings

    def _checked_groups(self, groups):
        """({saved index: parameter}, each group's new settings) from the saved param_groups."""
        if not isinstance(groups, (list, tuple)) or not all(isinstance(g, Mapping) for g in groups):
            raise ValueError("optimizer state_dict['param_groups'] must be a list of dicts (one per group)")
        if len(groups) != len(self.param_groups):
            raise ValueError(f"loaded state has {len(groups)} parameter groups, this optimizer has "
                             f"{len(self.param_groups)}")
        params, settings = {}, []
        for i, (mine, theirs) in enumerate(zip(self.param_groups, groups)):
            where = f"state_dict['param_groups'][{i}]"
            indices = theirs.get("params")
            if not isinstance(indices, (list, tuple)) or not all(_is_int(k) for k in indices):
                raise ValueError(f"{where}['params'] must be a list of parameter indices (ints), got "
                                 f"{_show(indices)}")
            if len(mine["params"]) != len(indices):
                raise ValueError(f"a loaded parameter group has {len(indices)} params, the "
                                 f"optimizer's has {len(mine['params'])}")
            for k, p in zip(indices, mine["params"]):
                if int(k) in params:
                    raise ValueError(f"{where}['params'] repeats parameter index {int(k)}")
                params[int(k)] = p
            for key, value in theirs.items():
                if key in mine and key != "params":
                    check_like(mine[key], value, f"{where}[{key!r}]")
            settings.append({k: copy.deepcopy(v) for k, v in theirs.items() if k != "params"})
        return params, settings

    def _checked_state(self, entry, p, where):
        """One parameter's loaded state, checked against state_layout and converted for p."""
        layout = self.state_layout
        missing = [k for k in self.required_state if k not in entry]
        if missing:
            raise ValueError(f"{where} lacks {missing}; a {type(self).__name__} state holds "
                             f"{sorted(layout or self.required_state)}")
        out = {}
        for k, v in entry.items():
            kind = None if layout is None else layout.get(k)
            if layout is not None and kind is None:
                raise ValueError(f"{where} has the unknown key {_show(k)}; a {type(self).__name__} state holds "
                                 f"{sorted(layout)} (is it another optimizer's state?)")
            if kind == "count":
                if not _is_int(v) or v < 0:
                    raise ValueError(f"{where}[{k!r}] must be an int >= 0 (a step count), got {_show(v)}")
                out[k] = int(v)
            elif kind == "tensor" and v is not None:
                out[k] = _import_array(v, p, f"{where}[{k!r}]")
            else:
                out[k] = _import(v, p)
        return out

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"  group {i}: " + ", ".join(f"{k}={v}" for k, v in g.items() if k != "params"))
        return "\n".join(lines + [")"])


class _Undo:
    """Takes a per-tensor step back on the device where found_inf is set: the parameter and its state are
    restored (a host count the step moved to the device, as Adam's after a load_state_dict, is filled back in),
    and state the step created is left at zero (as a first step that never happened: SGD's next momentum
    buffer is then (1 - dampening) * d, as after a skipped fused step). A copy and a select per array."""

    def __init__(self, param, state: dict):
        self.param, self.state = param, state
        self.saved = {"": param.copy(), **{k: v.copy() if is_array(v) else v for k, v in state.items()}}

    def where(self, skip) -> None:
        """Restore where skip (a 0-d bool device array: found_inf is set) holds."""
        xp = array_module(self.param)
        xp.copyto(self.param, self.saved[""], where=skip)
        for key, value in self.state.items():
            if is_array(value):
                before = self.saved.get(key)
                if before is None:
                    before = xp.zeros_like(value)
                elif not is_array(before):  # a host number the step turned into a device array
                    before = xp.full_like(value, before)
                xp.copyto(value, before, where=skip)


def zero_grads(tensors, set_to_none=True):
    """Clear the .grad of each tensor: drop it (default), or zero it in place (a version bump)."""
    for t in tensors:
        if t.grad is None:
            continue
        if set_to_none:
            t.grad = None
        else:
            t.grad._array[...] = 0
            t.grad._bump_version()


def writable_grad(p, contiguous=False) -> Tensor:
    """p.grad, replaced by a copy first when it cannot be written in place (a broadcast view: read-only,
    or with a zero stride, as the gradient of a sum can be), or, if asked, is not contiguous."""
    data = p.grad._array
    if (0 in data.strides[:data.ndim] and data.size > 1 or not getattr(data.flags, "writeable", True)
            or contiguous and not data.flags.c_contiguous):
        with on_device(p.grad.device):
            p.grad = Tensor._wrap(data.copy(order="C"))
    return p.grad


def _export(v):
    return Tensor._wrap(v.copy()) if is_array(v) else copy.deepcopy(v)


def _export_count(v) -> int:
    """A step count as an int; a fused optimizer keeps it in a one-element array on the device (a read)."""
    return int(to_device(v, CPU).reshape(-1)[0]) if is_array(v) else int(v)


def _import(v, p):
    """A state value of an optimizer that does not declare its layout: arrays move to p's device, as they are."""
    if isinstance(v, Tensor):
        v = v._array
    if is_array(v):
        return to_device(v, p.device).copy()
    return copy.deepcopy(v)


def _import_array(v, p, where):
    """A per-parameter state array (a moment, a momentum buffer): p's shape, floating; kept in p's dtype, on p's
    device."""
    array = v._array if isinstance(v, Tensor) else v
    if not is_array(array):
        raise ValueError(f"{where} must be a tensor shaped like its parameter {tuple(p.shape)}, got {_show(v)}")
    if tuple(array.shape) != tuple(p.shape):
        raise ValueError(f"{where} has shape {tuple(array.shape)}, its parameter has shape {tuple(p.shape)}")
    if not _dt.is_floating(array.dtype):
        raise ValueError(f"{where} has dtype {array.dtype.name}; optimizer state is floating point, like its "
                         f"parameter ({p.dtype.name})")
    return to_device(array, p.device).astype(p.dtype, copy=True)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _show(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_real(who, **values):
    """Raise TypeError unless every value is a real number (not a bool): hyper-parameters, checked before they
    are compared or used."""
    for key, value in values.items():
        if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{who}: {key} must be a real number, got {_show(value)}")


def check_like(current, value, where):
    """Raise ValueError unless ``value`` can stand in for the setting ``current``: a bool for a bool, a real
    number for a number, a list or tuple of the same length of such for a list or tuple. Any other current
    value (None, a string, a user's object) sets no expectation. Used by every load_state_dict in mp.optim.
    """
    if isinstance(current, (bool, np.bool_)):
        ok, expected = isinstance(value, (bool, np.bool_)), "a bool"
    elif isinstance(current, numbers.Real):
        ok, expected = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)), "a number"
    elif isinstance(current, (list, tuple)):
        ok = isinstance(value, (list, tuple)) and len(value) == len(current)
        expected = f"a list or tuple of length {len(current)}"
        for i, (c, v) in enumerate(zip(current, value) if ok else ()):
            check_like(c, v, f"{where}[{i}]")
    else:
        ok, expected = True, None
    if not ok:
        raise ValueError(f"{where} is {_show(value)}, expected {expected} (the current value is {_show(current)})")
