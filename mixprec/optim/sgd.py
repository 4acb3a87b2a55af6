"""Stochastic gradient descent with torch's momentum rule."""
from __future__ import annotations

from ..amp._layout import SGDRule
from .optimizer import Optimizer, check_real


class SGD(Optimizer):
    """p -= lr * d, where d folds in weight decay, momentum and Nesterov as torch.optim.SGD does:

    d = g + weight_decay * p;  buf = d (first step) or momentum * buf + (1 - dampening) * d;
    d = d + momentum * buf (nesterov) or buf.

    fused=True: one multi-tensor kernel per dtype group and step (kernels/multi_tensor_optimizers.cu;
    see Optimizer for the GradScaler contract). As in torch's fused SGD, "first step" is decided for
    the whole group (no parameter has a buffer yet); the buffers start at zero, so a parameter that
    joins later, or a first step that a GradScaler skipped on the device, starts with
    buf = (1 - dampening) * d: exactly d with the default dampening=0. (torch's fused SGD leaves
    those buffers uninitialised.)
    """

    state_layout = {"momentum_buffer": "tensor"}  # only with momentum; None (torch's, at momentum 0) means none
    state_on_device = True
    fused_kind = "SGD"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False, *, fused=False):
        check_real("SGD", lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay)
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr, momentum and weight_decay must be >= 0, got lr={lr}, "
                             f"momentum={momentum}, weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize), fused=fused)

    def _fused_rule(self, group, params):
        momentum = group["momentum"]
        first = bool(momentum) and all(self.state.get(p, {}).get("momentum_buffer") is None for p in params)
        return SGDRule(lr=group["lr"], momentum=momentum, dampening=group["dampening"],
                       weight_decay=group["weight_decay"], nesterov=bool(group["nesterov"]),
                       maximize=bool(group["maximize"]), first_step=first)

    def _fused_state(self, rule):
        return {"MOMENTUM_BUFFER": "momentum_buffer"} if rule.momentum else {}

    def _update(self, p, grad, state, group):
        t = p.dtype.type
        d = -grad if group["maximize"] else grad
        if group["weight_decay"]:
            d = d + t(group["weight_decay"]) * p._array
        m = group["momentum"]
        if m:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d.copy()
            else:
                buf *= t(m)
                buf += t(1 - group["dampening"]) * d
            d = d + t(m) * buf if group["nesterov"] else buf
        p._array -= t(group["lr"]) * d
