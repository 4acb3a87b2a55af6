"""Cases for the ops of mixprec/ops/rnn.py: the four cells and lstm_layer, against NumPy float64 cells."""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, rnd


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _affine(x, w, b):
    return x @ w.T + (0 if b is None else b)


def rnn_ref(act, x, h, w_ih, w_hh, b_ih=None, b_hh=None):
    return act(_affine(x, w_ih, b_ih) + _affine(h, w_hh, b_hh))


def lstm_ref(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    i, f, g, o = np.split(_affine(x, w_ih, b_ih) + _affine(h, w_hh, b_hh), 4, axis=1)
    c2 = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c2), c2


def gru_ref(x, h, w_ih, w_hh, b_ih=None, b_hh=None):
    xr, xz, xn = np.split(_affine(x, w_ih, b_ih), 3, axis=1)
    hr, hz, hn = np.split(_affine(h, w_hh, b_hh), 3, axis=1)
    r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1 - z) * n + z * h


def lstm_layer_ref(x, h, c, w_ih, w_hh, b_ih, b_hh, reverse):
    out = np.zeros(x.shape[:2] + (h.shape[1],))
    for t in (range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])):
        h, c = lstm_ref(x[t], h, c, w_ih, w_hh, b_ih, b_hh)
        out[t] = h
    return out, h, c


N, I, H, P = 2, 3, 3, 2  # batch, input size, hidden size, projected size

CASES = [
    Case("rnn_tanh_cell", "rnn_tanh_cell", [rnd(N, I), rnd(N, H), rnd(H, I), rnd(H, H), rnd(H), rnd(H)],
         mp.rnn_tanh_cell, lambda *a: rnn_ref(np.tanh, *a), lowp_ulps=4, lowp_spread=4, second_order=True),
    Case("rnn_relu_cell-no-bias", "rnn_relu_cell", [rnd(N, I), rnd(N, H), rnd(H, I), rnd(H, H)],
         mp.rnn_relu_cell, lambda *a: rnn_ref(lambda v: np.maximum(v, 0), *a), lowp_ulps=4, lowp_spread=4),
    Case("lstm_cell", "lstm_cell",
         [rnd(N, I), rnd(N, H), rnd(N, H), rnd(4 * H, I), rnd(4 * H, H), rnd(4 * H), rnd(4 * H)],
         lambda x, h, c, *w: mp.lstm_cell(x, (h, c), *w), lstm_ref, lowp_ulps=8, lowp_spread=8),
    Case("lstm_cell-projected-h-no-bias", "lstm_cell", [rnd(N, I), rnd(N, P), rnd(N, H), rnd(4 * H, I), rnd(4 * H, P)],
         lambda x, h, c, *w: mp.lstm_cell(x, [h, c], *w), lstm_ref, lowp_ulps=8, lowp_spread=8),
    Case("gru_cell", "gru_cell", [rnd(N, I), rnd(N, H), rnd(3 * H, I), rnd(3 * H, H), rnd(3 * H), rnd(3 * H)],
         mp.gru_cell, gru_ref, lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("lstm_layer-reverse", "lstm_layer",
         [rnd(2, 1, 2), rnd(1, 2), rnd(1, 2), rnd(8, 2), rnd(8, 2), rnd(8), rnd(8)],
         lambda x, h, c, *w: mp.lstm_layer(x, (h, c), *w, reverse=True),
         lambda *a: lstm_layer_ref(*a, reverse=True), lowp_ulps=16, lowp_spread=16),
]
