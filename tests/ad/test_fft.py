"""``tenferro_ad.fft`` against ``jax.numpy.fft``: value, VJP, JVP (float32/float64 and complex
inputs, every ``norm``, sizes that crop and pad) and reverse-over-reverse."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tests._opspecs import table
from tests.ad._opcheck import (
    Op,
    cases,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)

TABLE = table("fft")  # this family's rows of the one op table


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
