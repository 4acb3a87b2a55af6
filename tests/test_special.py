"""mp.special (mixprec/special.py) and the special-function ops behind it (mixprec/ops/special.py): the
namespace against torch.special's, torch's values and gradients where the definitions meet edges (zeros of
either sign, infinities, the domain's ends), the derivatives torch does not define, and bad arguments."""
from __future__ import annotations

import math

import numpy as np
import pytest

import mixprec as mp


def test_namespace_has_every_name_torch_special_lists(torch):
    missing = sorted(n for n in torch.special.__all__ if not callable(getattr(mp.special, n, None)))
    assert missing in ([], ["round"])  # (round is an elementwise op of its own, registered elsewhere)
    assert set(mp.special.__all__) <= set(torch.special.__all__)


def test_aliases_are_the_same_ops():
    x = mp.tensor([0.25, 0.5, 2.0], dtype=mp.float64)
    assert mp.special.gammaln(x).tolist() == mp.lgamma(x).tolist()
    assert mp.special.psi(x).tolist() == mp.digamma(x).tolist()
    assert mp.special.expit(x).tolist() == mp.sigmoid(x).tolist()
    assert mp.special.multigammaln(x + 2, 2).tolist() == x.add(2).mvlgamma(2).tolist()
    assert mp.special.gammainc(x, x).tolist() == x.igamma(x).tolist()


EDGES = [-math.inf, -2.5, -1.0, -0.0, 0.0, 1e-300, 0.5, 1.0, 30.0, math.inf, math.nan]


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "sinc", "logit", "i0", "special.ndtri",
                                  "special.log_ndtr", "special.erfcx", "special.entr", "special.i0e",
                                  "special.i1", "special.i1e", "special.spherical_bessel_j0"])
def test_edge_values_match_torch(name, torch):
    def fn(module):
        for part in name.split("."):
            module = getattr(module, part)
        return module
    want = fn(torch)(torch.tensor(EDGES, dtype=torch.float64)).numpy()
    got = fn(mp)(mp.tensor(EDGES, dtype=mp.float64)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, equal_nan=True)
    numbers = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))  # (signed zeros and infinities)


@pytest.mark.parametrize("name", ["lgamma", "sinc", "logit", "special.i1", "special.i1e", "special.entr"])
def test_edge_gradients_match_torch(name, torch):
    values = [-0.5, 0.0, 1e-300, 1e-20, 0.5, 1.5]

    def fn(module):
        for part in name.split("."):
            module = getattr(module, part)
        return module
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    fn(torch)(t).sum().backward()
    m = mp.tensor(values, dtype=mp.float64, requires_grad=True)
    fn(mp)(m).sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", ["xlogy", "special.xlog1py"])
def test_xlogy_family_values_and_gradients_at_zero_match_torch(name, torch):
    a = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, math.nan]
    b = [2.0, -0.5, -1.0, 0.0, math.inf, math.nan, 3.0, 1.0]

    def fn(module):
        for part in name.split("."):
            module = getattr(module, part)
        return module
    ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    want = fn(torch)(ta, tb)
    want.sum().backward()
    ma = mp.tensor(a, dtype=mp.float64, requires_grad=True)
    mb = mp.tensor(b, dtype=mp.float64, requires_grad=True)
    got = fn(mp)(ma, mb)
    got.sum().backward()
    for g, w in ((got, want), (ma.grad, ta.grad), (mb.grad, tb.grad)):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12, equal_nan=True)
    assert fn(mp)(2.0, mp.tensor([3.0])).tolist() == pytest.approx(fn(torch)(2.0, torch.tensor([3.0])).tolist())


def test_logit_eps_clamps_and_zeroes_the_gradient_outside(torch):
    x = [0.0, 0.1, 0.2, 0.5, 0.9, 1.0]
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    torch.logit(t, eps=0.1).sum().backward()
    m = mp.tensor(x, dtype=mp.float64, requires_grad=True)
    out = m.logit(eps=0.1)
    out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), torch.logit(torch.tensor(x, dtype=torch.float64), eps=0.1))
    np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_incomplete_gamma_is_differentiable_in_x_only(name, torch):
    a, x = [0.5, 2.0, 3.5], [0.3, 1.0, 4.0]
    ta, tx = torch.tensor(a, dtype=torch.float64), torch.tensor(x, dtype=torch.float64, requires_grad=True)
    getattr(torch, name)(ta, tx).sum().backward()
    ma, mx = mp.tensor(a, dtype=mp.float64), mp.tensor(x, dtype=mp.float64, requires_grad=True)
    getattr(mp, name)(ma, mx).sum().backward()
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    ma.requires_grad_()
    with pytest.raises(NotImplementedError, match=f"{name}: the derivative with respect to input"):
        getattr(mp, name)(ma, mx).sum().backward()


FIRST_INPUT_HAS_NO_DERIVATIVE = [("igamma", lambda lib: lib.igamma, "a"), ("igammac", lambda lib: lib.igammac, "a"),
                                 ("special.zeta", lambda lib: lib.special.zeta, "x")]


@pytest.mark.parametrize("name,fn,what", FIRST_INPUT_HAS_NO_DERIVATIVE,
                         ids=[c[0] for c in FIRST_INPUT_HAS_NO_DERIVATIVE])
def test_forward_mode_refuses_a_tangent_on_the_first_input_as_backward_and_torch_do(name, fn, what, torch):
    """A tangent on the first input (even a zero one) is NotImplementedError, as its gradient is in backward; torch
    refuses forward mode through these ops altogether. The second input's tangent is its reverse-mode derivative
    (torch's gradient), whether or not the first input requires grad."""
    first, second = [1.5, 2.0, 3.5], [0.3, 1.0, 4.0]
    for tangent in ([1.0, 0.0, 2.0], [0.0, 0.0, 0.0]):
        for lib in (mp, torch):
            with lib.autograd.forward_ad.dual_level():
                dual = lib.autograd.forward_ad.make_dual(lib.tensor(first, dtype=lib.float64),
                                                         lib.tensor(tangent, dtype=lib.float64))
                with pytest.raises(NotImplementedError, match=f"{name}: the derivative with respect to input "
                                   f"\\({what}\\)" if lib is mp else "forward AD"):
                    fn(lib)(dual, lib.tensor(second, dtype=lib.float64))
    tx = torch.tensor(second, dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(fn(torch)(torch.tensor(first, dtype=torch.float64), tx).sum(), tx)
    v = [1.0, -2.0, 0.5]
    for requires_grad in (False, True):
        with mp.autograd.forward_ad.dual_level():
            x = mp.autograd.forward_ad.make_dual(mp.tensor(second, dtype=mp.float64), mp.tensor(v, dtype=mp.float64))
            a = mp.tensor(first, dtype=mp.float64, requires_grad=requires_grad)
            got = mp.autograd.forward_ad.unpack_dual(fn(mp)(a, x)).tangent
        np.testing.assert_allclose(got.detach().numpy(), expected.numpy() * v, rtol=1e-12)


def test_zeta_is_differentiable_in_q_only(torch):
    s, q = [2.0, 3.5], [0.5, 2.0]
    tq = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    torch.special.zeta(torch.tensor(s, dtype=torch.float64), tq).sum().backward()
    mq = mp.tensor(q, dtype=mp.float64, requires_grad=True)
    ms = mp.tensor(s, dtype=mp.float64)
    mp.special.zeta(ms, mq).sum().backward()
    np.testing.assert_allclose(mq.grad.numpy(), tq.grad.numpy(), rtol=1e-12)
    ms.requires_grad_()
    with pytest.raises(NotImplementedError, match="special.zeta: the derivative with respect to input"):
        mp.special.zeta(ms, mq).sum().backward()


@pytest.mark.parametrize("fn", [mp.special.bessel_j0, mp.special.modified_bessel_k1, mp.special.airy_ai,
                                lambda x: mp.special.chebyshev_polynomial_t(x, 3),
                                lambda x: mp.special.legendre_polynomial_p(x, mp.tensor([2.0, 4.0]))])
def test_functions_torch_does_not_differentiate_give_results_without_grad(fn):
    x = mp.tensor([0.3, 0.7], dtype=mp.float64, requires_grad=True)
    assert not fn(x).requires_grad


def test_polynomials_take_the_integer_part_of_n_and_are_zero_below_degree_0(torch):
    x = [-1.0, -0.3, 0.0, 0.5, 1.0, 2.5]
    n = [-2.0, -0.5, 2.7, 3.0, 7.9, 12.0]
    for name in ["chebyshev_polynomial_t", "chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
                 "hermite_polynomial_h", "laguerre_polynomial_l", "legendre_polynomial_p"]:
        want = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float64), torch.tensor(n, dtype=torch.float64))
        got = getattr(mp.special, name)(mp.tensor(x, dtype=mp.float64), mp.tensor(n, dtype=mp.float64))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, err_msg=name)
    assert mp.special.hermite_polynomial_h(mp.tensor([1, 2]), mp.tensor([2, 3])).dtype == mp.float32


def test_integer_inputs_compute_in_float32():
    assert mp.lgamma(mp.tensor([1, 2, 3])).dtype == mp.float32
    assert mp.xlogy(mp.tensor([1, 2]), mp.tensor([2, 3])).dtype == mp.float32
    assert mp.mvlgamma(mp.tensor([3, 4]), 2).dtype == mp.float32


@pytest.mark.parametrize("call, exc, match", [
    (lambda x: mp.polygamma(-1, x), RuntimeError, "polygamma: n must be non-negative, got -1"),
    (lambda x: mp.polygamma(1.5, x), TypeError, "polygamma: n must be an int, got float"),
    (lambda x: x.mvlgamma(0), RuntimeError, "mvlgamma: p must be >= 1, got 0"),
    (lambda x: mp.mvlgamma(x, 4), RuntimeError, r"mvlgamma: every element of the input must be greater than "
                                                r"\(p-1\)/2 = 1.5"),
    (lambda x: mp.logit(x, eps="small"), TypeError, "logit: eps must be a number or None, got str"),
    (lambda x: mp.erfc(x.to(mp.complex64)), NotImplementedError, "erfc: not implemented for complex tensors"),
    (lambda x: mp.igammac(x.to(mp.int64), x.to(mp.int64)), NotImplementedError,
     "igammac: not implemented for integer or bool inputs"),
    (lambda x: mp.special.chebyshev_polynomial_t(x, mp.tensor([1, 2])), RuntimeError, "cannot be broadcast"),
])
def test_bad_arguments_raise_clear_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(mp.tensor([0.5, 1.0, 2.0]))


@pytest.mark.gpu
def test_cuda_results_match_the_cpu():
    x = np.linspace(0.1, 4.0, 7)
    for fn in (mp.lgamma, mp.digamma, lambda t: mp.polygamma(2, t), lambda t: mp.special.zeta(t + 1, t),
               lambda t: mp.igamma(t, t), mp.special.airy_ai,
               mp.special.modified_bessel_k0, lambda t: mp.special.laguerre_polynomial_l(t, 5)):
        got = fn(mp.tensor(x, device="cuda"))
        assert got.device.type == "cuda"
        np.testing.assert_allclose(got.cpu().numpy(), fn(mp.tensor(x)).numpy(), rtol=1e-12)
