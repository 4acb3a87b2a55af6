"""``mp.special``: torch.special's functions. The ops (and their derivatives) are in mixprec/ops/special.py;
the names torch.special shares with other namespaces (erf, expit, softmax, logsumexp, ...) are the same ops.

    import mixprec as mp
    p = mp.special.ndtr(z)                      # standard normal CDF
    h = mp.special.entr(probs).sum(-1)          # entropy
    y = mp.special.bessel_j0(x)                 # not differentiable, as in torch

Torch's top-level names for the same ops (mp.lgamma, mp.digamma, mp.polygamma, mp.erfc, mp.i0,
mp.xlogy, mp.igamma, ...) are plain mp.<name>.
"""
from .ops.registry import _REGISTRY
from .ops.registry import get as _get
from .ops.registry import public as _public

# torch.special's name -> the registered op that computes it
_OPS = {
    "airy_ai": "special_airy_ai", "bessel_j0": "special_bessel_j0", "bessel_j1": "special_bessel_j1",
    "bessel_y0": "special_bessel_y0", "bessel_y1": "special_bessel_y1",
    "chebyshev_polynomial_t": "special_chebyshev_polynomial_t",
    "chebyshev_polynomial_u": "special_chebyshev_polynomial_u",
    "chebyshev_polynomial_v": "special_chebyshev_polynomial_v",
    "chebyshev_polynomial_w": "special_chebyshev_polynomial_w",
    "digamma": "digamma", "entr": "special_entr", "erf": "erf", "erfc": "erfc", "erfcx": "special_erfcx",
    "erfinv": "erfinv", "exp2": "exp2", "expit": "sigmoid", "expm1": "expm1", "gammainc": "igamma",
    "gammaincc": "igammac", "gammaln": "lgamma", "hermite_polynomial_h": "special_hermite_polynomial_h",
    "hermite_polynomial_he": "special_hermite_polynomial_he", "i0": "i0", "i0e": "special_i0e", "i1": "special_i1",
    "i1e": "special_i1e", "laguerre_polynomial_l": "special_laguerre_polynomial_l",
    "legendre_polynomial_p": "special_legendre_polynomial_p", "log1p": "log1p", "log_ndtr": "special_log_ndtr",
    "log_softmax": "log_softmax", "logit": "logit", "logsumexp": "logsumexp",
    "modified_bessel_i0": "special_modified_bessel_i0", "modified_bessel_i1": "special_modified_bessel_i1",
    "modified_bessel_k0": "special_modified_bessel_k0", "modified_bessel_k1": "special_modified_bessel_k1",
    "multigammaln": "mvlgamma", "ndtr": "special_ndtr", "ndtri": "special_ndtri", "polygamma": "polygamma",
    "psi": "digamma", "round": "round", "scaled_modified_bessel_k0": "special_scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1": "special_scaled_modified_bessel_k1",
    "shifted_chebyshev_polynomial_t": "special_shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u": "special_shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v": "special_shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w": "special_shifted_chebyshev_polynomial_w",
    "sinc": "sinc", "softmax": "softmax", "spherical_bessel_j0": "special_spherical_bessel_j0",
    "xlog1py": "special_xlog1py", "xlogy": "xlogy", "zeta": "special_zeta",
}

__all__ = sorted(name for name, op in _OPS.items() if op in _REGISTRY)
globals().update({name: _public(_get(_OPS[name])) for name in __all__})
