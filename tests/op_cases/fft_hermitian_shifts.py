"""Cases for the ops of mixprec/ops/fft_hermitian_shifts.py: the n-D Hermitian transforms, the shifts, istft.

References are numpy.fft in float64: the n-D Hermitian transform as the inverse real transform of the
conjugate with the other normalization (numpy has hfft for one dim only), the shifts as numpy's, and istft
as the overlap-add written out frame by frame.
"""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, rnd
from .complex_ops import z_ref
from .fft import cplx, cplx_ref, parts

WINDOW = np.hanning(10)[1:-1]  # 8 points, none zero
DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def hfftn_ref(z, s=None, axes=None, norm="backward"):
    return np.fft.irfftn(np.conj(z), s=s, axes=axes, norm=DUAL[norm])


def ihfftn_ref(x, s=None, axes=None, norm="backward"):
    return np.conj(np.fft.rfftn(x, s=s, axes=axes, norm=DUAL[norm]))


def istft_ref(spec, n_fft, hop, window):
    """Each frame's irfft times the window, added at its offset, divided by the added squared window; the
    n_fft // 2 samples stft's centring padded at each end are trimmed."""
    frames = np.fft.irfft(spec.T, n=n_fft, axis=-1) * window
    total = n_fft + hop * (len(frames) - 1)
    y, env = np.zeros(total), np.zeros(total)
    for i, f in enumerate(frames):
        y[i * hop:i * hop + n_fft] += f
        env[i * hop:i * hop + n_fft] += window ** 2
    pad = n_fft // 2
    return (y / env)[pad:total - pad]


def istft_complex_ref(spec, n_fft, hop):
    frames = np.fft.ifft(spec.T, n=n_fft, axis=-1)
    total = n_fft + hop * (len(frames) - 1)
    y, env = np.zeros(total, complex), np.zeros(total)
    for i, f in enumerate(frames):
        y[i * hop:i * hop + n_fft] += f
        env[i * hop:i * hop + n_fft] += 1.0
    return y / env


CASES = [
    Case("hfft2", "fft_hfft2", [rnd(3, 4, 3), rnd(3, 4, 3)], lambda re, im: mp.fft.hfft2(mp.complex(re, im)),
         lambda re, im: hfftn_ref(z_ref(re, im), axes=(-2, -1)), lowp=False),
    Case("hfftn-s-ortho", "fft_hfftn", [rnd(3, 4, 3), rnd(3, 4, 3)],
         lambda re, im: mp.fft.hfftn(mp.complex(re, im), s=(3, 5), dim=(0, 2), norm="ortho"),
         lambda re, im: hfftn_ref(z_ref(re, im), (3, 5), (0, 2), "ortho"), lowp=False),
    Case("ihfft2", "fft_ihfft2", [rnd(2, 4, 6)], lambda x: mp.view_as_real(mp.fft.ihfft2(x)),
         lambda x: parts(ihfftn_ref(x, axes=(-2, -1))), lowp=False),
    Case("ihfftn-forward", "fft_ihfftn", [rnd(4, 5)], lambda x: mp.view_as_real(mp.fft.ihfftn(x, norm="forward")),
         lambda x: parts(ihfftn_ref(x, norm="forward")), lowp=False),
    Case("fftshift", "fft_fftshift", [rnd(3, 5)], mp.fft.fftshift, np.fft.fftshift),
    Case("fftshift-dim", "fft_fftshift", [rnd(4, 5)], lambda x: mp.fft.fftshift(x, dim=1),
         lambda x: np.fft.fftshift(x, axes=1)),
    Case("ifftshift", "fft_ifftshift", [rnd(3, 5)], lambda x: mp.fft.ifftshift(x, (0, -1)),
         lambda x: np.fft.ifftshift(x, (0, -1))),
    Case("istft", "istft", [rnd(5, 6), rnd(5, 6)],
         lambda re, im: mp.istft(mp.complex(re, im), 8, hop_length=2, window=mp.tensor(WINDOW, device=re.device)),
         lambda re, im: istft_ref(z_ref(re, im), 8, 2, WINDOW), lowp=False),
    Case("istft-complex-out", "istft", [rnd(4, 5), rnd(4, 5)],
         cplx(lambda z: mp.istft(z, 4, hop_length=1, center=False, return_complex=True)),
         cplx_ref(lambda z: istft_complex_ref(z, 4, 1)), lowp=False),
]

