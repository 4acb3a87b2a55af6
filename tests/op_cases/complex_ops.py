"""Cases for the ops of mixprec/ops/complex_ops.py.

The drivers differentiate real float64 tensors, so each case builds its complex
values from real inputs (mp.complex, view_as_complex) and returns real ones
(view_as_real, real, imag, abs, angle): the gradient and tangent checks then
test the complex convention end to end (d/dRe + i d/dIm through every op).
"""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, away, pos, rnd


def z_ref(re, im):
    """re + i im exactly, as torch.complex (re + 1j * im would turn a nan imag part into a nan real part too)."""
    z = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), dtype=np.result_type(re, im, np.complex64))
    z.real, z.imag = re, im
    return z


def parts(z):
    return np.stack([z.real, z.imag], -1)


CASES = [
    Case("complex", "complex", [rnd(2, 3), rnd(3)], lambda a, b: mp.view_as_real(mp.complex(a, b)),
         lambda a, b: parts(z_ref(a, b)), lowp=False),
    Case("view_as_complex", "view_as_complex", [rnd(2, 3, 2)], lambda a: mp.view_as_real(mp.view_as_complex(a) * 2),
         lambda a: 2 * a, lowp=False),
    Case("real-imag", "real", [rnd(3), rnd(3)],
         lambda a, b: (lambda z: ((z * z).real, (z * z).imag))(mp.complex(a, b)),
         lambda a, b: (lambda z: ((z * z).real, (z * z).imag))(z_ref(a, b)), lowp=False),
    Case("imag", "imag", [rnd(2, 2), rnd(2, 2)], lambda a, b: (mp.complex(a, b).exp()).imag,
         lambda a, b: np.exp(z_ref(a, b)).imag, lowp=False),
    Case("conj", "conj", [rnd(3), rnd(3)], lambda a, b: mp.view_as_real(mp.complex(a, b).conj() * mp.complex(b, a)),
         lambda a, b: parts(np.conj(z_ref(a, b)) * z_ref(b, a)), lowp=False),
    Case("abs-complex", "abs", [away(4), rnd(4)], lambda a, b: mp.complex(a, b).abs(),
         lambda a, b: np.abs(z_ref(a, b)), lowp=False),
    Case("angle", "angle", [away(4), away(4)], lambda a, b: mp.complex(a, b).angle(),
         lambda a, b: np.angle(z_ref(a, b)), lowp=False),
    Case("angle-real", "angle", [away(5)], mp.angle, lambda a: np.where(a < 0, np.pi, 0.0)),
    Case("polar", "polar", [pos(2, 3), rnd(3)], lambda r, t: mp.view_as_real(mp.polar(r, t)),
         lambda r, t: parts(r * np.exp(1j * t)), lowp=False),
    Case("complex-div-mul", "div", [rnd(3), away(3), rnd(3), away(3)],
         lambda a, b, c, d: mp.view_as_real(mp.complex(a, b) / mp.complex(c, d) * (1 - 2j)),
         lambda a, b, c, d: parts(z_ref(a, b) / z_ref(c, d) * (1 - 2j)), lowp=False),
]
