"""Cases for the ops of mixprec/ops/nn_layers.py (and the backward-only ops they and conv.py use)."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, const, distinct, rnd
from .refs import avg_pool_grad_ref, batch_norm_train_ref, conv2d_input_grad_ref, embedding_ref, ref_pool


def _grad_wrt_first(fn):
    """x, g, *rest -> d sum(g * fn(x, *rest)) / dx, itself differentiable (create_graph)."""
    def run(x, g, *rest):
        x = x if x.requires_grad else x.detach().requires_grad_()
        return mp.autograd.grad((fn(x, *rest) * g).sum(), x, create_graph=True)[0]
    return run


def _seeded_dropout(x):
    mp.manual_seed(11)  # the same mask on every call, so finite differences see one function
    return F.dropout(x, 0.4)


CASES = [
    Case("max_pool2d", "max_pool2d", [distinct(2, 2, 5, 5)], lambda x: F.max_pool2d(x, 3, 2, 1),
         lambda x: ref_pool(x, 3, 2, 1, 1, False, "max")),
    Case("max_pool2d-unbatched-dilated", "max_pool2d", [distinct(2, 6, 5)],
         lambda x: F.max_pool2d(x, 2, 1, dilation=2), lambda x: ref_pool(x[None], 2, 1, 0, 2, False, "max")[0]),
    Case("avg_pool2d", "avg_pool2d", [rnd(2, 2, 5, 6)], lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
         lambda x: ref_pool(x, 3, 2, 1, 1, False, "avg", False), lowp_ulps=2),
    Case("avg_pool2d-grad", "_avg_pool2d_backward", [rnd(1, 2, 4, 4), rnd(1, 2, 2, 2)],
         _grad_wrt_first(lambda x: F.avg_pool2d(x, 2)), lambda x, g: avg_pool_grad_ref(g, x.shape, 2)),
    Case("conv2d-input-grad", "_col2im", [rnd(1, 2, 4, 5), rnd(1, 3, 3, 3), rnd(3, 2, 2, 3)],
         _grad_wrt_first(lambda x, w: F.conv2d(x, w)), lambda x, g, w: conv2d_input_grad_ref(x.shape, w, g),
         lowp=False),
    Case("embedding", "embedding", [const(np.array([[0, 3, 3], [4, 1, 0]])), rnd(5, 3)], F.embedding,
         embedding_ref),
    Case("embedding-padding-idx", "embedding", [const(np.array([2, 0, 2])), rnd(4, 2)],
         lambda i, w: F.embedding(i, w, padding_idx=2), embedding_ref,
         grad=False),  # (the padding row gets no gradient: see test_nn_ops)
    Case("batch_norm-training", "batch_norm", [rnd(4, 3, 2), rnd(3), rnd(3)],
         lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), batch_norm_train_ref,
         lowp_ulps=8, lowp_spread=8),
    Case("batch_norm-eval", "batch_norm", [rnd(3, 2), rnd(2), rnd(2)],
         lambda x, w, b: F.batch_norm(x, mp.tensor([0.5, -1.0], dtype=x.dtype), mp.tensor([2.0, 0.5], dtype=x.dtype),
                                      w, b),
         lambda x, w, b: (x - np.array([0.5, -1.0])) / np.sqrt(np.array([2.0, 0.5]) + 1e-5) * w + b,
         lowp_ulps=4, lowp_spread=4),
    Case("dropout-eval", "dropout", [rnd(3, 4)], lambda x: F.dropout(x, 0.5, training=False), lambda x: x),
    Case("dropout-seeded", "dropout", [rnd(3, 4)], _seeded_dropout,
         lambda x: x * _kept(x.shape) / 0.6, lowp=False),
]


def _kept(shape):
    """Which elements seed 11 keeps (the mask drawn through mixprec; the arithmetic checked in NumPy)."""
    return _seeded_dropout(mp.ones(*shape, dtype=mp.float64)).numpy() != 0
