"""``mp.fft``: torch.fft's transforms. The ops (and how their gradients work) are in mixprec/ops/fft.py and
fft_hermitian_shifts.py.

    import mixprec as mp
    spectrum = mp.fft.rfft(signal, norm="ortho")     # float32 -> complex64
    back = mp.fft.irfft(spectrum, n=signal.shape[-1], norm="ortho")
"""
from .ops.registry import get as _get
from .ops.registry import public as _public

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftshift", "ifftshift"]

fft = _public(_get("fft_fft"))
ifft = _public(_get("fft_ifft"))
fft2 = _public(_get("fft_fft2"))
ifft2 = _public(_get("fft_ifft2"))
fftn = _public(_get("fft_fftn"))
ifftn = _public(_get("fft_ifftn"))
rfft = _public(_get("fft_rfft"))
irfft = _public(_get("fft_irfft"))
rfft2 = _public(_get("fft_rfft2"))
irfft2 = _public(_get("fft_irfft2"))
rfftn = _public(_get("fft_rfftn"))
irfftn = _public(_get("fft_irfftn"))
hfft = _public(_get("fft_hfft"))
ihfft = _public(_get("fft_ihfft"))
hfft2 = _public(_get("fft_hfft2"))
ihfft2 = _public(_get("fft_ihfft2"))
hfftn = _public(_get("fft_hfftn"))
ihfftn = _public(_get("fft_ihfftn"))
fftshift = _public(_get("fft_fftshift"))
ifftshift = _public(_get("fft_ifftshift"))
