"""Gradient clipping and weight initialisation."""
import math

import numpy as np
import pytest

import mixprec as mp

nn = mp.nn
rng = np.random.default_rng(4)


def params_with_grads(dtype=mp.float32, scale=1.0):
    ps = [nn.Parameter(mp.zeros(*s, dtype=dtype)) for s in ((3, 4), (5,), (2, 2, 2))]
    for p in ps:
        p.grad = mp.tensor(rng.standard_normal(p.shape) * scale, dtype=dtype)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_scales_to_max_norm(norm_type):
    ps = params_with_grads(scale=3.0)
    flat = np.concatenate([p.grad.numpy().astype(np.float64).ravel() for p in ps])
    total = np.abs(flat).max() if math.isinf(norm_type) else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    before = [p.grad.numpy().copy() for p in ps]
    out = nn.utils.clip_grad_norm_(ps, max_norm=1.0, norm_type=norm_type)
    assert out.dtype == mp.float32
    np.testing.assert_allclose(out.item(), total, rtol=1e-5)
    coef = 1.0 / (total + 1e-6)
    for p, b in zip(ps, before):
        np.testing.assert_allclose(p.grad.numpy(), b * coef, rtol=1e-5)


def test_clip_grad_norm_leaves_small_gradients_alone_and_handles_edge_cases():
    ps = params_with_grads(scale=1e-3)
    before = [p.grad.numpy().copy() for p in ps]
    nn.utils.clip_grad_norm_(ps, max_norm=10.0)
    for p, b in zip(ps, before):
        np.testing.assert_array_equal(p.grad.numpy(), b)
    assert nn.utils.clip_grad_norm_([nn.Parameter(mp.zeros(2))], 1.0).item() == 0.0  # no grads at all
    single = params_with_grads()[0]
    nn.utils.clip_grad_norm_(single, 0.5)  # a lone tensor is accepted
    assert np.linalg.norm(single.grad.numpy()) <= 0.5 + 1e-6


def test_clip_grad_norm_nonfinite():
    ps = params_with_grads()
    ps[1].grad._array[0] = np.inf
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
    assert np.isinf(nn.utils.clip_grad_norm_(ps, 1.0).item())
    with pytest.raises(ValueError, match="norm_type"):
        nn.utils.clip_grad_norm_(ps, 1.0, norm_type=0)
    with pytest.raises(TypeError, match="Tensors"):
        nn.utils.clip_grad_norm_([np.zeros(2)], 1.0)


@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16])
def test_clip_grad_norm_half_gradients_keep_dtype(dtype):
    ps = params_with_grads(dtype=dtype, scale=4.0)
    total = nn.utils.clip_grad_norm_(ps, 1.0)
    assert total.dtype == mp.float32 and all(p.grad.dtype == dtype for p in ps)
    flat = np.concatenate([p.grad.numpy().astype(np.float64).ravel() for p in ps])
    assert abs(np.linalg.norm(flat) - 1.0) < 1e-2


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    ps = params_with_grads(scale=2.0)
    tps = [torch.nn.Parameter(torch.zeros(p.shape)) for p in ps]
    for p, t in zip(ps, tps):
        t.grad = torch.tensor(p.grad.numpy().copy())
    for norm_type in (2.0, math.inf):
        a = nn.utils.clip_grad_norm_(ps, 0.7, norm_type=norm_type)
        b = torch.nn.utils.clip_grad_norm_(tps, 0.7, norm_type=norm_type)
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-6)
        for p, t in zip(ps, tps):
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_grad_value():
    ps = params_with_grads(scale=2.0)
    before = [p.grad.numpy().copy() for p in ps]
    nn.utils.clip_grad_value_(ps, 0.5)
    for p, b in zip(ps, before):
        np.testing.assert_array_equal(p.grad.numpy(), np.clip(b, -0.5, 0.5))
    with pytest.raises(ValueError):
        nn.utils.clip_grad_value_(ps, -1)


def test_init_functions_follow_torch_formulas():
    init = nn.init
    w = mp.empty(200, 300)
    init.kaiming_uniform_(w, a=0, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / 300)
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.99 * bound
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 200)) < 0.01 * math.sqrt(2 / 200) * 5
    init.xavier_uniform_(w, gain=2.0)
    assert np.abs(w.numpy()).max() <= 2 * math.sqrt(6 / 500)
    init.xavier_normal_(w)
    assert abs(w.numpy().std() - math.sqrt(2 / 500)) < 0.05 * math.sqrt(2 / 500)
    conv = mp.empty(8, 4, 3, 3)
    assert init.calculate_fan_in_and_fan_out(conv) == (36, 72)
    assert init.calculate_gain("tanh") == 5 / 3 and init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    init.constant_(conv, 0.25)
    assert (conv.numpy() == 0.25).all()
    h = mp.empty(4, 4, dtype=mp.bfloat16)
    init.normal_(h, 1.0, 0.0)
    assert h.dtype == mp.bfloat16 and (h.numpy().astype(np.float32) == 1).all()
    mp.manual_seed(5)
    a = init.uniform_(mp.empty(3), -1, 1).numpy()
    mp.manual_seed(5)
    np.testing.assert_array_equal(init.uniform_(mp.empty(3), -1, 1).numpy(), a)


def test_init_works_on_parameters_and_rejects_bad_input():
    p = nn.Parameter(mp.zeros(3, 3))
    nn.init.ones_(p)  # in place on a leaf that requires grad: init runs under no_grad
    assert (p.numpy() == 1).all() and p.requires_grad
    with pytest.raises(TypeError, match="floating"):
        nn.init.zeros_(mp.tensor([1, 2]))
    with pytest.raises(ValueError, match="at least 2 dims"):
        nn.init.xavier_uniform_(mp.empty(3))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.init.calculate_gain("swish")
