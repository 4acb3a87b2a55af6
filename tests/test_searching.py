"""mixprec/ops/searching.py: shapes and dtypes as torch's, and errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


def test_unique_results_follow_the_flags(torch):
    x = [[3, 1, 2], [1, 3, 3]]
    got = mp.unique(mp.tensor(x), return_counts=True)
    want = torch.unique(torch.tensor(x), return_counts=True)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
        assert g.dtype.name == str(w.dtype).removeprefix("torch.")


def test_nonzero_of_a_0d_tensor_and_nonzero_static_padding(torch):
    for value in (0.0, 2.0):
        assert mp.nonzero(mp.tensor(value)).shape == tuple(torch.nonzero(torch.tensor(value)).shape)
    x = [0.0, 1.5, 0.0, 3.0]
    np.testing.assert_array_equal(mp.nonzero_static(mp.tensor(x), size=3, fill_value=9).numpy(),
                                  torch.nonzero_static(torch.tensor(x), size=3, fill_value=9).numpy())


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.searchsorted(mp.tensor([1.0, 2.0]), mp.tensor([1.5]), side="middle"), RuntimeError,
     "searchsorted: side must be 'left' or 'right'"),
    (lambda: mp.searchsorted(mp.tensor([1.0, 2.0]), mp.tensor([1.5]), side="left", right=True), RuntimeError,
     "searchsorted: side='left' and right=True contradict"),
    (lambda: mp.searchsorted(mp.zeros(3, 2), mp.zeros(2, 2)), RuntimeError,
     "searchsorted: an N-D sequence"),
    (lambda: mp.bucketize(mp.zeros(3), mp.zeros(2, 2)), RuntimeError, "bucketize: boundaries must be 1-D"),
    (lambda: mp.nonzero_static(mp.zeros(3), size=-1), RuntimeError, "nonzero_static: size must be"),
    (lambda: mp.unique(mp.tensor([1j])), NotImplementedError, "unique: complex input"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
