"""mp.signal.windows against torch.signal.windows and SciPy's definitions: values, sym, dtype, bad arguments."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")
scipy_windows = pytest.importorskip("scipy.signal.windows")

W = mp.signal.windows
SIMPLE = ["hamming", "hann", "bartlett", "blackman", "cosine", "nuttall"]
WITH_ARGS = [("exponential", {"tau": 2.5}), ("exponential", {"center": 1.0}), ("gaussian", {"std": 0.7}),
             ("kaiser", {"beta": 5.0}), ("general_cosine", {"a": [0.5, 0.3, 0.2]}),
             ("general_hamming", {"alpha": 0.6})]


@pytest.mark.parametrize("name,kwargs", [(n, {}) for n in SIMPLE] + WITH_ARGS)
@pytest.mark.parametrize("M", [0, 1, 2, 5, 16])
@pytest.mark.parametrize("sym", [True, False])
def test_window_matches_torch(name, kwargs, M, sym):
    if "center" in kwargs and sym:
        pytest.skip("only a periodic exponential window takes a center (checked below)")
    got = getattr(W, name)(M, sym=sym, dtype=mp.float64, **kwargs)
    want = getattr(torch.signal.windows, name)(M, sym=sym, dtype=torch.float64, **kwargs)
    assert got.dtype == mp.float64 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,scipy_name,kwargs", [("hann", "hann", {}), ("kaiser", "kaiser", {"beta": 4.0}),
                                                    ("gaussian", "gaussian", {"std": 1.5}),
                                                    ("nuttall", "nuttall", {})])
def test_window_matches_scipy(name, scipy_name, kwargs):
    for sym in (True, False):
        want = getattr(scipy_windows, scipy_name)(9, *kwargs.values(), sym=sym)
        np.testing.assert_allclose(getattr(W, name)(9, sym=sym, dtype=mp.float64, **kwargs).numpy(), want,
                                   rtol=1e-12, atol=1e-14)


def test_window_defaults_and_options():
    w = W.hann(6)
    assert w.dtype == mp.float32 and not w.requires_grad and w.device.type == "cpu"
    w = W.hamming(4, dtype=mp.float64, requires_grad=True)
    assert w.requires_grad and w.is_leaf


BAD = [
    (lambda: W.hann(-1), ValueError, "non-negative"),
    (lambda: W.hann(2.5), TypeError, "M must be an int"),
    (lambda: W.hann(4, dtype=mp.int64), ValueError, "floating point"),
    (lambda: W.exponential(4, tau=0.0), ValueError, "tau must be positive"),
    (lambda: W.exponential(4, center=1.0), ValueError, "center must be None"),
    (lambda: W.gaussian(4, std=-1.0), ValueError, "std must be positive"),
    (lambda: W.kaiser(4, beta=-1.0), ValueError, "beta must be non-negative"),
    (lambda: W.general_cosine(4, a=0.5), TypeError, "list or tuple"),
]


@pytest.mark.parametrize("call,exc,match", BAD)
def test_bad_arguments_raise_clear_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_window_on_each_device(device):
    w = W.kaiser(7, beta=3.0, sym=False, device=device)
    assert str(w.device).startswith(device) and w.dtype == mp.float32
    np.testing.assert_allclose(w.cpu().numpy(), torch.signal.windows.kaiser(7, beta=3.0, sym=False).numpy(),
                               rtol=1e-6)
