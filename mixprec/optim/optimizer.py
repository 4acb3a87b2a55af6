"""Optimizer base: parameter groups, per-parameter state, state_dict."""
from __future__ import annotations

import copy

from .. import dtypes as _dt
from ..autograd.grad_mode import enable_grad, no_grad
from ..backend import is_array, to_device
from ..tensor import Tensor, zero_grads


class Optimizer:
    """Holds param_groups (dicts with "params" and hyper-parameters) and per-parameter state.

    Subclasses implement ``_update(p, grad, state, group)`` on raw arrays; step()
    does the bookkeeping. Updates write into parameter memory in place and bump
    each parameter's version counter, so stale autocast casts are never reused.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        self.state: dict = {}
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

    @no_grad()
    def step(self, closure=None):
        """Apply one update to every parameter that has a gradient; returns closure() if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                self._update(p, p.grad.data, self.state.setdefault(p, {}), group)
                p._bump_version()
        return loss

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


def _export(v):
    return Tensor._wrap(v.copy()) if is_array(v) else copy.deepcopy(v)


def _import(v, p):
    """State arrays come back on the parameter's device (their dtype is kept)."""
    if isinstance(v, Tensor):
        v = v.data
    if is_array(v):
        return to_device(v, p.device).copy()
    return copy.deepcopy(v)
