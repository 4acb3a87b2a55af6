"""The random samplers of mixprec/ops/samplers.py: seeded by mp.manual_seed on every device, the right
distributions, torch's zero gradients, clear errors."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

FILLS = [("uniform_", (-2.0, 3.0), 0.5, 25 / 12), ("normal_", (1.0, 2.0), 1.0, 4.0),
         ("exponential_", (2.0,), 0.5, 0.25),
         ("log_normal_", (0.0, 0.5), np.exp(0.125), (np.exp(0.25) - 1) * np.exp(0.25)),
         ("geometric_", (0.25,), 4.0, 12.0), ("bernoulli_", (0.3,), 0.3, 0.21)]


@pytest.mark.parametrize("name,params,mean,var", FILLS, ids=[f[0] for f in FILLS])
def test_fills_draw_their_distribution_and_follow_the_seed(name, params, mean, var, device):
    x = mp.zeros(200000, dtype=mp.float64, device=device)
    mp.manual_seed(7)
    assert getattr(x, name)(*params) is x
    first = x.numpy().copy()
    assert abs(first.mean() - mean) < 5 * np.sqrt(var / first.size) and abs(first.var() / var - 1) < 0.05
    mp.manual_seed(7)
    np.testing.assert_array_equal(getattr(x, name)(*params).numpy(), first)


def test_cauchy_median_and_quartiles():
    x = mp.zeros(100000, dtype=mp.float64).cauchy_(1.0, 2.0).numpy()
    assert np.allclose(np.percentile(x, [25, 50, 75]), [-1.0, 1.0, 3.0], atol=0.1)


def test_a_seed_gives_the_same_draws_in_every_dtype_family_and_device(device):
    mp.manual_seed(3)
    a = mp.normal(mp.zeros(5, device=device), 1.0).cpu().numpy()
    mp.manual_seed(3)
    b = mp.normal(mp.zeros(5), 1.0).numpy()
    np.testing.assert_array_equal(a, b)
    mp.manual_seed(3)
    i = mp.multinomial(mp.ones(3, 10, device=device), 4).cpu().numpy()
    mp.manual_seed(3)
    np.testing.assert_array_equal(mp.multinomial(mp.ones(3, 10), 4).numpy(), i)
    assert all(len(set(row)) == 4 for row in i)  # without replacement: distinct


def test_samplers_get_zero_gradients_as_torch(torch):
    m, s = mp.zeros(3, requires_grad=True), mp.ones(1, requires_grad=True)
    mp.normal(m, s).sum().backward()
    p = mp.full((3,), 0.4, requires_grad=True)
    mp.bernoulli(p).sum().backward()
    a = mp.ones(3, requires_grad=True)
    b = a * 2
    b.uniform_()
    (b * b).sum().backward()
    tm, ts = torch.zeros(3, requires_grad=True), torch.ones(1, requires_grad=True)
    torch.normal(tm, ts).sum().backward()
    for got, want in ((m.grad, tm.grad), (s.grad, ts.grad), (p.grad, torch.zeros(3)), (a.grad, torch.zeros(3))):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_normal_forms_and_dtypes(torch):
    assert mp.normal(0.3, 1.6, (2, 3)).dtype == mp.float32 and mp.normal(0.3, 1.6, (2, 3)).shape == (2, 3)
    assert mp.normal(0.0, 1.0, (2,), dtype=mp.float64).dtype == mp.float64
    assert mp.normal(mp.zeros(2, 1, dtype=mp.float64), mp.ones(3)).shape == (2, 3)
    assert mp.randint_like(mp.zeros(2, 2), 10).dtype == mp.float32
    counts = np.bincount(mp.multinomial(mp.tensor([0.0, 1.0, 3.0]), 4000, replacement=True).numpy(), minlength=3)
    assert counts[0] == 0 and abs(counts[2] / 4000 - 0.75) < 0.03


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.zeros(2).uniform_(2.0, 1.0), ValueError, r"uniform_: expected from <= to"),
    (lambda: mp.zeros(2).normal_(0.0, -1.0), ValueError, r"normal_: expected std >= 0"),
    (lambda: mp.zeros(2).exponential_(0.0), ValueError, r"exponential_: expected lambd > 0"),
    (lambda: mp.zeros(2).geometric_(1.0), ValueError, r"geometric_: p must be a number in \(0, 1\)"),
    (lambda: mp.zeros(2).bernoulli_(1.5), ValueError, r"bernoulli_: p must be a number in \[0, 1\]"),
    (lambda: mp.zeros(2, dtype=mp.int64).uniform_(), TypeError, r"uniform_: expected a floating-point tensor"),
    (lambda: mp.bernoulli(mp.tensor([0.5, 2.0])), ValueError, r"bernoulli: the probabilities in input"),
    (lambda: mp.normal(mp.zeros(2), -1.0), ValueError, r"normal: std must be >= 0"),
    (lambda: mp.multinomial(mp.ones(3), 4), RuntimeError, r"cannot draw 4 samples without replacement from 3"),
    (lambda: mp.multinomial(mp.tensor([1.0, 0.0, 0.0]), 2), RuntimeError, r"fewer than 2 categories"),
    (lambda: mp.multinomial(mp.tensor([1.0, -1.0]), 1, True), RuntimeError, r"finite and non-negative"),
    (lambda: mp.randint_like(mp.zeros(2), 5, 5), ValueError, r"randint_like: expected low < high"),
    (lambda: mp.zeros(2).normal_(generator=object()), ValueError, r"normal_: mixprec has one generator"),
])
def test_bad_arguments_raise_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
