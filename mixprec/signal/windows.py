"""``mp.signal.windows``: torch.signal.windows' window functions, as 1-D tensors of M points.

    import mixprec as mp
    w = mp.signal.windows.hann(8)                      # symmetric: for filter design
    w = mp.signal.windows.kaiser(400, beta=8.0, sym=False, dtype=mp.float64)   # periodic: for spectral analysis

Every window takes ``sym`` (True: symmetric, the M points of the window over M - 1
intervals; False: periodic, the first M of the symmetric window of M + 1 points) and
torch's keyword-only dtype (a floating dtype; the default dtype when None), device
and requires_grad. The values are computed in float64 on the host (a window is small
and made once) and rounded once to ``dtype``; a window is a leaf, never part of a graph.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as _dt
from ..tensor import tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine", "general_hamming",
           "hamming", "hann", "kaiser", "nuttall"]


def _check_size(name, M):
    if isinstance(M, bool) or not isinstance(M, numbers.Integral):
        raise TypeError(f"signal.windows.{name}: M must be an int (the number of points), got {M!r}")
    if M < 0:
        raise ValueError(f"signal.windows.{name}: M must be non-negative, got {M}")
    return int(M)


def _make(name, M, sym, dtype, device, requires_grad, layout, values, small=False):
    """The window of M points: values(n) gives the symmetric window of n >= 2 points (also of 1 with ``small``) as
    a float64 array."""
    M = _check_size(name, M)
    if layout is not None and str(layout) not in ("strided", "torch.strided"):
        raise ValueError(f"signal.windows.{name}: only the strided layout is supported, got {layout!r}")
    out_dtype = _dt.as_dtype(dtype) if dtype is not None else None
    if out_dtype is not None and not _dt.is_floating(out_dtype):
        raise ValueError(f"signal.windows.{name}: dtype must be a floating point type, got {out_dtype.name}")
    if M == 0 or (M == 1 and not small):
        w = np.ones(M)
    else:
        w = values(M if sym else M + 1)[:M]
    return tensor(w, dtype=out_dtype or _dt.float32, device=device, requires_grad=requires_grad)


def _positive(name, what, value, strictly=True):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (value > 0 if strictly else value >= 0):
        raise ValueError(f"signal.windows.{name}: {what} must be {'positive' if strictly else 'non-negative'}, "
                         f"got {value!r}")
    return float(value)


def _cosine_sum(coefficients):
    """sum_i (-1)^i a_i cos(2 pi i k / (n - 1)), k = 0 .. n - 1."""
    def values(n):
        phase = 2 * np.pi * np.arange(n) / (n - 1)
        return sum((-1) ** i * a * np.cos(i * phase) for i, a in enumerate(coefficients))
    return values


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The sum of cosines sum_i (-1)^i a[i] cos(2 pi i k / (M - 1)) with coefficients ``a`` (a list or tuple)."""
    if not isinstance(a, (list, tuple)) or not a or \
            not all(isinstance(c, numbers.Real) and not isinstance(c, bool) for c in a):
        raise TypeError(f"signal.windows.general_cosine: a must be a non-empty list or tuple of numbers, got {a!r}")
    return _make("general_cosine", M, sym, dtype, device, requires_grad, layout, _cosine_sum([float(c) for c in a]))


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """alpha - (1 - alpha) cos(2 pi k / (M - 1)): hann for alpha = 0.5, hamming for 0.54."""
    return _make("general_hamming", M, sym, dtype, device, requires_grad, layout, _cosine_sum([alpha, 1.0 - alpha]))


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hamming window, 0.54 - 0.46 cos(2 pi k / (M - 1))."""
    return _make("hamming", M, sym, dtype, device, requires_grad, layout, _cosine_sum([0.54, 0.46]))


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Hann window, 0.5 - 0.5 cos(2 pi k / (M - 1))."""
    return _make("hann", M, sym, dtype, device, requires_grad, layout, _cosine_sum([0.5, 0.5]))


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Blackman window, 0.42 - 0.5 cos(2 pi k / (M - 1)) + 0.08 cos(4 pi k / (M - 1))."""
    return _make("blackman", M, sym, dtype, device, requires_grad, layout, _cosine_sum([0.42, 0.5, 0.08]))


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return _make("nuttall", M, sym, dtype, device, requires_grad, layout,
                 _cosine_sum([0.3635819, 0.4891775, 0.1365995, 0.0106411]))


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangular window 1 - |2k / (M - 1) - 1|, zero at both ends."""
    return _make("bartlett", M, sym, dtype, device, requires_grad, layout,
                 lambda n: 1 - np.abs(2 * np.arange(n) / (n - 1) - 1))


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The sine (cosine) window sin(pi (k + 1/2) / M)."""
    return _make("cosine", M, sym, dtype, device, requires_grad, layout,
                 lambda n: np.sin(np.pi * (np.arange(n) + 0.5) / n))


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The exponential (Poisson) window exp(-|k - center| / tau). center defaults to the middle, (M - 1) / 2; only a
    periodic window (sym=False) may place it elsewhere (torch's rule, the reverse of SciPy's)."""
    tau = _positive("exponential", "tau", tau)
    if center is not None and sym:
        raise ValueError("signal.windows.exponential: center must be None for a symmetric window (sym=True)")
    if center is None:
        return _make("exponential", M, sym, dtype, device, requires_grad, layout,
                     lambda n: np.exp(-np.abs(np.arange(n) - (n - 1) / 2) / tau))
    return _make("exponential", M, True, dtype, device, requires_grad, layout,
                 lambda n: np.exp(-np.abs(np.arange(n) - float(center)) / tau), small=True)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Gaussian window exp(-(k - (M - 1)/2)^2 / (2 std^2))."""
    std = _positive("gaussian", "std", std)
    return _make("gaussian", M, sym, dtype, device, requires_grad, layout,
                 lambda n: np.exp(-((np.arange(n) - (n - 1) / 2) ** 2) / (2 * std * std)))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The Kaiser window I0(beta sqrt(1 - (2k / (M - 1) - 1)^2)) / I0(beta), I0 the modified Bessel function."""
    beta = _positive("kaiser", "beta", beta, strictly=False)

    def values(n):
        r = 2 * np.arange(n) / (n - 1) - 1
        return np.i0(beta * np.sqrt(np.clip(1 - r * r, 0, None))) / np.i0(beta)
    return _make("kaiser", M, sym, dtype, device, requires_grad, layout, values)


