"""``tenferro_ad.fft``: differentiable discrete Fourier transforms (``numpy.fft``'s
interface, JAX's derivative convention).  See :mod:`tenferro_ad.ops.fft`."""

from .ops.fft import (
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]
