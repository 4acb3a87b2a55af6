"""Cases for the ops of mixprec/ops/attention.py."""
from __future__ import annotations

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

from .case import Case, const, rnd
from .refs import sdpa_ref

E, H = 8, 2  # the multi-head cases' embed_dim and heads


def _mask(*shape, dead_row=None, seed=0):
    """A bool mask (True: may attend) with key 0 always allowed, except in the row ``dead_row`` (fully masked)."""
    m = np.random.default_rng(seed).random(shape) > 0.4
    m[..., 0] = True
    if dead_row is not None:
        m[..., dead_row, :] = False
    return m


def _mha_ref(q, k, v, wqkv, bqkv, wo, bo, mask=None, average=True):
    """Multi-head attention written out: project, split heads, attend (mask True: masked out), merge, project."""
    b, n_q, _ = q.shape
    wq, wk, wv = np.split(wqkv, 3)
    bq, bk, bv = np.split(bqkv, 3)

    def heads(x, w, bias):
        y = x @ w.T + bias
        return y.reshape(b, -1, H, E // H).transpose(0, 2, 1, 3)
    allowed = None if mask is None else ~mask
    out, probs = sdpa_ref(heads(q, wq, bq), heads(k, wk, bk), heads(v, wv, bv), allowed, with_probs=True)
    out = out.transpose(0, 2, 1, 3).reshape(b, n_q, E) @ wo.T + bo
    return out, probs.mean(1) if average else probs


def _mha(q, k, v, wqkv, bqkv, wo, bo, mask=None, mask_type=None, average=True):
    return mp.ops.get("_native_multi_head_attention")(q, k, v, E, H, wqkv, bqkv, wo, bo, mask, True, average,
                                                      mask_type)


CASES = [
    Case("sdpa", "scaled_dot_product_attention", [rnd(2, 3, 4), rnd(2, 5, 4), rnd(2, 5, 6)],
         F.scaled_dot_product_attention, sdpa_ref, lowp_ulps=2, lowp_spread=2, second_order=True),
    Case("sdpa-causal-heads", "scaled_dot_product_attention", [rnd(2, 2, 4, 3), rnd(2, 2, 4, 3), rnd(2, 2, 4, 3)],
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
         lambda q, k, v: sdpa_ref(q, k, v, causal=True), lowp_ulps=2, lowp_spread=2),
    Case("sdpa-causal-more-keys", "scaled_dot_product_attention", [rnd(3, 2), rnd(5, 2), rnd(5, 3)],
         lambda q, k, v: mp.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.7),
         lambda q, k, v: sdpa_ref(q, k, v, causal=True, scale=0.7), lowp_ulps=2, lowp_spread=2),
    Case("sdpa-bool-mask-dead-row", "scaled_dot_product_attention",
         [rnd(2, 3, 4), rnd(2, 5, 4), rnd(2, 5, 2), const(_mask(3, 5, dead_row=1))],
         lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), sdpa_ref, lowp_ulps=2,
         lowp_spread=2),
    Case("sdpa-float-mask-broadcast", "scaled_dot_product_attention",
         [rnd(2, 2, 3, 4), rnd(2, 2, 5, 4), rnd(2, 2, 5, 4), rnd(2, 1, 1, 5)],
         lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m, scale=0.25),
         lambda q, k, v, m: sdpa_ref(q, k, v, m, scale=0.25), lowp_ulps=2, lowp_spread=2),
    Case("sdpa-gqa", "scaled_dot_product_attention", [rnd(1, 4, 3, 2), rnd(1, 2, 5, 2), rnd(1, 2, 5, 3)],
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
         lambda q, k, v: sdpa_ref(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)), lowp_ulps=2, lowp_spread=2),
    Case("native-mha", "_native_multi_head_attention",
         [rnd(2, 3, E), rnd(2, 4, E), rnd(2, 4, E), rnd(3 * E, E), rnd(3 * E), rnd(E, E), rnd(E)], _mha, _mha_ref,
         lowp_ulps=4, lowp_spread=16),
    Case("native-mha-padding-mask", "_native_multi_head_attention",
         [rnd(2, 3, E), rnd(2, 4, E), rnd(2, 4, E), rnd(3 * E, E), rnd(3 * E), rnd(E, E), rnd(E),
          const(np.array([[False, False, True, True], [False, False, False, True]]))],
         lambda *a: _mha(*a, mask_type=1, average=False),
         lambda *a: _mha_ref(*a[:-1], mask=a[-1][:, None, None, :], average=False), lowp_ulps=4, lowp_spread=16),
    Case("native-mha-self-attention-mask", "_native_multi_head_attention",
         [rnd(2, 4, E), rnd(3 * E, E), rnd(3 * E), rnd(E, E), rnd(E), const(~_mask(4, 4, seed=1))],
         lambda x, *a: _mha(x, x, x, *a, mask_type=0), lambda x, *a: _mha_ref(x, x, x, *a), lowp_ulps=4,
         lowp_spread=16),
]
