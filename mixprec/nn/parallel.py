"""mp.nn.parallel: torch.nn.parallel's two wrappers, DataParallel and DistributedDataParallel.

DistributedDataParallel (one process per device, gradients all-reduced in buckets) is
mixprec/distributed/ddp.py; this module also names it here, where torch does.

DataParallel is torch's single-process one: without a usable GPU it calls the module
as it is (as torch's does); on one GPU it moves the inputs there and calls the module;
on several it scatters the inputs along ``dim``, runs a replica of the module on each
device (the parameters copied there by differentiable copies, so every replica's
gradient flows back to the one parameter), and gathers the outputs on ``output_device``.
torch itself recommends DistributedDataParallel over it; mixprec runs the replicas one
after another from one thread (each device still works asynchronously).
"""
from __future__ import annotations

import contextlib
from collections.abc import Mapping

from ..backend.availability import device_count, is_cuda_available
from ..backend.devices import Device, as_device
from ..ops.shape import cat
from ..distributed.ddp import DistributedDataParallel  # noqa: F401  (torch.nn.parallel.DistributedDataParallel)
from ..tensor import Tensor
from .module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]


def _cuda(d, who):
    """A GPU given as an index, "cuda:N" or a Device, checked to exist (DeviceUnavailableError if not)."""
    if isinstance(d, int) and not isinstance(d, bool):
        d = f"cuda:{d}"
    dev = as_device(d)
    if dev.type != "cuda":
        raise ValueError(f"DataParallel: {who} must name CUDA devices, got {d!r}")
    return dev


class DataParallel(Module):
    """``mp.nn.DataParallel(module, device_ids=None, output_device=None, dim=0)`` (see the module docstring)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an mp.nn.Module, got {type(module).__name__}")
        self.module, self.dim = module, dim
        if not is_cuda_available():  # torch: no GPU, no parallelism; the module runs as it is
            self.device_ids, self.output_device = [], None
            return
        ids = list(range(device_count())) if device_ids is None else list(device_ids)
        if not ids:
            raise ValueError("DataParallel: device_ids is empty; name at least one GPU")
        self.device_ids = [_cuda(d, "device_ids") for d in ids]
        self.output_device = _cuda(ids[0] if output_device is None else output_device, "output_device")

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        src = self.device_ids[0]
        for name, t in (*self.module.named_parameters(), *self.module.named_buffers()):
            if t.device != src:
                raise RuntimeError(f"DataParallel: the module's parameters and buffers must be on {src} "
                                   f"(device_ids[0]), but {name!r} is on {t.device}; call module.to({str(src)!r})")
        if len(self.device_ids) == 1:
            return self.module(*_moved(inputs, src), **_moved(kwargs, src))
        outputs = []
        for i, dev in enumerate(self.device_ids):
            part = _scatter((inputs, kwargs), i, len(self.device_ids), self.dim)
            if part is None:  # fewer rows than devices: the last devices get none, as torch's scatter
                break
            with _replica(self.module, dev):
                outputs.append(self.module(*_moved(part[0], dev), **_moved(part[1], dev)))
        return _gather(outputs, self.output_device, self.dim)


def _moved(value, dev):
    return _map(value, lambda t: t.to(dev))


def _map(value, fn):
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_map(v, fn) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, Mapping):
        return {k: _map(v, fn) for k, v in value.items()}
    return value


def _scatter(value, i, n, dim):
    """Chunk i of n of every tensor in value along dim (None when tensors have fewer than i + 1 chunks)."""
    short = []
    out = _map(value, lambda t: _chunk(t, i, n, dim, short))
    return None if short else out


def _chunk(t, i, n, dim, short):
    chunks = t.chunk(n, dim)
    if i >= len(chunks):
        short.append(t)
        return t
    return chunks[i]


@contextlib.contextmanager
def _replica(module, dev):
    """The module with its parameters and buffers replaced by differentiable copies on dev, for one call."""
    saved = []
    for m in module.modules():
        for store in (m._parameters, m._buffers):
            for name, t in store.items():
                if t is not None and t.device != dev:
                    saved.append((store, name, t))
                    store[name] = t.to(dev)
    try:
        yield
    finally:
        for store, name, t in reversed(saved):
            store[name] = t


def _gather(outputs, dev: Device, dim):
    first = outputs[0]
    if isinstance(first, Tensor):
        return cat([o.to(dev) for o in outputs], dim)
    if isinstance(first, (list, tuple)):
        return type(first)(_gather([o[j] for o in outputs], dev, dim) for j in range(len(first)))
    if isinstance(first, Mapping):
        return {k: _gather([o[k] for o in outputs], dev, dim) for k in first}
    return first
