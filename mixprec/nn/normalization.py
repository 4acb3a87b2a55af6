"""InstanceNorm1d/2d/3d and LocalResponseNorm (their functions are in ops/nn_norms_losses.py)."""
from __future__ import annotations

from .. import dtypes as _dt
from ..creation import ones, zeros
from . import functional as F
from .module import Module
from .parameter import Parameter


class _InstanceNorm(Module):
    _batched_ndim = 0  # the rank of a batched input: (N, C, *spatial)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        kw = dict(device=device, dtype=dtype if dtype is not None else _dt.float32)
        if affine:
            self.weight, self.bias = Parameter(ones(num_features, **kw)), Parameter(zeros(num_features, **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.register_buffer("running_mean", zeros(num_features, **kw) if track_running_stats else None)
        self.register_buffer("running_var", ones(num_features, **kw) if track_running_stats else None)

    def forward(self, input):
        if input.ndim not in (self._batched_ndim - 1, self._batched_ndim):
            raise ValueError(f"{type(self).__name__}: expected a {self._batched_ndim - 1}-D (unbatched) or "
                             f"{self._batched_ndim}-D input, got shape {tuple(input.shape)}")
        if input.ndim == self._batched_ndim - 1:
            return self.forward(input.unsqueeze(0)).squeeze(0)
        if input.shape[1] != self.num_features and self.affine:
            raise ValueError(f"{type(self).__name__}: expected an input with {self.num_features} channels (dim 1), "
                             f"got shape {tuple(input.shape)}")
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               0.1 if self.momentum is None else self.momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    """Normalise each (sample, channel) of (N, C, L) or (C, L) inputs over L."""
    _batched_ndim = 3


class InstanceNorm2d(_InstanceNorm):
    """Normalise each (sample, channel) of (N, C, H, W) or (C, H, W) inputs over H and W."""
    _batched_ndim = 4


class InstanceNorm3d(_InstanceNorm):
    """Normalise each (sample, channel) of (N, C, D, H, W) or (C, D, H, W) inputs over D, H and W."""
    _batched_ndim = 5


class LocalResponseNorm(Module):
    """x / (k + alpha * mean of x^2 over ``size`` neighbouring channels)^beta."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
