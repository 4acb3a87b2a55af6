"""Special functions, as torch.special has them: the gamma family (lgamma, digamma, polygamma, mvlgamma,
igamma/igammac, zeta), the error-function family (erfc, erfcx, ndtr, ndtri, log_ndtr), Bessel functions,
logit/xlogy/xlog1py/entr/sinc, and the classical orthogonal polynomials.

The values come from SciPy on the CPU and cupyx.scipy.special on a GPU (mixprec/backend/special.py);
float16/bfloat16 and integer inputs compute in float32 (opmath) and round once. Ops torch defines with a
Tensor method have one here too; the torch.special-only ones are registered as ``special_<name>`` and
reached as ``mp.special.<name>`` (mixprec/special.py).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module, is_array, special as _sf
from ..tensor import Tensor
from .elementwise import where
from .opmath import opmath
from .registry import register

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)


def _real_only(name, *arrays):
    for a in arrays:
        if getattr(a, "dtype", None) is not None and a.dtype.kind == "c":
            raise NotImplementedError(f"{name}: not implemented for complex tensors (as in torch); it takes real "
                                      f"floating, integer or bool tensors, got {a.dtype.name}")


def _scipy(name):
    """The array function that evaluates SciPy's (or cupyx's) special function ``name``."""
    def fn(a, *rest):
        return _sf.call(name, a, *rest)
    fn.__name__ = name
    return fn


def _unary(name, fn, *, d_in=None, d_out=None, methods=None, differentiable=True, doc=""):
    """Register the one-input elementwise op ``name``: ``fn`` on float32/float64 arrays (opmath widens the
    rest). Its derivative comes from the input (``d_in``) or the output (``d_out``), on Tensors; an op
    without either registers its rules itself, or has none (``differentiable=False``)."""
    def forward(ctx, input):
        _real_only(name, input)
        return opmath(fn, input)
    forward.__name__ = forward.__qualname__ = name
    saves = ("output",) if d_out is not None else ("input",)
    op = register(name, methods=(name,) if methods is None else methods, saves=saves,
                  differentiable=differentiable)(forward)
    op.__doc__ = doc or f"Elementwise {name}."
    if d_in is not None:
        op.partials(lambda ctx: (d_in(ctx.inputs[0]),))
    elif d_out is not None:
        op.partials(lambda ctx: (d_out(ctx.output),))
    return op


def _binary(name, fn, *, methods=None, differentiable=True, integers=True, doc=""):
    """Register the two-input elementwise op ``name`` (promoting and broadcasting, as torch's binary ufuncs).
    With ``integers=False`` a pair of integer/bool inputs is refused (torch has no kernel for it), as torch."""
    def forward(ctx, input, other):
        _real_only(name, input, other)
        if not integers and not any(isinstance(v, float) or _dt.is_floating(getattr(v, "dtype", np.dtype(int)))
                                    for v in (input, other)):
            raise NotImplementedError(f"{name}: not implemented for integer or bool inputs (as in torch); give "
                                      f"a floating-point input or other")
        return opmath(fn, input, other)
    forward.__name__ = forward.__qualname__ = name
    op = register(name, methods=(name,) if methods is None else methods, promote=(0, 1), broadcast=True,
                  differentiable=differentiable)(forward)
    op.__doc__ = doc
    return op


def _tensor(x):
    return isinstance(x, Tensor)


# ---------------------------------------------------------------- the gamma family
def _lgamma(a):
    # at -inf: +inf, as torch (C's lgamma); SciPy gives -inf
    return array_module(a).where(a == -np.inf, a.dtype.type(np.inf), _sf.call("gammaln", a))


lgamma = _unary("lgamma", _lgamma, d_in=lambda x: digamma(x),
                doc="Elementwise log|Gamma(x)| (special.gammaln).")


def _digamma(a):
    # at a zero, torch's convention: -inf at +0, +inf at -0 (the limits from the zero's side)
    xp = array_module(a)
    return xp.where(a == 0, xp.copysign(a.dtype.type(np.inf), -a), _sf.call("psi", a))


digamma = _unary("digamma", _digamma, d_in=lambda x: polygamma(1, x),
                 doc="Elementwise digamma psi(x), the derivative of lgamma (special.digamma, special.psi).")


def _polygamma(n, a):
    if n == 0:
        return _digamma(a)
    # (-1)^(n+1) n! zeta(n+1, x): the formula SciPy's polygamma evaluates (there always in float64)
    scale = a.dtype.type((-1.0) ** (n + 1) * math.factorial(n))
    return _sf.call("zeta", a.dtype.type(n + 1), a).astype(a.dtype, copy=False) * scale


@register("polygamma", promote=(1,), saves=("input",))
def polygamma(ctx, n, input):
    """Elementwise n-th derivative of digamma: polygamma(0, x) is digamma(x). ``n`` is a non-negative int
    (not differentiable)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"polygamma: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"polygamma: n must be non-negative, got {n}")
    _real_only("polygamma", input)
    ctx.n = int(n)
    return opmath(lambda a: _polygamma(int(n), a), input)


@polygamma.partials
def _(ctx):
    return None, polygamma(ctx.n + 1, ctx.inputs[1])


def _polygamma_method(self, n):
    """x.polygamma(n): polygamma(n, x)."""
    return polygamma(n, self)


Tensor.polygamma = _polygamma_method  # (torch's method takes n after self: the op's arguments reversed)


@register("mvlgamma", methods=("mvlgamma",), composite=True)
def mvlgamma(ctx, input, p):
    """Elementwise log of the multivariate gamma function of dimension p (special.multigammaln):
    sum over j < p of lgamma(x - j/2), plus p(p-1)/4 log(pi). Every x must exceed (p-1)/2."""
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"mvlgamma: p must be an int, got {type(p).__name__}")
    if p < 1:
        raise RuntimeError(f"mvlgamma: p must be >= 1, got {p}")
    _real_only("mvlgamma", input._array)
    if input.dtype.kind in "biu":
        input = input.to("float32")
    if not bool((input > (p - 1) / 2).all()):
        raise RuntimeError(f"mvlgamma: every element of the input must be greater than (p-1)/2 = {(p - 1) / 2}")
    shifts = Tensor._wrap(array_module(input._array).arange(p, dtype=input._array.dtype) / input.dtype.type(2))
    return lgamma(input.unsqueeze(-1) - shifts).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def _d_gammainc(a, x):
    """d/dx of the regularized lower incomplete gamma P(a, x): x^(a-1) e^-x / Gamma(a)."""
    return ((a - 1) * x.log() - x - lgamma(a)).exp()


def _no_derivative_in_input(name, what, ctx, tangent=None):
    """torch defines no derivative of igamma, igammac and zeta in their first input: backward refuses one
    when that input requires grad, forward mode when it carries a tangent (``tangent`` is then that tensor's
    own; an input without one gets a fresh zero tensor)."""
    fw = ctx.inputs[0]._fw
    if ctx.needs_input_grad[0] if tangent is None else (fw is not None and fw[1] is tangent):
        raise NotImplementedError(f"{name}: the derivative with respect to input ({what}) is not implemented (as in "
                                  f"torch); {'detach it' if tangent is None else 'give it no tangent in forward mode'}")


def _rules_in_x_only(name, sign):
    """igamma's and igammac's rules: the derivative in x is +-d/dx P(a, x); in a there is none."""
    def rule(ctx, g):
        _no_derivative_in_input(name, "a", ctx)
        return None, g * (_d_gammainc(*ctx.inputs) * sign)

    def tangent(ctx, ta, tx):
        _no_derivative_in_input(name, "a", ctx, ta)
        return None if tx is None else tx * (_d_gammainc(*ctx.inputs) * sign)
    return rule, tangent


igamma = _binary("igamma", _scipy("gammainc"), integers=False, doc="Elementwise regularized lower incomplete gamma "
                 "function P(input, other) (special.gammainc); differentiable in other only, as torch.")
igammac = _binary("igammac", _scipy("gammaincc"), integers=False, doc="Elementwise regularized upper incomplete gamma "
                  "function Q(input, other) = 1 - P(input, other) (special.gammaincc); differentiable in other only.")
for _op, _sign in ((igamma, 1), (igammac, -1)):
    _backward, _tangent = _rules_in_x_only(_op.name, _sign)
    _op.grad(_backward)
    _op.jvp(_tangent)


def _zeta(x, q):
    return _sf.call("zeta", x, q)


special_zeta = _binary("special_zeta", _zeta, methods=(), doc="Elementwise Hurwitz zeta function "
                       "sum over k >= 0 of (k + other)^-input; differentiable in other only, as torch.")


@special_zeta.grad
def _(ctx, g):
    _no_derivative_in_input("special.zeta", "x", ctx)
    x, q = ctx.inputs
    return None, g * (x * -1) * special_zeta(x + 1, q)


@special_zeta.jvp
def _(ctx, tx, tq):
    _no_derivative_in_input("special.zeta", "x", ctx, tx)
    x, q = ctx.inputs
    return None if tq is None else tq * (x * -1) * special_zeta(x + 1, q)


# ---------------------------------------------------------------- the error-function family
erfc = _unary("erfc", _scipy("erfc"), d_in=lambda x: (x * x * -1).exp() * (-2 / _SQRT_PI),
              doc="Elementwise complementary error function 1 - erf(x), accurate where erf is near 1.")


def _with_input_and_output(name, fn, partial, doc):
    """A one-input op whose derivative reads both x and f(x): partial(x, y) on Tensors."""
    def forward(ctx, input):
        _real_only(name, input)
        return opmath(fn, input)
    forward.__name__ = forward.__qualname__ = name
    op = register(name, saves=("input", "output"))(forward)
    op.__doc__ = doc
    op.partials(lambda ctx: (partial(ctx.inputs[0], ctx.output),))
    return op


special_erfcx = _with_input_and_output(
    "special_erfcx", _scipy("erfcx"), lambda x, y: x * y * 2 - 2 / _SQRT_PI,
    "Elementwise scaled complementary error function exp(x^2) erfc(x), finite where erfc underflows.")
special_ndtr = _unary("special_ndtr", _scipy("ndtr"), methods=(),
                      d_in=lambda x: (x * x * -0.5).exp() * (1 / _SQRT_2PI),
                      doc="Elementwise standard normal CDF: the area under the Gaussian density left of x.")
special_ndtri = _unary("special_ndtri", _scipy("ndtri"), methods=(), d_out=lambda y: (y * y * 0.5).exp() * _SQRT_2PI,
                       doc="Elementwise inverse of the standard normal CDF (x in [0, 1]).")
special_log_ndtr = _with_input_and_output(
    "special_log_ndtr", _scipy("log_ndtr"), lambda x, y: (y + x * x * 0.5).neg().exp() * (1 / _SQRT_2PI),
    "Elementwise log of the standard normal CDF, accurate far into the left tail.")


# ---------------------------------------------------------------- x log y and relatives
special_entr = _unary("special_entr", _scipy("entr"), methods=(), d_in=lambda x: (x.log() + 1).neg(),
                      doc="Elementwise entropy term -x log x (0 at 0, -inf for x < 0).")


def _x_log(log):
    """x * log(y) (log is xp.log or xp.log1p), 0 where x is 0 unless y is nan (torch's xlogy/xlog1py)."""
    def fn(x, y):
        xp = array_module(x if hasattr(x, "dtype") and not isinstance(x, np.generic) else y)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = x * getattr(xp, log)(y)
        return xp.where((x == 0) & ~xp.isnan(y), out.dtype.type(0), out).astype(out.dtype, copy=False)
    return fn


xlogy = _binary("xlogy", _x_log("log"), doc="Elementwise input * log(other), 0 where input is 0 (unless other is "
                "nan): the entropy-style product that stays finite at 0 * log 0.")


@xlogy.partials
def _(ctx):
    x, y = ctx.inputs
    dx = where((x == 0).logical_and(y <= 0), 0.0, y.log() if _tensor(y) else math.log(y)) if _tensor(x) else None
    return dx, (x / y if _tensor(y) else None)


special_xlog1py = _binary("special_xlog1py", _x_log("log1p"), methods=(),
                          doc="Elementwise input * log1p(other), 0 where input is 0 (unless other is nan).")


@special_xlog1py.partials
def _(ctx):
    x, y = ctx.inputs
    dx = where((x == 0).logical_and(y <= -1), 0.0, y.log1p() if _tensor(y) else math.log1p(y)) if _tensor(x) \
        else None
    return dx, (x / (y + 1) if _tensor(y) else None)


def _sinc(a):
    xp = array_module(a)
    pix = a * a.dtype.type(math.pi)
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.where(a == 0, a.dtype.type(1), xp.sin(pix) / pix)


def _d_sinc(x):
    # (cos(pi x) - sinc(x)) / x: the quotient rule's two terms over one x, finite down to the tiniest x
    return where(x == 0, 0.0, ((x * math.pi).cos() - sinc(x)) / x)


sinc = _unary("sinc", _sinc, d_in=_d_sinc, doc="Elementwise normalized sinc: sin(pi x) / (pi x), 1 at 0.")


@register("logit", methods=("logit",), saves=("input",))
def logit(ctx, input, eps=None):
    """Elementwise log(x / (1 - x)); with eps, x is first clamped to [eps, 1 - eps] (and the gradient is 0
    outside it)."""
    _real_only("logit", input)
    if eps is not None and not isinstance(eps, (int, float, np.floating, np.integer)):
        raise TypeError(f"logit: eps must be a number or None, got {type(eps).__name__}")
    ctx.eps = eps

    def fn(a):
        xp = array_module(a)
        if eps is not None:
            a = xp.clip(a, a.dtype.type(eps), a.dtype.type(1 - eps))
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.log(a / (1 - a))
    return opmath(fn, input)


@logit.partials
def _(ctx):
    x = ctx.inputs[0]
    d = 1 / (x * (1 - x))
    if ctx.eps is None:  # outside [0, 1], where logit is nan, so is its derivative (torch's)
        return (where((x < 0).logical_or(x > 1), math.nan, d),)
    return (where((x < ctx.eps).logical_or(x > 1 - ctx.eps), 0.0, d),)


# ---------------------------------------------------------------- Bessel functions
def _tiny_safe(x, partial, at_zero):
    """partial(x) where |x| exceeds the dtype's eps, ``at_zero`` (its limit) at smaller |x| (torch's rule)."""
    tiny = x.abs() <= float(np.finfo(x._array.dtype).eps)
    return where(tiny, at_zero, partial(where(tiny, 1.0, x)))


i0 = _unary("i0", _scipy("i0"), d_in=lambda x: special_i1(x),
            doc="Elementwise modified Bessel function of the first kind, order 0 (special.i0).")
special_i0e = _with_input_and_output(
    "special_i0e", _scipy("i0e"), lambda x, y: special_i1e(x) - x.sign() * y,
    "Elementwise exponentially scaled modified Bessel function of order 0: exp(-|x|) i0(x).")
special_i1 = _with_input_and_output(
    "special_i1", _scipy("i1"), lambda x, y: _tiny_safe(x, lambda s: i0(s) - y / s, 0.5),
    "Elementwise modified Bessel function of the first kind, order 1.")
special_i1e = _with_input_and_output(
    "special_i1e", _scipy("i1e"), lambda x, y: _tiny_safe(x, lambda s: special_i0e(s) - y * (s.sign() + 1 / s), 0.5),
    "Elementwise exponentially scaled modified Bessel function of order 1: exp(-|x|) i1(x).")


def _spherical_j0(a):
    xp = array_module(a)
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.where(a == 0, a.dtype.type(1), xp.where(xp.isinf(a), a.dtype.type(0), xp.sin(a) / a))


def _airy_ai(a):
    return _sf.call("airy", a)[0].astype(a.dtype, copy=False)


# torch defines no derivative for these (their outputs never require grad); nor does mixprec.
for _name, _fn, _what in (
        ("bessel_j0", "j0", "Bessel function of the first kind, order 0"),
        ("bessel_j1", "j1", "Bessel function of the first kind, order 1"),
        ("bessel_y0", "y0", "Bessel function of the second kind, order 0"),
        ("bessel_y1", "y1", "Bessel function of the second kind, order 1"),
        ("modified_bessel_i0", "i0", "modified Bessel function of the first kind, order 0"),
        ("modified_bessel_i1", "i1", "modified Bessel function of the first kind, order 1"),
        ("modified_bessel_k0", "k0", "modified Bessel function of the second kind, order 0"),
        ("modified_bessel_k1", "k1", "modified Bessel function of the second kind, order 1"),
        ("scaled_modified_bessel_k0", "k0e", "exponentially scaled modified Bessel function K0: exp(x) k0(x)"),
        ("scaled_modified_bessel_k1", "k1e", "exponentially scaled modified Bessel function K1: exp(x) k1(x)"),
        ("spherical_bessel_j0", _spherical_j0, "spherical Bessel function of the first kind, order 0: sin(x) / x"),
        ("airy_ai", _airy_ai, "Airy function Ai (cupyx has none: on CUDA it is evaluated on the host)")):
    _unary(f"special_{_name}", _scipy(_fn) if isinstance(_fn, str) else _fn, methods=(), differentiable=False,
           doc=f"Elementwise {_what} (not differentiable, as in torch).")


# ---------------------------------------------------------------- orthogonal polynomials
def _as_pair(x, n):
    """x and n as arrays of one shape (either may come as a NumPy scalar), and their array module."""
    xp = array_module(x if is_array(x) else n)
    shape = np.broadcast_shapes(np.shape(x), np.shape(n))
    x = xp.broadcast_to(x, shape) if is_array(x) else xp.full(shape, x, dtype=n.dtype)
    n = xp.broadcast_to(n, shape) if is_array(n) else xp.full(shape, n, dtype=x.dtype)
    return xp, x, n


def _polynomial(name, first, step, edges, what):
    """Register ``special_<name>(input, n)``: the degree-n polynomial at x, for the integer part of each n
    (0 where n < 0), by its three-term recurrence: ``first(x)`` gives degrees 0 and 1, ``step(k, x, p, q)``
    degree k from degrees k-2 and k-1. ``edges(xp, x, n)`` gives (mask, values) where a closed form replaces
    the recurrence (torch's, at x = +-1 and the like), or None. Not differentiable, as in torch."""
    def fn(x, n):
        xp, x, n = _as_pair(x, n)
        n = xp.trunc(n)
        p, q = first(x)
        out = xp.where(n == 0, p, q)
        top = int(n.max()) if n.size else 0  # (the recurrence runs to the largest degree asked for)
        with np.errstate(all="ignore"):
            for k in range(2, top + 1):
                p, q = q, step(k, x, p, q)
                out = xp.where(n == k, q, out)
        out = xp.where(n < 0, x.dtype.type(0), out)
        special = edges(xp, x, n) if edges is not None else None
        if special is not None:
            mask, values = special
            out = xp.where(mask & (n >= 0), values, out)
        return out.astype(x.dtype, copy=False)

    def forward(ctx, input, n):
        _real_only(f"special.{name}", input, n)
        return opmath(fn, input, n)
    forward.__name__ = forward.__qualname__ = f"special_{name}"
    op = register(f"special_{name}", promote=(0, 1), broadcast=True, differentiable=False)(forward)
    op.__doc__ = f"Elementwise {what} of degree n (the integer part of n; 0 for n < 0), not differentiable."
    return op


def _odd(n):
    return n - 2 * (n // 2) != 0


def _cheb_edges(at_one, at_minus_one):
    """torch's values at x = 1 and x = -1 (the recurrence is exact there too, but overflows less this way)."""
    def edges(xp, x, n):
        return (x == 1) | (x == -1), xp.where(x == 1, at_one(n), at_minus_one(n))
    return edges


def _shifted(first, step, edges):
    """The shifted polynomial: the same recurrence at 2x - 1 (so [0, 1] maps onto [-1, 1])."""
    def first2(x):
        return first(x + x - 1)

    def step2(k, x, p, q):
        return step(k, x + x - 1, p, q)

    def edges2(xp, x, n):
        return edges(xp, x + x - 1, n)
    return first2, step2, edges2


def _cheb_step(k, x, p, q):
    return (x + x) * q - p


_CHEBYSHEV = {
    "t": (lambda x: (x * 0 + 1, x), _cheb_edges(lambda n: n * 0 + 1, lambda n: 1 - 2 * _odd(n))),
    "u": (lambda x: (x * 0 + 1, x + x), _cheb_edges(lambda n: n + 1, lambda n: (n + 1) * (1 - 2 * _odd(n)))),
    "v": (lambda x: (x * 0 + 1, x + x - 1), _cheb_edges(lambda n: n * 0 + 1,
                                                        lambda n: (n + n + 1) * (1 - 2 * _odd(n)))),
    "w": (lambda x: (x * 0 + 1, x + x + 1), _cheb_edges(lambda n: n + n + 1, lambda n: 1 - 2 * _odd(n))),
}
for _kind, (_first, _edges) in _CHEBYSHEV.items():
    _polynomial(f"chebyshev_polynomial_{_kind}", _first, _cheb_step, _edges,
                f"Chebyshev polynomial of the {dict(t='first', u='second', v='third', w='fourth')[_kind]} kind")
    _polynomial(f"shifted_chebyshev_polynomial_{_kind}", *_shifted(_first, _cheb_step, _edges),
                f"shifted Chebyshev polynomial (on [0, 1]) of the "
                f"{dict(t='first', u='second', v='third', w='fourth')[_kind]} kind")

_polynomial("hermite_polynomial_h", lambda x: (x * 0 + 1, x + x),
            lambda k, x, p, q: (x + x) * q - (2 * (k - 1)) * p, None, "physicists' Hermite polynomial H")
_polynomial("hermite_polynomial_he", lambda x: (x * 0 + 1, x),
            lambda k, x, p, q: x * q - (k - 1) * p, None, "probabilists' Hermite polynomial He")
_polynomial("laguerre_polynomial_l", lambda x: (x * 0 + 1, 1 - x),
            lambda k, x, p, q: ((2 * k - 1 - x) * q - (k - 1) * p) / k,
            lambda xp, x, n: (x == 0, x * 0 + 1), "Laguerre polynomial L")
_polynomial("legendre_polynomial_p", lambda x: (x * 0 + 1, x),
            lambda k, x, p, q: ((2 * k - 1) * x * q - (k - 1) * p) / k,
            _cheb_edges(lambda n: n * 0 + 1, lambda n: 1 - 2 * _odd(n)), "Legendre polynomial P")
