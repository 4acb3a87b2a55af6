"""Pooling layers: thin Modules over mixprec.nn.functional's pools, with torch's names and attributes.

Each family has one base class; the 1-, 2- and 3-D subclasses only set ``nd``.
The ops check their inputs and name what they expected (mixprec/ops/pooling.py).
"""
from __future__ import annotations

from . import functional as F
from .module import Module


class _MaxPoolNd(Module):
    nd = 0

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return getattr(F, f"max_pool{self.nd}d")(input, self.kernel_size, self.stride, self.padding, self.dilation,
                                                  self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Maximum over kernel_size windows of (N, C, L) or (C, L) inputs; stride defaults to kernel_size."""
    nd = 1


class MaxPool2d(_MaxPoolNd):
    """Maximum over kernel_size windows of (N, C, H, W) or (C, H, W) inputs; stride defaults to kernel_size."""
    nd = 2


class MaxPool3d(_MaxPoolNd):
    """Maximum over kernel_size windows of (N, C, D, H, W) or (C, D, H, W) inputs (float32 under CPU autocast)."""
    nd = 3


class _AvgPoolNd(Module):
    nd = 0

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        extra = () if self.nd == 1 else (self.divisor_override,)
        return getattr(F, f"avg_pool{self.nd}d")(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                                  self.count_include_pad, *extra)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Mean over kernel_size windows of (N, C, L) or (C, L) inputs; stride defaults to kernel_size."""
    nd = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """Mean over kernel_size windows of (N, C, H, W) or (C, H, W) inputs; stride defaults to kernel_size."""
    nd = 2


class AvgPool3d(_AvgPoolNd):
    """Mean over kernel_size windows of (N, C, D, H, W) or (C, D, H, W) inputs (float32 under CPU autocast)."""
    nd = 3


class _AdaptivePoolNd(Module):
    nd = 0
    kind = "avg"

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        extra = (self.return_indices,) if self.kind == "max" else ()
        return getattr(F, f"adaptive_{self.kind}_pool{self.nd}d")(input, self.output_size, *extra)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _AdaptiveAvgPoolNd(_AdaptivePoolNd):
    kind = "avg"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Mean over windows sized so an (N, C, L) input becomes (N, C, output_size)."""
    nd = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Mean over windows sized so an (N, C, H, W) input becomes (N, C, *output_size); 1 is global pooling."""
    nd = 2


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Mean over windows sized so an (N, C, D, H, W) input becomes (N, C, *output_size)."""
    nd = 3


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    kind = "max"

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__(output_size)
        self.return_indices = return_indices


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Maximum over windows sized so an (N, C, L) input becomes (N, C, output_size)."""
    nd = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Maximum over windows sized so an (N, C, H, W) input becomes (N, C, *output_size)."""
    nd = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Maximum over windows sized so an (N, C, D, H, W) input becomes (N, C, *output_size)."""
    nd = 3


class _MaxUnpoolNd(Module):
    nd = 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return getattr(F, f"max_unpool{self.nd}d")(input, indices, self.kernel_size, self.stride, self.padding,
                                                    output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of MaxPool1d: values back at the indices it returned, zeros elsewhere."""
    nd = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of MaxPool2d: values back at the indices it returned, zeros elsewhere."""
    nd = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of MaxPool3d: values back at the indices it returned, zeros elsewhere."""
    nd = 3


class _FractionalMaxPoolNd(Module):
    nd = 0

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None):
        super().__init__()
        if (output_size is None) == (output_ratio is None):
            raise ValueError(f"{type(self).__name__}: give exactly one of output_size and output_ratio")
        self.kernel_size, self.output_size, self.output_ratio = kernel_size, output_size, output_ratio
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input):
        return getattr(F, f"fractional_max_pool{self.nd}d")(
            input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
            _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Max pool at pseudo-random window positions (new ones each call, from mixprec's generator)."""
    nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Max pool at pseudo-random window positions in 3-D (new ones each call, from mixprec's generator)."""
    nd = 3
