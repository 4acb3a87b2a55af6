"""One op test case, and the input makers the case tables use.

A Case is ``fn(*tensors)`` in mixprec against ``ref(*arrays)`` in NumPy float64.
``makers`` build the inputs from a generator seeded by the case id: float arrays
become floating tensors (the differentiated inputs), integer and bool arrays
become index/mask tensors, anything else is passed as it is.
tests/test_ops.py runs every case through every driver.
"""
from __future__ import annotations

import zlib

import numpy as np

import mixprec as mp

EPS = {mp.float16: 2.0 ** -10, mp.bfloat16: 2.0 ** -7}  # one ulp at 1.0


class Case:
    """One check of op ``op`` (the registry name whose coverage it counts for).

    grad: run gradcheck and the forward-mode checks (float64); second_order: also
    gradcheck the gradient; lowp: run in float16/bfloat16 and compare with float64 on
    the rounded inputs, allowing eps * (lowp_ulps * |ref| + lowp_spread * max(1, max|ref|))
    (an op that computes in float32 and rounds once is within one ulp; ops that round
    intermediates, or sum many terms, get more); rtol64: the float64 forward tolerance.
    """

    def __init__(self, id, op, makers, fn, ref, *, grad=True, second_order=False, lowp=True, lowp_ulps=1,
                 lowp_spread=0, rtol64=1e-12):
        self.id, self.op, self.makers, self.fn, self.ref = id, op, makers, fn, ref
        self.grad, self.second_order, self.lowp = grad, second_order, lowp
        self.lowp_ulps, self.lowp_spread, self.rtol64 = lowp_ulps, lowp_spread, rtol64

    def inputs(self):
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        return [m(rng) for m in self.makers]

    def tensors(self, values, device="cpu", dtype=mp.float64, requires_grad=False):
        """The case's inputs as mixprec tensors: float arrays in ``dtype``, the rest as they are."""
        out = []
        for v in values:
            if isinstance(v, np.ndarray) and v.dtype.kind == "f":
                out.append(mp.tensor(v, dtype=dtype, device=device, requires_grad=requires_grad))
            elif isinstance(v, np.ndarray):
                out.append(mp.tensor(v, device=device))
            else:
                out.append(v)
        return out

    def __repr__(self):
        return self.id


# ----------------------------------------------------------------- input makers
def rnd(*shape):
    return lambda rng: rng.standard_normal(shape)


def pos(*shape, lo=0.5, hi=2.0):
    return lambda rng: rng.uniform(lo, hi, shape)


def away(*shape, lo=0.3, hi=1.5):
    """Values whose magnitude stays away from 0 (kinks of relu/abs/clamp)."""
    return lambda rng: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


def distinct(*shape):
    """Values with no ties (max/min/sort-like ops are not differentiable at ties)."""
    n = int(np.prod(shape))
    return lambda rng: rng.permutation(np.linspace(-2.0, 2.0, n)).reshape(shape) + rng.uniform(-0.01, 0.01, shape)


def const(value):
    return lambda rng: value


def uni(*shape, lo, hi):
    return lambda rng: rng.uniform(lo, hi, shape)


def classes(n_classes, *shape, ignore_at=None):
    def make(rng):
        t = rng.integers(0, n_classes, shape)
        if ignore_at is not None:
            t.reshape(-1)[ignore_at] = -100
        return t
    return make


def probs(*shape, axis=1):
    def make(rng):
        p = rng.uniform(0.05, 1.0, shape)
        return p / p.sum(axis=axis, keepdims=True)
    return make


def grad_wrt_first(fn):
    """x, g, *rest -> d sum(g * fn(x, *rest)) / dx, itself differentiable (create_graph): a case of an op
    that only runs inside a backward."""
    def run(x, g, *rest):
        x = x if x.requires_grad else x.detach().requires_grad_()
        return mp.autograd.grad((fn(x, *rest) * g).sum(), x, create_graph=True)[0]
    return run
