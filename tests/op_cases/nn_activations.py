"""Cases for the ops of mixprec/ops/nn_activations.py (references written from each function's formula)."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, rnd, uni

SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _sigmoid(a):
    return 1 / (1 + np.exp(-a))


def _elu(a, alpha, scale=1.0, input_scale=1.0):
    return np.where(a > 0, scale * a, alpha * scale * (np.exp(np.minimum(a, 0) * input_scale) - 1))


def _rrelu_train(a, lower, upper, seed):
    slopes = np.random.default_rng(seed).uniform(lower, upper, a.shape)
    return np.where(a <= 0, a * slopes, a)


def _seeded(seed, fn):
    def run(*args):
        mp.manual_seed(seed)
        return fn(*args)
    return run


WIDE = uni(3, 4, lo=-5.0, hi=5.0)

CASES = [
    Case("leaky_relu", "leaky_relu", [rnd(3, 4)], lambda a: F.leaky_relu(a, 0.2),
         lambda a: np.where(a > 0, a, 0.2 * a)),
    Case("leaky_relu-default", "_leaky_relu", [rnd(5)], F.leaky_relu, lambda a: np.where(a > 0, a, 0.01 * a)),
    Case("elu", "elu", [WIDE], lambda a: F.elu(a, 0.7), lambda a: _elu(a, 0.7), lowp_ulps=2),
    Case("elu-core", "_elu", [rnd(4)], F.elu, lambda a: _elu(a, 1.0), lowp_ulps=2),
    Case("celu", "celu", [WIDE], lambda a: F.celu(a, 2.0), lambda a: _elu(a, 2.0, 1.0, 0.5), lowp_ulps=2),
    Case("selu", "selu", [WIDE], lambda a: mp.selu(a), lambda a: _elu(a, SELU_ALPHA, SELU_SCALE), lowp_ulps=2),
    Case("hardtanh", "hardtanh", [uni(3, 4, lo=-2.0, hi=2.0)], lambda a: F.hardtanh(a, -0.5, 1.5),
         lambda a: np.clip(a, -0.5, 1.5)),
    Case("hardtanh-core", "_hardtanh", [rnd(5)], F.hardtanh, lambda a: np.clip(a, -1, 1)),
    Case("relu6", "relu6", [uni(3, 4, lo=-2.0, hi=8.0)], F.relu6, lambda a: np.clip(a, 0, 6)),
    Case("hardswish", "hardswish", [WIDE], F.hardswish, lambda a: a * np.clip(a + 3, 0, 6) / 6, lowp_ulps=2),
    Case("hardswish-core", "_hardswish", [rnd(4)], F.hardswish, lambda a: a * np.clip(a + 3, 0, 6) / 6,
         lowp_ulps=2),
    Case("hardsigmoid", "hardsigmoid", [WIDE], F.hardsigmoid, lambda a: np.clip(a + 3, 0, 6) / 6),
    Case("hardsigmoid-core", "_hardsigmoid", [rnd(4)], F.hardsigmoid, lambda a: np.clip(a + 3, 0, 6) / 6),
    Case("mish", "mish", [WIDE], F.mish, lambda a: a * np.tanh(np.log1p(np.exp(a))), second_order=True),
    Case("mish-core", "_mish", [rnd(4)], F.mish, lambda a: a * np.tanh(np.log1p(np.exp(a)))),
    Case("threshold", "threshold", [rnd(3, 4)], lambda a: F.threshold(a, 0.1, -2.0),
         lambda a: np.where(a <= 0.1, -2.0, a)),
    Case("threshold-core", "_threshold", [rnd(5)], lambda a: mp.threshold(a, -0.2, 0.5),
         lambda a: np.where(a <= -0.2, 0.5, a)),
    Case("softsign", "softsign", [rnd(3, 4)], F.softsign, lambda a: a / (1 + np.abs(a)), second_order=True),
    Case("softshrink", "softshrink", [rnd(3, 4)], lambda a: F.softshrink(a, 0.3),
         lambda a: np.where(a > 0.3, a - 0.3, np.where(a < -0.3, a + 0.3, 0.0))),
    Case("hardshrink", "hardshrink", [rnd(3, 4)], lambda a: a.hardshrink(0.3),
         lambda a: np.where(np.abs(a) <= 0.3, 0.0, a)),
    Case("tanhshrink", "tanhshrink", [rnd(3, 4)], F.tanhshrink, lambda a: a - np.tanh(a), second_order=True,
         lowp_spread=1),
    Case("logsigmoid", "logsigmoid", [uni(3, 4, lo=-30.0, hi=4.0)], F.logsigmoid,
         lambda a: np.log(_sigmoid(a)), second_order=True),
    Case("glu", "glu", [rnd(3, 4)], F.glu, lambda a: a[:, :2] * _sigmoid(a[:, 2:]), second_order=True),
    Case("glu-dim0", "glu", [rnd(4, 3)], lambda a: F.glu(a, 0), lambda a: a[:2] * _sigmoid(a[2:])),
    Case("rrelu-eval", "rrelu", [rnd(3, 4)], lambda a: F.rrelu(a, 0.1, 0.3),
         lambda a: np.where(a > 0, a, 0.2 * a)),
    Case("rrelu-train", "rrelu", [rnd(3, 4)], _seeded(5, lambda a: F.rrelu(a, 0.1, 0.3, training=True)),
         lambda a: _rrelu_train(a, 0.1, 0.3, 5)),
]
