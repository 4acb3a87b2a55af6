"""mixprec/ops/differences.py: torch's argument forms, and errors for bad input."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


def test_gradient_with_coordinates_and_trapezoid_match_torch(torch):
    y, x = [1.0, 2.0, 4.0, 8.0], [0.0, 1.0, 3.0, 4.0]
    for order in (1, 2):
        got = mp.gradient(mp.tensor(y), spacing=(mp.tensor(x),), edge_order=order)[0]
        want = torch.gradient(torch.tensor(y), spacing=(torch.tensor(x),), edge_order=order)[0]
        np.testing.assert_allclose(got.numpy(), want.numpy())
    assert mp.trapz(mp.tensor(y), mp.tensor(x)).item() == pytest.approx(torch.trapz(torch.tensor(y),
                                                                                    torch.tensor(x)).item())
    np.testing.assert_allclose(mp.cumulative_trapezoid(mp.tensor(y), dx=2.0).numpy(),
                               torch.cumulative_trapezoid(torch.tensor(y), dx=2.0).numpy())


def test_diff_of_bools_is_whether_neighbours_differ(torch):
    m = [True, False, False, True]
    np.testing.assert_array_equal(mp.diff(mp.tensor(m)).numpy(), torch.diff(torch.tensor(m)).numpy())


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.diff(mp.tensor(1.0)), RuntimeError, "diff: expected a tensor with at least one dimension"),
    (lambda: mp.gradient(mp.zeros(3), edge_order=3), RuntimeError, "gradient: edge_order must be 1 or 2"),
    (lambda: mp.gradient(mp.zeros(2), edge_order=2), RuntimeError, "gradient: dim 0 has 2 elements"),
    (lambda: mp.trapezoid(mp.zeros(3), mp.zeros(3), dx=1.0), TypeError, "trapezoid: pass x or dx, not both"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
