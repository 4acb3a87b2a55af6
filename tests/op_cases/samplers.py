"""Cases for mixprec/ops/samplers.py: seeded, with the draws replayed from a NumPy generator of the same seed
(mixprec draws from one, in float64). Their gradients are zero by torch's convention, not the derivative of the
seeded function, so gradcheck does not apply (tests/test_samplers.py checks them)."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, const, pos, rnd


def _seeded(seed, fn):
    def run(*args):
        mp.manual_seed(seed)
        return fn(*args)
    return run


def _rng(seed):
    return np.random.default_rng(seed)


CASES = [
    Case("normal-tensors", "normal", [rnd(3, 4), pos(3, 4)], _seeded(1, mp.normal),
         lambda m, s: m + s * _rng(1).standard_normal((3, 4)), grad=False, lowp_ulps=2, lowp_spread=1),
    Case("normal-broadcast", "normal", [rnd(1, 4), pos(3, 1)], _seeded(2, mp.normal),
         lambda m, s: m + s * _rng(2).standard_normal((3, 4)), grad=False, lowp_ulps=2, lowp_spread=1),
    Case("bernoulli", "bernoulli", [pos(4, 5, lo=0.0, hi=1.0)], _seeded(3, mp.bernoulli),
         lambda p: (_rng(3).random((4, 5)) < p).astype(np.float64), grad=False, lowp=False),
    Case("bernoulli-p", "bernoulli", [rnd(6)], _seeded(4, lambda x: x.bernoulli(0.3)),
         lambda x: (_rng(4).random(x.shape) < 0.3).astype(np.float64), grad=False),
    Case("multinomial", "multinomial", [pos(2, 5)], _seeded(5, lambda w: mp.multinomial(w, 3)),
         lambda w: np.stack([_rng(5).choice(5, 3, replace=False, p=r / r.sum()) for r in w[:1]] +
                            [_replay_second_row(5, w)]), grad=False, lowp=False),
    Case("randint_like", "randint_like", [const(np.zeros((2, 3), dtype=np.int64))],
         _seeded(6, lambda x: mp.randint_like(x, -2, 5)), lambda x: _rng(6).integers(-2, 5, x.shape),
         grad=False, lowp=False),
]


def _replay_second_row(seed, w):
    rng = _rng(seed)
    rng.choice(5, 3, replace=False, p=w[0] / w[0].sum())
    return rng.choice(5, 3, replace=False, p=w[1] / w[1].sum())
