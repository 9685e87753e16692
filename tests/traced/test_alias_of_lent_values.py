"""A metadata-only alias (reshape, expand_dims, slicing) of an eager value that a trace
has borrowed as a constant.

Inside a trace, an eager handle that an equation reads is borrowed by the graph (a shared
borrow of its owner).  Aliasing that handle eagerly afterwards must not try to move the
lent-out owner into an allocation group (``BorrowError``): the alias borrows the value
itself, zero-copy.  ``jit(hessian(f))`` of an op whose gradient does not depend on the
input (``mod``, ``fmod``: the inner Jacobian's rows are eager constants the outer trace
borrows, then stacks) hit this.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad

jax.config.update("jax_enable_x64", True)

A = np.array([[1.5, 2.5, -3.2], [0.7, 4.1, 2.2]])
B = np.array([[0.6, 1.1, 0.9], [1.3, 0.8, 2.0]])


def test_eager_alias_of_a_value_a_trace_borrows_is_zero_copy_and_readable() -> None:
    def f(x: Any) -> Any:
        h = ad.sin(ad.constant(np.ones(3)))  # an eager value (its own owner)
        y = x * h  # the trace borrows it as a constant
        r = ad.reshape(h, (3, 1))  # an eager alias of the lent-out value
        return y + ad.reshape(r, (3,))

    x = np.arange(3.0)
    for engine in ("host", "xla"):
        got = ad.jit(f, engine=engine)(x).to_numpy()
        np.testing.assert_allclose(got, (x + 1.0) * np.sin(1.0))


@pytest.mark.parametrize("name", ["mod", "fmod"])
@pytest.mark.parametrize("engine", ["host", "xla"])
def test_jit_hessian_of_an_op_with_a_constant_gradient_matches_jax(name: str, engine: str) -> None:
    ours, theirs = getattr(ad, name), getattr(jnp, name)
    w = np.arange(1.0, 7.0).reshape(2, 3)

    def loss(m: Any, f: Any) -> Any:
        return lambda x, y: m.sum(f(x, y) * w)

    got = ad.jit(lambda x, y: ad.hessian(lambda u: loss(ad, ours)(u, y))(x), engine=engine)(A, B)
    want = jax.hessian(lambda u: loss(jnp, theirs)(u, B))(A)
    assert got.to_numpy().shape == want.shape
    np.testing.assert_array_equal(got.to_numpy(), np.asarray(want))
