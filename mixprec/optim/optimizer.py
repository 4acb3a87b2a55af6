"""Optimizer base: parameter groups, per-parameter state, state_dict."""
from __future__ import annotations

import copy

from .. import dtypes as _dt
from ..autograd.grad_mode import enable_grad, no_grad
from ..backend import is_array, on_device, to_device
from ..tensor import Tensor, zero_grads


class Optimizer:
    """Holds param_groups (dicts with "params" and hyper-parameters) and per-parameter state.

    Subclasses implement ``_update(p, grad, state, group)`` on raw arrays; step()
    does the bookkeeping (a subclass that overrides step() calls super().step()).
    Updates write into parameter memory in place and bump each parameter's version
    counter, so stale autocast casts are never reused.

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
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        self.state: dict = {}
        self._step_extension = None
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for g in params:
            self.add_param_group(g)

    def add_param_group(self, group: dict):
        group = dict(group)
        ps = group["params"]
        group["params"] = [ps] if isinstance(ps, Tensor) else list(ps)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer params must be Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf tensor (it is computed from others)")
            if not _dt.is_floating(p.dtype):
                raise TypeError(f"optimizer params must be floating point, got {p.dtype.name}")
            if id(p) in seen:
                raise ValueError("some parameters appear in more than one parameter group")
            seen.add(id(p))
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True):
        zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)
        if self._step_extension is not None:
            self._step_extension.zero_grad(set_to_none)

    @no_grad()
    def step(self, closure=None):
        """Apply one update to every parameter that has a gradient; returns closure() if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        extension = self._step_extension
        if extension is not None:
            extension.before_update()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                self._update(p, p.grad.data, self.state.setdefault(p, {}), group)
                p._bump_version()
        if extension is not None:
            extension.after_update()
        return loss

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
        state = {index[id(p)]: {k: _export(v) for k, v in s.items()}
                 for g in self.param_groups for p in g["params"] if (s := self.state.get(p))}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict):
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict or "state" not in state_dict:
            raise ValueError("optimizer state_dict must be a dict with keys 'state' and 'param_groups'")
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"loaded state has {len(groups)} parameter groups, this optimizer has "
                             f"{len(self.param_groups)}")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError(f"a loaded parameter group has {len(theirs['params'])} params, the "
                                 f"optimizer's has {len(mine['params'])}")
        params = {i: p for mine, theirs in zip(self.param_groups, groups)
                  for i, p in zip(theirs["params"], mine["params"])}
        self.state = {}
        for key, s in state_dict["state"].items():
            p = params[int(key)]
            self.state[p] = {k: _import(v, p) for k, v in s.items()}
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = copy.deepcopy(v)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"  group {i}: " + ", ".join(f"{k}={v}" for k, v in g.items() if k != "params"))
        return "\n".join(lines + [")"])


def writable_grad(p) -> Tensor:
    """p.grad, replaced by a copy first when it cannot be written in place (a broadcast view: read-only,
    or with a zero stride, as the gradient of a sum can be)."""
    data = p.grad.data
    if 0 in data.strides[:data.ndim] and data.size > 1 or not getattr(data.flags, "writeable", True):
        with on_device(p.grad.device):
            p.grad = Tensor._wrap(data.copy())
    return p.grad


def _export(v):
    return Tensor._wrap(v.copy()) if is_array(v) else copy.deepcopy(v)


def _import(v, p):
    """State arrays come back on the parameter's device (their dtype is kept)."""
    if isinstance(v, Tensor):
        v = v.data
    if is_array(v):
        return to_device(v, p.device).copy()
    return copy.deepcopy(v)
