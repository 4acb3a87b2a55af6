"""Watching the FP8 region's casts: the one place a tool (mp.amp.inspect) sees what fp8_autocast quantized.

A watcher is a function of one :class:`Cast`. ``with watching(fn):`` registers it for a block; the
quantizers of mixprec.amp.fp8.autocast call every registered watcher after each cast, with the
array that was cast, the scale it was cast with and the FP8 data. When nobody watches, a cast pays
one truthiness check of ``WATCHERS`` (a list): no copy, no host sync, no other work.

A watcher that re-runs the region's Functions for a reference of its own (the inspector's float32
shadow) does it inside ``unquantized()``: there, while a watcher is registered, a quantizer returns
its input in float32 (the float32 path, no cast), records no amax and calls no watcher, so the
reference neither changes the region's state nor shows up as a cast.

Watchers are called on the thread that made the cast, the backward's casts (grad_output) included;
a watcher that wants one thread's casts compares threads itself.
"""
from __future__ import annotations

import contextlib
import threading
from typing import NamedTuple

__all__ = ["Cast", "WATCHERS", "watching", "unquantized", "skipped", "seen"]

WATCHERS: list = []        # the registered watchers; empty: the quantizers do nothing more than cast
_local = threading.local()  # .unquantized: inside unquantized() on this thread


class Cast(NamedTuple):
    """One FP8 cast, as a watcher sees it (arrays on the cast's device, not to be written).

    module: the module (nn.Linear, a convolution) whose GEMM it fed, or for a functional GEMM its op's name
    ("matmul", "linear", "conv2d"); role: "input", "weight" or "grad_output"; fp8: the
    format's name ("float8_e4m3fn", "float8_e5m2"); recipe: the recipe it ran under; source: the
    high-precision array that was cast; data: the FP8 values (ml_dtypes' float8 dtype for NumPy,
    uint8 bits for CuPy). Per-tensor recipes: scale is the float32 (1,) array the cast multiplied by,
    data = fp8(saturate(source * scale)). MXFP8: source is 2-D, blocked by 32 along its last
    dimension, and scale holds each block's E8M0 bits (the block's scale is 2**(bits - 127),
    data = fp8(saturate(source / 2**(bits - 127)))); columnwise: the copy the backward quantizes
    again in blocks along another dimension (source is then the transposed input or weight).
    """
    module: object
    role: str
    fp8: str
    recipe: object
    source: object
    scale: object
    data: object
    columnwise: bool = False


@contextlib.contextmanager
def watching(watcher):
    """Call ``watcher(cast)`` for every FP8 cast made inside the block."""
    WATCHERS.append(watcher)
    try:
        yield watcher
    finally:
        WATCHERS.remove(watcher)


@contextlib.contextmanager
def unquantized():
    """Inside the block, on this thread and while a watcher is registered, the quantizers do not cast."""
    before = getattr(_local, "unquantized", False)
    _local.unquantized = True
    try:
        yield
    finally:
        _local.unquantized = before


def skipped() -> bool:
    """Whether a quantizer returns its input uncast here (read only when WATCHERS is not empty)."""
    return getattr(_local, "unquantized", False)


def seen(*fields, **named):
    """Report one cast (Cast's fields) to every watcher."""
    cast = Cast(*fields, **named)
    for watcher in list(WATCHERS):
        watcher(cast)
