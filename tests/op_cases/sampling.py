"""Cases for the ops of mixprec/ops/sampling.py: grid_sample (and aten's grid_sampler)."""
from __future__ import annotations

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, rnd, uni
from .refs_spatial import grid_sample_ref


def _case(id, shape, grid_shape, mode, padding_mode, align_corners, lowp_spread=2):
    return Case(id, "grid_sample", [rnd(*shape), uni(*grid_shape, lo=-1.25, hi=1.25)],
                lambda x, g: F.grid_sample(x, g, mode, padding_mode, align_corners),
                lambda x, g: grid_sample_ref(x, g, mode, padding_mode, align_corners), lowp_spread=lowp_spread)


CASES = [
    _case("grid_sample-bilinear-zeros", (2, 3, 4, 5), (2, 3, 2, 2), "bilinear", "zeros", False),
    _case("grid_sample-bilinear-border-aligned", (1, 2, 3, 4), (1, 2, 3, 2), "bilinear", "border", True),
    _case("grid_sample-bilinear-reflection", (1, 2, 4, 3), (1, 3, 3, 2), "bilinear", "reflection", False),
    _case("grid_sample-bilinear-reflection-aligned", (1, 1, 3, 4), (1, 2, 2, 2), "bilinear", "reflection", True),
    _case("grid_sample-nearest-zeros", (1, 2, 4, 4), (1, 3, 2, 2), "nearest", "zeros", False, 0),
    _case("grid_sample-nearest-reflection-aligned", (1, 2, 3, 5), (1, 2, 2, 2), "nearest", "reflection", True, 0),
    _case("grid_sample-bicubic-zeros", (2, 2, 4, 5), (2, 3, 2, 2), "bicubic", "zeros", False),
    _case("grid_sample-bicubic-border-aligned", (1, 2, 3, 4), (1, 2, 3, 2), "bicubic", "border", True),
    _case("grid_sample-bicubic-reflection", (1, 1, 4, 3), (1, 3, 3, 2), "bicubic", "reflection", False),
    _case("grid_sample-bicubic-reflection-aligned", (1, 1, 3, 4), (1, 2, 2, 2), "bicubic", "reflection", True),
    _case("grid_sample-trilinear-zeros", (1, 2, 3, 4, 3), (1, 2, 2, 2, 3), "bilinear", "zeros", False),
    _case("grid_sample-trilinear-border", (2, 1, 2, 3, 4), (2, 1, 3, 2, 3), "bilinear", "border", False),
    _case("grid_sample-nearest-3d", (1, 2, 3, 3, 2), (1, 2, 1, 2, 3), "nearest", "border", True, 0),
    Case("grid_sampler-enums", "grid_sampler", [rnd(1, 2, 3, 4), uni(1, 2, 2, 2, lo=-1.1, hi=1.1)],
         lambda x, g: mp.grid_sampler(x, g, 0, 1, False),
         lambda x, g: grid_sample_ref(x, g, "bilinear", "border", False), lowp_spread=2),
]
