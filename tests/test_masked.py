"""mp.masked (mixprec/masked.py): torch.masked's semantics, checked against NumPy's masked arrays and, where
torch is installed, torch.masked itself."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

X = np.array([[0.5, -1.25, 2.0, 0.75], [1.5, 0.25, -0.5, 3.0], [-2.0, 1.0, 0.125, -0.75]])
MASK = np.array([[True, False, True, True], [False, False, False, False], [True, True, False, True]])


def _ma():
    return np.ma.masked_array(X, ~MASK)


@pytest.mark.parametrize("name,identity", [("sum", 0.0), ("prod", 1.0), ("amax", -np.inf), ("amin", np.inf),
                                           ("logsumexp", -np.inf)])
def test_reductions_give_their_identity_on_a_fully_masked_row(name, identity, device):
    x, m = mp.tensor(X, device=device), mp.tensor(MASK, device=device)
    out = getattr(mp.masked, name)(x, 1, mask=m).numpy()
    with np.errstate(divide="ignore"):  # (the fully masked row's log(0))
        ref = {"sum": _ma().sum(1), "prod": _ma().prod(1), "amax": _ma().max(1), "amin": _ma().min(1),
               "logsumexp": np.log(np.exp(_ma()).sum(1))}[name]
    np.testing.assert_allclose(out[[0, 2]], np.asarray(ref)[[0, 2]], rtol=1e-12)
    assert out[1] == identity


@pytest.mark.parametrize("name", ["mean", "var", "std", "median"])
def test_reductions_without_identity_give_nan_on_a_fully_masked_row(name, device):
    x, m = mp.tensor(X, device=device), mp.tensor(MASK, device=device)
    out = getattr(mp.masked, name)(x, 1, mask=m).numpy()
    rows = [X[i][MASK[i]] for i in (0, 2)]
    ref = {"mean": [r.mean() for r in rows], "var": [r.var(ddof=1) for r in rows],
           "std": [r.std(ddof=1) for r in rows], "median": [np.sort(r)[(len(r) - 1) // 2] for r in rows]}[name]
    np.testing.assert_allclose(out[[0, 2]], ref, rtol=1e-12)
    assert np.isnan(out[1])


def test_mask_broadcasts_and_masked_out_elements_get_no_gradient(device):
    x = mp.tensor(X, device=device, requires_grad=True)
    column_mask = mp.tensor([True, False, True, False], device=device)  # (4,) broadcast over the rows
    mp.masked.sum(x, mask=column_mask).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to([1.0, 0.0, 1.0, 0.0], X.shape))


def test_softmax_gives_masked_out_positions_zero_probability(device):
    x, m = mp.tensor(X, device=device), mp.tensor(MASK, device=device)
    p = mp.masked.softmax(x, 1, mask=m).numpy()
    e = np.where(MASK, np.exp(X), 0.0)[[0, 2]]
    np.testing.assert_allclose(p[[0, 2]], e / e.sum(1, keepdims=True), rtol=1e-12)
    assert np.isnan(p[1]).all()


def test_bad_mask_is_refused():
    with pytest.raises(IndexError, match="masked.sum: the mask has more dims"):
        mp.masked.sum(mp.tensor([1.0, 2.0]), mask=mp.tensor([[True, False]]))
    with pytest.raises(TypeError, match="masked.amax: mask must be a Tensor"):
        mp.masked.amax(mp.tensor([1.0, 2.0]), mask=[True, False])
    with pytest.raises(ValueError, match="masked.mean: the result needs a floating"):
        mp.masked.mean(mp.tensor([1, 2]))


@pytest.mark.parametrize("name,args,kwargs", [
    ("sum", (1,), {}), ("prod", (), {"keepdim": True}), ("cumsum", (1,), {}), ("cumprod", (0,), {}),
    ("amax", ((0, 1),), {}), ("argmin", (1,), {}), ("mean", (0,), {}), ("median", (1,), {}),
    ("norm", (3.0, 1), {}), ("var", (1,), {"correction": 0}), ("std", (0,), {}), ("softmax", (1,), {}),
    ("log_softmax", (0,), {}), ("softmin", (1,), {}), ("normalize", (2.0, 1), {}), ("logsumexp", (1,), {})])
def test_matches_torch_masked_values_and_gradients(name, args, kwargs, torch):
    mask = MASK.copy()
    mask[1, 2] = True  # (no fully masked-out row: torch's gradients there are NaN-laden)
    x = mp.tensor(X, requires_grad=True)
    tx = torch.tensor(X, requires_grad=True)
    out = getattr(mp.masked, name)(x, *args, mask=mp.tensor(mask), **kwargs)
    want = getattr(torch.masked, name)(tx, *args, mask=torch.tensor(mask), **kwargs)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    if out.requires_grad:
        g = np.linspace(-1.0, 1.0, out.numel()).reshape(out.shape)
        out.backward(mp.tensor(g))
        want.backward(torch.tensor(g))
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_logaddexp_matches_torch(torch):
    a, b = X[0], X[2]
    ma, mb = MASK[0], MASK[2]
    out = mp.masked.logaddexp(mp.tensor(a), mp.tensor(b), input_mask=mp.tensor(ma), other_mask=mp.tensor(mb))
    want = torch.masked.logaddexp(torch.tensor(a), torch.tensor(b), input_mask=torch.tensor(ma),
                                  other_mask=torch.tensor(mb))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-12)
