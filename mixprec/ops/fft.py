"""Discrete Fourier transforms (``mp.fft``) and the short-time transform ``stft``.

Four primitives do the work, each over any set of dims with optional sizes
(``s``: inputs are zero-padded or trimmed to them first) and a normalization
(``norm``: "backward" scales the inverse by 1/n, "forward" the forward one,
"ortho" both by 1/sqrt(n)):

    fft_fftn / fft_ifftn   complex -> complex (a real input counts as complex)
    fft_rfftn              real -> the non-negative half of the spectrum
    fft_irfftn             that half -> real

Every other name (fft, fft2, rfft, hfft, ...) translates its arguments to one
of them. All are linear, so the tangent is the transform of the tangent; the
gradient is the *adjoint* transform: the inverse transform with the dual
normalization ("backward" <-> "forward"), then the padding undone. torch and
NumPy agree on all of this, and on the CPU these are float32 ops under autocast
(NumPy >= 2 and cuFFT keep float32 -> complex64). float16/bfloat16 inputs are
refused, as torch refuses them on the CPU.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..backend import array_module
from .complex_ops import view_as_real
from .registry import register
from .shape import cat, dim_index
from ..tensor import Tensor
from ..creation import ones, zeros

_NORMS = ("backward", "ortho", "forward")
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _check_input(name, a):
    """float32/float64/complex inputs pass; integers compute as float32 (torch); half precision is refused."""
    if a.dtype in _dt.LOW_PRECISION:
        raise TypeError(f"{name}: {a.dtype.name} inputs are not supported (torch refuses them on the CPU too); "
                        "cast to float32, or run under mp.autocast('cpu'), whose float32 policy for FFTs does it")
    if a.dtype.kind in "biu":
        return a.astype(_dt.float32)
    return a


def _norm(name, norm):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f'{name}: invalid normalization mode {norm!r}; expected None, "backward", "ortho" or '
                         '"forward"')
    return norm


def _plan(name, a, s, dim, last_halved=None):
    """(dims, sizes): the transformed dims of ``a`` (non-negative, in order) and the signal size along each.

    dim=None means the last len(s) dims (all dims when s is None too); a size of
    -1 in s keeps that dim's size. last_halved: for irfftn, the default size of
    the last dim is 2 * (m - 1) for an input of m along it.
    """
    if dim is None:
        dim = tuple(range(a.ndim)) if s is None else tuple(range(a.ndim - len(s), a.ndim))
        if s is not None and len(s) > a.ndim:
            raise RuntimeError(f"{name}: got a shape s of {len(s)} sizes for a {a.ndim}-d input")
    elif isinstance(dim, (int, np.integer)):
        dim = (dim,)
    dims = tuple(dim_index(d, a.ndim, name) for d in dim)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{name}: dims must be unique, got {tuple(dim)}")
    if s is not None:
        s = tuple(s)
        if len(s) != len(dims):
            raise RuntimeError(f"{name}: when given, dim and s must have the same length, got {len(dims)} dims and "
                               f"{len(s)} sizes")
    sizes = []
    for i, d in enumerate(dims):
        n = -1 if s is None else s[i]
        if n == -1:
            n = a.shape[d]
            if last_halved and i == len(dims) - 1:
                n = 2 * (n - 1)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise RuntimeError(f"{name}: invalid number of data points ({n}) specified along dim {d}")
        sizes.append(int(n))
    if not dims:
        raise RuntimeError(f"{name}: needs at least one dim to transform")
    return dims, tuple(sizes)


def _resize(t, dims, sizes):
    """Trim or zero-pad Tensor t along dims to sizes (the adjoint of a resize is the resize back)."""
    for d, n in zip(dims, sizes):
        have = t.shape[d]
        if have > n:
            t = t[(slice(None),) * d + (slice(0, n),)]
        elif have < n:
            pad = zeros(*t.shape[:d], n - have, *t.shape[d + 1:], dtype=t.dtype, device=t.device)
            t = cat([t, pad], d)
    return t


def _checked(name, kind, a, s, dim, norm):
    """(array, dims, sizes, norm) for a call of a transform of ``kind``, or the error, naming the function called."""
    a = _check_input(name, a)
    norm = _norm(name, norm)
    dims, sizes = _plan(name, a, s, dim, last_halved=kind == "irfftn")
    if kind == "rfftn" and _dt.is_complex(a.dtype):
        raise TypeError(f"{name}: expects a real input, got {a.dtype.name} (use fft for complex inputs)")
    return a, dims, sizes, norm


def _transform(name, kind, a, s, dim, norm):
    """Run one primitive on an array; returns (out, dims, sizes, norm) for the rules."""
    a, dims, sizes, norm = _checked(name, kind, a, s, dim, norm)
    xp = array_module(a)
    out = getattr(xp.fft, kind)(a, s=sizes, axes=dims, norm=norm)
    real = _dt.real_of(a.dtype)
    out_dtype = real if kind == "irfftn" else _dt.complex_of(real)
    return out.astype(out_dtype, copy=False), dims, sizes, norm


def _primitive(kind, doc):
    name = "fft_" + kind

    def forward(ctx, input, s=None, dim=None, norm=None):
        out, ctx.dims, ctx.sizes, ctx.norm = _transform(name, kind, input, s, dim, norm)
        ctx.in_shape = input.shape
        return out
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = doc
    return register(name, linear=True)(forward)


fftn = _primitive("fftn", "The n-dimensional discrete Fourier transform over ``dim`` (all dims by default).")
ifftn = _primitive("ifftn", "The inverse of fftn.")
rfftn = _primitive("rfftn", "fftn of a real input, keeping the non-negative frequencies of the last dim (n//2 + 1).")
irfftn = _primitive("irfftn", "The inverse of rfftn: a real signal from the non-negative half of its spectrum; "
                              "the last dim's output size defaults to 2 * (m - 1).")


def _in_sizes(ctx):
    return [ctx.in_shape[d] for d in ctx.dims]


@fftn.grad
def _(ctx, g):
    return _resize(ifftn(g, dim=ctx.dims, norm=_DUAL[ctx.norm]), ctx.dims, _in_sizes(ctx)),


@ifftn.grad
def _(ctx, g):
    return _resize(fftn(g, dim=ctx.dims, norm=_DUAL[ctx.norm]), ctx.dims, _in_sizes(ctx)),


@rfftn.grad
def _(ctx, g):
    """rfftn keeps the first n//2 + 1 outputs of fftn: pad the gradient back with zeros, then fftn's adjoint."""
    full = _resize(g, ctx.dims[-1:], ctx.sizes[-1:])
    return _resize(ifftn(full, dim=ctx.dims, norm=_DUAL[ctx.norm]).real, ctx.dims, _in_sizes(ctx)),


@irfftn.grad
def _(ctx, g):
    """The adjoint of irfftn is rfftn, with every frequency that stands for itself and its mirror image counted
    twice (all but 0 and, for an even size, n/2)."""
    d, n = ctx.dims[-1], ctx.sizes[-1]
    half = rfftn(g, dim=ctx.dims, norm=_DUAL[ctx.norm])
    m = half.shape[d]
    twice = n - m  # entries 1 .. n - m have a mirror image in the full spectrum
    if twice > 0:
        scale = ones(m, dtype=_dt.real_of(half.dtype), device=half.device)
        scale[1:1 + twice] = 2.0
        half = half * scale.reshape((m,) + (1,) * (half.ndim - 1 - d))
    return _resize(half, ctx.dims, _in_sizes(ctx)),


# ---------------------------------------------------------------- the torch.fft names
def _composite(name, doc, forward):
    """Register ``forward`` as the composite op ``name``, float32 under CPU autocast (as every torch.fft name)."""
    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = doc
    return register(name, composite=True)(forward)


def _one_dim(name, primitive, doc, hermitian=False):
    """A 1-D transform (n, dim) on top of an n-D primitive; hermitian: hfft/ihfft, the primitive on the conjugate
    with the dual normalization."""
    def forward(ctx, input, n=None, dim=-1, norm=None):
        s = None if n is None else (n,)
        _checked(name, primitive.name[4:], input._array, s, (dim,), norm)  # errors name the function called
        if not hermitian:
            return primitive(input, s, (dim,), norm)
        norm = _DUAL[_norm(name, norm)]
        return irfftn(input.conj(), s, (dim,), norm) if primitive is irfftn else rfftn(input, s, (dim,), norm).conj()
    return _composite(name, doc, forward)


fft = _one_dim("fft_fft", fftn, "The 1-D discrete Fourier transform along ``dim`` (zero-padded or trimmed to n).")
ifft = _one_dim("fft_ifft", ifftn, "The inverse of fft.")
rfft = _one_dim("fft_rfft", rfftn, "fft of a real signal: the n//2 + 1 non-negative frequencies.")
irfft = _one_dim("fft_irfft", irfftn, "The inverse of rfft: a real signal of n points (2 * (m - 1) by default).")
hfft = _one_dim("fft_hfft", irfftn, "The real spectrum of a signal with Hermitian symmetry given by its first half "
                                    "(irfft of the conjugate, normalized the other way).", hermitian=True)
ihfft = _one_dim("fft_ihfft", rfftn, "The inverse of hfft: the first half of a Hermitian-symmetric signal from its "
                                     "real spectrum.", hermitian=True)


def _two_dims(name, primitive, doc):
    def forward(ctx, input, s=None, dim=(-2, -1), norm=None):
        _checked(name, primitive.name[4:], input._array, s, dim, norm)  # errors name the function called
        return primitive(input, s, dim, norm)
    return _composite(name, doc, forward)


fft2 = _two_dims("fft_fft2", fftn, "The 2-D discrete Fourier transform over the last two dims.")
ifft2 = _two_dims("fft_ifft2", ifftn, "The inverse of fft2.")
rfft2 = _two_dims("fft_rfft2", rfftn, "fft2 of a real input, keeping the non-negative half of the last dim.")
irfft2 = _two_dims("fft_irfft2", irfftn, "The inverse of rfft2.")


# ---------------------------------------------------------------- stft
_PAD_MODES = ("reflect", "constant", "replicate", "circular")


def _padded_positions(xp, length, pad, mode):
    """For each position of the padded signal, which input position it copies (-1: a zero)."""
    i = xp.arange(-pad, length + pad)
    if mode == "reflect":
        i = xp.abs(i)
        return xp.where(i >= length, 2 * (length - 1) - i, i)
    if mode == "replicate":
        return xp.clip(i, 0, length - 1)
    if mode == "circular":
        return i % length
    return xp.where((i < 0) | (i >= length), -1, i)


def check_frames(name, n_fft, hop_length, win_length, window):
    """stft's and istft's frame arguments: a positive hop, a window no longer than n_fft, and of that length."""
    if hop_length <= 0 or not 0 < win_length <= n_fft:
        raise RuntimeError(f"{name}: expected hop_length > 0 and 0 < win_length <= n_fft, got hop_length="
                           f"{hop_length}, win_length={win_length}, n_fft={n_fft}")
    if window is not None and tuple(window.shape) != (win_length,):
        raise RuntimeError(f"{name}: expected a 1-D window of size win_length={win_length}, got shape "
                           f"{tuple(window.shape)}")


@register("stft", methods=("stft",), promote=(0, 4), composite=True)
def stft(ctx, input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None):
    """The short-time Fourier transform: the fft of overlapping windowed frames (torch.stft's semantics).

    input (L,) or (B, L) -> (B?, n_fft // 2 + 1 or n_fft, frames), complex (return_complex=True) or with a
    last dim of 2 for real and imaginary parts.
    """
    if not isinstance(input, Tensor) or input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1-D (L,) or 2-D (B, L) tensor, got shape "
                           f"{tuple(getattr(input, 'shape', ()))}")
    _check_input("stft", input._array)
    if input._array.dtype.kind in "biu":  # (unlike the plain transforms: torch's stft has no integer path either)
        raise TypeError(f"stft: expected a floating point or complex input, got {input.dtype.name}")
    complex_input = _dt.is_complex(input.dtype) or (window is not None and _dt.is_complex(window.dtype))
    if return_complex is None:
        if not complex_input:
            raise RuntimeError("stft: return_complex must be given for real inputs (return_complex=True gives a "
                               "complex tensor; False, real and imaginary parts in a last dim of 2)")
        return_complex = True
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    length = input.shape[-1]
    if not 0 < n_fft <= length + (2 * (n_fft // 2) if center else 0):
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length + (2 * (n_fft // 2) if center else 0)} "
                           f"(the padded signal's length), got n_fft={n_fft}")
    check_frames("stft", n_fft, hop_length, win_length, window)
    if pad_mode not in _PAD_MODES:
        raise ValueError(f"stft: pad_mode must be one of {_PAD_MODES}, got {pad_mode!r}")
    onesided = not complex_input if onesided is None else onesided
    if onesided and complex_input:
        raise RuntimeError("stft: onesided output is only possible for a real input and window")
    x = input
    xp = array_module(x._array)
    if center:
        pad = n_fft // 2
        if pad_mode == "reflect" and pad >= length:
            raise RuntimeError(f"stft: reflect padding of {pad} needs a signal longer than that, got {length}")
        where_from = _padded_positions(xp, length, pad, pad_mode)
        if pad_mode == "constant":
            x = cat([x, zeros(*x.shape[:-1], 1, dtype=x.dtype, device=x.device)], -1)  # position -1: a zero
        x = x[..., where_from]
        length += 2 * pad
    frames = 1 + (length - n_fft) // hop_length
    starts = xp.arange(frames)[:, None] * hop_length
    x = x[..., starts + xp.arange(n_fft)[None, :]]  # (B?, frames, n_fft)
    if window is None:
        window = ones(win_length, dtype=_dt.real_of(input.dtype), device=input.device)
    if win_length < n_fft:  # a shorter window sits in the middle of the frame
        left = (n_fft - win_length) // 2
        window = cat([zeros(left, dtype=window.dtype, device=window.device), window,
                      zeros(n_fft - win_length - left, dtype=window.dtype, device=window.device)])
    norm = "ortho" if normalized else "backward"
    spectrum = (rfftn if onesided else fftn)(x * window, None, (-1,), norm).transpose(-1, -2)
    return spectrum if return_complex else view_as_real(spectrum)
