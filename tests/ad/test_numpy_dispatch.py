"""numpy functions and ufuncs on handles run tenferro_ad's recorded ops (NEP 13/18), and
refuse clearly what has no implementation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import NumpyFunctionError


@pytest.fixture(autouse=True)
def _jax_op_by_op() -> Iterator[None]:
    """JAX (the oracle) runs op by op here, as in ``tests/ad/_opcheck.oracle``: no XLA
    compile of each whole oracle function; per-primitive executables are cached."""
    with jax.disable_jit():
        yield


X = np.array([[0.3, -1.2, 0.8], [1.5, 0.2, -0.4]])
A = np.array([[0.5, 1.0, -2.0], [0.1, 0.7, 0.3]])


def _grad_both(ours: Callable[[Any], Any], theirs: Callable[[Any], Any]) -> None:
    got = ad.grad(ours)(ts.from_numpy(X))
    ref = jax.grad(theirs)(jnp.asarray(X))
    np.testing.assert_allclose(ts.kernel.read_array(got), np.asarray(ref), rtol=1e-12,
                               atol=1e-12)


CASES: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("np.sum", lambda h: np.sum(np.sin(h)), lambda x: jnp.sum(jnp.sin(x))),
    ("np.mean_axis", lambda h: np.sum(np.mean(h * h, axis=0)),
     lambda x: jnp.sum(jnp.mean(x * x, axis=0))),
    ("np.var_std", lambda h: np.var(h, ddof=1) + np.std(h, axis=1).sum(),
     lambda x: jnp.var(x, ddof=1) + jnp.std(x, axis=1).sum()),
    ("np.prod_max_min", lambda h: np.prod(h) + np.max(h) - np.min(h, axis=1).sum(),
     lambda x: jnp.prod(x) + jnp.max(x) - jnp.min(x, axis=1).sum()),
    ("ndarray_op_handle", lambda h: np.sum(A - h) + np.sum(A * h) + np.sum(A / (h + 3.0)),
     lambda x: jnp.sum(A - x) + jnp.sum(A * x) + jnp.sum(A / (x + 3.0))),
    ("ndarray_matmul_handle", lambda h: np.sum(A.T @ h), lambda x: jnp.sum(A.T @ x)),
    ("ufuncs", lambda h: np.sum(np.exp(h) + np.tanh(h) * np.arctan(h) + np.hypot(h, A)),
     lambda x: jnp.sum(jnp.exp(x) + jnp.tanh(x) * jnp.arctan(x) + jnp.hypot(x, A))),
    ("mod_both_ways", lambda h: np.sum(h % 0.7) + np.sum(2.5 % (h + 2.0)) + np.sum(A % (h + 3)),
     lambda x: jnp.sum(x % 0.7) + jnp.sum(2.5 % (x + 2.0)) + jnp.sum(A % (x + 3))),
    ("reduce_accumulate", lambda h: np.add.reduce(h, axis=0).sum() + np.add.accumulate(h).sum()
     + np.maximum.reduce(h, axis=1).sum(),
     lambda x: jnp.sum(x, axis=0).sum() + jnp.cumsum(x, axis=0).sum()
     + jnp.max(x, axis=1).sum()),
    ("concatenate_stack", lambda h: np.sum(np.concatenate([h, A]) ** 2)
     + np.sum(np.stack([h, h * 2.0], axis=1)[:, 1]),
     lambda x: jnp.sum(jnp.concatenate([x, A]) ** 2)
     + jnp.sum(jnp.stack([x, x * 2.0], axis=1)[:, 1])),
    ("where_clip", lambda h: np.sum(np.where(h > 0, h, 0.1 * h) + np.clip(h, -0.5, 0.5)),
     lambda x: jnp.sum(jnp.where(x > 0, x, 0.1 * x) + jnp.clip(x, -0.5, 0.5))),
    ("shape_functions", lambda h: np.sum(np.ravel(np.transpose(h)) * np.arange(6.0))
     + np.sum(np.roll(np.flip(h, 1), 1) * A) + np.sum(np.reshape(h, (3, 2))[0]),
     lambda x: jnp.sum(jnp.ravel(jnp.transpose(x)) * jnp.arange(6.0))
     + jnp.sum(jnp.roll(jnp.flip(x, 1), 1) * A) + jnp.sum(jnp.reshape(x, (3, 2))[0])),
    ("products", lambda h: np.dot(h[0], h[1]) + np.sum(np.outer(h[0], A[1]))
     + np.einsum("ij,ij->", h, A) + np.sum(np.tensordot(h, A, axes=[1, 1])),
     lambda x: jnp.dot(x[0], x[1]) + jnp.sum(jnp.outer(x[0], A[1]))
     + jnp.einsum("ij,ij->", x, A) + jnp.sum(jnp.tensordot(x, A, axes=[1, 1]))),
    ("linalg_norm", lambda h: np.linalg.norm(h) + np.linalg.norm(h, 1, axis=0).sum(),
     lambda x: jnp.linalg.norm(x) + jnp.linalg.norm(x, 1, axis=0).sum()),
    ("fft", lambda h: np.sum(np.real(np.fft.fft(h)) * A),
     lambda x: jnp.sum(jnp.real(jnp.fft.fft(x)) * A)),
    ("cumsum_diff_sort", lambda h: np.sum(np.cumsum(h, axis=1) * A) + np.sum(np.diff(h) ** 2)
     + np.sum(np.sort(h, axis=None) * np.arange(6.0)),
     lambda x: jnp.sum(jnp.cumsum(x, axis=1) * A) + jnp.sum(jnp.diff(x) ** 2)
     + jnp.sum(jnp.sort(x, axis=None) * jnp.arange(6.0))),
    ("methods", lambda h: h.ravel().sum() + h.cumsum(axis=0).var() + h.std(ddof=1)
     + h.prod(axis=1).sum() + h.clip(-1.0, 1.0).sum() + h.T.dot(A).trace()
     + h.repeat(2, axis=0).mean() + h.max(axis=0).sum() + h.squeeze().sum(),
     lambda x: x.ravel().sum() + x.cumsum(axis=0).var() + x.std(ddof=1)
     + x.prod(axis=1).sum() + x.clip(-1.0, 1.0).sum() + x.T.dot(A).trace()
     + x.repeat(2, axis=0).mean() + x.max(axis=0).sum() + x.squeeze().sum()),
    ("floordiv_round_pos", lambda h: np.sum((h // 0.5) * h + round(h * 3.0) + (+h)),
     lambda x: jnp.sum((x // 0.5) * x + jnp.round(x * 3.0) + (+x))),
]


@pytest.mark.parametrize(("name", "ours", "theirs"), CASES, ids=[c[0] for c in CASES])
def test_numpy_calls_on_handles_are_recorded(name: str, ours: Any, theirs: Any) -> None:
    """numpy calls on handles run our recorded ops: gradients equal JAX's."""
    _grad_both(ours, theirs)


def test_ndarray_on_the_left_keeps_argument_order() -> None:
    """``ndarray - h`` is ``sub(ndarray, h)`` and returns a handle."""

    def f(h: ad.EagerTensor) -> ad.EagerTensor:
        r = A - h
        assert isinstance(r, ad.EagerTensor)
        np.testing.assert_allclose(r.to_numpy(), A - X)
        return ad.sum(r)

    ad.grad(f)(ts.from_numpy(X))


def test_complex_methods_and_properties() -> None:
    """``h.real``, ``h.imag``, ``h.conj()`` as numpy arrays have them."""
    z = ts.from_numpy(np.array([1.0 + 2.0j, -0.5 + 0.1j]))
    h = ad.add(z, 0.0)
    np.testing.assert_array_equal(h.real.to_numpy(), [1.0, -0.5])
    np.testing.assert_array_equal(h.imag.to_numpy(), [2.0, 0.1])
    np.testing.assert_array_equal(h.conj().to_numpy(), [1.0 - 2.0j, -0.5 - 0.1j])


def test_scalar_conversions() -> None:
    """float(h), int(h), np.float64(h) read the single element."""
    h = ad.add(ts.from_numpy(np.array(2.75)), 0.0)
    assert float(h) == 2.75
    assert int(h) == 2
    assert np.float64(h) == 2.75


def test_unsupported_ufunc_is_named() -> None:
    """A ufunc without an implementation raises a TypeError naming it."""
    h = ad.add(ts.from_numpy(np.array([4.0, 6.0])), 0.0)
    with pytest.raises(NumpyFunctionError, match=r"numpy\.spacing"):
        np.spacing(h)
    with pytest.raises(TypeError, match=r"numpy\.spacing"):
        np.spacing(h)


def test_unsupported_function_is_named() -> None:
    """A numpy function without an implementation raises a TypeError naming it."""
    h = ad.add(ts.from_numpy(np.array([4.0, 6.0])), 0.0)
    with pytest.raises(NumpyFunctionError, match=r"numpy\.unique"):
        np.unique(h)
    with pytest.raises(NumpyFunctionError, match=r"numpy\.percentile"):
        np.percentile(h, 50)


def test_out_argument_is_refused() -> None:
    """out= cannot write into a handle (read-only) nor into an ndarray from a handle op."""
    h = ad.add(ts.from_numpy(np.array([4.0, 6.0])), 0.0)
    buf = np.zeros(2)
    with pytest.raises(NumpyFunctionError, match="argument 'out'"):
        np.sin(h, out=buf)
    with pytest.raises(NumpyFunctionError, match="argument 'out'"):
        np.sum(h, out=np.zeros(()))
    np.testing.assert_array_equal(buf, [0.0, 0.0])


def test_in_place_ndarray_update_with_a_handle_is_refused() -> None:
    """``ndarray += h`` would write a handle's value into numpy memory: refused, unchanged."""
    h = ad.add(ts.from_numpy(np.array([4.0, 6.0])), 0.0)
    buf = np.ones(2)
    with pytest.raises(NumpyFunctionError):
        buf += h
    np.testing.assert_array_equal(buf, [1.0, 1.0])


def test_sum_dtype_keyword_converts() -> None:
    """np.sum(h, dtype=float32) converts the result (recorded, differentiable)."""
    h = ad.add(ts.from_numpy(np.array([1.0, 2.0])), 0.0)
    r = np.sum(h, dtype=np.float32)
    assert r.to_numpy().dtype == np.float32
    assert float(r) == 3.0


def test_shape_queries() -> None:
    """np.shape / np.ndim / np.size on handles answer from metadata."""
    h = ad.add(ts.from_numpy(np.ones((2, 3))), 0.0)
    assert np.shape(h) == (2, 3)
    assert np.ndim(h) == 2
    assert np.size(h) == 6
