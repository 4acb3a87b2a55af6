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


@pytest.mark.parametrize("y_dtype,x_dtype", [("float32", "float64"), ("int64", "float64"), ("int64", "int64"),
                                              ("float64", "int64")])
def test_gradient_with_coordinates_promotes_input_and_coordinates_as_torch(torch, y_dtype, x_dtype):
    y, x = [[1.0, 2.0, 4.0, 8.0, 3.0]], [0.0, 1.0, 3.0, 4.0, 7.0]
    for order in (1, 2):
        got = mp.gradient(mp.tensor(y, dtype=getattr(mp, y_dtype)), spacing=[mp.tensor(x, dtype=getattr(mp, x_dtype))],
                          dim=1, edge_order=order)[0]
        want = torch.gradient(torch.tensor(y, dtype=getattr(torch, y_dtype)),
                              spacing=[torch.tensor(x, dtype=getattr(torch, x_dtype))], dim=1, edge_order=order)[0]
        assert got.dtype.name == str(want.dtype).removeprefix("torch.")
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_an_integral_over_no_samples_is_zeros_of_the_other_dims(torch):
    y, x = np.zeros((0, 3)), np.ones((4, 3))
    for fn in ("trapz", "trapezoid"):
        got = getattr(mp, fn)(mp.tensor(y), mp.tensor(x), dim=0)
        want = getattr(torch, fn)(torch.tensor(y), torch.tensor(x), dim=0)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_diff_of_bools_is_whether_neighbours_differ(torch):
    m = [True, False, False, True]
    np.testing.assert_array_equal(mp.diff(mp.tensor(m)).numpy(), torch.diff(torch.tensor(m)).numpy())


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.diff(mp.tensor(1.0)), RuntimeError, "diff: expected a tensor with at least one dimension"),
    (lambda: mp.gradient(mp.zeros(3), edge_order=3), RuntimeError, "gradient: edge_order must be 1 or 2"),
    (lambda: mp.gradient(mp.zeros(2), edge_order=2), RuntimeError, "gradient: dim 0 has 2 elements"),
    (lambda: mp.trapezoid(mp.zeros(3), mp.zeros(3), dx=1.0), TypeError, "trapezoid: pass x or dx, not both"),
    (lambda: mp.gradient(mp.zeros(3, dtype=mp.bool)), RuntimeError, "gradient: bool input is not supported"),
    (lambda: mp.gradient(mp.zeros(3), spacing=[mp.zeros(3, dtype=mp.bool)]), RuntimeError,
     "gradient: the coordinates of dim 0 are bool"),
    (lambda: mp.trapezoid(mp.zeros(3, dtype=mp.bool)), RuntimeError, "trapezoid: bool input is not supported"),
    (lambda: mp.cumulative_trapezoid(mp.zeros(3), mp.zeros(3, dtype=mp.bool)), RuntimeError,
     "cumulative_trapezoid: bool input is not supported"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
