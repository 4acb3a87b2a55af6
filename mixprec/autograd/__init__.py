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
                        set_grad_enabled)
from .grad_mode import _Switch
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from .graph import Node  # noqa: F401


class set_multithreading_enabled(_Switch):
    """torch's switch for running backward on one thread per device. mixprec's engine always runs backward on
    the calling thread, so both settings compute the same; accepted (checked, and a context manager or
    decorator) so ported code runs."""

    _bare_decorator = False

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_multithreading_enabled: mode must be True or False, got {mode!r}")
        self.mode = mode

    def _enter(self):
        pass

    def clone(self):
        return set_multithreading_enabled(self.mode)
