"""Padding layers: each is ``mp.nn.functional.pad`` with a fixed mode and padding, as torch's are.

padding is an int (the same on both sides of every padded dim) or a tuple of
2 * nd ints ordered as F.pad's: (left, right[, top, bottom[, front, back]]).
"""
from __future__ import annotations

import numpy as np

from . import functional as F
from .module import Module


class _PadNd(Module):
    nd = 0
    mode = "constant"

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        if isinstance(padding, (int, np.integer)):
            padding = (int(padding),) * (2 * self.nd)
        padding = tuple(padding)
        if len(padding) != 2 * self.nd:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of {2 * self.nd} ints, "
                             f"got {padding!r}")
        self.padding, self.value = padding, value

    def forward(self, input):
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if self.mode == "constant" else "")


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float):
        super().__init__(padding, value)


class _ZeroPadNd(_PadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)


class _ReflectionPadNd(_PadNd):
    mode = "reflect"  # mirrored at the edge, the edge not repeated; each pad must be smaller than its dim


class _ReplicationPadNd(_PadNd):
    mode = "replicate"  # the edge value repeated


class _CircularPadNd(_PadNd):
    mode = "circular"  # wrapped around


class ConstantPad1d(_ConstantPadNd):
    nd = 1


class ConstantPad2d(_ConstantPadNd):
    nd = 2


class ConstantPad3d(_ConstantPadNd):
    nd = 3


class ZeroPad1d(_ZeroPadNd):
    nd = 1


class ZeroPad2d(_ZeroPadNd):
    nd = 2


class ZeroPad3d(_ZeroPadNd):
    nd = 3


class ReflectionPad1d(_ReflectionPadNd):
    nd = 1


class ReflectionPad2d(_ReflectionPadNd):
    nd = 2


class ReflectionPad3d(_ReflectionPadNd):
    nd = 3


class ReplicationPad1d(_ReplicationPadNd):
    nd = 1


class ReplicationPad2d(_ReplicationPadNd):
    nd = 2


class ReplicationPad3d(_ReplicationPadNd):
    nd = 3


class CircularPad1d(_CircularPadNd):
    nd = 1


class CircularPad2d(_CircularPadNd):
    nd = 2


class CircularPad3d(_CircularPadNd):
    nd = 3
