"""Cases for the ops of mixprec/ops/elementwise.py."""
from __future__ import annotations

import math

import numpy as np
from scipy.special import erf as _erf

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, away, const, distinct, grad_wrt_first, pos, rnd
from .refs import gelu_tanh_ref, softplus_ref

CASES = [
    Case("add", "add", [rnd(2, 3), rnd(2, 3)], lambda a, b: a + b, np.add),
    Case("add-broadcast", "add", [rnd(2, 3), rnd(3)], mp.add, np.add),
    Case("add-broadcast-both", "add", [rnd(3, 1), rnd(1, 4)], lambda a, b: a.add(b), np.add),
    Case("add-alpha", "add", [rnd(2, 3), rnd(2, 1)], lambda a, b: mp.add(a, b, alpha=0.5), lambda a, b: a + 0.5 * b,
         lowp_spread=1.0),
    Case("add-scalar", "add", [rnd(4)], lambda a: 2.5 + a, lambda a: 2.5 + a),
    Case("sub", "sub", [rnd(3, 1), rnd(1, 4)], lambda a, b: a - b, np.subtract),
    Case("sub-alpha", "sub", [rnd(2, 3), rnd(3)], lambda a, b: a.sub(b, alpha=2), lambda a, b: a - 2 * b,
         lowp_spread=1.0),
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
    Case("relu-grad", "_relu_backward", [away(2, 3), rnd(2, 3)], grad_wrt_first(F.relu),
         lambda a, g: np.where(a <= 0, 0.0, g)),  # torch's threshold_backward: a nan input passes g on
    Case("gelu", "gelu", [rnd(2, 3)], F.gelu, lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2)))),
    Case("gelu-tanh", "gelu", [rnd(2, 3)], lambda a: a.gelu(approximate="tanh"), gelu_tanh_ref),
    Case("silu", "silu", [rnd(2, 3)], F.silu, lambda a: a / (1 + np.exp(-a)), second_order=True),
    Case("softplus", "softplus", [rnd(2, 3)], F.softplus, softplus_ref),
    Case("softplus-beta-threshold", "softplus", [const(np.array([-3.0, -0.5, 0.4, 1.2, 4.0]))],
         lambda a: mp.softplus(a, beta=2.0, threshold=1.5), lambda a: softplus_ref(a, 2.0, 1.5)),
    Case("maximum", "maximum", [distinct(2, 3), distinct(3)], mp.maximum, np.maximum),
    Case("minimum", "minimum", [distinct(3, 1), distinct(1, 4)], lambda a, b: a.minimum(b), np.minimum),
    Case("maximum-scalar", "maximum", [away(5)], lambda a: mp.maximum(a, 0.1), lambda a: np.maximum(a, 0.1)),
    Case("where", "where", [const(np.array([[True, False, True], [False, False, True]])), rnd(2, 3), rnd(3)], mp.where,
         np.where),
    Case("where-broadcast-cond", "where", [const(np.array([True, False, True])), rnd(2, 3), rnd(2, 1)], mp.where,
         np.where),
    Case("where-scalar", "where", [const(np.array([True, False, True, False])), rnd(4)],
         lambda c, a: mp.where(c, a, 0.0), lambda c, a: np.where(c, a, 0.0)),
    Case("clamp", "clamp", [away(2, 5, lo=0.05, hi=2.0)], lambda a: a.clamp(-1.0, 1.0), lambda a: np.clip(a, -1, 1)),
    Case("clamp-min", "clamp", [away(6)], lambda a: mp.clamp(a, min=0.0), lambda a: np.maximum(a, 0)),
    Case("clamp-max", "clamp", [away(6)], lambda a: a.clamp(max=0.0), lambda a: np.minimum(a, 0)),
    Case("clamp-tensor-bounds", "clamp",
         [const(np.array([-2.0, -0.2, 0.3, 2.0])),
                                          const(np.array([-1.0, -0.5, -0.5, -1.0])),
                                          const(np.array([1.0, 0.5, 0.1, 1.0]))],
         lambda a, lo, hi: mp.clamp(a, lo, hi), lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi)),
    # ---- the rest of the unary table
    Case("erf", "erf", [rnd(2, 3)], mp.erf, _erf),
    Case("sign", "sign", [away(2, 3)], mp.sign, np.sign),
    # ---- comparisons and tests: exact, no gradient
    Case("eq", "eq", [const(np.array([1.0, 2.0, 2.0])), const(np.array([1.0, 2.5, 2.0]))], lambda a, b: a == b,
         np.equal, grad=False),
    Case("le-broadcast", "le", [rnd(2, 3), rnd(3)], mp.le, np.less_equal, grad=False),
    Case("logical_not", "logical_not", [rnd(4)], lambda x: x.logical_not(), np.logical_not, grad=False),
    Case("bitwise_not-mask", "bitwise_not", [const(np.array([True, False, True]))], lambda m: ~m, np.logical_not,
         grad=False),
    Case("bitwise_not-ints", "bitwise_not", [const(np.array([3, 0, -7]))], mp.bitwise_not, np.invert, grad=False),
    Case("isfinite-isinf-isnan", "isfinite", [const(np.array([1.0, np.inf, -np.inf, np.nan]))],
         lambda x: (x.isfinite(), x.isinf(), x.isnan()), lambda x: (np.isfinite(x), np.isinf(x), np.isnan(x)),
         grad=False),
]
