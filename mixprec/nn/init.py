"""Weight initialisation, in place, with PyTorch's formulas and mixprec's generator.

Samples are drawn on the host in float32 (float64 for float64 tensors), as
mp.rand/mp.randn do, so ``mp.manual_seed(s)`` gives the same weights on every
device, then rounded to the tensor's dtype.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..autograd.grad_mode import no_grad
from ..random import _rng_state
from ..tensor import Tensor


def _check(tensor, name):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(tensor).__name__}")
    if not _dt.is_floating(tensor.dtype):
        raise TypeError(f"{name}: expected a floating-point tensor, got {tensor.dtype.name}")


def _draw(tensor, kind):
    dtype = np.float64 if tensor.dtype == _dt.float64 else np.float32
    gen = _rng_state["np"]
    if kind == "uniform":
        return gen.random(tensor.shape, dtype=dtype)
    return gen.standard_normal(tensor.shape, dtype=dtype)


def _fill(tensor, array):
    with no_grad():
        tensor._assign("init", array)
    return tensor


def uniform_(tensor, a: float = 0.0, b: float = 1.0):
    """Fill with samples from U(a, b)."""
    _check(tensor, "uniform_")
    if not a <= b:
        raise ValueError(f"uniform_: expected a <= b, got a={a}, b={b}")
    u = _draw(tensor, "uniform")
    return _fill(tensor, u * u.dtype.type(b - a) + u.dtype.type(a))


def normal_(tensor, mean: float = 0.0, std: float = 1.0):
    """Fill with samples from N(mean, std**2)."""
    _check(tensor, "normal_")
    if std < 0:
        raise ValueError(f"normal_: std must be >= 0, got {std}")
    n = _draw(tensor, "normal")
    return _fill(tensor, n * n.dtype.type(std) + n.dtype.type(mean))


def constant_(tensor, val: float):
    _check(tensor, "constant_")
    return _fill(tensor, val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The gain PyTorch recommends for a nonlinearity (sqrt(2) for relu, 5/3 for tanh, ...)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight: (in, out) features times the receptive field size for convs."""
    if tensor.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor with at least 2 dims, got shape {tuple(tensor.shape)}")
    receptive = int(np.prod(tensor.shape[2:])) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
    """He initialisation: U(-b, b) with b = gain * sqrt(3 / fan)."""
    _check(tensor, "kaiming_uniform_")
    fan = _fan(tensor, mode)
    if fan == 0:
        return tensor
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
    """He initialisation: N(0, std**2) with std = gain / sqrt(fan)."""
    _check(tensor, "kaiming_normal_")
    fan = _fan(tensor, mode)
    if fan == 0:
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


def xavier_uniform_(tensor, gain: float = 1.0):
    """Glorot initialisation: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out))."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain: float = 1.0):
    """Glorot initialisation: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
