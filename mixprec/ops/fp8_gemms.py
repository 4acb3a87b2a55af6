"""Where the GEMM ops meet an FP8 region (``mp.amp.fp8_autocast``, mixprec/amp/fp8/autocast.py).

Inside a region whose recipe keeps no per-module state (CurrentScaling, MXFP8BlockScaling) the
functional GEMMs run on FP8 values: F.linear, matmul and ``@``, mm, bmm, addmm, and the
convolutions. The region lives above the ops, in mp.amp, so it hands this module, per thread,
the object that computes a quantized GEMM (:func:`enter`, :func:`leave`), and a GEMM op asks

    if fp8_gemms.entered and (y := fp8_gemms.product(ctx, "mm", a, b)) is not None:   # in a region
        return y

``entered`` counts the regions entered in all threads: outside every region a GEMM op pays one
read of it, and no other op anything (dispatch itself never looks).

An op that works on arrays (matmul, mm, bmm, addmm, linear) calls :func:`product`: the region
computes the product of the quantized operands on Tensors of its own, building a small graph of its
own when grad mode is on, and notes that graph's backward on ``ctx``. Its backward rule first asks
:func:`grads` (once ``noted`` says some call ever noted one), which runs that backward (the FP8
backward GEMMs) for a call that ran one and returns None for every other call. A convolution's
forward works on Tensors (a composite) and calls :func:`conv`, whose graph is the ordinary one.
"""
from __future__ import annotations

import threading

from .._state import PER_THREAD

entered = 0                    # fp8 regions entered and not yet left, in all threads
_local = threading.local()     # .gemms: this thread's quantized-GEMM object, or None
_lock = threading.Lock()
noted = False                  # whether an FP8 product was ever noted on a ctx (backward rules look only then)


def current():
    """This thread's quantized-GEMM object (an FP8 region's), or None: no region, or one that leaves the
    functional GEMMs alone, or the FP8 path's own inner GEMMs, or a backward pass running (its GEMMs are the
    forward's to decide: an FP8 product's backward quantizes its gradients, an ordinary one's does not)."""
    return None if PER_THREAD.engine.runs else getattr(_local, "gemms", None)


def enter(gemms):
    """Make ``gemms`` (None: plain GEMMs) this thread's until :func:`leave`; returns what it replaced."""
    global entered
    with _lock:
        entered += 1
    previous = getattr(_local, "gemms", None)   # (not current(): inside a backward that is None, not the region's)
    _local.gemms = gemms
    return previous


def leave(previous):
    """Undo the matching :func:`enter`, given what it returned."""
    global entered
    _local.gemms = previous
    with _lock:
        entered -= 1


class plain:
    """``with plain():`` the GEMMs inside run unquantized, in an FP8 region too (a fused unit's inner products,
    such as attention's). Outside every region it does nothing."""

    def __enter__(self):
        self.previous = enter(None) if entered else self
        return self

    def __exit__(self, *exc):
        if self.previous is not self:
            leave(self.previous)
        return False


def note(ctx, backward):
    """Record on an array op's ctx the ``backward(g, wanted)`` of the FP8 product its forward ran."""
    global noted
    noted = True
    ctx.fp8 = backward


def grads(ctx, g, wanted):
    """The gradients (one per operand of the product, None where ``wanted`` says no) of the FP8 product the
    forward of ``ctx``'s call ran, or None when it ran none."""
    backward = getattr(ctx, "fp8", None)
    return None if backward is None else backward(g, wanted)


def product(ctx, name, a, b, c=None, alpha=1, beta=1, transpose_b=False):
    """An array op's FP8 product ``alpha * (a @ b) + beta * c`` (b.T with transpose_b), or None: no region on
    this thread quantizes functional GEMMs, or the operands are of a dtype it leaves alone."""
    gemms = current()
    return None if gemms is None else gemms.product(ctx, name, a, b, c, alpha, beta, transpose_b)


def conv(name, convolve, x, w, bias):
    """A convolution's FP8 result on Tensors (``convolve(x, w)`` without bias), or None as for product()."""
    gemms = current()
    return None if gemms is None else gemms.conv(name, convolve, x, w, bias)
