"""Cases for the ops of mixprec/ops/fft.py: every transform against numpy.fft (float64).

Complex inputs are built from two real ones and complex outputs returned as
view_as_real, so the drivers differentiate real tensors (see complex_ops.py).
FFTs refuse half precision, as torch's CPU FFTs do (tests/test_fft.py).
"""
from __future__ import annotations

import numpy as np

import mixprec as mp

from .case import Case, rnd
from .complex_ops import z_ref


def parts(z):
    return np.stack([z.real, z.imag], -1)


def cplx(f):
    """f applied to complex(re, im), its complex result as real parts."""
    return lambda re, im: mp.view_as_real(f(mp.complex(re, im)))


def cplx_ref(f):
    return lambda re, im: parts(f(z_ref(re, im)))


def stft_ref(x, n_fft, hop, window):
    """Frames of the reflect-padded signal, windowed, rfft'd: (freq, frames)."""
    pad = n_fft // 2
    x = np.pad(x, pad, mode="reflect")
    frames = np.stack([x[i:i + n_fft] * window for i in range(0, len(x) - n_fft + 1, hop)])
    return parts(np.fft.rfft(frames, axis=-1).T)


WINDOW = np.hanning(8)

CASES = [
    Case("fft-real", "fft_fft", [rnd(2, 5)], lambda x: mp.view_as_real(mp.fft.fft(x)), lambda x: parts(np.fft.fft(x)),
         lowp=False, second_order=True),
    Case("fft-n-ortho", "fft_fft", [rnd(3, 4), rnd(3, 4)], cplx(lambda z: mp.fft.fft(z, n=6, dim=0, norm="ortho")),
         cplx_ref(lambda z: np.fft.fft(z, n=6, axis=0, norm="ortho")), lowp=False),
    Case("ifft-trim", "fft_ifft", [rnd(2, 6), rnd(2, 6)], cplx(lambda z: mp.fft.ifft(z, n=4)),
         cplx_ref(lambda z: np.fft.ifft(z, n=4)), lowp=False),
    Case("fft2-forward", "fft_fft2", [rnd(2, 3, 4), rnd(2, 3, 4)], cplx(lambda z: mp.fft.fft2(z, norm="forward")),
         cplx_ref(lambda z: np.fft.fft2(z, norm="forward")), lowp=False),
    Case("ifft2-s", "fft_ifft2", [rnd(3, 4), rnd(3, 4)], cplx(lambda z: mp.fft.ifft2(z, s=(5, 2))),
         cplx_ref(lambda z: np.fft.ifft2(z, s=(5, 2))), lowp=False),
    Case("fftn", "fft_fftn", [rnd(2, 3, 4), rnd(2, 3, 4)], cplx(lambda z: mp.fft.fftn(z, dim=(0, 2))),
         cplx_ref(lambda z: np.fft.fftn(z, axes=(0, 2))), lowp=False),
    Case("ifftn", "fft_ifftn", [rnd(2, 3, 4), rnd(2, 3, 4)], cplx(lambda z: mp.fft.ifftn(z, s=(4, 3), norm="ortho")),
         cplx_ref(lambda z: np.fft.ifftn(z, s=(4, 3), axes=(1, 2), norm="ortho")), lowp=False),
    Case("rfft", "fft_rfft", [rnd(2, 7)], lambda x: mp.view_as_real(mp.fft.rfft(x)), lambda x: parts(np.fft.rfft(x)),
         lowp=False, second_order=True),
    Case("rfft-n-dim", "fft_rfft", [rnd(6, 2)], lambda x: mp.view_as_real(mp.fft.rfft(x, n=4, dim=0, norm="forward")),
         lambda x: parts(np.fft.rfft(x, n=4, axis=0, norm="forward")), lowp=False),
    Case("irfft", "fft_irfft", [rnd(2, 5), rnd(2, 5)], lambda re, im: mp.fft.irfft(mp.complex(re, im)),
         lambda re, im: np.fft.irfft(z_ref(re, im)), lowp=False, second_order=True),
    Case("irfft-odd-n", "fft_irfft", [rnd(4), rnd(4)], lambda re, im: mp.fft.irfft(mp.complex(re, im), n=9,
                                                                                  norm="ortho"),
         lambda re, im: np.fft.irfft(z_ref(re, im), n=9, norm="ortho"), lowp=False),
    Case("rfft2", "fft_rfft2", [rnd(3, 5)], lambda x: mp.view_as_real(mp.fft.rfft2(x)),
         lambda x: parts(np.fft.rfft2(x)), lowp=False),
    Case("irfft2", "fft_irfft2", [rnd(3, 4), rnd(3, 4)], lambda re, im: mp.fft.irfft2(mp.complex(re, im), s=(3, 5)),
         lambda re, im: np.fft.irfft2(z_ref(re, im), s=(3, 5)), lowp=False),
    Case("rfftn", "fft_rfftn", [rnd(2, 3, 4)], lambda x: mp.view_as_real(mp.fft.rfftn(x, norm="ortho")),
         lambda x: parts(np.fft.rfftn(x, norm="ortho")), lowp=False),
    Case("irfftn", "fft_irfftn", [rnd(2, 3, 3), rnd(2, 3, 3)], lambda re, im: mp.fft.irfftn(mp.complex(re, im)),
         lambda re, im: np.fft.irfftn(z_ref(re, im)), lowp=False),
    Case("hfft", "fft_hfft", [rnd(2, 4), rnd(2, 4)], lambda re, im: mp.fft.hfft(mp.complex(re, im), n=7),
         lambda re, im: np.fft.hfft(z_ref(re, im), n=7), lowp=False),
    Case("ihfft", "fft_ihfft", [rnd(2, 6)], lambda x: mp.view_as_real(mp.fft.ihfft(x, norm="ortho")),
         lambda x: parts(np.fft.ihfft(x, norm="ortho")), lowp=False),
    Case("stft", "stft", [rnd(20)],
         lambda x: mp.stft(x, 8, hop_length=3, window=mp.tensor(WINDOW, device=x.device), return_complex=False),
         lambda x: stft_ref(x, 8, 3, WINDOW), lowp=False),
]
