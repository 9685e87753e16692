"""The functional API composes with jit in both directions, and ``ad.trace`` serves both
of its meanings."""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts

X0 = np.array([0.3, 0.7, -0.2])


def _f(x: Any) -> Any:
    return ad.sum(ad.sin(x) * x)


def _np(v: Any) -> np.ndarray[Any, Any]:
    return v.to_numpy()


def test_jit_of_grad_and_grad_of_jit_agree_with_eager() -> None:
    expected = np.cos(X0) * X0 + np.sin(X0)
    np.testing.assert_allclose(_np(ad.jit(ad.grad(_f))(ts.from_numpy(X0))), expected)
    np.testing.assert_allclose(_np(ad.grad(ad.jit(_f))(ts.from_numpy(X0))), expected)
    vg = ad.jit(ad.value_and_grad(_f))(ts.from_numpy(X0))
    np.testing.assert_allclose(_np(vg[1]), expected)


def test_jvp_and_vjp_inside_jit() -> None:
    x = ts.from_numpy(X0)
    t = ad.jit(lambda x: ad.jvp(ad.sin, (x,), (x,))[1])(x)
    np.testing.assert_allclose(_np(t), np.cos(X0) * X0)

    def pull(x: Any) -> Any:
        _, fn = ad.vjp(ad.sin, x)
        return fn(x)[0]

    np.testing.assert_allclose(_np(ad.jit(pull)(x)), np.cos(X0) * X0)


def test_trace_of_a_function_is_a_graph_and_trace_of_an_array_is_its_diagonal_sum() -> None:
    g = ad.trace(lambda x: ad.sin(x) * x)(np.ones(3))
    assert "sin" in str(g)
    assert ad.trace(np.eye(3) * 2.0).item() == 6.0
