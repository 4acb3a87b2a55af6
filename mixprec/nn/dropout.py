"""Dropout's relatives as layers: Dropout1d/2d/3d (whole channels), AlphaDropout, FeatureAlphaDropout (their
functions are in ops/feature_dropout.py). Active in training mode only."""
from __future__ import annotations

from . import functional as F
from .module import Module


class _DropoutLayer(Module):
    _fn: str

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
            raise ValueError(f"{type(self).__name__}: p must be a probability between 0 and 1, got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return getattr(F, self._fn)(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutLayer):
    """Zero whole channels of (N, C, L) or (C, L) inputs with probability p; scale the rest by 1/(1-p)."""
    _fn = "dropout1d"


class Dropout2d(_DropoutLayer):
    """Zero whole channels of (N, C, H, W) inputs with probability p; scale the rest by 1/(1-p)."""
    _fn = "dropout2d"


class Dropout3d(_DropoutLayer):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs with probability p; scale the rest."""
    _fn = "dropout3d"


class AlphaDropout(_DropoutLayer):
    """Alpha dropout: keeps zero mean and unit variance under SELU."""
    _fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutLayer):
    """Alpha dropout of whole channels."""
    _fn = "feature_alpha_dropout"
