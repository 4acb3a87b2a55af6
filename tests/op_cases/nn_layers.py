"""Cases for the ops of mixprec/ops/nn_layers.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, away, const, pos, rnd
from .refs import batch_norm_train_ref, embedding_ref


def _seeded_dropout(x):
    mp.manual_seed(11)  # the same mask on every call, so finite differences see one function
    _seeded_dropout.device = x.device  # masks are drawn where the tensor is (cuRAND on a GPU): see _kept
    return F.dropout(x, 0.4)


_seeded_dropout.device = "cpu"


CASES = [
    Case("embedding", "embedding", [const(np.array([[0, 3, 3], [4, 1, 0]])), rnd(5, 3)], F.embedding,
         embedding_ref),
    Case("embedding-padding-idx", "embedding", [const(np.array([2, 0, 2])), rnd(4, 2)],
         lambda i, w: F.embedding(i, w, padding_idx=2), embedding_ref,
         grad=False),  # (the padding row gets no gradient: see test_nn_ops)
    Case("embedding-max-norm", "_embedding", [const(np.array([1, 3, 1])), rnd(4, 3)],
         lambda i, w: F.embedding(i, w.detach().clone(), max_norm=0.5, norm_type=1.0),
         lambda i, w: (w * np.minimum(1, 0.5 / (np.abs(w).sum(1, keepdims=True) + 1e-7)))[i],
         grad=False),  # (the rows are renormalised in place, outside autograd; scale_grad_by_freq: test_nn_ops)
    Case("batch_norm-training", "batch_norm", [rnd(4, 3, 2), rnd(3), rnd(3)],
         lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), batch_norm_train_ref,
         lowp_ulps=8, lowp_spread=8),
    Case("batch_norm-eval", "batch_norm", [rnd(3, 2), rnd(2), rnd(2)],
         lambda x, w, b: F.batch_norm(x, mp.tensor([0.5, -1.0], dtype=x.dtype, device=x.device),
                                      mp.tensor([2.0, 0.5], dtype=x.dtype, device=x.device), w, b),
         lambda x, w, b: (x - np.array([0.5, -1.0])) / np.sqrt(np.array([2.0, 0.5]) + 1e-5) * w + b,
         lowp_ulps=4, lowp_spread=4),
    Case("prelu-per-channel", "prelu", [away(2, 3, 4), pos(3, lo=0.1, hi=0.9)], F.prelu,
         lambda x, w: np.where(x > 0, x, w.reshape(1, 3, 1) * x)),
    Case("prelu-shared-1d", "prelu", [away(5), pos(1, lo=0.1, hi=0.9)], mp.prelu,
         lambda x, w: np.where(x > 0, x, w * x)),
    Case("bilinear", "bilinear", [rnd(4, 3), rnd(4, 2), rnd(5, 3, 2), rnd(5)], F.bilinear,
         lambda a, b, w, bias: np.einsum("ni,oij,nj->no", a, w, b) + bias, lowp_spread=4),
    Case("bilinear-batch-dims-no-bias", "bilinear", [rnd(2, 3, 3), rnd(2, 3, 2), rnd(4, 3, 2)], F.bilinear,
         lambda a, b, w: np.einsum("...i,oij,...j->...o", a, w, b), lowp_spread=4),
    Case("dropout-eval", "dropout", [rnd(3, 4)], lambda x: F.dropout(x, 0.5, training=False), lambda x: x),
    Case("dropout-seeded", "dropout", [rnd(3, 4)], _seeded_dropout,
         lambda x: x * _kept(x.shape) / 0.6, lowp=False),
]


def _kept(shape):
    """Which elements seed 11 keeps on the device the case last ran on (the mask drawn through mixprec; the
    arithmetic checked in NumPy)."""
    return _seeded_dropout(mp.ones(*shape, dtype=mp.float64, device=_seeded_dropout.device)).numpy() != 0

