"""Automatic differentiation (torch.autograd's API).

Reverse mode: ``backward``/``grad`` run the graph recorded by ops (engine.py,
graph.py); custom ops subclass ``Function``. Forward mode: ``forward_ad``. The
functional API (jacobian, hessian, vjp, jvp, vhp, hvp): ``functional``.
Checks: ``gradcheck``/``gradgradcheck``. Switches: grad_mode.py.
"""
from . import forward_ad, functional, graph  # noqa: F401
from .engine import backward, grad  # noqa: F401
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .grad_mode import (detect_anomaly, enable_grad, inference_mode, is_anomaly_check_nan_enabled,  # noqa: F401
                        is_anomaly_enabled, is_grad_enabled, is_inference_mode_enabled, no_grad, set_detect_anomaly,
                        set_grad_enabled, set_multithreading_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from .graph import Node  # noqa: F401
