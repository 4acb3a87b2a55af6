"""mp.autograd.functional against torch.autograd.functional (CPU, float64): values, return structures
(tensors, tuples, tuples of tuples), create_graph, strict mode and errors."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

RNG = np.random.default_rng(3)
X = RNG.uniform(0.2, 1.0, (3,))
Y = RNG.uniform(0.2, 1.0, (2, 2))
V3, V22, V4 = RNG.standard_normal(3), RNG.standard_normal((2, 2)), RNG.standard_normal((3, 2))


def one_in_one_out(x):                  # R^3 -> R^3
    return x.exp() * x.sum()


def two_in_two_out(x, y):               # (R^3, R^{2x2}) -> (R^{3x2}, R)
    return x.reshape(3, 1) * y.sin().sum(dim=0), (x ** 2).sum() + y.prod()


def scalar_of_two(x, y):                # (R^3, R^{2x2}) -> R
    return (x.exp() * y.sum()).sum() + (x * x).sum() * y.prod()


def scalar_of_one(x):
    return (x.exp() * x).sum() + x.prod()


def _t(lib, a, requires_grad=False):
    return lib.tensor(a, dtype=lib.float64, requires_grad=requires_grad)


def _np(result):
    """Nested tuples of tensors -> the same nesting of float64 arrays (torch's forward-mode jacobian gives
    lists where its docs say tuples: read them as tuples)."""
    if isinstance(result, (tuple, list)):
        return tuple(_np(r) for r in result)
    return result.detach().numpy().astype(np.float64)


def _same(got, want):
    assert type(got) is type(want) or (isinstance(got, tuple) and isinstance(want, tuple))
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def both(torch, call):
    """Run ``call(lib, F)`` with mixprec and torch; compare the nested results."""
    _same(_np(call(mp, mp.autograd.functional)), _np(call(torch, torch.autograd.functional)))


CALLS = {
    "vjp-single": lambda lib, F: F.vjp(one_in_one_out, _t(lib, X), _t(lib, V3)),
    "vjp-tuple": lambda lib, F: F.vjp(two_in_two_out, (_t(lib, X), _t(lib, Y)), (_t(lib, V4), _t(lib, 1.5))),
    "vjp-scalar-v-none": lambda lib, F: F.vjp(scalar_of_one, _t(lib, X)),
    "jvp-single": lambda lib, F: F.jvp(one_in_one_out, _t(lib, X), _t(lib, V3)),
    "jvp-tuple": lambda lib, F: F.jvp(two_in_two_out, (_t(lib, X), _t(lib, Y)), (_t(lib, V3), _t(lib, V22))),
    "jacobian-single": lambda lib, F: F.jacobian(one_in_one_out, _t(lib, X)),
    "jacobian-tuple": lambda lib, F: F.jacobian(two_in_two_out, (_t(lib, X), _t(lib, Y))),
    "jacobian-tuple-in-single-out": lambda lib, F: F.jacobian(scalar_of_two, (_t(lib, X), _t(lib, Y))),
    "jacobian-forward": lambda lib, F: F.jacobian(two_in_two_out, (_t(lib, X), _t(lib, Y)), vectorize=True,
                                                  strategy="forward-mode"),
    "hessian-single": lambda lib, F: F.hessian(scalar_of_one, _t(lib, X)),
    "hessian-tuple": lambda lib, F: F.hessian(scalar_of_two, (_t(lib, X), _t(lib, Y))),
    "hessian-forward-over-reverse": lambda lib, F: F.hessian(scalar_of_two, (_t(lib, X), _t(lib, Y)), vectorize=True,
                                                             outer_jacobian_strategy="forward-mode"),
    "vhp": lambda lib, F: F.vhp(scalar_of_two, (_t(lib, X), _t(lib, Y)), (_t(lib, V3), _t(lib, V22))),
    "hvp": lambda lib, F: F.hvp(scalar_of_two, (_t(lib, X), _t(lib, Y)), (_t(lib, V3), _t(lib, V22))),
    "hvp-single": lambda lib, F: F.hvp(scalar_of_one, _t(lib, X), _t(lib, V3)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_values_and_structure_match_torch(name, torch):
    both(torch, CALLS[name])


def test_inputs_are_not_modified_and_results_detached():
    x = _t(mp, X, requires_grad=True)
    out, g = mp.autograd.functional.vjp(one_in_one_out, x, _t(mp, V3))
    assert not out.requires_grad and not g.requires_grad and x.grad is None and x.is_leaf
    jac = mp.autograd.functional.jacobian(one_in_one_out, x)
    assert not jac.requires_grad


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_create_graph_keeps_results_differentiable(strategy, torch):
    """d/dx of sum(jacobian) equals torch's (jacobian with create_graph, then backward to x)."""
    def run(lib, F):
        x = _t(lib, X, requires_grad=True)
        kw = {"strategy": strategy, "vectorize": True} if lib is torch else {"strategy": strategy}
        if lib is torch and strategy == "forward-mode":  # torch has no create_graph there: reverse mode instead
            kw = {}
        jac = F.jacobian(one_in_one_out, x, create_graph=True, **kw)
        assert jac.requires_grad
        jac.sum().backward()
        return x.grad
    _same(_np(run(mp, mp.autograd.functional)), _np(run(torch, torch.autograd.functional)))
    # jvp (forward mode here, the double-backward trick in torch): J v differentiable in x and in v
    grads = []
    for lib, F in ((mp, mp.autograd.functional), (torch, torch.autograd.functional)):
        x, v = _t(lib, X, requires_grad=True), _t(lib, V3, requires_grad=True)
        _, t = F.jvp(one_in_one_out, x, v, create_graph=True)
        grads.append(_np(lib.autograd.grad(t.sum(), [x, v])))
    _same(*grads)


def independent(x, y):
    return x * 2, x.sum() + 0 * x.sum()     # the second output does not depend on y


def test_strict_mode_and_zeros(torch):
    """Without strict, a missing dependence gives zeros; with strict, an error (as torch)."""
    both(torch, lambda lib, F: F.jacobian(independent, (_t(lib, X), _t(lib, Y))))
    for lib, F in ((mp, mp.autograd.functional), (torch, torch.autograd.functional)):
        with pytest.raises(RuntimeError, match=r"(?i)independent of input 1"):
            F.jacobian(independent, (_t(lib, X), _t(lib, Y)), strict=True)
        with pytest.raises(RuntimeError, match=r"(?i)does not require gradients"):
            F.vjp(lambda x: x.detach() * 2, _t(lib, X), _t(lib, V3), strict=True)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        mp.autograd.functional.jacobian(independent, (_t(mp, X), _t(mp, Y)), strict=True, strategy="forward-mode")


ERRORS = [
    ("v-missing", lambda lib, F: F.vjp(one_in_one_out, _t(lib, X)), RuntimeError, "v can only be None"),
    ("v-size", lambda lib, F: F.jvp(one_in_one_out, _t(lib, X), _t(lib, V4)), RuntimeError, "invalid size"),
    ("v-length", lambda lib, F: F.vjp(two_in_two_out, (_t(lib, X), _t(lib, Y)), (_t(lib, V4),)), RuntimeError,
     "invalid length"),
    ("inputs-type", lambda lib, F: F.jacobian(one_in_one_out, [1.0, 2.0]), TypeError, "Tensor or a tuple of Tensors"),
    ("outputs-type", lambda lib, F: F.vjp(lambda x: 3.0, _t(lib, X)), TypeError, "Tensor or a tuple of Tensors"),
    ("hessian-non-scalar", lambda lib, F: F.hessian(one_in_one_out, _t(lib, X)), RuntimeError, "single element"),
    ("hvp-tuple-output", lambda lib, F: F.hvp(two_in_two_out, (_t(lib, X), _t(lib, Y)),
                                              (_t(lib, V3), _t(lib, V22))), RuntimeError, "single Tensor"),
]


@pytest.mark.parametrize("name,call,error,match", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, call, error, match, torch):
    for lib, F in ((mp, mp.autograd.functional), (torch, torch.autograd.functional)):
        with pytest.raises(error, match=f"(?i){match}"):
            call(lib, F)
    with pytest.raises(ValueError, match="strategy"):
        mp.autograd.functional.jacobian(one_in_one_out, _t(mp, X), strategy="sideways")
