"""Upsample, UpsamplingNearest2d and UpsamplingBilinear2d: interpolate as layers (ops/interpolate.py)."""
from __future__ import annotations

from . import functional as F
from .module import Module


class Upsample(Module):
    """Resize the spatial dims by interpolate(size or scale_factor, mode, align_corners, recompute_scale_factor)."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return f"{what}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    """Upsample(mode="nearest") of (N, C, H, W) inputs."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample(mode="bilinear", align_corners=True) of (N, C, H, W) inputs."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
