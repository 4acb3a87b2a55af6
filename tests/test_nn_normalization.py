"""InstanceNorm1d/2d/3d and LocalResponseNorm (mixprec/nn/normalization.py) and their functions against torch."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name,shape", [("InstanceNorm1d", (3, 4, 6)), ("InstanceNorm2d", (2, 4, 3, 3)),
                                        ("InstanceNorm3d", (2, 4, 2, 2, 3)), ("InstanceNorm2d", (4, 3, 3))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, True)])
def test_instance_norm_matches_torch_in_training_and_eval(name, shape, affine, track):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    m, t = getattr(mp.nn, name)(4, affine=affine, track_running_stats=track), getattr(torch.nn, name)(
        4, affine=affine, track_running_stats=track)
    for _ in range(2):
        mx, tx = mp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, ty = m(mx), t(tx)
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
        (y * y).sum().backward()
        (ty * ty).sum().backward()
        np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    if track:
        np.testing.assert_allclose(m.running_mean.numpy(), t.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m.running_var.numpy(), t.running_var.numpy(), rtol=1e-5, atol=1e-6)
        m.eval(), t.eval()
        np.testing.assert_allclose(m(mp.tensor(x)).numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_local_response_norm_layer_matches_torch():
    x = np.random.default_rng(1).standard_normal((2, 7, 3, 2)).astype(np.float32)
    y = mp.nn.LocalResponseNorm(4, 0.1, 0.6, 2.0)(mp.tensor(x))
    np.testing.assert_allclose(y.numpy(), torch.nn.LocalResponseNorm(4, 0.1, 0.6, 2.0)(torch.tensor(x)).numpy(),
                               rtol=1e-6, atol=1e-6)


def test_gaussian_nll_and_triplet_with_distance_losses_match_torch():
    rng = np.random.default_rng(2)
    x, t, v = (rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), rng.uniform(0, 2, (4, 1)))
    v[0] = 0.0  # clamped to eps
    mx, mv = mp.tensor(x, requires_grad=True), mp.tensor(v, requires_grad=True)
    tx, tv = torch.tensor(x, requires_grad=True), torch.tensor(v, requires_grad=True)
    mloss = mp.nn.GaussianNLLLoss(full=True, reduction="sum")(mx, mp.tensor(t), mv)
    tloss = torch.nn.GaussianNLLLoss(full=True, reduction="sum")(tx, torch.tensor(t), tv)
    np.testing.assert_allclose(mloss.item(), tloss.item(), rtol=1e-10)
    mloss.backward()
    tloss.backward()
    np.testing.assert_allclose(mv.grad.numpy(), tv.grad.numpy(), rtol=1e-10)
    a, p, n = (rng.standard_normal((5, 3)) for _ in range(3))
    for fn, tfn in [(None, None), (lambda u, w: (u - w).abs().sum(-1), lambda u, w: (u - w).abs().sum(-1))]:
        got = mp.nn.TripletMarginWithDistanceLoss(distance_function=fn, margin=0.5, swap=True, reduction="none")(
            mp.tensor(a), mp.tensor(p), mp.tensor(n))
        want = torch.nn.TripletMarginWithDistanceLoss(distance_function=tfn, margin=0.5, swap=True, reduction="none")(
            torch.tensor(a), torch.tensor(p), torch.tensor(n))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)


def test_gaussian_nll_loss_promotes_and_an_infinite_var_leaves_a_zero_input_gradient():
    x = mp.tensor([[0.5, -1.0]], dtype=mp.float32, requires_grad=True)
    loss = mp.nn.functional.gaussian_nll_loss(x, mp.zeros(1, 2, dtype=mp.float64), mp.tensor([[float("inf"), 2.0]]),
                                              reduction="sum")
    assert loss.dtype == mp.float64
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, -0.5]])  # (x - target) / var


@pytest.mark.parametrize("fn,exc,match", [
    (lambda: mp.nn.functional.instance_norm(mp.ones(2, 3, 1)), ValueError,
     r"instance_norm: expected more than 1 spatial"),
    (lambda: mp.nn.functional.instance_norm(mp.ones(2, 3)), ValueError, r"instance_norm: expected an input of shape"),
    (lambda: mp.nn.functional.local_response_norm(mp.ones(2, 3), 2), ValueError, r"local_response_norm: expected"),
    (lambda: mp.nn.functional.gaussian_nll_loss(mp.ones(2, 3), mp.ones(2, 3), -mp.ones(2, 3)), ValueError,
     r"gaussian_nll_loss: var has negative entries"),
    (lambda: mp.nn.functional.gaussian_nll_loss(mp.ones(2, 3), mp.ones(2, 3), mp.ones(3, 3)), ValueError,
     r"gaussian_nll_loss: var of shape \(3, 3\) is of incorrect size"),
    (lambda: mp.nn.functional.triplet_margin_with_distance_loss(mp.ones(2, 3), mp.ones(2, 3), mp.ones(3), margin=1.0),
     RuntimeError, r"the same number of dims, got \[2, 2, 1\]"),
    (lambda: mp.nn.functional.triplet_margin_with_distance_loss(mp.ones(2), mp.ones(2), mp.ones(2), margin=0.0),
     ValueError, r"margin must be greater than 0"),
])
def test_bad_arguments_raise_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()
