"""Complex numbers with JAX's conventions: conj/real/imag/abs/angle/complex, complex exp/log
and arithmetic; grads of real losses equal ``jax.grad``; holomorphic functions equal
``jax.grad(..., holomorphic=True)``; the zero-copy reinterpretation inside programs."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
from tenferro_storage import ledger
from tests.ad._oracle import close, rand, to_np

REAL_LOSSES: dict[str, tuple[Any, Any]] = {
    "conj_mul": (
        lambda z: ad.real(z * ad.conj(z) * z).sum(),
        lambda z: jnp.real(z * jnp.conj(z) * z).sum(),
    ),
    "real_imag": (
        lambda z: (ad.real(z) ** 2 * ad.imag(z)).sum(),
        lambda z: (jnp.real(z) ** 2 * jnp.imag(z)).sum(),
    ),
    "abs": (lambda z: (ad.abs(z) ** 3).sum(), lambda z: (jnp.abs(z) ** 3).sum()),
    "angle": (
        lambda z: (ad.angle(z) * ad.abs(z)).sum(),
        lambda z: (jnp.angle(z) * jnp.abs(z)).sum(),
    ),
    "exp_log": (
        lambda z: ad.real(ad.exp(z) + ad.log(z) * z).sum(),
        lambda z: jnp.real(jnp.exp(z) + jnp.log(z) * z).sum(),
    ),
    "div_sub": (
        lambda z: ad.imag((z - 1.5) / (z + 2.0)).sum(),
        lambda z: jnp.imag((z - 1.5) / (z + 2.0)).sum(),
    ),
    "complex_ctor": (
        lambda z: ad.abs(ad.complex(ad.imag(z), ad.real(z)) * z).sum(),
        lambda z: jnp.abs(jax.lax.complex(jnp.imag(z), jnp.real(z)) * z).sum(),
    ),
}


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2**31 - 1))
@pytest.mark.parametrize("name", sorted(REAL_LOSSES))
def test_real_loss_of_complex_input_grad_and_jvp_match_jax(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    z = rand(rng, (2, 3), True) + 0.5
    f, jf = REAL_LOSSES[name]
    close(ad.grad(f)(z), jax.grad(jf)(z))
    t = rand(rng, z.shape, True)
    close(ad.jvp(f, (z,), (t,))[1], jax.jvp(jf, (z,), (t,))[1])


def test_holomorphic_function_matches_jax_holomorphic_grad() -> None:
    rng = np.random.default_rng(1)
    z = np.asarray(rand(rng, (), True) + 0.3)

    def f(z: Any) -> Any:
        return ad.exp(z) * ad.sin(z) / (z + 2.0) + ad.log(z) * z * z

    def jf(z: Any) -> Any:
        return jnp.exp(z) * jnp.sin(z) / (z + 2.0) + jnp.log(z) * z * z

    close(ad.grad(f, holomorphic=True)(z), jax.grad(jf, holomorphic=True)(z))


def test_complex_gradient_matches_finite_differences() -> None:
    """grad = dL/dRe z - i dL/dIm z (JAX's convention)."""
    rng = np.random.default_rng(2)
    z = rand(rng, (3,), True)

    def f_np(z: Any) -> float:
        return float(np.sum(np.abs(z) ** 3 + np.real(z * z)))

    g = to_np(ad.grad(lambda z: (ad.abs(z) ** 3 + ad.real(z * z)).sum())(z))
    eps = 1e-6
    for i in range(3):
        e = np.zeros(3, complex)
        e[i] = eps
        dre = (f_np(z + e) - f_np(z - e)) / (2 * eps)
        dim = (f_np(z + 1j * e) - f_np(z - 1j * e)) / (2 * eps)
        assert g[i] == pytest.approx(dre - 1j * dim, rel=1e-6)


def test_view_as_real_inside_a_program_is_zero_copy_and_differentiable() -> None:
    rng = np.random.default_rng(3)
    z = rand(rng, (2, 3), True)
    w = rng.standard_normal((2, 3, 2))

    def f(z: Any) -> Any:
        r = ad.view_as_real(z * z)
        back = ad.view_as_complex(r * 2.0)
        return (r * w).sum() + ad.abs(back).sum()

    def jf(z: Any) -> Any:
        y = z * z
        r = jnp.stack([jnp.real(y), jnp.imag(y)], -1)
        back = jax.lax.complex(r[..., 0] * 2.0, r[..., 1] * 2.0)
        return (r * w).sum() + jnp.abs(back).sum()

    close(ad.grad(f)(z), jax.grad(jf)(z))
    x = ad.stop_gradient(ad.exp(ad.real(z) * 0))
    zz = ad.complex(x, x)
    with ledger.capture() as rec:
        r = ad.view_as_real(zz)
    assert not rec.events  # metadata only: no allocation, no copy
    close(r, np.stack([to_np(x), to_np(x)], -1))
    with pytest.raises(TypeError, match="view_as_real"):
        ad.view_as_real(x)


def _mixed_loss_ad(w: Any, z: Any) -> Any:
    return ad.sum(ad.abs(w @ z * w[0] + w[1]) ** 2.0)


def _mixed_loss_jax(w: Any, z: Any) -> Any:
    return jnp.sum(jnp.abs(w @ z * w[0] + w[1]) ** 2)


def test_real_argument_meeting_complex_values_gets_a_real_gradient_like_jax() -> None:
    """A real input combined with complex values (matmul, mul, add) gets JAX's real cotangent."""
    import tenferro_storage as ts

    w = np.array([[1.0, 2.0], [0.5, -1.0]])
    z = np.array([1 + 2j, -0.5 + 1j])
    gw, gz = ad.grad(_mixed_loss_ad, argnums=(0, 1))(ts.from_numpy(w), ts.from_numpy(z))
    jw, jz = jax.grad(_mixed_loss_jax, argnums=(0, 1))(w, z)
    assert gw.dtype == "float64"
    np.testing.assert_allclose(gw.to_numpy(), np.asarray(jw), rtol=1e-12)
    np.testing.assert_allclose(gz.to_numpy(), np.asarray(jz), rtol=1e-12)


_Z = np.array([1 + 2j, -0.5 + 1j])
_SECOND_ORDER_CASES = {
    "matmul-abs2": (
        lambda u: ad.sum(ad.abs(u @ _Z) ** 2.0),
        lambda u: jnp.sum(jnp.abs(u @ _Z) ** 2),
    ),
    "einsum-abs": (
        lambda u: ad.sum(ad.abs(ad.einsum("ij,j->i", u, _Z))),
        lambda u: jnp.sum(jnp.abs(u @ _Z)),
    ),
    "broadcast-mul-abs2": (
        lambda u: ad.sum(ad.abs(ad.sum(u * _Z, axis=1)) ** 2.0),
        lambda u: jnp.sum(jnp.abs(jnp.sum(u * _Z, axis=1)) ** 2),
    ),
    "real-of-matmul": (
        lambda u: ad.sum(ad.real(u @ _Z) ** 2.0),
        lambda u: jnp.sum(jnp.real(u @ _Z) ** 2),
    ),
}


@pytest.mark.parametrize("case", sorted(_SECOND_ORDER_CASES))
def test_mixed_real_complex_second_order_matches_jax(case: str) -> None:
    """Grad of grad through complex intermediates of a real input (abs's complex direction
    must itself be differentiated) equals JAX's."""
    import tenferro_storage as ts

    fa, fj = _SECOND_ORDER_CASES[case]
    w = np.array([[1.0, 2.0], [0.5, -1.0]])
    got = ad.grad(lambda v: ad.sum(ad.grad(fa)(v) ** 2.0))(ts.from_numpy(w))
    want = jax.grad(lambda v: jnp.sum(jax.grad(fj)(v) ** 2))(w)
    np.testing.assert_allclose(got.to_numpy(), np.asarray(want), rtol=1e-10)
