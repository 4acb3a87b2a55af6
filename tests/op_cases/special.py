"""Cases for the ops of mixprec/ops/special.py. References: Python's math module where it has the function,
SciPy's special functions (float64) otherwise, and the defining formulas for the elementary ones."""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sp

import mixprec as mp

from .case import Case, rnd, uni


def _vec(fn):
    return np.vectorize(fn, otypes=[np.float64])


def _with_a(op, a):
    """op(a, x) with a fixed first argument (not differentiated: torch defines no derivative in it)."""
    return lambda x: op(mp.tensor(a, dtype=x.dtype, device=x.device), x)


_A = np.array([0.7, 1.5, 2.0, 3.2])


def _zeta_of_q(q):
    """zeta(s, q) at fixed s (written with ``mp`` only, so the campaign can run it under torch as the oracle)."""
    return mp.special.zeta(mp.tensor(_A + 1.5, dtype=q.dtype, device=q.device), q)

CASES = [
    Case("lgamma", "lgamma", [uni(2, 3, lo=0.2, hi=5)], mp.lgamma, _vec(math.lgamma), lowp_ulps=8, lowp_spread=8,
         second_order=True),
    Case("lgamma-negative", "lgamma", [uni(5, lo=-2.9, hi=-2.1)], lambda x: x.lgamma(), _vec(math.lgamma),
         lowp=False),
    Case("digamma", "digamma", [uni(2, 3, lo=0.3, hi=5)], mp.digamma, sp.psi, lowp_ulps=8, lowp_spread=8,
         second_order=True),
    Case("polygamma-1", "polygamma", [uni(5, lo=0.3, hi=4)], lambda x: mp.polygamma(1, x),
         lambda x: _vec(lambda v: sum(1 / (v + k) ** 2 for k in range(200000)) + 1 / (v + 200000))(x),
         lowp_ulps=8, lowp_spread=8, rtol64=1e-9),
    Case("polygamma-method-3", "polygamma", [uni(5, lo=0.5, hi=4)], lambda x: x.polygamma(3),
         lambda x: sp.polygamma(3, x), lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("polygamma-0", "polygamma", [uni(4, lo=0.5, hi=4)], lambda x: mp.special.polygamma(0, x), sp.psi,
         lowp_ulps=8, lowp_spread=8),
    Case("mvlgamma-3", "mvlgamma", [uni(2, 3, lo=1.2, hi=4)], lambda x: mp.mvlgamma(x, 3),
         _vec(lambda v: 3 / 2 * math.log(math.pi) + sum(math.lgamma(v - j / 2) for j in range(3))),
         lowp_ulps=32, lowp_spread=32),
    Case("igamma", "igamma", [uni(4, lo=0.2, hi=4)], _with_a(mp.igamma, _A), lambda x: sp.gammainc(_A, x),
         lowp_ulps=8, lowp_spread=8),
    Case("igammac", "igammac", [uni(4, lo=0.2, hi=4)], _with_a(lambda a, x: a.igammac(x), _A),
         lambda x: sp.gammaincc(_A, x), lowp_ulps=8, lowp_spread=8),
    Case("zeta", "special_zeta", [uni(4, lo=0.5, hi=3)], _zeta_of_q,
         lambda q: _vec(lambda s, v: sum((k + v) ** -s for k in range(20000))
                        + (20000 + v) ** (1 - s) / (s - 1) + 0.5 * (20000 + v) ** -s)(_A + 1.5, q),
         lowp_ulps=8, lowp_spread=8, rtol64=1e-7),
    Case("erfc", "erfc", [rnd(2, 3)], mp.erfc, _vec(math.erfc), lowp_ulps=4, lowp_spread=4, second_order=True),
    Case("erfcx", "special_erfcx", [uni(5, lo=-1.5, hi=4)], lambda x: mp.special.erfcx(x),
         _vec(lambda v: math.exp(v * v) * math.erfc(v)), lowp_ulps=8, lowp_spread=8, rtol64=1e-10),
    Case("ndtr", "special_ndtr", [rnd(5)], mp.special.ndtr, _vec(lambda v: 0.5 * math.erfc(-v / math.sqrt(2))),
         lowp_ulps=4, lowp_spread=4),
    Case("ndtri", "special_ndtri", [uni(5, lo=0.05, hi=0.95)], mp.special.ndtri,
         lambda p: math.sqrt(2) * sp.erfinv(2 * p - 1), lowp_ulps=16, lowp_spread=16, rtol64=1e-10),
    Case("log_ndtr", "special_log_ndtr", [uni(5, lo=-6, hi=3)], mp.special.log_ndtr,
         _vec(lambda v: math.log(0.5 * math.erfc(-v / math.sqrt(2)))), lowp_ulps=8, lowp_spread=8, rtol64=1e-10),
    Case("entr", "special_entr", [uni(2, 3, lo=0.05, hi=3)], mp.special.entr, lambda x: -x * np.log(x),
         lowp_ulps=8, lowp_spread=8),
    Case("xlogy", "xlogy", [rnd(2, 3), uni(3, lo=0.2, hi=3)], mp.xlogy, lambda x, y: x * np.log(y), lowp_ulps=4,
         lowp_spread=4, second_order=True),
    Case("xlogy-method", "xlogy", [uni(3, lo=0.2, hi=3), rnd(2, 3)], lambda x, y: y.xlogy(x),
         lambda x, y: y * np.log(x), lowp_ulps=4, lowp_spread=4),
    Case("xlog1py", "special_xlog1py", [rnd(2, 3), uni(3, lo=-0.5, hi=3)], mp.special.xlog1py,
         lambda x, y: x * np.log1p(y), lowp_ulps=4, lowp_spread=4, second_order=True),
    Case("sinc", "sinc", [uni(6, lo=-2.5, hi=2.5)], mp.sinc, lambda x: np.sin(np.pi * x) / (np.pi * x),
         lowp_ulps=8, lowp_spread=8, second_order=True),
    Case("logit", "logit", [uni(2, 3, lo=0.05, hi=0.95)], mp.logit, lambda p: np.log(p / (1 - p)), lowp_ulps=8,
         lowp_spread=8),
    Case("logit-eps", "logit", [uni(6, lo=0.05, hi=0.95)], lambda p: p.logit(eps=0.2),
         lambda p: np.log(np.clip(p, 0.2, 0.8) / (1 - np.clip(p, 0.2, 0.8))), lowp_ulps=8, lowp_spread=8),
    Case("i0", "i0", [rnd(2, 3)], mp.i0, _vec(lambda v: sum((v / 2) ** (2 * k) / math.factorial(k) ** 2
                                                           for k in range(40))), lowp_ulps=4, lowp_spread=4),
    Case("i0e", "special_i0e", [rnd(5)], lambda x: mp.special.i0e(x), lambda x: np.exp(-np.abs(x)) * sp.iv(0, x),
         lowp_ulps=8, lowp_spread=8),
    Case("i1", "special_i1", [rnd(5)], mp.special.i1, _vec(lambda v: sum((v / 2) ** (2 * k + 1) / (
        math.factorial(k) * math.factorial(k + 1)) for k in range(40))), lowp_ulps=4, lowp_spread=4),
    Case("i1e", "special_i1e", [rnd(5)], lambda x: mp.special.i1e(x), lambda x: np.exp(-np.abs(x)) * sp.iv(1, x),
         lowp_ulps=8, lowp_spread=8),
]

# Not differentiable in torch (their outputs never require grad): forward and low precision only.
CASES += [
    Case(f"{name}", f"special_{name}", [maker], lambda x, name=name: getattr(mp.special, name)(x), ref, grad=False,
         lowp_ulps=16, lowp_spread=16)
    for name, maker, ref in (
        ("bessel_j0", uni(6, lo=-8, hi=8), lambda x: sp.jv(0, x)),
        ("bessel_j1", uni(6, lo=-8, hi=8), lambda x: sp.jv(1, x)),
        ("bessel_y0", uni(6, lo=0.3, hi=8), lambda x: sp.yv(0, x)),
        ("bessel_y1", uni(6, lo=0.3, hi=8), lambda x: sp.yv(1, x)),
        ("modified_bessel_i0", rnd(6), lambda x: sp.iv(0, x)),
        ("modified_bessel_i1", rnd(6), lambda x: sp.iv(1, x)),
        ("modified_bessel_k0", uni(6, lo=0.2, hi=5), lambda x: sp.kv(0, x)),
        ("modified_bessel_k1", uni(6, lo=0.2, hi=5), lambda x: sp.kv(1, x)),
        ("scaled_modified_bessel_k0", uni(6, lo=0.2, hi=5), lambda x: np.exp(x) * sp.kv(0, x)),
        ("scaled_modified_bessel_k1", uni(6, lo=0.2, hi=5), lambda x: np.exp(x) * sp.kv(1, x)),
        ("spherical_bessel_j0", uni(6, lo=-6, hi=6), lambda x: np.sin(x) / x),
    )
]
CASES.append(Case("airy_ai", "special_airy_ai", [uni(6, lo=-5, hi=3)], mp.special.airy_ai, lambda x: sp.airy(x)[0],
                  grad=False, lowp_ulps=16, lowp_spread=16))


def _degrees(rng):
    return rng.integers(-1, 9, (4,))


def _theta(x):
    return np.arccos(x)


# The orthogonal polynomials (not differentiable, as in torch): degree n from an integer tensor, a float
# tensor (its integer part) or a Python int.
_POLYNOMIALS = (
    ("chebyshev_polynomial_t", (-1, 1), lambda x, n: sp.eval_chebyt(n, x)),
    ("chebyshev_polynomial_u", (-1, 1), lambda x, n: sp.eval_chebyu(n, x)),
    ("chebyshev_polynomial_v", (-0.95, 0.95), lambda x, n: np.cos((n + 0.5) * _theta(x)) / np.cos(_theta(x) / 2)),
    ("chebyshev_polynomial_w", (-0.95, 0.95), lambda x, n: np.sin((n + 0.5) * _theta(x)) / np.sin(_theta(x) / 2)),
    ("shifted_chebyshev_polynomial_t", (0, 1), lambda x, n: sp.eval_sh_chebyt(n, x)),
    ("shifted_chebyshev_polynomial_u", (0, 1), lambda x, n: sp.eval_sh_chebyu(n, x)),
    ("shifted_chebyshev_polynomial_v", (0.03, 0.97),
     lambda x, n: np.cos((n + 0.5) * _theta(2 * x - 1)) / np.cos(_theta(2 * x - 1) / 2)),
    ("shifted_chebyshev_polynomial_w", (0.03, 0.97),
     lambda x, n: np.sin((n + 0.5) * _theta(2 * x - 1)) / np.sin(_theta(2 * x - 1) / 2)),
    ("hermite_polynomial_h", (-2, 2), lambda x, n: sp.eval_hermite(n, x)),
    ("hermite_polynomial_he", (-2, 2), lambda x, n: sp.eval_hermitenorm(n, x)),
    ("laguerre_polynomial_l", (-1, 4), lambda x, n: sp.eval_laguerre(n, x)),
    ("legendre_polynomial_p", (-1, 1), lambda x, n: sp.eval_legendre(n, x)),
)


def _zero_below(ref):
    """ref(x, n) for n >= 0, 0 for a negative degree (torch's convention)."""
    def run(x, n):
        n = np.broadcast_to(n, np.broadcast_shapes(np.shape(x), np.shape(n)))
        return np.where(n < 0, 0.0, ref(x, np.maximum(n, 0)))
    return run


for _name, (_lo, _hi), _ref in _POLYNOMIALS:
    _fn = getattr(mp.special, _name)
    CASES += [
        Case(_name, f"special_{_name}", [uni(3, 4, lo=_lo, hi=_hi), _degrees], _fn, _zero_below(_ref), grad=False,
             lowp_ulps=64, lowp_spread=64, rtol64=1e-10),
        Case(f"{_name}-int-degree", f"special_{_name}", [uni(5, lo=_lo, hi=_hi)], lambda x, _f=_fn: _f(x, 3),
             lambda x, _r=_ref: _r(x, 3), grad=False, lowp_ulps=32, lowp_spread=32, rtol64=1e-10),
    ]
