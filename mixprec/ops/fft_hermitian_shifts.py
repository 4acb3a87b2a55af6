"""torch.fft's n-dimensional Hermitian transforms, the frequency shifts, and istft (``mp.fft``, ``mp.istft``).

    hfft2, hfftn     a real spectrum from the half of a Hermitian-symmetric signal (irfftn of its conjugate,
                     normalized the other way), the n-D form of hfft
    ihfft2, ihfftn   their inverses (the conjugate of rfftn, normalized the other way)
    fftshift         the zero frequency moved to the middle of each dim (ifftshift moves it back)
    istft            the inverse of stft: each frame's inverse fft, windowed, overlapped and added, divided by the
                     summed squared window

All are composed of ops/fft.py's primitives and of slicing, cat and index_add, which carry the derivatives.
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..backend import array_module
from .fft import _DUAL, _checked, _check_input, _norm, check_frames, ifftn, irfftn, rfftn
from .registry import register
from .shape import cat, dim_index
from ..tensor import Tensor
from ..creation import ones, zeros


# ---------------------------------------------------------------- Hermitian n-D transforms
def _hermitian(name, kind, default_dim, doc):
    """hfftn-like (kind "irfftn") or ihfftn-like (kind "rfftn") transforms over ``dim``."""
    def forward(ctx, input, s=None, dim=default_dim, norm=None):
        _checked(name, kind, input._array, s, dim, norm)  # errors name the function called
        dual = _DUAL[_norm(name, norm)]
        if kind == "irfftn":
            return irfftn(input.conj(), s, dim, dual)
        return rfftn(input, s, dim, dual).conj()
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = doc
    return register(name, composite=True)(forward)


hfft2 = _hermitian("fft_hfft2", "irfftn", (-2, -1), "hfftn over the last two dims.")
hfftn = _hermitian("fft_hfftn", "irfftn", None,
                   "The real n-D spectrum of a Hermitian-symmetric signal given by its half (the last dim halved): "
                   "irfftn of the conjugate, normalized the other way.")
ihfft2 = _hermitian("fft_ihfft2", "rfftn", (-2, -1), "ihfftn over the last two dims.")
ihfftn = _hermitian("fft_ihfftn", "rfftn", None,
                    "The inverse of hfftn: the half of a Hermitian-symmetric signal from its real spectrum "
                    "(the conjugate of rfftn, normalized the other way).")


# ---------------------------------------------------------------- shifts
def _shift(name, inverse):
    def forward(ctx, input, dim=None):
        dims = range(input.ndim) if dim is None else (dim,) if isinstance(dim, int) else dim
        out = input
        for d in (dim_index(d, input.ndim, name) for d in dims):
            n = out.shape[d]
            first = n - n // 2 if not inverse else n // 2  # where the moved-to-the-front part starts
            head = (slice(None),) * d
            out = cat([out[head + (slice(first, None),)], out[head + (slice(0, first),)]], d)
        return out
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = ("The zero frequency moved to the middle of each dim in ``dim`` (every dim by default): a roll "
                       "by n // 2." if not inverse else "The inverse of fftshift: a roll by -(n // 2).")
    return register(name, composite=True)(forward)


fftshift = _shift("fft_fftshift", inverse=False)
ifftshift = _shift("fft_ifftshift", inverse=True)


# ---------------------------------------------------------------- istft
@register("istft", methods=("istft",), promote=(0, 3), composite=True)
def istft(ctx, input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """The inverse short-time Fourier transform of stft's complex output (..., n_freq, frames): each frame's inverse
    fft times the window, overlapped and added at hop_length, divided by the overlapped squared window (which must
    be non-zero everywhere: the NOLA condition). center trims stft's padding; ``length`` trims or zero-pads the
    signal to that many samples."""
    name = "istft"
    if not isinstance(input, Tensor) or input.ndim not in (2, 3) or not _dt.is_complex(input.dtype):
        raise RuntimeError(f"{name}: expected a complex 2-D (n_freq, frames) or 3-D (B, n_freq, frames) tensor, got "
                           f"{getattr(input, 'dtype', type(input))} of shape {tuple(getattr(input, 'shape', ()))}")
    _check_input(name, input._array)
    if input.numel() == 0:  # (as torch: no frames, or no signals, give nothing to invert)
        raise RuntimeError(f"{name}: input cannot be empty, got shape {tuple(input.shape)}")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    check_frames(name, n_fft, hop_length, win_length, window)
    n_freq, frames = input.shape[-2:]
    onesided = n_freq != n_fft if onesided is None else onesided
    expected = n_fft // 2 + 1 if onesided else n_fft
    if n_freq != expected:
        raise RuntimeError(f"{name}: expected {expected} frequencies (n_fft={n_fft}, onesided={onesided}), got "
                           f"{n_freq}")
    if return_complex and onesided:
        raise RuntimeError(f"{name}: a onesided input gives a real signal; pass return_complex=False or "
                           "onesided=False")
    if not return_complex and window is not None and _dt.is_complex(window.dtype):
        raise RuntimeError(f"{name}: a complex window gives a complex signal; pass return_complex=True")
    batched = input.ndim == 3
    x = (input if batched else input.unsqueeze(0)).transpose(-1, -2)  # (B, frames, n_freq)
    norm = "ortho" if normalized else "backward"
    if return_complex:
        x = ifftn(x, (n_fft,), (-1,), norm)
    else:
        x = irfftn(x[..., :n_fft // 2 + 1], (n_fft,), (-1,), norm)
    real = _dt.real_of(input.dtype)
    if window is None:
        window = ones(win_length, dtype=real, device=input.device)
    if win_length < n_fft:  # a shorter window sits in the middle of the frame
        left = (n_fft - win_length) // 2
        window = cat([zeros(left, dtype=window.dtype, device=window.device), window,
                      zeros(n_fft - win_length - left, dtype=window.dtype, device=window.device)])
    x = x * window
    total = n_fft + hop_length * (frames - 1)
    xp = array_module(input._array)
    positions = Tensor._wrap((xp.arange(frames)[:, None] * hop_length + xp.arange(n_fft)[None, :]).reshape(-1))
    y = zeros(x.shape[0], total, dtype=x.dtype, device=x.device).index_add(-1, positions, x.reshape(x.shape[0], -1))
    squared = window * window  # (w^2, not |w|^2, for a complex window too: torch's envelope)
    envelope = zeros(total, dtype=squared.dtype, device=squared.device).index_add(
        0, positions, squared.expand(frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0) if length is None else min(start + length, total)
    y, envelope = y[:, start:end], envelope[start:end]
    if envelope.numel() and not bool((envelope.abs() > 1e-11).all()):
        raise RuntimeError(f"{name}: the window overlapped at hop_length={hop_length} has a zero (it fails the "
                           "non-zero overlap-add, NOLA, condition), so the signal cannot be recovered")
    y = y / envelope
    if length is not None and y.shape[-1] < length:
        y = cat([y, zeros(y.shape[0], length - y.shape[-1], dtype=y.dtype, device=y.device)], -1)
    return y if batched else y.squeeze(0)
