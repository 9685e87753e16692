"""``tenferro_ad.fft`` against ``jax.numpy.fft``: value, VJP, JVP (float32/float64 and complex
inputs, every ``norm``, sizes that crop and pad) and reverse-over-reverse."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tests.ad._opcheck import (
    Op,
    cases,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)

R = ("float32", "float64")
RC = ("float32", "float64", "complex64", "complex128")
C = ("complex64", "complex128")
S1 = (((6,),), ((2, 5),))
S2 = (((4, 6),), ((2, 3, 5),))
T32 = 5e-4


def _fft_ops() -> list[Op]:
    out = []
    for norm in (None, "ortho", "forward"):
        tag = norm or "backward"
        out += [
            Op(f"fft-{tag}", lambda x, n=norm: ad.fft.fft(x, norm=n),
               lambda x, n=norm: jnp.fft.fft(x, norm=n), S1, "any", RC, rtol32=T32),
            Op(f"ifft-{tag}", lambda x, n=norm: ad.fft.ifft(x, norm=n),
               lambda x, n=norm: jnp.fft.ifft(x, norm=n), S1, "any", RC, rtol32=T32),
            Op(f"rfft-{tag}", lambda x, n=norm: ad.fft.rfft(x, norm=n),
               lambda x, n=norm: jnp.fft.rfft(x, norm=n), S1, "any", R, rtol32=T32),
            Op(f"irfft-{tag}", lambda x, n=norm: ad.fft.irfft(x, norm=n),
               lambda x, n=norm: jnp.fft.irfft(x, norm=n), S1, "any", C, rtol32=T32),
            Op(f"fftn-{tag}", lambda x, n=norm: ad.fft.fftn(x, norm=n),
               lambda x, n=norm: jnp.fft.fftn(x, norm=n), S2, "any", RC, rtol32=T32),
            Op(f"irfftn-{tag}", lambda x, n=norm: ad.fft.irfftn(x, norm=n),
               lambda x, n=norm: jnp.fft.irfftn(x, norm=n), S2, "any", C, rtol32=T32),
            Op(f"rfftn-{tag}", lambda x, n=norm: ad.fft.rfftn(x, norm=n),
               lambda x, n=norm: jnp.fft.rfftn(x, norm=n), S2, "any", R, rtol32=T32),
        ]
    return out


TABLE = [
    *_fft_ops(),
    Op("fft_n_pad", lambda x: ad.fft.fft(x, n=8), lambda x: jnp.fft.fft(x, n=8), S1, "any",
       RC, rtol32=T32),
    Op("fft_n_crop_axis0", lambda x: ad.fft.fft(x, n=1, axis=0),
       lambda x: jnp.fft.fft(x, n=1, axis=0), (((2, 5),),), "any", RC, rtol32=T32),
    Op("irfft_odd_n", lambda x: ad.fft.irfft(x, n=7), lambda x: jnp.fft.irfft(x, n=7), S1,
       "any", C, rtol32=T32),
    Op("rfft_odd", ad.fft.rfft, jnp.fft.rfft, (((7,),),), "any", R, rtol32=T32),
    Op("fft2", ad.fft.fft2, jnp.fft.fft2, S2, "any", RC, rtol32=T32),
    Op("ifft2", ad.fft.ifft2, jnp.fft.ifft2, S2, "any", RC, rtol32=T32),
    Op("rfft2", ad.fft.rfft2, jnp.fft.rfft2, S2, "any", R, rtol32=T32),
    Op("irfft2", ad.fft.irfft2, jnp.fft.irfft2, S2, "any", C, rtol32=T32),
    Op("irfft2_s", lambda x: ad.fft.irfft2(x, s=(3, 5)), lambda x: jnp.fft.irfft2(x, s=(3, 5)),
       S2, "any", C, rtol32=T32),
    Op("ifftn_axes", lambda x: ad.fft.ifftn(x, axes=(0, 2)),
       lambda x: jnp.fft.ifftn(x, axes=(0, 2)), (((2, 3, 5),),), "any", RC, rtol32=T32),
    Op("rfftn_s", lambda x: ad.fft.rfftn(x, s=(4, 4)), lambda x: jnp.fft.rfftn(x, s=(4, 4)),
       S2, "any", R, rtol32=T32),
    Op("fftshift", ad.fft.fftshift, jnp.fft.fftshift, S2, "any", RC),
    Op("ifftshift_axes", lambda x: ad.fft.ifftshift(x, axes=1),
       lambda x: jnp.fft.ifftshift(x, axes=1), S2, "any", RC),
    Op("rfft_irfft_roundtrip", lambda x: ad.fft.irfft(ad.fft.rfft(x) * 1.5, n=6),
       lambda x: jnp.fft.irfft(jnp.fft.rfft(x) * 1.5, n=6), (((6,),),), "any", R, rtol32=T32),
]


@pytest.mark.parametrize(("op", "bucket", "dtype"), cases(TABLE))
def test_value_vjp_jvp_match_jax(op: Op, bucket: int, dtype: str) -> None:
    """Value, VJP and JVP agree with JAX; single precision stays single."""
    check_first_order(op, bucket, dtype)


@pytest.mark.parametrize("op", second_cases([o for o in TABLE if "float64" in o.dtypes]))
def test_reverse_over_reverse_matches_jax(op: Op) -> None:
    """Second order through the transposed transforms (real inputs) agrees with JAX."""
    check_second_order(op, 0)


@pytest.mark.parametrize("op", second_cases([o for o in TABLE if "float64" in o.dtypes]))
def test_forward_over_reverse_matches_jax(op: Op) -> None:
    """jvp of a directional gradient (u^T H v) agrees with JAX."""
    check_forward_over_reverse(op, 0)


@pytest.mark.parametrize("op", [o for o in TABLE if "complex128" in o.dtypes][:6],
                         ids=lambda o: o.name)
def test_reverse_over_reverse_complex_matches_jax(op: Op) -> None:
    """Second order with complex inputs (the real part of the loss) agrees with JAX."""
    check_second_order(op, 0, "complex128")


def test_fftfreq_matches_numpy() -> None:
    """Frequency helpers are constants equal to numpy's."""
    np.testing.assert_array_equal(ad.fft.fftfreq(5, 0.5).to_numpy(), np.fft.fftfreq(5, 0.5))
    np.testing.assert_array_equal(ad.fft.rfftfreq(6).to_numpy(), np.fft.rfftfreq(6))


def test_bad_norm_names_the_argument() -> None:
    """An unknown norm raises a ValueError naming the function and the argument."""
    with pytest.raises(ValueError, match="fft: argument 'norm'"):
        ad.fft.fft(ts.from_numpy(np.ones(4)), norm="bogus")


def test_rfft_refuses_complex_input() -> None:
    """rfft of a complex value is refused (numpy discards the imaginary part silently)."""
    with pytest.raises(ValueError, match=r"rfft: (argument .a.: )?expected a real input"):
        ad.fft.rfft(ts.from_numpy(np.ones(4, np.complex128)))
