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


@pytest.mark.parametrize("right", [False, True])
def test_a_nan_in_the_sequence_or_values_lands_where_torch_bisection_puts_it(torch, right):
    nan = float("nan")
    values = [[0.5, 3.0, nan, 9.0], [2.0, nan, -1.0, 6.0]]
    for seq in ([nan, 1.0, 3.0, 5.0], [1.0, nan, 3.0, 5.0, 7.0], [1.0, 2.0, 3.0, nan], [[1.0, nan], [nan, 4.0]]):
        v = values if np.ndim(seq) == 2 else values[0]
        want = torch.searchsorted(torch.tensor(seq), torch.tensor(v), right=right)
        np.testing.assert_array_equal(mp.searchsorted(mp.tensor(seq), mp.tensor(v), right=right).numpy(), want)
        if np.ndim(seq) == 1:
            want = torch.bucketize(torch.tensor(values), torch.tensor(seq), right=right)
            np.testing.assert_array_equal(mp.bucketize(mp.tensor(values), mp.tensor(seq), right=right).numpy(), want)


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
    (lambda: mp.unique(mp.zeros(3, 0), dim=0), RuntimeError, "unique: input of shape \\(3, 0\\) has a 0-size dim"),
    (lambda: mp.unique_consecutive(mp.zeros(0, 2), dim=1), RuntimeError, "unique_consecutive: input of shape"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
