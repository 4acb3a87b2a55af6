"""Stochastic gradient descent with torch's momentum rule."""
from __future__ import annotations

from .optimizer import Optimizer


class SGD(Optimizer):
    """p -= lr * d, where d folds in weight decay, momentum and Nesterov as torch.optim.SGD does:

    d = g + weight_decay * p;  buf = d (first step) or momentum * buf + (1 - dampening) * d;
    d = d + momentum * buf (nesterov) or buf.
    """

    state_layout = {"momentum_buffer": "tensor"}  # only with momentum; None (torch's, at momentum 0) means none

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr, momentum and weight_decay must be >= 0, got lr={lr}, "
                             f"momentum={momentum}, weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize))

    def _update(self, p, grad, state, group):
        t = p.dtype.type
        d = -grad if group["maximize"] else grad
        if group["weight_decay"]:
            d = d + t(group["weight_decay"]) * p.data
        m = group["momentum"]
        if m:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = d.copy()
            else:
                buf *= t(m)
                buf += t(1 - group["dampening"]) * d
            d = d + t(m) * buf if group["nesterov"] else buf
        p.data -= t(group["lr"]) * d
