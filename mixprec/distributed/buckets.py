"""Gradient buckets: many tensors packed into a few flat arrays, one collective call each.

A collective call has a fixed cost (a network round trip, an NCCL kernel launch)
on top of the bytes it moves, so reducing 200 small gradients one by one is
slow. Instead tensors of the same device and dtype are laid end to end in a
flat buffer of at most ``cap_bytes`` (one tensor larger than the cap gets a
bucket of its own), and each buffer is reduced with a single call.

Every rank must build the same buckets in the same order (the calls are
matched up between processes), so the plan depends only on the tensors'
order, shapes and dtypes.
"""
from __future__ import annotations

from math import prod

from .. import backend as _be
from ..backend import devices

DEFAULT_CAP_MB = 25.0


class Bucket:
    """Tensors of one device and dtype sharing one flat buffer (allocated once, reused)."""

    def __init__(self, tensors, device, dtype):
        self.tensors = list(tensors)
        self.device = device
        self.dtype = dtype
        self.offsets = []
        n = 0
        for t in self.tensors:
            self.offsets.append(n)
            n += prod(t.shape)
        self.numel = n
        self._buffer = None

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @property
    def buffer(self):
        """The flat array, created on first use on the tensors' device."""
        if self._buffer is None:
            with devices.on_device(self.device):
                self._buffer = _be.xp_of(self.device).empty(self.numel, dtype=self.dtype)
        return self._buffer

    def views(self):
        """One view of the buffer per tensor, shaped like it (writing a view writes the buffer)."""
        buf = self.buffer
        return [buf[o:o + prod(t.shape)].reshape(t.shape) for o, t in zip(self.offsets, self.tensors)]

    def pack(self, arrays):
        """Copy ``arrays`` (one per tensor; None packs zeros) into the buffer and return it."""
        for view, a in zip(self.views(), arrays):
            if a is None:
                view[...] = 0
            elif a is not view:
                view[...] = a
        return self.buffer

    def __repr__(self):
        return f"Bucket({len(self.tensors)} tensors, {self.dtype.name}, {self.device}, {self.nbytes} bytes)"


def plan_buckets(tensors, cap_bytes: int) -> list[Bucket]:
    """Group ``tensors`` into buckets of one (device, dtype) holding at most ``cap_bytes`` each.

    Tensors keep their relative order inside a bucket; buckets are ordered by
    their first tensor, so the plan is the same on every rank.
    """
    if cap_bytes <= 0:
        raise ValueError(f"bucket cap must be positive, got {cap_bytes} bytes")
    groups: list[list] = []  # in order of each bucket's first tensor
    open_group: dict = {}
    open_bytes: dict = {}
    for t in tensors:
        key = (t.device, t.dtype)
        size = prod(t.shape) * t.dtype.itemsize
        if key in open_group and open_bytes[key] + size > cap_bytes:
            del open_group[key]
        if key not in open_group:
            open_group[key] = []
            open_bytes[key] = 0
            groups.append(open_group[key])
        open_group[key].append(t)
        open_bytes[key] += size
    return [Bucket(ts, ts[0].device, ts[0].dtype) for ts in groups]


def cap_from_mb(bucket_cap_mb: float) -> int:
    """Mebibytes (torch's unit for ``bucket_cap_mb``) to bytes."""
    if not isinstance(bucket_cap_mb, (int, float)) or isinstance(bucket_cap_mb, bool) or bucket_cap_mb <= 0:
        raise ValueError(f"bucket_cap_mb must be a positive number, got {bucket_cap_mb!r}")
    return max(1, int(bucket_cap_mb * 1024 * 1024))
