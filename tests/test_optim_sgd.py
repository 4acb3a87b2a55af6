"""mp.optim.SGD against a hand-written float64 reference of torch's documented rule, and against torch."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.1, momentum=0.8, nesterov=True),
    dict(lr=0.1, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, weight_decay=0.1, nesterov=True),
    dict(lr=0.1, momentum=0.5, maximize=True),
    dict(lr=0.02, momentum=0.7, dampening=0.1, weight_decay=0.05, maximize=True),
]
STEPS = 5


def reference_sgd(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    """torch.optim.SGD's update, step by step in float64; returns the parameter after each step."""
    p = p.astype(np.float64).copy()
    buf = None
    history = []
    for g in grads:
        d = -g if maximize else g.copy()
        if weight_decay:
            d = d + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
        history.append(p.copy())
    return history


def _grads(seed, shape=(3, 2)):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(STEPS)]


def _ids(cfg):
    return ",".join(f"{k}={v}" for k, v in cfg.items())


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_matches_reference_rule_step_by_step(cfg):
    p0 = np.random.default_rng(1).standard_normal((3, 2))
    grads = _grads(2)
    p = mp.tensor(p0, dtype=mp.float64, requires_grad=True)
    opt = mp.optim.SGD([p], **cfg)
    for g, expected in zip(grads, reference_sgd(p0, grads, **cfg)):
        p.grad = mp.tensor(g, dtype=mp.float64)
        opt.step()
        np.testing.assert_allclose(p.numpy(), expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("cfg", CONFIGS, ids=_ids)
def test_matches_torch(cfg):
    torch = pytest.importorskip("torch")
    p0 = np.random.default_rng(3).standard_normal((4,)).astype(np.float32)
    grads = [g.astype(np.float32) for g in _grads(4, (4,))]
    p = mp.tensor(p0, requires_grad=True)
    tp = torch.tensor(p0, requires_grad=True)
    opt, topt = mp.optim.SGD([p], **cfg), torch.optim.SGD([tp], **cfg)
    for g in grads:
        p.grad, tp.grad = mp.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert p.dtype == mp.float32
    if cfg.get("momentum"):
        assert opt.state[p]["momentum_buffer"].dtype == np.float32


def test_trains_a_least_squares_problem():
    rng = np.random.default_rng(0)
    x = mp.tensor(rng.standard_normal((64, 3)), dtype=mp.float32)
    w_true = mp.tensor([[1.0], [-2.0], [0.5]])
    y = x @ w_true
    w = mp.zeros(3, 1, requires_grad=True)
    opt = mp.optim.SGD([w], lr=0.1, momentum=0.9)
    for _ in range(300):
        loss = ((x @ w - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(w.numpy(), w_true.numpy(), atol=1e-3)


def test_param_groups_have_their_own_hyperparameters():
    a, b = mp.ones(2, requires_grad=True), mp.ones(2, requires_grad=True)
    opt = mp.optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.0)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[0]["momentum"] == 0.0 and opt.param_groups[1]["nesterov"] is False
    a.grad, b.grad = mp.ones(2), mp.ones(2)
    opt.step()
    assert a.tolist() == pytest.approx([0.9, 0.9]) and b.tolist() == [0.5, 0.5]


def test_step_skips_params_without_grad_and_bumps_versions():
    a, b = mp.ones(2, requires_grad=True), mp.ones(2, requires_grad=True)
    opt = mp.optim.SGD([a, b], lr=1.0)
    a.grad = mp.ones(2)
    v_a, v_b = a._version, b._version
    opt.step()
    assert a.tolist() == [0.0, 0.0] and b.tolist() == [1.0, 1.0]
    assert a._version == v_a + 1 and b._version == v_b
    assert a.requires_grad and a.is_leaf and a.grad_fn is None  # updated in place, still a leaf


def test_step_with_closure_returns_its_loss():
    w = mp.tensor([2.0], requires_grad=True)
    opt = mp.optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with mp.no_grad():  # step turns grad mode on for the closure
        loss = opt.step(closure)
    assert loss.item() == 4.0 and w.item() == 1.0


def test_zero_grad():
    w = mp.ones(2, requires_grad=True)
    opt = mp.optim.SGD([w], lr=0.1)
    (w * 3).sum().backward()
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g and w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_state_dict_round_trip_continues_identically():
    p0 = np.random.default_rng(5).standard_normal(4)
    grads = _grads(6, (4,)) * 2
    cfg = dict(lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)

    p = mp.tensor(p0, dtype=mp.float64, requires_grad=True)
    opt = mp.optim.SGD([p], **cfg)
    for g in grads[:3]:
        p.grad = mp.tensor(g, dtype=mp.float64)
        opt.step()
    saved = opt.state_dict()
    saved_buf = saved["state"][0]["momentum_buffer"].numpy().copy()
    assert saved["param_groups"][0]["params"] == [0] and saved["param_groups"][0]["lr"] == 0.1

    q = mp.tensor(p.numpy().copy(), dtype=mp.float64, requires_grad=True)
    resumed = mp.optim.SGD([q], lr=999.0)
    resumed.load_state_dict(saved)
    assert resumed.param_groups[0]["lr"] == 0.1 and resumed.param_groups[0]["params"] == [q]
    for g in grads[3:]:
        p.grad = q.grad = mp.tensor(g, dtype=mp.float64)
        opt.step()
        resumed.step()
    np.testing.assert_array_equal(q.numpy(), p.numpy())
    # the saved state is a copy: stepping afterwards did not change it
    np.testing.assert_array_equal(saved["state"][0]["momentum_buffer"].numpy(), saved_buf)


def test_load_state_dict_errors():
    a, b = mp.ones(2, requires_grad=True), mp.ones(2, requires_grad=True)
    opt = mp.optim.SGD([a, b], lr=0.1)
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"param_groups": []})
    with pytest.raises(ValueError, match="2 parameter groups, this optimizer has 1"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]})
    with pytest.raises(ValueError, match="has 1 params, the optimizer's has 2"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})


@pytest.mark.parametrize("kwargs,match", [
    (dict(lr=-1.0), "lr"), (dict(lr=0.1, momentum=-0.5), "momentum"), (dict(lr=0.1, weight_decay=-1), "weight_decay"),
    (dict(lr=0.1, nesterov=True), "nesterov"), (dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "nesterov"),
])
def test_bad_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mp.optim.SGD([mp.ones(1, requires_grad=True)], **kwargs)


def test_bad_params():
    with pytest.raises(ValueError, match="empty parameter list"):
        mp.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        mp.optim.SGD([mp.ones(1, requires_grad=True) * 2], lr=0.1)
    with pytest.raises(TypeError, match="floating point"):
        mp.optim.SGD([mp.tensor([1, 2])], lr=0.1)
    with pytest.raises(TypeError, match="must be Tensors"):
        mp.optim.SGD([np.ones(2)], lr=0.1)
    p = mp.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match="more than one parameter group"):
        mp.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_params_that_are_not_an_iterable_of_tensors_are_refused_as_torch_does():
    torch = pytest.importorskip("torch")
    for lib in (torch, mp):
        with pytest.raises(TypeError, match="iterable of Tensors"):
            lib.optim.SGD(lib.nn.Parameter(lib.ones(3)), lr=0.1)  # one tensor, not a list of them
        p = lib.nn.Parameter(lib.ones(3))
        opt = lib.optim.SGD([p], lr=0.1)
        with pytest.raises(TypeError, match="ordered collections|ordered collection"):
            opt.add_param_group({"params": {lib.nn.Parameter(lib.ones(1))}})  # a set: no stable order
        with pytest.raises(TypeError, match="must be a dict"):
            opt.add_param_group([p])
        assert len(opt.param_groups) == 1 and opt.param_groups[0]["params"] == [p]
    with pytest.raises(TypeError, match="SGD: params must be an iterable"):
        mp.optim.SGD(3, lr=0.1)
    with pytest.raises(KeyError, match="SGD.add_param_group: the parameter group has no 'params'"):
        mp.optim.SGD([mp.nn.Parameter(mp.ones(1))], lr=0.1).add_param_group({"lr": 0.1})


def test_hyper_parameters_that_are_not_numbers_and_a_closure_that_is_not_callable_are_type_errors_as_in_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, mp):
        p = lib.nn.Parameter(lib.ones(2))
        with pytest.raises(TypeError):
            lib.optim.SGD([p], lr="0.1")
        with pytest.raises(TypeError):
            lib.optim.SGD([p], lr=0.1).step(3)
    p = mp.nn.Parameter(mp.ones(2))
    with pytest.raises(TypeError, match="SGD: lr must be a real number, got '0.1'"):
        mp.optim.SGD([p], lr="0.1")
    with pytest.raises(TypeError, match="SGD: momentum must be a real number, got None"):
        mp.optim.SGD([p], lr=0.1, momentum=None)
    opt = mp.optim.SGD([p], lr=0.1)
    p.grad = mp.ones(2)
    with pytest.raises(TypeError, match="SGD.step: closure must be a function"):
        opt.step(3)
    assert p.tolist() == [1.0, 1.0] and not opt.state  # nothing stepped


def test_a_failed_load_names_the_optimizer_and_what_was_wrong():
    p = mp.nn.Parameter(mp.ones(2))
    opt = mp.optim.SGD([p], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="SGD.load_state_dict: state_dict\\['param_groups'\\]\\[0\\]\\['lr'\\] is "
                                         "'x', expected a number"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0], "lr": "x"}]})
    with pytest.raises(ValueError, match="SGD.load_state_dict: state_dict\\['state'\\]\\[0\\]\\['momentum_buffer'\\] "
                                         "has shape \\(3,\\), its parameter has shape \\(2,\\)"):
        opt.load_state_dict({"state": {0: {"momentum_buffer": np.zeros(3)}}, "param_groups": [{"params": [0]}]})
    assert opt.param_groups[0]["lr"] == 0.1 and not opt.state


def test_load_state_dict_keeps_the_optimizers_own_parameters_as_torch_does():
    torch = pytest.importorskip("torch")
    for lib in (torch, mp):
        ps = [lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(3))]
        opt = lib.optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.5}], lr=0.1, momentum=0.9)
        for p in ps:
            p.grad = lib.ones(p.shape)
        opt.step()
        others = [lib.nn.Parameter(lib.zeros(2)), lib.nn.Parameter(lib.zeros(3))]
        fresh = lib.optim.SGD([{"params": [others[0]]}, {"params": [others[1]]}], lr=0.1, momentum=0.9)
        fresh.load_state_dict(opt.state_dict())
        assert all(g["params"][0] is p for g, p in zip(fresh.param_groups, others))  # the same objects
        assert set(map(id, fresh.state)) == set(map(id, others)) and fresh.param_groups[1]["lr"] == 0.5
        assert all(np.asarray(fresh.state[p]["momentum_buffer"]).shape == tuple(p.shape) for p in others)
