"""Forward-mode automatic differentiation (torch.autograd.forward_ad's API).

Reverse mode pulls one gradient back from a scalar through the whole graph;
forward mode pushes one direction (a *tangent*) forward with the computation:
every op that sees an input carrying a tangent also computes its output's
tangent, J·v, from the op's tangent rule (registered beside its backward). No
graph is kept; one pass gives the directional derivative of every output::

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)    # x carries the direction v
        y = f(x)
        value, jvp = forward_ad.unpack_dual(y)      # jvp = J_f(primal) @ v

Tangents belong to the dual level they were made in: leaving the level forgets
them all (the level is an object, and a tangent is read only while its level is
the active one). One level is active at a time, as torch allows by default.

Tangents follow their primal's dtype, also under autocast: autocast's casts
are ordinary (linear) ops, so a float32 dual cast to bfloat16 for a matmul has
a bfloat16 tangent, and tangent rules run with autocast off (like backward),
each in the dtypes its op ran in. A tangent must have its primal's dtype
(torch accepts another dtype; mixprec refuses it, so every tangent has the
precision of the value it moves with). In-place ops update tangents (also the
base's, through a view), and custom Functions take part through their ``jvp``.
"""
from __future__ import annotations

from typing import NamedTuple

from .. import dtypes as _dt
from ..backend import array_module
from .._state import modes  # the active dual level is this thread's modes().dual_level (an object), or None
from ..tensor import Tensor
from ..ops import autocast
from .graph import set_tangent

__all__ = ["dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor", "enter_dual_level", "exit_dual_level"]


class _Level:
    """A dual level's identity."""
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def enter_dual_level():
    """Start a dual level (prefer ``with dual_level():``); returns its index (0: one level at a time)."""
    m = modes()
    if m.dual_level is not None:
        raise RuntimeError("forward_ad: nested forward mode AD is not supported: a dual level is already active")
    m.dual_level = _Level(0)
    return 0


def exit_dual_level(*, level=None):
    """End the active dual level: every tangent made in it is forgotten."""
    m = modes()
    if m.dual_level is None or (level is not None and level != m.dual_level.index):
        raise RuntimeError(f"forward_ad: no dual level {'' if level is None else level} is active to exit")
    m.dual_level = None


class dual_level:
    """Context manager for a dual level: tangents made inside live until it exits."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


def tangent_of(t):
    """The tangent ``t`` carries at the active level, or None."""
    fw = t._fw
    return fw[1] if fw is not None and fw[0] is modes().dual_level else None


def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` that carries ``tangent`` (same shape, dtype and device) at the active level.

    Gradients still flow back to ``tensor`` through the view (reverse mode works on duals).
    """
    active = modes().dual_level
    if active is None:
        raise RuntimeError("make_dual: trying to create a dual tensor for forward AD, but no dual level is active; "
                           "call it inside a forward_ad.dual_level() context")
    if level is not None and level != active.index:
        raise RuntimeError(f"make_dual: level {level} is not the active dual level {active.index}")
    for what, t in (("tensor", tensor), ("tangent", tangent)):
        if not isinstance(t, Tensor):
            raise TypeError(f"make_dual: {what} must be a Tensor, got {type(t).__name__}")
    if not _dt.is_differentiable(tensor.dtype):
        raise ValueError(f"make_dual: expected a floating-point or complex primal, got {tensor.dtype.name}")
    if tangent.shape != tensor.shape:
        raise RuntimeError(f"make_dual: the tangent has shape {tangent.shape}, but the primal has shape "
                         f"{tensor.shape}; they must match")
    if tangent.dtype != tensor.dtype:
        raise ValueError(f"make_dual: the tangent has dtype {tangent.dtype.name}, but the primal has dtype "
                         f"{tensor.dtype.name}; they must match")
    if tangent.device != tensor.device:
        raise ValueError(f"make_dual: the tangent is on {tangent.device}, but the primal is on {tensor.device}")
    with _paused():
        dual = tensor.view(tensor.shape)
    set_tangent(dual, active, tangent)
    return dual


class UnpackedDualTensor(NamedTuple):
    """What unpack_dual returns: the primal (a view without tangent) and the tangent (or None)."""
    primal: object
    tangent: object


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of a tensor: the tangent is None when it carries none at the active level."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"unpack_dual: expected a Tensor, got {type(tensor).__name__}")
    tangent = tangent_of(tensor) if modes().dual_level is not None else None
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    with _paused():
        primal = tensor.view(tensor.shape)
    return UnpackedDualTensor(primal, tangent)


class _paused:
    """Forward mode off inside: tangent rules run on plain tensors (no tangents of tangents)."""

    def __enter__(self):
        m = modes()
        self.level, m.dual_level = m.dual_level, None

    def __exit__(self, *exc):
        modes().dual_level = self.level
        return False


def _tangent_arg(a):
    """The tangent a rule gets for one positional argument (see mixprec.ops.registry.Op)."""
    if isinstance(a, Tensor):
        if not _dt.is_differentiable(a.dtype):
            return None
        t = tangent_of(a)
        return t if t is not None else Tensor._wrap(array_module(a._array).zeros_like(a._array))
    if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) for x in a):
        return [_tangent_arg(x) for x in a]
    return None


def attach_tangents(ctx, args, out):
    """Run the op's tangent rule and give each floating output its tangent (called by dispatch).

    The rule runs with forward mode paused (no tangents of tangents) and autocast
    off (it computes in the dtypes the op ran in, as backward does).
    """
    rule = ctx.op.tangent
    if rule is None:
        raise NotImplementedError(f"{ctx.op.name} has no forward-mode rule (tangent); forward-mode AD through it "
                                  "is not supported")
    level = modes().dual_level
    tangents = [_tangent_arg(a) for a in args]
    with _paused(), autocast.suspended():
        result = rule(ctx, *tangents)
        several = isinstance(out, tuple)
        for o, t in zip(out if several else (out,), result if several else (result,)):
            if t is None or not _dt.is_differentiable(o.dtype):
                continue
            if _dt.is_complex(t.dtype) and not _dt.is_complex(o.dtype):
                t = t.real  # a real output moves by the real part (see autograd.engine._fit)
            if t.shape != o.shape:
                t = t.expand(o.shape)
            if t.dtype != o.dtype:
                t = t.to(o.dtype)
            set_tangent(o, level, t)
