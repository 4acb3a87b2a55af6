"""Layers: thin Modules that own parameters and call the functional ops.

Every layer checks the shape of what it is given and says what it expected,
so a mistake shows up as "Linear(in_features=64): expected input[..., 64]"
rather than deep inside a matrix product. The math, the gradients and the
autocast policy all live in the ops (mp.nn.functional), once.
"""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..tensor import tensor
from ..creation import empty, ones, zeros
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter
from ..autograd.grad_mode import no_grad
from ..amp.fp8 import autocast as _fp8


def _factory(device, dtype):
    return dict(device=device, dtype=dtype if dtype is not None else _dt.float32)


def _weight_and_bias(module, weight_shape, bias, out_features, device, dtype):
    """Give ``module`` a weight Parameter of ``weight_shape`` and a bias of (out_features,), or bias None."""
    kw = _factory(device, dtype)
    module.weight = Parameter(empty(*weight_shape, **kw))
    module.register_parameter("bias", Parameter(empty(out_features, **kw)) if bias else None)


def _kaiming_init(weight, bias):
    """torch's init of Linear and convolutions: weight ~ kaiming_uniform(a=sqrt(5)), which is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias from the same range."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init.calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        init.uniform_(bias, -bound, bound)


def _expect(cond, layer, what, x):
    if not cond:
        raise ValueError(f"{layer}: expected {what}, got input of shape {tuple(x.shape)}")


# ---------------------------------------------------------------- dense
class Linear(Module):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features).

    Initialised as PyTorch does: weight ~ kaiming_uniform(a=sqrt(5)), i.e.
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and bias from the same range.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        _weight_and_bias(self, (out_features, in_features), bias, out_features, device, dtype)
        self.reset_parameters()
        self.register_load_state_dict_pre_hook(_fp8.load_state_hook)  # a checkpoint's FP8 state makes its buffers

    def reset_parameters(self):
        _kaiming_init(self.weight, self.bias)

    def forward(self, input):
        _expect(input.ndim >= 1 and input.shape[-1] == self.in_features, self.__repr__(),
                f"input[..., {self.in_features}]", input)
        if _fp8.active() is not None:  # inside mp.amp.fp8_autocast: the GEMM on FP8 values
            return _fp8.linear(self, input)
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """y = x1^T A x2 + b for each output feature: weight (out_features, in1_features, in2_features).

    Initialised as torch does: weight and bias ~ U(-1/sqrt(in1_features), 1/sqrt(in1_features)).
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        _weight_and_bias(self, (out_features, in1_features, in2_features), bias, out_features, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        for name, x, n in (("input1", input1, self.in1_features), ("input2", input2, self.in2_features)):
            _expect(x.ndim >= 1 and x.shape[-1] == n, repr(self), f"{name}[..., {n}]", x)
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class Identity(Module):
    def forward(self, input):
        return input


class Flatten(Module):
    """Merge dims start_dim..end_dim (by default all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        n = max(input.ndim, 1)
        _expect(-n <= self.start_dim < n and -n <= self.end_dim < n, repr(self),
                f"an input that has dims {self.start_dim} and {self.end_dim}", input)
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Embedding(Module):
    """A lookup table: integer indices -> rows of weight (num_embeddings, embedding_dim), weight ~ N(0, 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, device=None,
                 dtype=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} must be within num_embeddings "
                                 f"({num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = Parameter(empty(num_embeddings, embedding_dim, **_factory(device, dtype)))
        self.reset_parameters()

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


# ---------------------------------------------------------------- normalisation
class LayerNorm(Module):
    """Normalise over the last len(normalized_shape) dims, then scale by weight (ones) and shift by bias (zeros)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        kw = _factory(device, dtype)
        self.register_parameter("weight", Parameter(ones(*self.normalized_shape, **kw)) if elementwise_affine else None)
        self.register_parameter("bias", Parameter(zeros(*self.normalized_shape, **kw))
                                if elementwise_affine and bias else None)

    def forward(self, input):
        n = len(self.normalized_shape)
        _expect(tuple(input.shape[input.ndim - n:]) == self.normalized_shape and input.ndim >= n, repr(self),
                f"input[..., {', '.join(map(str, self.normalized_shape))}]", input)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    """Divide by the root mean square over the last len(normalized_shape) dims, then scale by weight (ones).

    eps=None uses the machine epsilon of the dtype the math runs in (float32's for half inputs), as torch.
    """

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.register_parameter("weight", Parameter(ones(*self.normalized_shape, **_factory(device, dtype)))
                                if elementwise_affine else None)

    def forward(self, input):
        n = len(self.normalized_shape)
        _expect(tuple(input.shape[input.ndim - n:]) == self.normalized_shape and input.ndim >= n, repr(self),
                f"input[..., {', '.join(map(str, self.normalized_shape))}]", input)
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _BatchNorm(Module):
    _dims = ()  # input ranks the subclass accepts

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        kw = _factory(device, dtype)
        if affine:
            self.weight = Parameter(ones(num_features, **kw))
            self.bias = Parameter(zeros(num_features, **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, **kw))
            self.register_buffer("running_var", ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=_dt.int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def forward(self, input):
        dims = " or ".join(f"{d}-D" for d in self._dims)
        _expect(input.ndim in self._dims and input.shape[1] == self.num_features, repr(self),
                f"a {dims} input with {self.num_features} channels in dim 1", input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / int(self.num_batches_tracked.item())
        use_batch_stats = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) inputs, per channel C."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) inputs, per channel C."""
    _dims = (4,)


class Dropout(Module):
    """In training mode zero each element with probability p and scale the rest by 1/(1-p); identity in eval."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"Dropout: p must be a probability between 0 and 1, got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


# ---------------------------------------------------------------- activations
class ReLU(Module):
    def forward(self, input):
        return F.relu(input)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate='{self.approximate}'"


class SiLU(Module):
    """x * sigmoid(x) (also called swish)."""

    def forward(self, input):
        return F.silu(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class PReLU(Module):
    """x where x > 0, else weight * x, with a learned slope: one shared (num_parameters=1) or one per channel."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(empty(num_parameters, **_factory(device, dtype)))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softmax(Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, dim=self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, dim=self.dim)


