"""Adam and AdamW with torch.optim's update rules, statement for statement.

One step for a parameter p with gradient g (torch's single-tensor Adam):

    g = -g                                    if maximize
    step += 1
    p = p * (1 - lr * weight_decay)           AdamW (decoupled weight decay)
    g = g + weight_decay * p                  Adam (L2 penalty folded into the gradient)
    m = lerp(m, g, 1 - beta1)                 first moment
    v = v * beta2 + (1 - beta2) * g * g       second moment
    v_max = max(v_max, v)                     amsgrad only; then v_max replaces v below
    denom = sqrt(v) / sqrt(1 - beta2**step) + eps
    p = p + (-lr / (1 - beta1**step)) * m / denom

The state (m, v, v_max) has the parameter's dtype and device, so float32
parameters keep float32 state. Each line is one PyTorch kernel: for
float16/bfloat16 tensors it computes in float32 and rounds once when it
stores, which is what PyTorch's kernels do ("opmath").

fused=True runs the same lines as one kernel over all parameters of a dtype
(kernels/multi_tensor_optimizers.cu, twin in mixprec.amp._reference): each
value is rounded once, when stored; the step count lives on the device, as
a one-element int64 array in state["step"] (state_dict() still saves an int),
and the bias corrections beta**step are computed there, by squaring. On a
GPU the per-tensor step keeps its count on the device too (its bias
corrections are float64 device arithmetic), so a GradScaler can skip it there.
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from .. import dtypes as _dt
from ..amp._layout import AdamRule
from ..backend import array_module, is_array
from .optimizer import Optimizer, check_real


def _opmath(a):
    """The array a kernel computes on: float32 for half-precision storage."""
    return a.astype(np.float32) if a.dtype in _dt.LOW_PRECISION else a


def _store(dst, value):
    """Write a kernel's result into dst's memory, rounding to dst's dtype once."""
    dst[...] = value.astype(dst.dtype, copy=False)


def _as(c, value):
    """A host float, or a 0-d device array (a bias correction computed from the step count there), as type c."""
    return value.astype(c) if is_array(value) else c(value)


def _lerp(start, end, weight):
    """start + weight * (end - start), in torch's two-sided form (exact at weight 0 and 1)."""
    if abs(weight) < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1 - weight)


class Adam(Optimizer):
    """Adam (Kingma & Ba), with torch's defaults and options.

    weight_decay adds an L2 penalty to the gradient; for decoupled weight
    decay use AdamW (or decoupled_weight_decay=True). amsgrad keeps the
    running maximum of the second moment; maximize ascends instead.
    fused=True: one multi-tensor kernel per dtype group and step (see the
    module docstring, and Optimizer for the GradScaler contract).
    """

    state_layout = {"step": "count", "exp_avg": "tensor", "exp_avg_sq": "tensor", "max_exp_avg_sq": "tensor"}
    state_on_device = True  # on a GPU the step count is a device array too (on the CPU a host read is free)
    required_state = ("step", "exp_avg", "exp_avg_sq")  # max_exp_avg_sq appears once amsgrad steps
    fused_kind = "ADAM"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 maximize=False, decoupled_weight_decay=False, fused=False):
        name = type(self).__name__
        check_real(name, lr=lr, eps=eps, weight_decay=weight_decay)
        if isinstance(betas, (str, bytes)) or not isinstance(betas, Iterable):
            raise TypeError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        betas = tuple(betas)
        check_real(name, **{f"betas[{i}]": b for i, b in enumerate(betas)})
        if not 0.0 <= lr:
            raise ValueError(f"{name}: invalid learning rate {lr} (must be >= 0)")
        if not 0.0 <= eps:
            raise ValueError(f"{name}: invalid epsilon {eps} (must be >= 0)")
        if len(betas) != 2:
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {betas!r}")
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"{name}: invalid beta parameter at index {i}: {b} (must be in [0, 1))")
        if not 0.0 <= weight_decay:
            raise ValueError(f"{name}: invalid weight_decay {weight_decay} (must be >= 0)")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, decoupled_weight_decay=decoupled_weight_decay), fused=fused)

    def _capture_blocker(self):
        if not self.fused and any(p.device.type == "cpu" for g in self.param_groups for p in g["params"]):
            return "its step count and bias corrections are kept on the host (for parameters on the CPU)"
        return None

    def _fused_rule(self, group, params):
        beta1, beta2 = group["betas"]
        return AdamRule(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
                        amsgrad=bool(group["amsgrad"]), maximize=bool(group["maximize"]),
                        decoupled_weight_decay=bool(group["decoupled_weight_decay"]))

    def _fused_state(self, rule):
        # the step count lives on the device (int64), where count_steps adds one
        uses = {"EXP_AVG": "exp_avg", "EXP_AVG_SQ": "exp_avg_sq", "STEP": "step"}
        return dict(uses, MAX_EXP_AVG_SQ="max_exp_avg_sq") if rule.amsgrad else uses

    def _update(self, p, grad, state, group):
        xp = array_module(p._array)
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        if not state:
            state["step"] = 0
            state["exp_avg"] = xp.zeros_like(p._array)
            state["exp_avg_sq"] = xp.zeros_like(p._array)
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = xp.zeros_like(p._array)
        c = np.float32 if p.dtype in _dt.LOW_PRECISION else p.dtype.type  # the kernels' scalar type
        param, exp_avg, exp_avg_sq = p._array, state["exp_avg"], state["exp_avg_sq"]
        g = -grad if group["maximize"] else grad
        if xp is not np and not is_array(state["step"]):  # on a GPU the count lives there (so a step can be undone)
            state["step"] = xp.full(1, state["step"], dtype=np.int64)
        state["step"] += 1
        step = state["step"]
        if wd != 0:
            if group["decoupled_weight_decay"]:
                _store(param, _opmath(param) * c(1 - lr * wd))
            else:
                g = (_opmath(g) + c(wd) * _opmath(param)).astype(grad.dtype, copy=False)
        g = _opmath(g)
        _store(exp_avg, _lerp(_opmath(exp_avg), g, c(1 - beta1)))
        _store(exp_avg_sq, _opmath(exp_avg_sq) * c(beta2))
        _store(exp_avg_sq, _opmath(exp_avg_sq) + c(1 - beta2) * g * g)
        if is_array(step):  # float64 on the device, then the kernels' scalar type
            bias_correction1 = 1 - xp.power(np.float64(beta1), step.reshape(()))
            bias_correction2_sqrt = xp.sqrt(1 - xp.power(np.float64(beta2), step.reshape(())))
            step_size = lr / bias_correction1
        else:
            bias_correction1 = 1 - beta1 ** step
            bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
            step_size = lr / bias_correction1
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"]
            xp.maximum(second, exp_avg_sq, out=second)
        else:
            second = exp_avg_sq
        dt = p.dtype
        denom = xp.sqrt(_opmath(second)).astype(dt, copy=False)
        denom = (_opmath(denom) / _as(c, bias_correction2_sqrt)).astype(dt, copy=False)
        denom = (_opmath(denom) + c(eps)).astype(dt, copy=False)
        _store(param, _opmath(param) + _as(c, -step_size) * _opmath(exp_avg) / _opmath(denom))


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr * weight_decay before the Adam step.

    Defaults follow torch.optim.AdamW (weight_decay=1e-2).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, fused=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize, decoupled_weight_decay=True, fused=fused)
