"""Random samplers: normal, bernoulli, multinomial, randint_like, and the in-place fills Tensor.uniform_,
normal_, exponential_, cauchy_, geometric_, log_normal_ and bernoulli_.

Every draw comes from mixprec's generator (mixprec/random.py), on the host, and is then moved to the tensor's
device, so mp.manual_seed gives the same numbers on every device (they differ from torch's generator's).
Values are drawn in float64 and rounded once to the tensor's dtype.

Gradients follow torch: a sample is not differentiated through its parameters (normal's mean and std,
bernoulli's probabilities get zero gradients, the output still records the op); an in-place fill overwrites
the tensor, so what it held gets a zero gradient. None of these is on an autocast list.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, devices
from ..random import _rng_state
from ..tensor import Tensor
from ..creation import zeros_like
from .inplace import _overwrite, apply
from .registry import register


def _gen():
    return _rng_state["np"]


def _no_generator(generator, name):
    if generator is not None:
        raise ValueError(f"{name}: mixprec has one generator (seeded by mp.manual_seed); pass generator=None")


def _zero_grads(ctx, g):
    """Zero gradients (torch's rule for samplers), as the output's (each is summed into its input's shape)."""
    return tuple(zeros_like(g) if ctx.needs_input_grad[i] else None for i in range(len(ctx.needs_input_grad)))


def _zero_tangent(ctx, *tangents):
    return zeros_like(ctx.output)


# ---------------------------------------------------------------- normal, bernoulli
@register("normal", promote=(0, 1), saves=("output",))
def normal(ctx, mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, layout=None,
           requires_grad=False):
    """Samples of N(mean, std^2): mean and std tensors (broadcast) or numbers; with two numbers, ``size`` gives
    the shape (and dtype/device the tensor's)."""
    _no_generator(generator, "normal")
    if layout not in (None, "strided"):
        raise ValueError(f"normal: only the strided layout exists in mixprec, got {layout!r}")
    if not _dt.is_floating(mean.dtype):
        raise TypeError(f"normal: expected floating mean and std, got {mean.dtype.name}")
    if bool((std < 0).any()) if hasattr(std, "any") else std < 0:
        raise ValueError("normal: std must be >= 0")
    try:
        shape = np.broadcast_shapes(mean.shape, np.shape(std))
    except ValueError:
        raise RuntimeError(f"normal: mean of shape {tuple(mean.shape)} and std of shape {tuple(np.shape(std))} do "
                           "not broadcast") from None
    if size is not None:
        if shape != ():
            raise ValueError("normal: size is only given with a number mean and std")
        shape = tuple(size)
    out_dtype = _dt.as_dtype(dtype) if dtype is not None else mean.dtype
    z = devices.to_device(_gen().standard_normal(shape), devices.as_device(device) if device is not None
                          else devices.device_of_array(mean))
    xp = array_module(z)
    out = xp.asarray(mean, dtype=np.float64) + xp.asarray(std, dtype=np.float64) * z
    return out.astype(out_dtype)


normal.grad(_zero_grads)
normal.jvp(_zero_tangent)


@register("bernoulli", methods=("bernoulli",), saves=("output",))
def bernoulli(ctx, input, p=None, *, generator=None):
    """1 with probability ``input`` (or ``p`` for every element), else 0, in input's dtype."""
    _no_generator(generator, "bernoulli")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"bernoulli: expected a floating-point input, got {input.dtype.name}")
    u = devices.to_device(_gen().random(input.shape), devices.device_of_array(input))
    if p is None:
        if input.size and bool(((input < 0) | (input > 1)).any()):
            raise ValueError("bernoulli: the probabilities in input must be in [0, 1]")
        return (u < input.astype(np.float64)).astype(input.dtype)
    _probability(p, "bernoulli")
    return (u < p).astype(input.dtype)


bernoulli.grad(_zero_grads)
bernoulli.jvp(_zero_tangent)


def _probability(p, name, low_open=False, high_open=False):
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not ((0 < p) if low_open else (0 <= p)) \
            or not ((p < 1) if high_open else (p <= 1)):
        interval = f"{'(' if low_open else '['}0, 1{')' if high_open else ']'}"
        raise ValueError(f"{name}: p must be a number in {interval}, got {p!r}")


# ---------------------------------------------------------------- multinomial, randint_like
@register("multinomial", methods=("multinomial",), differentiable=False)
def multinomial(ctx, input, num_samples, replacement=False, *, generator=None):
    """Indices (int64) of num_samples categories drawn per row of non-negative weights (1-D or 2-D input),
    with or without replacement."""
    _no_generator(generator, "multinomial")
    if input.ndim not in (1, 2) or not _dt.is_floating(input.dtype):
        raise ValueError(f"multinomial: expected a 1-D or 2-D floating tensor of weights, got shape "
                         f"{tuple(input.shape)} {input.dtype.name}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    weights = np.atleast_2d(devices.to_host(input)).astype(np.float64)
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise RuntimeError("multinomial: the weights must be finite and non-negative")
    if (weights.sum(1) == 0).any():
        raise RuntimeError("multinomial: a row of weights sums to 0")
    if not replacement and num_samples > weights.shape[1]:
        raise RuntimeError(f"multinomial: cannot draw {num_samples} samples without replacement from "
                           f"{weights.shape[1]} categories")
    if not replacement and (np.count_nonzero(weights, 1) < num_samples).any():
        raise RuntimeError(f"multinomial: a row has fewer than {num_samples} categories of non-zero weight to draw "
                           "without replacement")
    gen = _gen()
    out = np.stack([gen.choice(w.size, num_samples, replace=bool(replacement), p=w / w.sum()) for w in weights]
                   or [np.zeros((0, num_samples), dtype=np.int64)]).reshape(-1, num_samples)  # (no rows: none)
    out = out.astype(np.int64)
    return devices.to_device(out if input.ndim == 2 else out[0], devices.device_of_array(input))


@register("randint_like", differentiable=False, promote=())
def randint_like(ctx, input, low=0, high=None, *, dtype=None, device=None, layout=None, requires_grad=False,
                 memory_format=None):
    """Integers drawn uniformly from [low, high) in a tensor of input's shape (and dtype, unless given);
    randint_like(input, high) as torch."""
    if high is None:
        low, high = 0, low
    for what, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"randint_like: {what} must be an int, got {type(v).__name__}")
    if low >= high:
        raise ValueError(f"randint_like: expected low < high, got low={low}, high={high}")
    out = _gen().integers(low, high, size=input.shape, dtype=np.int64)
    out_dtype = _dt.as_dtype(dtype) if dtype is not None else input.dtype
    return devices.to_device(out, devices.as_device(device) if device is not None
                             else devices.device_of_array(input)).astype(out_dtype)


# ---------------------------------------------------------------- in-place fills
def _fill_with(name, draw, floating_only=True):
    """Tensor.<name>(*params): overwrite self with draw(shape, *params) (a float64 NumPy array)."""
    def method(self, *params, generator=None, **named):
        _no_generator(generator, name)
        if floating_only and not _dt.is_floating(self.dtype):
            raise TypeError(f"{name}: expected a floating-point tensor, got {self.dtype.name}")
        value = devices.to_device(draw(tuple(self.shape), *params, **named), self.device).astype(self.dtype)
        return apply(self, name, lambda t: _overwrite(t, Tensor._wrap(value)),
                     lambda t: t._write(name, value, any_cast=True), others=[])
    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    method.__doc__ = draw.__doc__
    return method


def _uniform(shape, a=0.0, b=1.0):
    """Fill with samples of U[from, to)."""
    if a > b:
        raise ValueError(f"uniform_: expected from <= to, got from={a}, to={b}")
    return a + (b - a) * _gen().random(shape)


def _normal(shape, mean=0.0, std=1.0):
    """Fill with samples of N(mean, std^2)."""
    if std < 0:
        raise ValueError(f"normal_: expected std >= 0, got {std}")
    return _gen().normal(mean, std, shape)


def _exponential(shape, lambd=1.0):
    """Fill with samples of the exponential distribution of rate lambd."""
    if lambd <= 0:
        raise ValueError(f"exponential_: expected lambd > 0, got {lambd}")
    return _gen().exponential(1.0 / lambd, shape)


def _cauchy(shape, median=0.0, sigma=1.0):
    """Fill with samples of the Cauchy distribution (median, scale sigma)."""
    if sigma <= 0:
        raise ValueError(f"cauchy_: expected sigma > 0, got {sigma}")
    return median + sigma * _gen().standard_cauchy(shape)


def _log_normal(shape, mean=1.0, std=2.0):
    """Fill with samples of exp(N(mean, std^2))."""
    if std <= 0:
        raise ValueError(f"log_normal_: expected std > 0, got {std}")
    return _gen().lognormal(mean, std, shape)


def _geometric(shape, p):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    _probability(p, "geometric_", low_open=True, high_open=True)
    return _gen().geometric(p, shape).astype(np.float64)


def _bernoulli(shape, p=0.5):
    """Fill with 1 with probability p (a number, or a tensor of probabilities that broadcasts), else 0."""
    if isinstance(p, Tensor):
        probabilities = devices.to_host(p._array).astype(np.float64)
        if ((probabilities < 0) | (probabilities > 1)).any():
            raise ValueError("bernoulli_: the probabilities must be in [0, 1]")
        return (_gen().random(shape) < np.broadcast_to(probabilities, shape)).astype(np.float64)
    _probability(p, "bernoulli_")
    return (_gen().random(shape) < p).astype(np.float64)


Tensor.uniform_ = _fill_with("uniform_", _uniform)
Tensor.normal_ = _fill_with("normal_", _normal)
Tensor.exponential_ = _fill_with("exponential_", _exponential)
Tensor.cauchy_ = _fill_with("cauchy_", _cauchy)
Tensor.log_normal_ = _fill_with("log_normal_", _log_normal)
Tensor.geometric_ = _fill_with("geometric_", _geometric, floating_only=False)
Tensor.bernoulli_ = _fill_with("bernoulli_", _bernoulli, floating_only=False)
