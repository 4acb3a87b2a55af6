"""Cases for mixprec/ops/embedding_bag.py (references: explicit per-bag loops)."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, const, rnd


def _bag_ref(weight, idx, starts, mode, psw=None, padding_idx=None):
    ends = list(starts[1:]) + [len(idx)]
    out = np.zeros((len(starts), weight.shape[1]))
    for b, (s, e) in enumerate(zip(starts, ends)):
        entries = [i for i in range(s, e) if idx[i] != padding_idx]
        if not entries:
            continue
        rows = np.stack([weight[idx[i]] * (1 if psw is None else psw[i]) for i in entries])
        out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
    return out


IDX = np.array([1, 3, 3, 0, 5, 2, 1])
OFFSETS = np.array([0, 2, 2, 5])  # the third bag is empty

CASES = [
    Case("embedding_bag-mean", "embedding_bag", [rnd(6, 3), const(IDX), const(OFFSETS)],
         lambda w, i, o: F.embedding_bag(mp.tensor(i), w, mp.tensor(o)), lambda w, i, o: _bag_ref(w, i, o, "mean"),
         lowp_ulps=2, lowp_spread=2),
    Case("embedding_bag-sum-weighted", "embedding_bag", [rnd(6, 3), const(IDX), const(OFFSETS), rnd(7)],
         lambda w, i, o, p: F.embedding_bag(mp.tensor(i), w, mp.tensor(o), mode="sum", per_sample_weights=p),
         lambda w, i, o, p: _bag_ref(w, i, o, "sum", p), lowp_ulps=3, lowp_spread=3),
    Case("embedding_bag-max-padding", "embedding_bag", [rnd(6, 3), const(IDX.reshape(1, 7))],
         lambda w, i: F.embedding_bag(mp.tensor(i), w, mode="max", padding_idx=3),
         lambda w, i: _bag_ref(w, i.reshape(-1), [0], "max", padding_idx=3)),
    Case("embedding_bag-2d-last-offset", "embedding_bag", [rnd(6, 2), const(IDX[:6].reshape(3, 2))],
         lambda w, i: F.embedding_bag(mp.tensor(i), w, mode="sum", include_last_offset=True),
         lambda w, i: _bag_ref(w, i.reshape(-1), [0, 2, 4], "sum"), lowp_ulps=2, lowp_spread=2),
]
