"""Reverse-mode automatic differentiation."""
from .function import Function, FunctionCtx  # noqa: F401
from .functional import grad, gradcheck  # noqa: F401
from .grad_mode import (detect_anomaly, enable_grad, is_anomaly_enabled, is_grad_enabled,  # noqa: F401
                        no_grad, set_grad_enabled)
from .graph import Node  # noqa: F401
