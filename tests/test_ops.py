"""Every op of the foundation, table-driven.

Each case builds float64 NumPy inputs, calls mixprec, and compares with the same
computation done in NumPy float64. The same table drives:
  * forward in float64 against NumPy (tight tolerance),
  * the gradient via mp.autograd.gradcheck (float64 finite differences),
  * forward in float16 / bfloat16 against float64 on the rounded inputs,
each on the CPU and, marked gpu, on CUDA (the ``device`` fixture).
"""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes
from scipy.special import erf as _erf

import mixprec as mp
import mixprec.nn.functional as F

LOW = [pytest.param(mp.float16, id="float16"), pytest.param(mp.bfloat16, id="bfloat16")]
EPS = {mp.float16: 2.0 ** -10, mp.bfloat16: 2.0 ** -7}


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


class Case:
    """One forward/gradient check: ``fn(*inputs)`` in mixprec vs ``ref(*inputs)`` in NumPy float64.

    makers build the inputs; float arrays become float tensors (differentiated),
    integer/bool arrays become index tensors, anything else is passed as is.
    """

    def __init__(self, id, op, makers, fn, ref, grad=True, lowp=True, lowp_atol=0.0):
        self.id, self.op, self.makers, self.fn, self.ref = id, op, makers, fn, ref
        self.grad, self.lowp, self.lowp_atol = grad, lowp, lowp_atol

    def inputs(self):
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        return [m(rng) for m in self.makers]


def _split_ref(x, sizes, axis):
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _scatter_add_ref(x, dim, index, src):
    out = x.copy()
    for pos_ in np.ndindex(*index.shape):
        target = list(pos_)
        target[dim] = index[pos_]
        out[tuple(target)] += src[pos_]
    return out


def _index_put_ref(x, idx, v, accumulate):
    out = x.copy()
    if accumulate:
        np.add.at(out, idx, v)
    else:
        out[idx] = v
    return out


def _softplus_ref(x, beta=1.0, threshold=20.0):
    z = beta * x
    return np.where(z > threshold, x, np.log1p(np.exp(z)) / beta)


def _softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _gelu_tanh_ref(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _matmul_ref(a, b):
    return a @ b


CASES = [
    # ---- arithmetic (with broadcasting and Python scalars)
    Case("add", "add", [rnd(2, 3), rnd(2, 3)], lambda a, b: a + b, np.add),
    Case("add-broadcast", "add", [rnd(2, 3), rnd(3)], mp.add, np.add),
    Case("add-broadcast-both", "add", [rnd(3, 1), rnd(1, 4)], lambda a, b: a.add(b), np.add),
    Case("add-alpha", "add", [rnd(2, 3), rnd(2, 1)], lambda a, b: mp.add(a, b, alpha=0.5),
         lambda a, b: a + 0.5 * b, lowp_atol=1.0),
    Case("add-scalar", "add", [rnd(4)], lambda a: 2.5 + a, lambda a: 2.5 + a),
    Case("sub", "sub", [rnd(3, 1), rnd(1, 4)], lambda a, b: a - b, np.subtract),
    Case("sub-alpha", "sub", [rnd(2, 3), rnd(3)], lambda a, b: a.sub(b, alpha=2),
         lambda a, b: a - 2 * b, lowp_atol=1.0),
    Case("rsub-scalar", "sub", [rnd(4)], lambda a: 1.5 - a, lambda a: 1.5 - a),
    Case("mul", "mul", [rnd(2, 3), rnd(2, 3)], lambda a, b: a * b, np.multiply),
    Case("mul-broadcast", "mul", [rnd(2, 1, 3), rnd(4, 1)], mp.mul, np.multiply),
    Case("mul-scalar", "mul", [rnd(3)], lambda a: a * 3 * 0.5, lambda a: a * 1.5),
    Case("div", "div", [rnd(2, 3), away(3)], lambda a, b: a / b, np.divide),
    Case("div-method", "div", [rnd(3, 1), away(1, 2)], lambda a, b: a.div(b), np.divide),
    Case("rdiv-scalar", "div", [away(4)], lambda a: 2 / a, lambda a: 2 / a),
    Case("neg", "neg", [rnd(2, 3)], lambda a: -a, np.negative),
    Case("neg-fn", "neg", [rnd(3)], mp.neg, np.negative),
    Case("pow-scalar", "pow", [pos(2, 3)], lambda a: a ** 3, lambda a: a ** 3),
    Case("pow-fractional", "pow", [pos(4)], lambda a: mp.pow(a, 0.5), np.sqrt),
    Case("pow-tensor", "pow", [pos(2, 3), rnd(3)], lambda a, b: a ** b, np.power),
    Case("rpow-scalar", "pow", [rnd(4)], lambda a: 2 ** a, lambda a: 2.0 ** a),
    # ---- unary math
    Case("exp", "exp", [rnd(2, 3)], mp.exp, np.exp),
    Case("log", "log", [pos(2, 3)], lambda a: a.log(), np.log),
    Case("log1p", "log1p", [pos(5, lo=-0.5, hi=2.0)], mp.log1p, np.log1p),
    Case("expm1", "expm1", [rnd(5)], lambda a: a.expm1(), np.expm1),
    Case("sqrt", "sqrt", [pos(2, 3)], mp.sqrt, np.sqrt),
    Case("rsqrt", "rsqrt", [pos(2, 3)], lambda a: a.rsqrt(), lambda a: 1 / np.sqrt(a)),
    Case("reciprocal", "reciprocal", [away(5)], mp.reciprocal, lambda a: 1 / a),
    Case("abs", "abs", [away(2, 3)], lambda a: a.abs(), np.abs),
    Case("sin", "sin", [rnd(5)], mp.sin, np.sin),
    Case("cos", "cos", [rnd(5)], lambda a: a.cos(), np.cos),
    Case("tanh", "tanh", [rnd(2, 3)], F.tanh, np.tanh),
    Case("sigmoid", "sigmoid", [rnd(2, 3)], F.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    Case("relu", "relu", [away(2, 3)], F.relu, lambda a: np.maximum(a, 0)),
    Case("gelu", "gelu", [rnd(2, 3)], F.gelu, lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2)))),
    Case("gelu-tanh", "gelu", [rnd(2, 3)], lambda a: a.gelu(approximate="tanh"), _gelu_tanh_ref),
    Case("softplus", "softplus", [rnd(2, 3)], F.softplus, _softplus_ref),
    Case("softplus-beta-threshold", "softplus", [const(np.array([-3.0, -0.5, 0.4, 1.2, 4.0]))],
         lambda a: mp.softplus(a, beta=2.0, threshold=1.5), lambda a: _softplus_ref(a, 2.0, 1.5)),
    # ---- binary selection
    Case("maximum", "maximum", [distinct(2, 3), distinct(3)], mp.maximum, np.maximum),
    Case("minimum", "minimum", [distinct(3, 1), distinct(1, 4)], lambda a, b: a.minimum(b), np.minimum),
    Case("maximum-scalar", "maximum", [away(5)], lambda a: mp.maximum(a, 0.1), lambda a: np.maximum(a, 0.1)),
    Case("where", "where", [const(np.array([[True, False, True], [False, False, True]])), rnd(2, 3), rnd(3)],
         mp.where, np.where),
    Case("where-broadcast-cond", "where", [const(np.array([True, False, True])), rnd(2, 3), rnd(2, 1)],
         mp.where, np.where),
    Case("where-scalar", "where", [const(np.array([True, False, True, False])), rnd(4)],
         lambda c, a: mp.where(c, a, 0.0), lambda c, a: np.where(c, a, 0.0)),
    Case("clamp", "clamp", [away(2, 5, lo=0.05, hi=2.0)], lambda a: a.clamp(-1.0, 1.0),
         lambda a: np.clip(a, -1, 1)),
    Case("clamp-min", "clamp", [away(6)], lambda a: mp.clamp(a, min=0.0), lambda a: np.maximum(a, 0)),
    Case("clamp-max", "clamp", [away(6)], lambda a: a.clamp(max=0.0), lambda a: np.minimum(a, 0)),
    Case("clamp-tensor-bounds", "clamp", [const(np.array([-2.0, -0.2, 0.3, 2.0])),
                                          const(np.array([-1.0, -0.5, -0.5, -1.0])),
                                          const(np.array([1.0, 0.5, 0.1, 1.0]))],
         lambda a, lo, hi: mp.clamp(a, lo, hi), lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi)),
    # ---- reductions
    Case("sum", "sum", [rnd(2, 3)], lambda a: a.sum(), np.sum),
    Case("sum-dim", "sum", [rnd(2, 3, 4)], lambda a: mp.sum(a, 1), lambda a: a.sum(1)),
    Case("sum-dims-keepdim", "sum", [rnd(2, 3, 4)], lambda a: a.sum(dim=(0, -1), keepdim=True),
         lambda a: a.sum(axis=(0, 2), keepdims=True)),
    Case("mean", "mean", [rnd(2, 3)], mp.mean, np.mean),
    Case("mean-dim-keepdim", "mean", [rnd(2, 3, 4)], lambda a: a.mean(-1, keepdim=True),
         lambda a: a.mean(-1, keepdims=True)),
    Case("prod", "prod", [pos(2, 3)], lambda a: a.prod(), np.prod),
    Case("prod-dim", "prod", [rnd(3, 4)], lambda a: mp.prod(a, 1), lambda a: a.prod(1)),
    Case("prod-one-zero", "prod", [const(np.array([[0.0, 2.0, -1.5], [1.2, 0.7, 3.0]]))],
         lambda a: a.prod(dim=1, keepdim=True), lambda a: a.prod(1, keepdims=True), lowp=False),
    Case("prod-two-zeros", "prod", [const(np.array([[0.0, 2.0, 0.0], [1.2, 0.0, 3.0]]))],
         lambda a: a.prod(dim=1), lambda a: a.prod(1), lowp=False),
    Case("amax", "amax", [distinct(2, 3)], lambda a: a.amax(), np.max),
    Case("amax-dim", "amax", [distinct(3, 4)], lambda a: mp.amax(a, 1), lambda a: a.max(1)),
    Case("amin-dim-keepdim", "amin", [distinct(3, 4)], lambda a: a.amin(0, keepdim=True),
         lambda a: a.min(0, keepdims=True)),
    Case("amin-dims", "amin", [distinct(2, 3, 2)], lambda a: mp.amin(a, (0, 2)), lambda a: a.min((0, 2))),
    Case("var", "var", [rnd(2, 5)], lambda a: a.var(), lambda a: np.var(a, ddof=1)),
    Case("var-dim-biased", "var", [rnd(3, 4)], lambda a: mp.var(a, 1, correction=0),
         lambda a: np.var(a, 1)),
    Case("var-keepdim", "var", [rnd(3, 4)], lambda a: a.var(0, keepdim=True),
         lambda a: np.var(a, 0, ddof=1, keepdims=True)),
    Case("cumsum", "cumsum", [rnd(5)], lambda a: a.cumsum(0), np.cumsum),
    Case("cumsum-dim", "cumsum", [rnd(2, 3, 2)], lambda a: mp.cumsum(a, dim=1), lambda a: np.cumsum(a, 1)),
    Case("cumsum-neg-dim", "cumsum", [rnd(3, 4)], lambda a: a.cumsum(-1), lambda a: np.cumsum(a, -1)),
    # ---- matrix products
    Case("matmul", "matmul", [rnd(2, 3), rnd(3, 4)], lambda a, b: a @ b, _matmul_ref),
    Case("matmul-1d-1d", "matmul", [rnd(4), rnd(4)], mp.matmul, _matmul_ref),
    Case("matmul-1d-2d", "matmul", [rnd(3), rnd(3, 2)], lambda a, b: a @ b, _matmul_ref),
    Case("matmul-2d-1d", "matmul", [rnd(2, 3), rnd(3)], lambda a, b: a.matmul(b), _matmul_ref),
    Case("matmul-1d-3d", "matmul", [rnd(3), rnd(2, 3, 2)], mp.matmul, _matmul_ref),
    Case("matmul-batch-broadcast", "matmul", [rnd(2, 1, 2, 3), rnd(3, 3, 2)], lambda a, b: a @ b, _matmul_ref),
    Case("matmul-3d-2d", "matmul", [rnd(2, 2, 3), rnd(3, 2)], lambda a, b: a @ b, _matmul_ref),
    Case("mm", "mm", [rnd(2, 3), rnd(3, 2)], mp.mm, _matmul_ref),
    Case("bmm", "bmm", [rnd(2, 2, 3), rnd(2, 3, 2)], lambda a, b: a.bmm(b), _matmul_ref),
    Case("mv", "mv", [rnd(2, 3), rnd(3)], mp.mv, _matmul_ref),
    Case("dot", "dot", [rnd(5), rnd(5)], lambda a, b: a.dot(b), np.dot),
    Case("addmm", "addmm", [rnd(2, 2), rnd(2, 3), rnd(3, 2)], mp.addmm, lambda c, a, b: c + a @ b),
    Case("addmm-broadcast-beta-alpha", "addmm", [rnd(2), rnd(3, 3), rnd(3, 2)],
         lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2.0), lambda c, a, b: 0.5 * c + 2.0 * (a @ b)),
    Case("baddbmm", "baddbmm", [rnd(2, 2, 2), rnd(2, 2, 3), rnd(2, 3, 2)], mp.baddbmm,
         lambda c, a, b: c + a @ b),
    Case("baddbmm-beta-alpha", "baddbmm", [rnd(1, 2), rnd(2, 2, 3), rnd(2, 3, 2)],
         lambda c, a, b: mp.baddbmm(c, a, b, beta=-1.0, alpha=0.5), lambda c, a, b: -c + 0.5 * (a @ b)),
    Case("linear", "linear", [rnd(3, 4), rnd(2, 4), rnd(2)], F.linear, lambda x, w, b: x @ w.T + b),
    Case("linear-no-bias-3d", "linear", [rnd(2, 2, 3), rnd(4, 3)], mp.linear, lambda x, w: x @ w.T),
    # ---- shape
    Case("reshape", "reshape", [rnd(2, 3)], lambda a: a.reshape(3, 2), lambda a: a.reshape(3, 2)),
    Case("reshape-infer", "reshape", [rnd(2, 3, 2)], lambda a: mp.reshape(a, (-1, 4)), lambda a: a.reshape(-1, 4)),
    Case("view", "view", [rnd(2, 6)], lambda a: a.view(3, 2, 2), lambda a: a.reshape(3, 2, 2)),
    Case("transpose", "transpose", [rnd(2, 3, 4)], lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2)),
    Case("transpose-T", "transpose", [rnd(2, 3)], lambda a: a.T * 1, lambda a: a.T),
    Case("permute", "permute", [rnd(2, 3, 4)], lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    Case("permute-neg", "permute", [rnd(2, 3, 4)], lambda a: mp.permute(a, (1, -1, 0)),
         lambda a: a.transpose(1, 2, 0)),
    Case("squeeze", "squeeze", [rnd(1, 3, 1)], lambda a: a.squeeze(), np.squeeze),
    Case("squeeze-dim", "squeeze", [rnd(1, 3, 1)], lambda a: a.squeeze(-1), lambda a: a.squeeze(-1)),
    Case("unsqueeze", "unsqueeze", [rnd(2, 3)], lambda a: a.unsqueeze(1), lambda a: a[:, None]),
    Case("unsqueeze-neg", "unsqueeze", [rnd(2, 3)], lambda a: mp.unsqueeze(a, -1), lambda a: a[..., None]),
    Case("expand", "expand", [rnd(3, 1)], lambda a: a.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4))),
    Case("expand-keep", "expand", [rnd(1, 3)], lambda a: a.expand(4, -1), lambda a: np.broadcast_to(a, (4, 3))),
    Case("flatten", "flatten", [rnd(2, 3, 2)], lambda a: a.flatten(), np.ravel),
    Case("flatten-range", "flatten", [rnd(2, 3, 2, 2)], lambda a: mp.flatten(a, 1, 2),
         lambda a: a.reshape(2, 6, 2)),
    Case("cat", "cat", [rnd(2, 1), rnd(2, 3), rnd(2, 2)], lambda a, b, c: mp.cat([a, b, c], dim=1),
         lambda a, b, c: np.concatenate([a, b, c], axis=1)),
    Case("cat-dim0", "cat", [rnd(1, 3), rnd(2, 3)], lambda a, b: mp.cat((a, b)), lambda a, b: np.concatenate([a, b])),
    Case("stack", "stack", [rnd(2, 3), rnd(2, 3)], lambda a, b: mp.stack([a, b]), lambda a, b: np.stack([a, b])),
    Case("stack-dim", "stack", [rnd(2, 3), rnd(2, 3), rnd(2, 3)], lambda a, b, c: mp.stack([a, b, c], dim=-1),
         lambda a, b, c: np.stack([a, b, c], axis=-1)),
    Case("split-size", "split", [rnd(5, 2)], lambda a: a.split(2), lambda a: _split_ref(a, [2, 2, 1], 0)),
    Case("split-sections", "split", [rnd(2, 6)], lambda a: mp.split(a, [1, 3, 2], dim=1),
         lambda a: _split_ref(a, [1, 3, 2], 1)),
    # ---- indexing
    Case("getitem-int", "__getitem__", [rnd(3, 4)], lambda a: a[1], lambda a: a[1]),
    Case("getitem-slices", "__getitem__", [rnd(4, 5)], lambda a: a[1:, ::2], lambda a: a[1:, ::2]),
    Case("getitem-neg-step-none-ellipsis", "__getitem__", [rnd(2, 3, 4)], lambda a: a[..., None, -1, 1:3],
         lambda a: a[..., None, -1, 1:3]),
    Case("getitem-int-array", "__getitem__", [rnd(4, 3), const(np.array([2, 0, 2, 3]))],
         lambda a, i: a[i], lambda a, i: a[i]),
    Case("getitem-list", "__getitem__", [rnd(4, 3)], lambda a: a[[0, 0, 3]], lambda a: a[[0, 0, 3]]),
    Case("getitem-two-arrays", "__getitem__", [rnd(3, 4), const(np.array([0, 2, 0])), const(np.array([1, 3, 1]))],
         lambda a, i, j: a[i, j], lambda a, i, j: a[i, j]),
    Case("getitem-slice-and-array", "__getitem__", [rnd(3, 4), const(np.array([3, 0, 3]))],
         lambda a, i: a[1:, i], lambda a, i: a[1:, i]),
    Case("getitem-bool-mask", "__getitem__", [rnd(2, 3), const(np.array([[True, False, True], [False, True, True]]))],
         lambda a, m: a[m], lambda a, m: a[m]),
    Case("index_put", "index_put", [rnd(5), const(np.array([0, 3])), rnd(2)],
         lambda x, i, v: mp.index_put(x, (i,), v), lambda x, i, v: _index_put_ref(x, (i,), v, False)),
    Case("index_put-accumulate-repeated", "index_put", [rnd(5), const(np.array([1, 3, 1, 1])), rnd(4)],
         lambda x, i, v: mp.index_put(x, (i,), v, accumulate=True),
         lambda x, i, v: _index_put_ref(x, (i,), v, True)),
    Case("index_put-2d-broadcast-values", "index_put", [rnd(3, 4), const(np.array([0, 2])), rnd(4)],
         lambda x, i, v: mp.index_put(x, (i,), v), lambda x, i, v: _index_put_ref(x, (i,), v, False)),
    Case("index_put-two-indices-accumulate", "index_put",
         [rnd(3, 3), const(np.array([0, 2, 0])), const(np.array([1, 1, 1])), rnd(3)],
         lambda x, i, j, v: mp.index_put(x, (i, j), v, accumulate=True),
         lambda x, i, j, v: _index_put_ref(x, (i, j), v, True)),
    Case("scatter_add-repeated", "scatter_add", [rnd(4), const(np.array([0, 2, 0, 0, 3])), rnd(5)],
         lambda x, i, s: mp.scatter_add(x, 0, i, s), lambda x, i, s: _scatter_add_ref(x, 0, i, s)),
    Case("scatter_add-dim1", "scatter_add", [rnd(2, 3), const(np.array([[0, 0], [2, 1]])), rnd(2, 2)],
         lambda x, i, s: x.scatter_add(1, i, s), lambda x, i, s: _scatter_add_ref(x, 1, i, s)),
    Case("scatter_add-src-larger", "scatter_add", [rnd(3, 2), const(np.array([[2, 0], [2, 1]])), rnd(3, 3)],
         lambda x, i, s: mp.scatter_add(x, 0, i, s), lambda x, i, s: _scatter_add_ref(x, 0, i, s)),
    # ---- normalisations
    Case("softmax", "softmax", [rnd(2, 4)], lambda a: F.softmax(a, dim=-1), lambda a: _softmax_ref(a, -1)),
    Case("softmax-dim0", "softmax", [rnd(3, 2)], lambda a: a.softmax(0), lambda a: _softmax_ref(a, 0)),
    Case("log_softmax", "log_softmax", [rnd(2, 4)], lambda a: F.log_softmax(a, dim=1),
         lambda a: np.log(_softmax_ref(a, 1))),
    Case("log_softmax-3d", "log_softmax", [rnd(2, 3, 2)], lambda a: mp.log_softmax(a, 1),
         lambda a: np.log(_softmax_ref(a, 1))),
]

# The issue's op list: every one must have at least one case above.
ISSUE_OPS = """add sub mul div neg pow exp log log1p expm1 sqrt rsqrt reciprocal abs sin cos tanh sigmoid relu
gelu softplus maximum minimum where clamp sum mean prod amax amin var cumsum matmul mm bmm mv dot addmm baddbmm
linear reshape view transpose permute squeeze unsqueeze expand flatten cat stack split __getitem__ index_put
scatter_add softmax log_softmax""".split()
NN_FUNCTIONAL = ["relu", "gelu", "softplus", "sigmoid", "linear", "softmax", "log_softmax"]


def _params(cases):
    return [pytest.param(c, id=c.id) for c in cases]


def _to_tensors(values, device, dtype=None, requires_grad=False):
    out = []
    for v in values:
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            t = mp.tensor(v, dtype=dtype or mp.float64, device=device)
            t.requires_grad_(requires_grad)
            out.append(t)
        elif isinstance(v, np.ndarray):
            out.append(mp.tensor(v, device=device))
        else:
            out.append(v)
    return out


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _f64(values):
    return [v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v for v in values]


def test_every_issue_op_has_a_case():
    covered = {c.op for c in CASES}
    assert sorted(set(ISSUE_OPS) - covered) == []


@pytest.mark.parametrize("name", ISSUE_OPS)
def test_issue_op_is_registered_and_public(name):
    assert name in mp.ops.names()
    if name.isidentifier() and not name.startswith("_"):
        assert callable(getattr(mp, name))
    if name in NN_FUNCTIONAL:
        assert callable(getattr(F, name))


def test_nn_functional_lists_only_functional_ops():
    assert set(NN_FUNCTIONAL) <= set(dir(F))
    with pytest.raises(AttributeError, match="no function 'exp'"):
        F.exp


@pytest.mark.parametrize("case", _params(CASES))
def test_forward_float64(case, device):
    values = case.inputs()
    out = _outputs(case.fn(*_to_tensors(values, device)))
    ref = _outputs(case.ref(*values))
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert isinstance(o, mp.Tensor)
        assert o.device.type == device
        assert o.dtype == mp.float64
        assert o.shape == np.shape(r)
        np.testing.assert_allclose(o.numpy(), r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", _params([c for c in CASES if c.grad]))
def test_gradcheck(case, device):
    inputs = _to_tensors(case.inputs(), device, requires_grad=True)
    assert mp.autograd.gradcheck(case.fn, inputs)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("case", _params([c for c in CASES if c.lowp]))
def test_forward_low_precision(case, dtype, device):
    """Half-precision results agree with float64 math on the same (rounded) inputs.

    Each op computes in float32 (or exactly) and rounds once, so the error is about
    half an ulp of the output; the tolerance allows one ulp (eps of the dtype)
    relative, plus ``lowp_atol`` ulps of the largest output where an op rounds an
    intermediate (alpha * other) before the final operation.
    """
    values = case.inputs()
    tensors = _to_tensors(values, device, dtype=dtype)
    rounded = [t.numpy().astype(np.float64) if isinstance(t, mp.Tensor) and t.dtype == dtype else v
               for t, v in zip(tensors, values)]
    out = _outputs(case.fn(*tensors))
    ref = _outputs(case.ref(*rounded))
    eps = EPS[dtype]
    for o, r in zip(out, ref):
        assert o.dtype == dtype
        got = o.numpy().astype(np.float64)
        scale = np.max(np.abs(r)) if np.size(r) else 0.0
        tol = eps * np.abs(r) + case.lowp_atol * eps * scale + 1e-30
        assert np.all(np.abs(got - r) <= tol), (got, r)


# ----------------------------------------------------------------- matmul family on half inputs
MATMUL_FAMILY = [
    ("matmul", lambda a, b: a @ b, [(8, 32), (32, 5)]),
    ("matmul-batched", mp.matmul, [(3, 4, 32), (32, 6)]),
    ("matmul-1d", mp.matmul, [(64,), (64,)]),
    ("mm", mp.mm, [(8, 32), (32, 5)]),
    ("bmm", mp.bmm, [(2, 4, 32), (2, 32, 3)]),
    ("mv", mp.mv, [(6, 48), (48,)]),
    ("dot", mp.dot, [(96,), (96,)]),
]


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name,fn,shapes", MATMUL_FAMILY, ids=[m[0] for m in MATMUL_FAMILY])
def test_half_matmul_is_float32_accumulate_then_round(name, fn, shapes, dtype, device):
    """The tensor-core contract: half inputs, float32 accumulation, one rounding at the end."""
    rng = np.random.default_rng(7)
    a, b = (mp.tensor(rng.standard_normal(s), dtype=dtype, device=device) for s in shapes)
    out = fn(a, b)
    a32, b32 = a.numpy().astype(np.float32), b.numpy().astype(np.float32)
    expected = np.asarray(a32 @ b32).astype(dtype)
    assert out.dtype == dtype
    got_bits, want_bits = out.numpy().view(np.int16).astype(np.int32), expected.view(np.int16).astype(np.int32)
    if device == "cpu":
        np.testing.assert_array_equal(got_bits, want_bits)
    else:  # cuBLAS sums in another order: the float32 sum may differ in its last bits, so allow one ulp
        assert np.max(np.abs(got_bits - want_bits)) <= 1
    # and that is within a K-dependent tolerance of the float64 product of the same inputs
    exact = a32.astype(np.float64) @ b32.astype(np.float64)
    assert np.all(np.abs(out.numpy().astype(np.float64) - exact) <= EPS[dtype] * np.abs(exact) + 1e-5 * shapes[0][-1])


@pytest.mark.parametrize("dtype", LOW)
def test_half_fused_matmul_ops_round_once(dtype):
    """addmm / baddbmm / linear add their bias in float32 before the single rounding (as torch's CPU GEMM)."""
    rng = np.random.default_rng(3)
    c, a, b = (mp.tensor(rng.standard_normal(s), dtype=dtype) for s in [(8, 5), (8, 32), (32, 5)])
    f = [t.numpy().astype(np.float32) for t in (c, a, b)]
    np.testing.assert_array_equal(mp.addmm(c, a, b, beta=0.5, alpha=2.0).numpy(),
                                  (np.float32(0.5) * f[0] + np.float32(2.0) * (f[1] @ f[2])).astype(dtype))
    w, bias = b.T.contiguous(), c[0]
    np.testing.assert_array_equal(F.linear(a, w, bias).numpy(), (f[1] @ f[2] + f[0][0]).astype(dtype))
    bc, ba, bb = (mp.tensor(rng.standard_normal(s), dtype=dtype) for s in [(2, 3, 4), (2, 3, 16), (2, 16, 4)])
    g = [t.numpy().astype(np.float32) for t in (bc, ba, bb)]
    np.testing.assert_array_equal(mp.baddbmm(bc, ba, bb).numpy(), (g[0] + g[1] @ g[2]).astype(dtype))


@pytest.mark.parametrize("dtype", LOW)
def test_half_reductions_accumulate_in_float32(dtype):
    """A float16 sum of 4096 ones stays exact; accumulating in float16 itself would stall at 2048."""
    x = mp.ones(4096, dtype=dtype)
    assert x.sum().item() == 4096.0
    assert x.mean().item() == 1.0
    assert x.cumsum(0)[-1].item() == 4096.0


# ----------------------------------------------------------------- specific gradient semantics
def test_amax_splits_gradient_between_ties(device):
    x = mp.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], device=device, requires_grad=True)
    x.amax(dim=1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5], [0.5, 0, 0.5]])


def test_maximum_splits_gradient_on_ties(device):
    a = mp.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    b = mp.tensor([1.0, 5.0, 0.0], device=device, requires_grad=True)
    mp.maximum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(b.grad.numpy(), [0.5, 1.0, 0.0])


def test_relu_gradient_at_zero_is_zero(device):
    x = mp.tensor([-1.0, 0.0, 2.0], device=device, requires_grad=True)
    mp.relu(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 1.0])


def test_getitem_gradient_accumulates_repeated_rows(device):
    x = mp.zeros(3, 2, device=device, requires_grad=True)
    x[mp.tensor([0, 2, 0, 0], device=device)].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[3, 3], [0, 0], [1, 1]])


def test_index_put_without_accumulate_blocks_gradient_of_overwritten_slots(device):
    x = mp.ones(4, device=device, requires_grad=True)
    v = mp.tensor([5.0, 6.0], device=device, requires_grad=True)
    y = mp.index_put(x, (mp.tensor([1, 3], device=device),), v)
    np.testing.assert_array_equal(y.numpy(), [1, 5, 1, 6])
    (y * mp.tensor([1.0, 2.0, 3.0, 4.0], device=device)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 0, 3, 0])
    np.testing.assert_array_equal(v.grad.numpy(), [2, 4])


def test_index_put_accumulate_sums_repeated_indices(device):
    x = mp.zeros(3, device=device)
    y = mp.index_put(x, (mp.tensor([0, 0, 2, 0], device=device),), mp.tensor([1.0, 2.0, 3.0, 4.0], device=device),
                     accumulate=True)
    np.testing.assert_array_equal(y.numpy(), [7, 0, 3])
    np.testing.assert_array_equal(x.numpy(), [0, 0, 0])  # out of place


def test_scatter_add_repeated_indices_and_grad(device):
    x = mp.zeros(3, device=device, requires_grad=True)
    src = mp.tensor([1.0, 2.0, 3.0, 4.0], device=device, requires_grad=True)
    idx = mp.tensor([2, 2, 0, 2], device=device)
    y = mp.scatter_add(x, 0, idx, src)
    np.testing.assert_array_equal(y.numpy(), [3, 0, 7])
    (y * mp.tensor([10.0, 20.0, 30.0], device=device)).sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [30, 30, 10, 30])
    np.testing.assert_array_equal(x.grad.numpy(), [10, 20, 30])


def test_second_derivatives_of_nonlinear_ops(device):
    """Backwards are written with Tensor ops, so they differentiate again (gradgradcheck)."""
    rng = np.random.default_rng(0)
    for fn in (mp.tanh, mp.sigmoid, mp.exp, lambda t: t.log_softmax(dim=-1), mp.gelu,
               lambda t: (t * t).softmax(0), lambda t: t.var(), lambda t: t.prod()):
        x = mp.tensor(rng.uniform(0.2, 1.0, (3,)), dtype=mp.float64, device=device, requires_grad=True)

        def first(t, fn=fn):
            return mp.autograd.grad(fn(t).sum(), t, create_graph=True)[0]
        assert mp.autograd.gradcheck(first, (x,))


# ----------------------------------------------------------------- dtypes of results
def test_integer_division_gives_float32(device):
    out = mp.tensor([1, 2, 3], device=device) / mp.tensor([2, 2, 2], device=device)
    assert out.dtype == mp.float32
    np.testing.assert_array_equal(out.numpy(), [0.5, 1.0, 1.5])
    assert (2 / mp.tensor([4], device=device)).dtype == mp.float32


def test_integer_sum_counts_in_int64(device):
    assert mp.tensor([True, True, False], device=device).sum().dtype == mp.int64
    assert mp.tensor([1, 2], dtype=mp.int32, device=device).sum().dtype == mp.int64


def test_comparisons_give_bool_and_no_graph(device):
    x = mp.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    for out in (x < 2, x <= 2, x > 2, x >= 2, x == 2, x != 2, 2 < x):
        assert out.dtype == mp.bool and out.grad_fn is None and not out.requires_grad
    np.testing.assert_array_equal((x > 1.5).numpy(), [False, True, True])
    np.testing.assert_array_equal((2 > x).numpy(), [True, False, False])


# ----------------------------------------------------------------- bad input: clear errors, never raw NumPy ones
def _x():
    return mp.ones(2, 3)


ERRORS = [
    # broadcasting failures name the op and both shapes (one mechanism for every elementwise op)
    ("add", lambda: mp.tensor([1, 2]) + mp.ones(3), RuntimeError, r"add: shapes \(2,\) and \(3,\) cannot be broadcast"),
    ("sub", lambda: _x() - mp.ones(2), RuntimeError, r"sub: shapes \(2, 3\) and \(2,\)"),
    ("mul", lambda: mp.mul(_x(), mp.ones(4, 1, 2)), RuntimeError, r"mul: shapes \(2, 3\) and \(4, 1, 2\)"),
    ("div", lambda: _x() / mp.ones(4), RuntimeError, r"div: shapes \(2, 3\) and \(4,\)"),
    ("rdiv", lambda: mp.ones(4).__rtruediv__(_x()), RuntimeError, r"__rtruediv__: shapes"),
    ("pow", lambda: _x() ** mp.ones(2), RuntimeError, r"pow: shapes \(2, 3\) and \(2,\)"),
    ("maximum", lambda: mp.maximum(_x(), mp.ones(5)), RuntimeError, r"maximum: shapes \(2, 3\) and \(5,\)"),
    ("where", lambda: mp.where(mp.ones(2) > 0, _x(), mp.ones(3)), RuntimeError,
     r"where: shapes \(2,\), \(2, 3\) and \(3,\)"),
    ("clamp", lambda: _x().clamp(mp.zeros(4)), RuntimeError, r"clamp: shapes \(2, 3\) and \(4,\)"),
    ("eq", lambda: _x() == mp.ones(2), RuntimeError, r"eq: shapes \(2, 3\) and \(2,\)"),
    ("add_", lambda: mp.ones(3).add_(_x()), RuntimeError, r"add_: a value of shape \(2, 3\) cannot be written"),
    # matrix products name both shapes and the op
    ("matmul", lambda: _x() @ _x(), RuntimeError, r"matmul: shapes \(2, 3\) and \(2, 3\) cannot be multiplied"),
    ("matmul-batch", lambda: mp.ones(2, 3, 4) @ mp.ones(5, 4, 3), RuntimeError, r"batch dimensions"),
    ("matmul-0d", lambda: mp.tensor(1.0) @ _x(), RuntimeError, r"matmul: .*0-d"),
    ("mm", lambda: mp.mm(_x(), mp.ones(3)), RuntimeError, r"mm: shapes \(2, 3\) and \(3,\)"),
    ("bmm", lambda: mp.bmm(mp.ones(2, 2, 3), mp.ones(3, 3, 2)), RuntimeError,
     r"bmm: shapes \(2, 2, 3\) and \(3, 3, 2\)"),
    ("mv", lambda: mp.mv(_x(), mp.ones(2)), RuntimeError, r"mv: shapes \(2, 3\) and \(2,\)"),
    ("dot", lambda: mp.dot(mp.ones(3), mp.ones(4)), RuntimeError, r"dot: shapes \(3,\) and \(4,\)"),
    ("linear", lambda: F.linear(_x(), mp.ones(4, 2)), RuntimeError, r"linear: input of shape \(2, 3\).*\(4, 2\)"),
    ("linear-bias", lambda: F.linear(_x(), mp.ones(4, 3), mp.ones(3)), RuntimeError, r"bias of shape \(3,\)"),
    ("addmm", lambda: mp.addmm(mp.ones(3, 3), _x(), mp.ones(3, 4)), RuntimeError, r"addmm: .*\(3, 3\).*\(2, 4\)"),
    ("matmul-dtypes", lambda: mp.ones(2, 2, dtype=mp.float16) @ mp.ones(2, 2), TypeError,
     r"matmul: .*same dtype, got float16 and float32"),
    # shape ops
    ("reshape", lambda: _x().reshape(4, 2), RuntimeError,
     r"reshape: shape \(4, 2\) is invalid for an input of shape \(2, 3\)"),
    ("view", lambda: _x().T.view(6), RuntimeError, r"view: cannot view .* use reshape"),
    ("expand", lambda: _x().expand(4, 3), RuntimeError, r"expand: cannot expand shape \(2, 3\) to \(4, 3\)"),
    ("cat", lambda: mp.cat([_x(), mp.ones(3, 3)], dim=1), RuntimeError, r"cat: shapes \(2, 3\) and \(3, 3\)"),
    ("stack", lambda: mp.stack([_x(), mp.ones(2, 2)]), RuntimeError, r"stack: shapes \(2, 3\) and \(2, 2\)"),
    ("permute", lambda: _x().permute(0, 0), ValueError, r"permute: dims \(0, 0\)"),
    ("split", lambda: _x().split([1, 1], dim=1), ValueError, r"split: sections \[1, 1\] do not add up to the size 3"),
    ("index_put", lambda: mp.index_put(mp.zeros(4), (mp.tensor([0, 1]),), mp.ones(3)), ValueError,
     r"index_put: .*\(3,\).*\(2,\)"),
    ("index_put-oob", lambda: mp.index_put(mp.zeros(4), (mp.tensor([5]),), mp.ones(1)), IndexError,
     r"index_put: index 5 is out of bounds"),
    ("scatter_add-oob", lambda: mp.scatter_add(mp.zeros(3), 0, mp.tensor([5]), mp.ones(1)), IndexError,
     r"scatter_add: index 5 is out of bounds"),
    ("scatter_add-src", lambda: mp.scatter_add(mp.zeros(3), 0, mp.tensor([0, 1]), mp.ones(1)), RuntimeError,
     r"scatter_add: index of shape \(2,\) must not be larger than src"),
    ("scatter_add-float-index", lambda: mp.scatter_add(mp.zeros(3), 0, mp.tensor([0.0]), mp.ones(1)), TypeError,
     r"scatter_add: index must be an integer tensor"),
    ("getitem", lambda: _x()[5], IndexError, r"__getitem__: .*\(tensor of shape \(2, 3\)\)"),
    # dims out of range name the op
    *[(f"dim-{name}", fn, IndexError, rf"{name}: dim .* out of range for a tensor with 2 dimensions")
      for name, fn in [("sum", lambda: _x().sum(2)), ("mean", lambda: _x().mean(-3)), ("amax", lambda: _x().amax(5)),
                       ("var", lambda: _x().var(2)), ("cumsum", lambda: _x().cumsum(2)),
                       ("softmax", lambda: _x().softmax(2)), ("log_softmax", lambda: _x().log_softmax(-3)),
                       ("transpose", lambda: _x().transpose(0, 2)), ("squeeze", lambda: _x().squeeze(3)),
                       ("unsqueeze", lambda: _x().unsqueeze(4)), ("flatten", lambda: _x().flatten(2)),
                       ("split", lambda: _x().split(1, dim=2)), ("cat", lambda: mp.cat([_x(), _x()], dim=2))]],
    # argument errors
    ("where-cond", lambda: mp.where(mp.ones(2), mp.ones(2), mp.ones(2)), TypeError, r"where: condition must be a bool"),
    ("clamp-none", lambda: _x().clamp(), ValueError, r"clamp: at least one of min and max"),
    ("gelu-approximate", lambda: _x().gelu(approximate="erf"), ValueError, r"gelu: approximate must be"),
    ("softmax-no-dim", lambda: _x().softmax(), TypeError, r"softmax: pass dim="),
    ("softmax-int", lambda: mp.tensor([1, 2]).softmax(0), TypeError, r"softmax: needs a floating input"),
    ("mean-int", lambda: mp.tensor([1, 2]).mean(), TypeError, r"mean: needs a floating input"),
    ("var-int", lambda: mp.tensor([1, 2]).var(), TypeError, r"var: needs a floating input"),
    ("neg-bool", lambda: -mp.tensor([True]), TypeError, r"neg: .*bool.*logical_not"),
    ("too-many-args", lambda: mp.exp(_x(), 1), TypeError, r"exp\(\) takes at most 1 positional arguments \(input\)"),
    ("operand-str", lambda: _x() + "a", TypeError, r"unsupported operand type\(s\) for \+: 'Tensor' and 'str'"),
    ("operand-none", lambda: _x() * None, TypeError, r"unsupported operand"),
    ("operand-complex", lambda: _x() - 1j, TypeError, r"unsupported operand"),
    ("function-str", lambda: mp.add(_x(), "a"), TypeError, r"add: expected a Tensor or a number, got str"),
]


@pytest.mark.parametrize("fn,exc,match", [pytest.param(f, e, m, id=i) for i, f, e, m in ERRORS])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_integer_inputs_of_float_math_compute_in_float32():
    """exp/sin/sqrt/... of an int or bool tensor are float32 (torch), never float64; relu/abs keep ints."""
    i = mp.tensor([1, 4])
    for fn in (mp.exp, mp.log, mp.sqrt, mp.rsqrt, mp.sin, mp.cos, mp.tanh, mp.sigmoid, mp.log1p, mp.expm1,
               mp.reciprocal, mp.gelu, mp.softplus):
        assert fn(i).dtype == mp.float32, fn
    np.testing.assert_allclose(mp.sqrt(i).numpy(), [1.0, 2.0])
    assert mp.log(mp.tensor([True])).dtype == mp.float32
    assert mp.relu(mp.tensor([-1, 2])).tolist() == [0, 2] and mp.relu(mp.tensor([-1, 2])).dtype == mp.int64
    assert mp.tensor([-3], dtype=mp.int32).abs().dtype == mp.int32


def test_ops_accept_numpy_arrays_and_scalars_as_data():
    x = mp.ones(3, dtype=mp.float16)
    assert (x * np.float64(2.0)).dtype == mp.float16  # NumPy scalars are weak like Python ones
    out = x + np.full(3, 2.0, dtype=np.float32)  # an array is a tensor operand
    assert out.dtype == mp.float32 and out.tolist() == [3.0, 3.0, 3.0]
    assert mp.where(mp.tensor([True, False]), 1.0, 0.0).tolist() == [1.0, 0.0]
    assert mp.exp(0.0).item() == 1.0 and mp.exp(0.0).dtype == mp.float32


# ----------------------------------------------------------------- broadcasting, property-based
def _unbroadcast(x, shape):
    """Sum x over the dims that broadcasting added or stretched, back to ``shape``."""
    x = x.sum(axis=tuple(range(x.ndim - len(shape)))) if x.ndim > len(shape) else x
    return x.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True).reshape(shape)


BINARY_GRADS = {  # op -> (forward, d out / d a, d out / d b), all in NumPy
    "add": (np.add, lambda a, b: np.ones_like(a * b), lambda a, b: np.ones_like(a * b)),
    "mul": (np.multiply, lambda a, b: b + 0 * a, lambda a, b: a + 0 * b),
    "div": (np.divide, lambda a, b: 1 / b + 0 * a, lambda a, b: -a / (b * b)),
}


@settings(max_examples=40, deadline=None)
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       name=st.sampled_from(sorted(BINARY_GRADS)))
def test_broadcasting_forward_and_gradients(shapes, name):
    """Any broadcastable shape pair: the result has the broadcast shape and each input gets a
    gradient of its own shape, the sum over the copies broadcasting made."""
    (sa, sb), result = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.5, 2.0, sa), rng.uniform(0.5, 2.0, sb)
    ta = mp.tensor(a, dtype=mp.float64, requires_grad=True)
    tb = mp.tensor(b, dtype=mp.float64, requires_grad=True)
    fwd, da, db = BINARY_GRADS[name]
    out = getattr(mp, name)(ta, tb)
    assert out.shape == result
    np.testing.assert_allclose(out.numpy(), fwd(a, b), rtol=1e-12)
    out.sum().backward()
    assert ta.grad.shape == sa and tb.grad.shape == sb
    np.testing.assert_allclose(ta.grad.numpy(), _unbroadcast(np.broadcast_to(da(a, b), result), sa), rtol=1e-12)
    np.testing.assert_allclose(tb.grad.numpy(), _unbroadcast(np.broadcast_to(db(a, b), result), sb), rtol=1e-12)


def test_registry_introspection():
    names = mp.ops.names()
    assert names == sorted(names)
    for ref_name in ("mm", "matmul", "__matmul__", "linear", "log_softmax", "softmax", "addmm", "bmm"):
        assert ref_name in names
    P = mp.ops.CastPolicy
    assert mp.ops.policy("mm", "cuda") is P.LOWER_PRECISION_FP and mp.ops.policy("mm", "cpu") is P.LOWER_PRECISION_FP
    assert mp.ops.policy("log_softmax", "cuda") is P.FP32 and mp.ops.policy("log_softmax", "cpu") is None
    assert mp.ops.policy("mv", "cpu") is None and mp.ops.policy("dot", "cuda") is P.PROMOTE
    assert mp.ops.policy("add", "cuda") is None
    assert mp.ops.get("__matmul__") is mp.ops.get("matmul")
    with pytest.raises(KeyError, match="no op named 'nope'"):
        mp.ops.get("nope")
    with pytest.raises(ValueError, match="device_type"):
        mp.ops.policy("mm", "tpu")
