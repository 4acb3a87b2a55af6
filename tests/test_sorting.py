"""mixprec/ops/sorting.py: torch's choice among equal values, NaN placement, gradients to the chosen
elements, and errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

TIES = [3.0, 1.0, 3.0, 2.0, 1.0, 3.0]
NANS = [1.0, float("nan"), 0.0, float("nan"), 5.0]


@pytest.mark.parametrize("values", [TIES, NANS, [2.0, 2.0, 2.0, 2.0]])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_and_orders_nan_as_largest_like_torch(values, descending, torch, device):
    got = mp.sort(mp.tensor(values, device=device), descending=descending)
    want = torch.sort(torch.tensor(values), descending=descending, stable=True)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())


@pytest.mark.parametrize("values", [TIES, NANS, [1.0, 2.0, 2.0, 1.0]])
def test_median_mode_and_nanmedian_pick_torch_values_and_its_nan_index(values, torch):
    x, t = mp.tensor(values), torch.tensor(values)
    assert mp.median(x, 0).values.numpy() == pytest.approx(torch.median(t, 0).values.item(), nan_ok=True)
    assert mp.nanmedian(x, 0).values.item() == pytest.approx(torch.nanmedian(t, 0).values.item(), nan_ok=True)
    assert tuple(int(i) for i in (mp.mode(x).indices, mp.mode(x).values)) == \
        tuple(int(i) for i in (torch.mode(t).indices, torch.mode(t).values))
    if any(np.isnan(values)):  # the index of the first NaN
        assert int(mp.median(x, 0).indices) == int(torch.median(t, 0).indices)


def test_median_of_all_shares_the_gradient_between_ties_like_torch(torch):
    x, t = mp.tensor([1.0, 2.0, 2.0, 1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0, 2.0, 1.0, 2.0],
                                                                                  requires_grad=True)
    mp.median(x).backward()
    torch.median(t).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_selection_gradient_goes_to_the_selected_elements():
    x = mp.tensor([[0.5, -1.0, 2.0], [3.0, 0.0, 1.0]], requires_grad=True)
    values, indices = mp.topk(x, 2)
    values.sum().backward()
    expected = np.zeros((2, 3))
    np.put_along_axis(expected, indices.numpy(), 1.0, axis=1)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_results_are_named_tuples():
    x = mp.tensor([[0.5, -1.0, 2.0]])
    assert type(mp.sort(x)).__name__ == "sort" and mp.kthvalue(x, 1).values.shape == (1,)
    assert type(mp.median(x, 1)).__name__ == "median" and type(mp.mode(x)).__name__ == "mode"


def test_median_of_an_empty_float_tensor_is_nan(torch):
    assert np.isnan(mp.median(mp.zeros(0)).item()) and np.isnan(torch.median(torch.zeros(0)).item())


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.topk(mp.zeros(2, 3), 4), RuntimeError, "topk: k=4 is out of range"),
    (lambda: mp.kthvalue(mp.zeros(3), 0), RuntimeError, "kthvalue: k=0 is out of range"),
    (lambda: mp.sort(mp.zeros(2, 3), 2), IndexError, "sort: dim 2 is out of range"),
    (lambda: mp.mode(mp.zeros(2, 0), 1), IndexError, "mode: cannot take the mode of an empty dim"),
    (lambda: mp.median(mp.zeros(2, 0), 1), IndexError, "median: cannot take the median of an empty dim"),
    (lambda: mp.sort(mp.tensor([1j])), RuntimeError, "sort: complex input is not supported"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
