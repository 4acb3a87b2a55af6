"""quantile / nanquantile against torch (CPU, float64): every interpolation mode, NaNs, q tensors, gradients."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")

MODES = ["linear", "lower", "higher", "midpoint", "nearest"]
RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 7))
X_NAN = X.copy()
X_NAN[1, 2] = np.nan
X_ALL_NAN = X_NAN.copy()
X_ALL_NAN[2] = np.nan
CALLS = [  # (input, q, keyword arguments)
    (X, 0.3, dict(dim=1)),
    (X_NAN, np.array([0.0, 0.25, 0.5, 1.0]), dict(dim=0, keepdim=True)),
    (X_ALL_NAN, np.array([0.1, 0.9]), dict(dim=-1)),
    (X, np.array([0.1, 0.9]), dict()),
    (X, np.array(0.5), dict(dim=-1, keepdim=True)),
    (X.reshape(3, 7, 1), np.array([0.3]), dict(dim=None, keepdim=True)),
    (np.arange(5.0), np.array([0.125, 0.375, 0.625, 0.875]), dict()),  # ties of the rank's fraction: "nearest"
    (np.array(0.7), 0.5, dict(dim=0, keepdim=True)),  # a 0-d input has no dim to keep: its result stays 0-d
    (np.array(0.7), np.array([0.2, 0.9]), dict(keepdim=True)),
]


@pytest.mark.parametrize("name", ["quantile", "nanquantile"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("x,q,kwargs", CALLS, ids=[f"call{i}" for i in range(len(CALLS))])
def test_matches_torch_values_and_gradients(name, mode, x, q, kwargs):
    xm, xt = mp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    qm = mp.tensor(q, requires_grad=True) if isinstance(q, np.ndarray) else q
    qt = torch.tensor(q, requires_grad=True) if isinstance(q, np.ndarray) else q
    out = getattr(mp, name)(xm, qm, interpolation=mode, **kwargs)
    tout = getattr(torch, name)(xt, qt, interpolation=mode, **kwargs)
    assert out.shape == tuple(tout.shape)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = RNG.standard_normal(out.shape)
    (out * mp.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    # an all-NaN slice has no answer: its gradient goes to one of its NaNs, which one is the sort's choice
    answered = ~np.isnan(x).all(axis=-1, keepdims=True) if x.ndim > 1 else True
    np.testing.assert_allclose(np.nan_to_num(xm.grad.numpy(), nan=9.0) * answered,
                               np.nan_to_num(xt.grad.numpy(), nan=9.0) * answered, atol=1e-12)
    if isinstance(q, np.ndarray) and np.all(answered):  # (q is not used by the modes that round: no gradient)
        got = np.zeros(q.shape) if qm.grad is None else qm.grad.numpy()
        np.testing.assert_allclose(got, np.zeros(q.shape) if qt.grad is None else qt.grad.numpy(), atol=1e-10)


ERRORS = [
    ("q-range", lambda: mp.quantile(mp.ones(3), 1.5), RuntimeError, r"q values must be in the range \[0, 1\]"),
    ("q-tensor-range", lambda: mp.nanquantile(mp.ones(3), mp.tensor([0.5, -0.1])), RuntimeError, "range"),
    ("q-dtype", lambda: mp.quantile(mp.ones(3), mp.tensor(0.5, dtype=mp.float64)), TypeError, "q must have"),
    ("q-2d", lambda: mp.quantile(mp.ones(3), mp.ones(1, 1) * 0.5), RuntimeError, "1-d tensor"),
    ("q-type", lambda: mp.quantile(mp.ones(3), "0.5"), TypeError, "q must be a number or a tensor"),
    ("half", lambda: mp.quantile(mp.ones(3, dtype=mp.bfloat16), 0.5), TypeError, "float32 or float64.*autocast"),
    ("int", lambda: mp.nanquantile(mp.ones(3, dtype=mp.int64), 0.5), TypeError, "float32 or float64"),
    ("empty", lambda: mp.quantile(mp.ones(0), 0.5), RuntimeError, "non-empty"),
    ("mode", lambda: mp.quantile(mp.ones(3), 0.5, interpolation="mean"), ValueError, "interpolation must be"),
    ("dim", lambda: mp.quantile(mp.ones(3), 0.5, dim=1), IndexError, "dim 1 is out of range"),
]


@pytest.mark.parametrize("fn,exc,match", [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_cpu_autocast_computes_quantiles_in_float32():
    x = mp.tensor(X, dtype=mp.bfloat16, requires_grad=True)
    with mp.autocast("cpu"):
        out = mp.quantile(x, 0.5, dim=1)
    assert out.dtype == mp.float32
    out.sum().backward()
    assert x.grad.dtype == mp.bfloat16
