"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d, with torch's parameters, names and init.

One base class per kind holds everything; the subclasses only say how many spatial
dims they have. Weights are (out, in / groups, *kernel) for a convolution and
(in, out / groups, *kernel) for a transposed one, initialised as torch does:
weight ~ kaiming_uniform(a=sqrt(5)) and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
fan_in = weight.shape[1] * prod(kernel). state_dicts load into torch and back.
"""
from __future__ import annotations

from ..amp.fp8 import autocast as _fp8
from ..ops.conv import ntuple
from . import functional as F
from .layers import _expect, _kaiming_init, _weight_and_bias
from .module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What every convolution layer shares: checks, parameters, init and repr."""
    nd = 0
    transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                 padding_mode, output_padding, device, dtype):
        super().__init__()
        name = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                             f"divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        if self.transposed and padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode='zeros' is supported for transposed convolutions, got "
                             f"{padding_mode!r}")
        if isinstance(padding, str):
            if self.transposed or padding not in ("valid", "same"):
                allowed = "an int or a tuple" if self.transposed else "'valid', 'same', an int or a tuple"
                raise ValueError(f"{name}: padding must be {allowed}, got {padding!r}")
            if padding == "same" and any(s != 1 for s in ntuple(name, "stride", stride, self.nd, 1)):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        nd = self.nd
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = ntuple(name, "kernel_size", kernel_size, nd, 1)
        self.stride, self.dilation = ntuple(name, "stride", stride, nd, 1), ntuple(name, "dilation", dilation, nd, 1)
        self.padding = padding if isinstance(padding, str) else ntuple(name, "padding", padding, nd, 0)
        self.output_padding = ntuple(name, "output_padding", output_padding, nd, 0)
        self.groups, self.padding_mode = groups, padding_mode
        shape = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        _weight_and_bias(self, shape + self.kernel_size, bias, out_channels, device, dtype)
        self.reset_parameters()
        self.register_load_state_dict_pre_hook(_fp8.load_state_hook)  # a checkpoint's FP8 state makes its buffers

    def reset_parameters(self):
        _kaiming_init(self.weight, self.bias)

    def _check_input(self, input):
        nd = self.nd
        spatial = ", ".join("DHW"[3 - nd:]) if nd > 1 else "L"
        _expect(input.ndim in (nd + 1, nd + 2) and input.shape[-nd - 1] == self.in_channels, repr(self),
                f"a {nd + 1}-D (C, {spatial}) or {nd + 2}-D (N, C, {spatial}) input with {self.in_channels} "
                "channels", input)

    def extra_repr(self):
        nd = self.nd
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * nd:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype)

    def _explicit_padding(self):
        """Per-dim (low, high) padding: 'same' puts the odd extra element at the end, as torch does."""
        if self.padding == "valid":
            return ((0, 0),) * self.nd
        if self.padding == "same":
            totals = [d * (k - 1) for k, d in zip(self.kernel_size, self.dilation)]
            return tuple((t // 2, t - t // 2) for t in totals)
        return tuple((p, p) for p in self.padding)

    def forward(self, input):
        self._check_input(input)
        conv = getattr(F, f"conv{self.nd}d")
        padding = self.padding
        if self.padding_mode != "zeros":
            pad = [p for low_high in reversed(self._explicit_padding()) for p in low_high]  # last dim first
            input, padding = F.pad(input, pad, mode=self.padding_mode), 0
        if _fp8.active() is not None:  # inside mp.amp.fp8_autocast: the convolution on FP8 values
            return _fp8.conv(self, input, lambda x, w: conv(x, w, None, self.stride, padding, self.dilation,
                                                            self.groups))
        return conv(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) inputs with a weight of shape (C_out, C_in/groups, k)."""
    nd = 1


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) inputs with a weight of shape (C_out, C_in/groups, kH, kW)."""
    nd = 2


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) inputs with a weight of shape (C_out, C_in/groups, kD, kH, kW)."""
    nd = 3


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        """The output_padding that makes the output ``output_size`` (spatial dims, or with N and C in front)."""
        if output_size is None:
            return self.output_padding
        nd = self.nd
        size = tuple(output_size)
        size = size[len(size) - nd:] if len(size) in (nd + 1, nd + 2) else size
        if len(size) != nd:
            raise ValueError(f"{type(self).__name__}: output_size must have {nd}, {nd + 1} or {nd + 2} entries, got "
                             f"{tuple(output_size)}")
        smallest = tuple((n - 1) * s - 2 * p + d * (k - 1) + 1 for n, s, p, d, k in
                         zip(input.shape[-nd:], self.stride, self.padding, self.dilation, self.kernel_size))
        largest = tuple(lo + s - 1 for lo, s in zip(smallest, self.stride))
        if any(not lo <= n <= hi for n, lo, hi in zip(size, smallest, largest)):
            raise ValueError(f"{type(self).__name__}: requested an output size of {size}, but valid sizes range "
                             f"from {smallest} to {largest} (for an input of {tuple(input.shape[-nd:])})")
        return tuple(n - lo for n, lo in zip(size, smallest))

    def forward(self, input, output_size=None):
        self._check_input(input)
        conv_transpose = getattr(F, f"conv_transpose{self.nd}d")
        output_padding = self._output_padding(input, output_size)
        if _fp8.active() is not None:  # inside mp.amp.fp8_autocast: the convolution on FP8 values
            return _fp8.conv(self, input, lambda x, w: conv_transpose(x, w, None, self.stride, self.padding,
                                                                      output_padding, self.groups, self.dilation))
        return conv_transpose(input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                              self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution (the gradient of Conv1d w.r.t. its input); weight (C_in, C_out/groups, k)."""
    nd = 1


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution (the gradient of Conv2d w.r.t. its input); weight (C_in, C_out/groups, kH, kW)."""
    nd = 2


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution; weight (C_in, C_out/groups, kD, kH, kW)."""
    nd = 3
