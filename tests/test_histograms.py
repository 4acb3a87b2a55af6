"""mixprec/ops/histograms.py: torch's bin ranges and dtypes, and errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


@pytest.mark.parametrize("values", [[], [2.0], [1.0, 2.0, 1.0]])
def test_default_ranges_match_torch(values, torch):
    got, want = mp.histogram(mp.tensor(values), 2), torch.histogram(torch.tensor(values), 2)
    np.testing.assert_allclose(got.hist.numpy(), want.hist.numpy())
    np.testing.assert_allclose(got.bin_edges.numpy(), want.bin_edges.numpy())
    np.testing.assert_allclose(mp.histc(mp.tensor(values), 3).numpy(), torch.histc(torch.tensor(values), 3).numpy())


def test_an_infinite_weight_makes_only_its_own_bin_infinite(torch):
    x, w = [0.1, 0.5, 0.9], [float("inf"), 1.0, 2.0]
    for density in (False, True):
        got = mp.histogram(mp.tensor(x), 3, weight=mp.tensor(w), density=density).hist
        want = torch.histogram(torch.tensor(x), 3, weight=torch.tensor(w), density=density).hist
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_bincount_dtype_follows_the_weights(torch):
    i = [1, 1, 3]
    for w in ([0.5, 0.5, 1.0], [1, 1, 2]):
        got, want = mp.bincount(mp.tensor(i), mp.tensor(w)), torch.bincount(torch.tensor(i), torch.tensor(w))
        assert got.dtype.name == str(want.dtype).removeprefix("torch.")
        np.testing.assert_allclose(got.numpy(), want.numpy())


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.bincount(mp.tensor([1, -1])), RuntimeError, "bincount: input must be non-negative"),
    (lambda: mp.bincount(mp.tensor([1.0])), NotImplementedError, "bincount: input must hold integers"),
    (lambda: mp.histc(mp.tensor([1, 2])), NotImplementedError, "histc: needs a floating input"),
    (lambda: mp.histc(mp.zeros(3), 3, 2, 1), RuntimeError, "histc: the range's min"),
    (lambda: mp.histc(mp.tensor([1.0, float("inf")]), 3), RuntimeError,
     r"histc: the range \[1.0, inf\] must be finite"),
    (lambda: mp.histogram(mp.zeros(3), 0), RuntimeError, "histogram: bins must be a positive int"),
    (lambda: mp.histogramdd(mp.zeros(4, 2), [2]), RuntimeError, "histogramdd: expected bins for each of the 2"),
    (lambda: mp.histogram(mp.zeros(3), 2, weight=mp.ones(3, dtype=mp.float64)), RuntimeError,
     "histogram: weight must have the input's dtype float32"),
    (lambda: mp.histogram(mp.zeros(3), mp.tensor([0.0, 1.0], dtype=mp.float64)), RuntimeError,
     "histogram: bins must have the input's dtype"),
    (lambda: mp.histogramdd(mp.tensor([[0.0, float("inf")]]), 2), RuntimeError,
     "histogramdd: the data's range \\[inf, inf\\] along dim 1 is not finite"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
