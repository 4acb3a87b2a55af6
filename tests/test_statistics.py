"""mixprec/ops/statistics.py: torch's tie and NaN rules of cummax/cummin, the var/std overloads, and errors."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("values", [[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [1.0, float("nan"), 0.0, float("nan"), 5.0]])
def test_running_extremes_take_the_later_tie_and_keep_nan_like_torch(name, values, torch, device):
    got = getattr(mp, name)(mp.tensor(values, device=device), 0)
    want = getattr(torch, name)(torch.tensor(values), 0)
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())


def test_std_overloads_read_a_bool_as_unbiased(torch):
    x = [[1.0, 2.0, 4.0], [0.5, 0.25, 3.0]]
    assert mp.std(mp.tensor(x), False).item() == pytest.approx(torch.std(torch.tensor(x), False).item())
    np.testing.assert_allclose(mp.std_mean(mp.tensor(x), 1, correction=0)[0].numpy(),
                               torch.std_mean(torch.tensor(x), 1, correction=0)[0].numpy())
    with pytest.raises(TypeError, match="std: pass correction or unbiased, not both"):
        mp.std(mp.tensor(x), 0, True, correction=1)


def test_std_of_constant_data_passes_a_zero_gradient(torch):
    x, t = mp.tensor([2.0, 2.0, 2.0], requires_grad=True), torch.tensor([2.0, 2.0, 2.0], requires_grad=True)
    mp.std(x).backward()
    torch.std(t).backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_logcumsumexp_stays_finite_far_below_the_maximum():
    x = mp.tensor([-1000.0, 0.0, -1000.0])
    np.testing.assert_allclose(mp.logcumsumexp(x, 0).numpy(), [-1000.0, 0.0, 0.0])


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.nanmean(mp.tensor([1, 2])), RuntimeError, "nanmean: needs a floating input"),
    (lambda: mp.logcumsumexp(mp.tensor([1, 2]), 0), NotImplementedError, "logcumsumexp: needs a floating input"),
    (lambda: mp.aminmax(mp.zeros(0)), RuntimeError, "aminmax: cannot reduce all of an empty input"),
    (lambda: mp.cummax(mp.zeros(2), 1), IndexError, "cummax: dim 1 is out of range"),
    (lambda: mp.cov(mp.zeros(2, 2, 2)), RuntimeError, "cov: expected a 1-D or 2-D input"),
    (lambda: mp.cov(mp.zeros(2, 3), fweights=mp.tensor([1.0, 1.0, 1.0])), RuntimeError,
     "cov: fweights must be integers"),
    (lambda: mp.cov(mp.zeros(2, 3, dtype=mp.bool)), RuntimeError, "cov: bool input is not supported"),
    (lambda: mp.corrcoef(mp.zeros(2, 3, dtype=mp.bool)), RuntimeError, "cov: bool input is not supported"),
    (lambda: mp.cov(mp.zeros(2, 3), aweights=mp.tensor([1, 1, 1])), RuntimeError,
     "cov: aweights must have a floating dtype"),
    (lambda: mp.cov(mp.zeros(2, 3), aweights=mp.tensor([1.0, float("nan"), 1.0])), RuntimeError,
     "cov: aweights cannot be negative"),
    (lambda: mp.cov(mp.zeros(2, 3), fweights=mp.tensor([0, 0, 0])), RuntimeError, "cov: the weights sum to zero"),
])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
