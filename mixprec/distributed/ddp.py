"""Data parallelism: every rank holds the whole model, sees its own slice of each batch,
and the ranks average their gradients so every replica takes the same step.

    model = mp.distributed.DistributedDataParallel(net)   # broadcasts rank 0's parameters
    loss = loss_fn(model(x), y)
    loss.backward()
    model.sync_gradients()      # .grad is now the mean over ranks, on every rank
    optimizer.step()

Averaging is explicit (``sync_gradients()`` after backward) rather than hidden
in backward hooks: mixprec's engine hands each leaf its gradient only at the
very end of backward, so hooks could not overlap communication with compute
anyway, and an explicit call cannot fire by mistake inside
``autograd.grad`` (gradient penalties). Forgetting the call is caught: the next
forward pass raises instead of letting the replicas drift apart.
"""
from __future__ import annotations

import contextlib
import zlib

import numpy as np

from .. import backend as _be
from ..autograd.grad_mode import is_grad_enabled
from . import process_group as _pg
from .buckets import DEFAULT_CAP_MB, cap_from_mb, plan_buckets


class DistributedDataParallel:
    """Wrap anything callable that has ``.parameters()`` (an nn.Module, or your own object).

    - On construction, rank 0's parameters are broadcast to every rank (``broadcast_parameters``)
      and the ranks check they hold the same model (same shapes and dtypes in the same order).
    - ``ddp(*args)`` calls the wrapped model; attributes not found here are looked up on it.
    - ``sync_gradients()`` averages ``.grad`` over ranks: parameters of one dtype and device are
      packed into flat buckets of at most ``bucket_cap_mb`` MiB, one all-reduce per bucket. After
      it each ``.grad`` is a view into a bucket buffer that the next sync overwrites (torch's
      ``gradient_as_bucket_view``); copy a gradient if you need to keep it.
    - ``with ddp.no_sync():`` makes ``sync_gradients()`` a no-op, so gradients accumulate locally
      over micro-batches; the first sync outside the block averages the accumulated sum.
    - A parameter without a gradient on some rank counts as zero there. With
      ``find_unused_parameters=True`` one extra small all-reduce finds parameters that no rank
      used, and those keep ``.grad = None`` (so the optimizer skips them, as in one process).
    """

    def __init__(self, module, *, bucket_cap_mb: float = DEFAULT_CAP_MB, broadcast_parameters: bool = True,
                 find_unused_parameters: bool = False):
        from ..tensor import Tensor
        group = _pg._require()
        if not callable(module) or not callable(getattr(module, "parameters", None)):
            raise TypeError("DistributedDataParallel wraps a callable object with a .parameters() method "
                            f"(e.g. an mp.nn.Module), got {type(module).__name__}")
        params, seen = [], set()
        for p in module.parameters():
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(module).__name__}.parameters() yielded a {type(p).__name__}, not a Tensor")
            if id(p) not in seen:  # a shared (tied) parameter is communicated once
                seen.add(id(p))
                params.append(p)
        if not params:
            raise ValueError(f"{type(module).__name__}.parameters() is empty: nothing to keep in sync")
        for p in params:
            if not p.is_leaf:
                raise ValueError("DistributedDataParallel: a parameter is not a leaf tensor (it was computed "
                                 "from others); parameters must be leaves")
            if group.name == "nccl" and p.device != group.device:
                raise RuntimeError(f"DistributedDataParallel: rank {group.rank} runs on {group.device}, but a "
                                   f"parameter is on {p.device}; move the model there first "
                                   "(mp.distributed.get_device())")
        cap = cap_from_mb(bucket_cap_mb)
        self.module = module
        self.find_unused_parameters = bool(find_unused_parameters)
        self._sync_enabled = True
        self._pending = False  # a training forward ran and its gradients are not averaged yet
        _check_same_model(params)
        if broadcast_parameters and group.world_size > 1:
            _broadcast_from_rank0(params, cap)
        self.buckets = plan_buckets([p for p in params if p.requires_grad], cap)

    # ---- the wrapped model ----
    def __call__(self, *args, **kwargs):
        if self._pending:
            raise RuntimeError(
                "DistributedDataParallel: the previous training forward pass was not followed by "
                "sync_gradients(), so the ranks' gradients were never averaged; call ddp.sync_gradients() "
                "after loss.backward() (inside ddp.no_sync() it does nothing), and run forward passes you "
                "do not train on under mp.no_grad()")
        out = self.module(*args, **kwargs)
        if self._sync_enabled and is_grad_enabled():
            self._pending = True
        return out

    forward = __call__

    def parameters(self):
        return self.module.parameters()

    def __getattr__(self, name):  # train(), eval(), state_dict(), ... of the wrapped model
        if name.startswith("_") or name == "module":  # not set yet: never recurse
            raise AttributeError(name)
        return getattr(self.module, name)

    def __repr__(self):
        return f"DistributedDataParallel({len(self.buckets)} buckets, module={self.module!r})"

    # ---- gradients ----
    @contextlib.contextmanager
    def no_sync(self):
        """Accumulate gradients locally: sync_gradients() does nothing inside the block."""
        prev = self._sync_enabled
        self._sync_enabled = False
        try:
            yield
        finally:
            self._sync_enabled = prev

    def sync_gradients(self) -> None:
        """Average every parameter's .grad over the ranks (no-op inside no_sync())."""
        if not self._sync_enabled:
            return
        self._pending = False
        group = _pg._require()
        if group.world_size == 1:
            return
        used = None
        if self.find_unused_parameters:
            ps = [p for b in self.buckets for p in b.tensors]
            flags = np.array([p.grad is not None for p in ps], dtype=np.int32)
            if group.name == "nccl":
                flags = _be.to_device(flags, group.device)
            _pg.all_reduce_array(flags, "max")
            used = {id(p) for p, f in zip(ps, _be.to_device(flags, _be.CPU).tolist()) if f}
        from ..tensor import Tensor
        for bucket in self.buckets:
            flat = bucket.pack([None if p.grad is None else p.grad.data for p in bucket.tensors])
            _pg.all_reduce_array(flat, "avg")
            for p, view in zip(bucket.tensors, bucket.views()):
                if used is None or id(p) in used:
                    p.grad = Tensor._wrap(view)


def _check_same_model(params):
    """Every rank must hold the same parameter list, or bucketed calls would pair up wrong data."""
    desc = ";".join(f"{tuple(p.shape)}:{p.dtype.name}:{int(p.requires_grad)}" for p in params)
    sig = np.array([len(params), zlib.crc32(desc.encode())], dtype=np.int64)
    group = _pg._require()
    if group.name == "nccl":
        sig = _be.to_device(sig, group.device)
    hi, lo = sig.copy(), -sig
    _pg.all_reduce_array(hi, "max")
    _pg.all_reduce_array(lo, "max")
    if bool((hi != -lo).any()):
        raise RuntimeError("DistributedDataParallel: the ranks hold different models (their parameters "
                           "differ in number, shape, dtype or requires_grad); every rank must build the same model")


def _broadcast_from_rank0(params, cap):
    """Start every replica from rank 0's weights (bucketed, like the gradients)."""
    for bucket in plan_buckets(params, cap):
        flat = bucket.pack([p.data for p in bucket.tensors])
        _pg.broadcast_array(flat, src=0)
        for p, view in zip(bucket.tensors, bucket.views()):
            p.data[...] = view
            p._bump_version()


def make_found_inf_reducer():
    """A function that makes a 1-element found_inf array agree across ranks (all-reduce MAX, in place).

    GradScaler calls it at the end of unscale_ when installed as
    ``scaler.found_inf_reducer``: if any rank saw inf/NaN, every rank skips the
    step and backs off the scale, so the replicas and their scales stay equal.
    """
    _pg._require()

    def reduce_found_inf(found_inf):
        _pg.all_reduce_array(found_inf, "max")
    return reduce_found_inf


def sync_scaler(scaler):
    """Install the found_inf reducer on a GradScaler and return the scaler."""
    if not hasattr(scaler, "found_inf_reducer"):
        raise TypeError(f"sync_scaler expects an mp.amp.GradScaler (an object with a found_inf_reducer "
                        f"attribute), got {type(scaler).__name__}")
    scaler.found_inf_reducer = make_found_inf_reducer()
    return scaler
