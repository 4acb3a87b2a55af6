"""Data parallelism: every rank holds the whole model, sees its own slice of each batch,
and the ranks average their gradients so every replica takes the same step.

    model = mp.distributed.DistributedDataParallel(net)   # broadcasts rank 0's parameters
    loss = loss_fn(model(x), y)
    loss.backward()             # .grad is now the mean over ranks, on every rank
    optimizer.step()

The loop is torch's: gradients are averaged *during* backward. Each parameter
has a post-accumulate-grad hook; the backward engine runs a leaf's
accumulation as soon as its gradient is complete, so the hook fires while the
rest of backward goes on. Parameters are packed into buckets (one all-reduce
each); a bucket is all-reduced as soon as all its parameters have reported,
buckets strictly in one order on every rank (the last bucket first: gradients
arrive roughly in reverse order of the parameters), so the collective calls
match across ranks. What is left when backward ends (parameters without a
gradient count as zero) is reduced then, from a callback the engine runs at
the end of backward. ``autograd.grad`` accumulates nothing and so averages
nothing (gradient penalties stay local), as in torch.

``sync_gradients()`` stays for explicit control: after a backward that
already averaged it does nothing; after gradients accumulated locally (inside
``no_sync()``) it averages them. Forgetting to train on a forward pass is
caught: the next forward raises instead of letting the replicas drift apart.
"""
from __future__ import annotations

import contextlib
import functools
import weakref
import zlib

import numpy as np

from ..backend import devices
from ..autograd.engine import queue_callback
from ..autograd.grad_mode import is_grad_enabled
from . import process_group as _pg
from .buckets import DEFAULT_CAP_MB, cap_from_mb, plan_buckets
from ..autograd.graph import AccumulateGrad
from ..tensor import Tensor

_OWNERS: dict = {}  # id(parameter) -> (weakref to it, weakref to the DistributedDataParallel averaging it)


class DistributedDataParallel:
    """Wrap anything callable that has ``.parameters()`` (an nn.Module, or your own object).

    - On construction, rank 0's parameters are broadcast to every rank (``broadcast_parameters``)
      and the ranks check they hold the same model (same shapes and dtypes in the same order).
    - ``ddp(*args)`` calls the wrapped model; attributes not found here are looked up on it.
    - ``loss.backward()`` averages ``.grad`` over ranks (see the module docstring): parameters of
      one dtype and device are packed into flat buckets of at most ``bucket_cap_mb`` MiB, one
      all-reduce per bucket. After it each ``.grad`` is a view into a bucket buffer that the next
      reduction overwrites (torch's ``gradient_as_bucket_view``); copy a gradient to keep it.
    - ``with ddp.no_sync():`` backward accumulates gradients locally over micro-batches; the
      first backward outside the block (or a ``sync_gradients()`` call) averages the sum.
    - A parameter without a gradient on some rank counts as zero there. With
      ``find_unused_parameters=True`` each training forward finds the parameters its output does
      not depend on (they are ready at once), and one extra small all-reduce at the end of
      backward finds those that no rank used: they keep ``.grad = None`` (so the optimizer skips
      them, as in one process).
    - A parameter can be averaged by one live DistributedDataParallel at a time.
    """

    def __init__(self, module, *, bucket_cap_mb: float = DEFAULT_CAP_MB, broadcast_parameters: bool = True,
                 find_unused_parameters: bool = False):
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
        _claim(params, self)
        cap = cap_from_mb(bucket_cap_mb)
        self.module = module
        self.find_unused_parameters = bool(find_unused_parameters)
        self._sync_enabled = True
        self._pending = False   # a training forward ran and its gradients are not averaged yet
        self._averaged = False  # the last backward averaged .grad, and nothing ran since (sync_gradients: no-op)
        _check_same_model(params)
        if broadcast_parameters and group.world_size > 1:
            _broadcast_from_rank0(params, cap)
        self.buckets = plan_buckets([p for p in params if p.requires_grad], cap)
        self._bucket_of = {id(p): b for b, bucket in enumerate(self.buckets) for p in bucket.tensors}
        self._launch_order = list(reversed(range(len(self.buckets))))
        self._locally_unused = []
        self._reset_reduction()
        ref = weakref.ref(self)
        handles = [p.register_post_accumulate_grad_hook(functools.partial(_grad_ready, ref))
                   for bucket in self.buckets for p in bucket.tensors]
        weakref.finalize(self, _remove, handles)

    # ---- the wrapped model ----
    def __call__(self, *args, **kwargs):
        if self._pending:
            raise RuntimeError(
                "DistributedDataParallel: the previous training forward pass was not followed by "
                "sync_gradients() or by a backward() through its output (which averages the gradients), so the "
                "ranks' gradients were never averaged; run forward passes you do not train on under mp.no_grad()")
        out = self.module(*args, **kwargs)
        if self._sync_enabled and is_grad_enabled():
            self._pending = True
            self._averaged = False
            if self.find_unused_parameters:
                reached = _leaves_reached(out)
                self._locally_unused = [p for b in self.buckets for p in b.tensors if id(p) not in reached]
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
        """Average every parameter's .grad over the ranks: no-op inside no_sync(), and right after a backward
        that already averaged them."""
        if not self._sync_enabled:
            return
        self._pending = False
        if self._averaged:
            return
        group = _pg._require()
        if group.world_size == 1:
            return
        used = self._globally_used(self._with_grad()) if self.find_unused_parameters else None
        for b in range(len(self.buckets)):
            self._reduce_bucket(b, used)

    # ---- averaging during backward (post-accumulate-grad hooks) ----
    def _reset_reduction(self):
        self._ready = [set() for _ in self.buckets]
        self._next = 0          # position in _launch_order of the next bucket to reduce
        self._started = False   # a hook fired in the backward now running
        self._used = set()      # parameters with a gradient of their own on this rank, in this backward

    def _on_grad_ready(self, p):
        if not self._sync_enabled:
            self._averaged = False  # accumulating locally (no_sync)
            return
        if _pg._require().world_size == 1:
            self._pending, self._averaged = False, True
            return
        if not self._started:
            self._started = True
            self._used = self._with_grad()  # (also gradients accumulated earlier, under no_sync)
            queue_callback(self._finish_backward)
            for q in self._locally_unused:  # a parameter the output does not depend on is ready at once
                self._mark_ready(q)
        self._used.add(id(p))
        self._mark_ready(p)

    def _mark_ready(self, p):
        b = self._bucket_of[id(p)]
        self._ready[b].add(id(p))
        order = self._launch_order
        while self._next < len(order) and self._full(order[self._next]):
            self._reduce_bucket(order[self._next])
            self._next += 1

    def _full(self, b):
        return len(self._ready[b]) == len(self.buckets[b].tensors)

    def _finish_backward(self):
        """At the end of backward: reduce the buckets still waiting, in order (missing gradients are zeros)."""
        order = self._launch_order
        while self._next < len(order):
            self._reduce_bucket(order[self._next])
            self._next += 1
        if self.find_unused_parameters:
            used = self._globally_used(self._used)
            for bucket in self.buckets:
                for p in bucket.tensors:
                    if id(p) not in used:
                        p.grad = None
        self._reset_reduction()
        self._pending, self._averaged = False, True

    def _reduce_bucket(self, b, used=None):
        """All-reduce one bucket (average) and point each parameter's .grad at its slice."""
        bucket = self.buckets[b]
        flat = bucket.pack([None if p.grad is None else p.grad._array for p in bucket.tensors])
        _pg.all_reduce_array(flat, "avg")
        for p, view in zip(bucket.tensors, bucket.views()):
            if used is None or id(p) in used:
                p.grad = Tensor._wrap(view)

    def _with_grad(self):
        return {id(p) for b in self.buckets for p in b.tensors if p.grad is not None}

    def _globally_used(self, used_here):
        """Ids of the parameters some rank has a gradient for (one small all-reduce of ``used_here`` flags)."""
        group = _pg._require()
        ps = [p for b in self.buckets for p in b.tensors]
        flags = np.array([id(p) in used_here for p in ps], dtype=np.int32)
        if group.name == "nccl":
            flags = devices.to_device(flags, group.device)
        _pg.all_reduce_array(flags, "max")
        return {id(p) for p, f in zip(ps, devices.to_device(flags, devices.CPU).tolist()) if f}


def _grad_ready(ref, p):
    ddp = ref()
    if ddp is not None:
        ddp._on_grad_ready(p)


def _remove(handles):
    for h in handles:
        h.remove()


def _claim(params, ddp):
    """Refuse a parameter that another live DistributedDataParallel averages (it would be averaged twice)."""
    for key in [k for k, (p, d) in _OWNERS.items() if p() is None or d() is None]:
        del _OWNERS[key]
    for p in params:
        entry = _OWNERS.get(id(p))
        if entry is not None and entry[0]() is p and entry[1]() is not None:
            raise RuntimeError("DistributedDataParallel: a parameter of this model is already averaged by another "
                               "live DistributedDataParallel; wrap each model once (its gradients would be averaged "
                               "twice)")
    ref = weakref.ref(ddp)
    for p in params:
        _OWNERS[id(p)] = (weakref.ref(p), ref)


def _leaves_reached(out):
    """Ids of the leaves the graph behind ``out`` (tensors, also inside tuples, lists and dicts) leads to."""
    stack, seen, leaves = [], set(), set()
    todo = [out]
    while todo:
        x = todo.pop()
        if isinstance(x, Tensor):
            if x.grad_fn is not None:
                stack.append(x.grad_fn)
            elif x.requires_grad:
                leaves.add(id(x))
        elif isinstance(x, (tuple, list)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            leaves.add(id(node.variable))
        stack.extend(e[0] for e in node._next_edges if e is not None)
    return leaves


def _check_same_model(params):
    """Every rank must hold the same parameter list, or bucketed calls would pair up wrong data."""
    desc = ";".join(f"{tuple(p.shape)}:{p.dtype.name}:{int(p.requires_grad)}" for p in params)
    sig = np.array([len(params), zlib.crc32(desc.encode())], dtype=np.int64)
    group = _pg._require()
    if group.name == "nccl":
        sig = devices.to_device(sig, group.device)
    hi, lo = sig.copy(), -sig
    _pg.all_reduce_array(hi, "max")
    _pg.all_reduce_array(lo, "max")
    if bool((hi != -lo).any()):
        raise RuntimeError("DistributedDataParallel: the ranks hold different models (their parameters "
                           "differ in number, shape, dtype or requires_grad); every rank must build the same model")


def _broadcast_from_rank0(params, cap):
    """Start every replica from rank 0's weights (bucketed, like the gradients)."""
    for bucket in plan_buckets(params, cap):
        flat = bucket.pack([p._array for p in bucket.tensors])
        _pg.broadcast_array(flat, src=0)
        for p, view in zip(bucket.tensors, bucket.views()):
            p._array[...] = view
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
