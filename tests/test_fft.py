"""mp.fft and mp.stft against torch (CPU, float64): values and gradients, errors, autocast.

The op-case table (tests/op_cases/fft.py) checks each gradient and tangent
against finite differences; here every transform, size and normalization is
compared with torch, whose gradients (adjoint transforms) mixprec reproduces.
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
NORMS = [None, "ortho", "forward"]


def _compare(fn, tfn, x):
    """Values and the gradient of sum(Re(w * out)) for a random complex w."""
    xm = mp.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    out, tout = fn(xm), tfn(xt)
    assert out.shape == tuple(tout.shape) and str(out.dtype) == str(tout.dtype).replace("torch.", "")
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().resolve_conj().numpy(), atol=1e-10)
    w = RNG.standard_normal(out.shape) + 1j * RNG.standard_normal(out.shape)
    (mp.tensor(w) * out).real.sum().backward()
    (torch.tensor(w) * tout).real.sum().backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.resolve_conj().numpy(), atol=1e-10)


def _signal(shape, complex_):
    x = RNG.standard_normal(shape)
    return x + 1j * RNG.standard_normal(shape) if complex_ else x


ONE_D = [(name, n, complex_) for name, complex_ in [("fft", False), ("fft", True), ("ifft", True), ("rfft", False),
                                                    ("irfft", True), ("hfft", True), ("ihfft", False)]
         for n in (None, 4, 9)]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name,n,complex_", ONE_D)
def test_one_dimensional_transforms_match_torch(name, n, complex_, norm):
    _compare(lambda x: getattr(mp.fft, name)(x, n=n, dim=0, norm=norm),
             lambda x: getattr(torch.fft, name)(x, n=n, dim=0, norm=norm), _signal((6, 3), complex_))


MULTI_D = [("fft2", dict(s=(2, 6)), True), ("ifft2", dict(), True), ("fftn", dict(dim=(0, 2)), False),
           ("ifftn", dict(s=(3, 3, 2)), True), ("rfft2", dict(s=(3, 7)), False), ("irfft2", dict(s=(5, 6)), True),
           ("rfftn", dict(dim=(0, 1)), False), ("irfftn", dict(), True), ("irfftn", dict(s=(3, 4), dim=(0, 2)), True)]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name,kwargs,complex_", MULTI_D, ids=[f"{m[0]}-{m[1]}" for m in MULTI_D])
def test_multi_dimensional_transforms_match_torch(name, kwargs, complex_, norm):
    _compare(lambda x: getattr(mp.fft, name)(x, norm=norm, **kwargs),
             lambda x: getattr(torch.fft, name)(x, norm=norm, **kwargs), _signal((2, 4, 5), complex_))


@pytest.mark.parametrize("pad_mode", ["reflect", "constant", "replicate", "circular"])
@pytest.mark.parametrize("center,onesided,normalized", [(True, True, False), (False, False, True),
                                                        (True, False, True)])
def test_stft_matches_torch(pad_mode, center, onesided, normalized):
    window = np.hanning(6)
    kwargs = dict(hop_length=3, win_length=6, center=center, pad_mode=pad_mode, onesided=onesided,
                  normalized=normalized, return_complex=True)
    _compare(lambda x: mp.stft(x, 8, window=mp.tensor(window), **kwargs),
             lambda x: torch.stft(x, 8, window=torch.tensor(window), **kwargs), _signal((2, 21), False))


def test_stft_defaults_and_complex_input_match_torch():
    ones = torch.ones(4, dtype=torch.float64)
    _compare(lambda x: mp.stft(x, 4, return_complex=True), lambda x: torch.stft(x, 4, window=ones,
                                                                                return_complex=True),
             _signal(13, False))
    _compare(lambda x: mp.stft(x, 4), lambda x: torch.stft(x, 4, window=ones), _signal(13, True))
    x = mp.tensor(_signal(13, False))
    as_real = mp.stft(x, 4, return_complex=False)
    assert as_real.shape == mp.stft(x, 4, return_complex=True).shape + (2,) and as_real.dtype == mp.float64


def test_round_trips():
    x = mp.tensor(_signal((3, 8), False))
    np.testing.assert_allclose(mp.fft.irfft(mp.fft.rfft(x), n=8).numpy(), x.numpy(), atol=1e-12)
    np.testing.assert_allclose(mp.fft.ifftn(mp.fft.fftn(x)).real.numpy(), x.numpy(), atol=1e-12)
    np.testing.assert_allclose(mp.fft.hfft(mp.fft.ihfft(x), n=8).numpy(), x.numpy(), atol=1e-12)


@pytest.mark.parametrize("dtype,out", [(mp.float32, mp.complex64), (mp.float64, mp.complex128),
                                       (mp.int64, mp.complex64), (mp.complex64, mp.complex64)])
def test_output_dtypes_follow_torch(dtype, out):
    x = mp.tensor(np.arange(8) + (1j if dtype == mp.complex64 else 0), dtype=dtype)
    assert mp.fft.fft(x).dtype == out
    assert mp.fft.irfft(mp.fft.fft(x)).dtype == mp.dtypes.real_of(out)


ERRORS = [
    ("half", lambda: mp.fft.fft(mp.ones(4, dtype=mp.float16)), TypeError, r"fft_fft: float16 inputs are not supported"),
    ("bfloat16-2d", lambda: mp.fft.rfft2(mp.ones(2, 4, dtype=mp.bfloat16)), TypeError, r"fft_rfft2: bfloat16"),
    ("norm", lambda: mp.fft.ifft(mp.ones(4), norm="x"), ValueError, r"fft_ifft: invalid normalization mode 'x'"),
    ("n-zero", lambda: mp.fft.fft(mp.ones(4), n=0), RuntimeError, r"invalid number of data points \(0\)"),
    ("empty", lambda: mp.fft.rfft(mp.ones(0)), RuntimeError, r"fft_rfft: invalid number of data points \(0\)"),
    ("dim", lambda: mp.fft.fft2(mp.ones(3)), IndexError, r"fft_fft2: dim -2 is out of range"),
    ("s-and-dim", lambda: mp.fft.fftn(mp.ones(3, 3), s=(2, 3), dim=(0,)), RuntimeError,
     "dim and s must have the same length"),
    ("repeated-dim", lambda: mp.fft.fftn(mp.ones(3, 3), dim=(0, 0)), RuntimeError, "dims must be unique"),
    ("rfft-complex", lambda: mp.fft.rfft(mp.ones(4) * 1j), TypeError, "expects a real input"),
    ("stft-return-complex", lambda: mp.stft(mp.ones(10), 4), RuntimeError, "return_complex must be given"),
    ("stft-window", lambda: mp.stft(mp.ones(10), 4, window=mp.ones(3), return_complex=True), RuntimeError,
     "window of size win_length=4"),
    ("stft-n_fft", lambda: mp.stft(mp.ones(5), 16, center=False, return_complex=True), RuntimeError, "n_fft"),
    ("stft-pad_mode", lambda: mp.stft(mp.ones(10), 4, pad_mode="wrap", return_complex=True), ValueError, "pad_mode"),
    ("stft-3d", lambda: mp.stft(mp.ones(2, 2, 10), 4, return_complex=True), RuntimeError, "1-D"),
    ("stft-half", lambda: mp.stft(mp.ones(10, dtype=mp.float16), 4, return_complex=True), TypeError,
     "stft: float16 inputs are not supported"),
]


@pytest.mark.parametrize("fn,exc,match", [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_bad_input_raises_a_clear_error(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def test_empty_batch_is_fine():
    assert mp.fft.fft(mp.ones(0, 4)).shape == (0, 4)
    assert mp.fft.rfft(mp.ones(0, 6)).shape == (0, 4)


@pytest.mark.parametrize("fn", [mp.fft.fft, mp.fft.rfft2, mp.fft.ihfft, lambda x: mp.fft.irfft(x, n=6),
                                lambda x: mp.stft(x.flatten(), 4, return_complex=True)],
                         ids=["fft", "rfft2", "ihfft", "irfft", "stft"])
def test_cpu_autocast_runs_ffts_in_float32(fn):
    x = mp.tensor(RNG.standard_normal((3, 4)), dtype=mp.bfloat16, requires_grad=True)
    with mp.autocast("cpu"):
        out = fn(x)
    assert out.dtype in (mp.complex64, mp.float32)
    (out.abs() if out.is_complex() else out).sum().backward()
    assert x.grad.dtype == mp.bfloat16


@pytest.mark.gpu
def test_gpu_transforms_match_the_cpu():
    x = mp.tensor(RNG.standard_normal((3, 8)), requires_grad=True)
    xg = x.detach().cuda().requires_grad_()
    for fn in (mp.fft.fft, mp.fft.rfft, lambda t: mp.fft.irfft(mp.fft.rfft2(t), n=8)):
        out, gout = fn(x), fn(xg)
        np.testing.assert_allclose(gout.numpy(), out.numpy(), atol=1e-10)
        (out.abs() if out.is_complex() else out).sum().backward()
        (gout.abs() if gout.is_complex() else gout).sum().backward()
        np.testing.assert_allclose(xg.grad.numpy(), x.grad.numpy(), atol=1e-10)
        x.grad = xg.grad = None
