"""Issue 26 item 6: traced mode covers the whole op set.

Every ``ad.linalg`` function, ``sort`` and ``median`` run under ``jit`` and ``vmap`` (and
their gradients under ``jit``) with eager mode's values; ``jacrev``/``jacfwd``/``hessian``
work inside ``jit``, also on functions that close over another traced argument;
``grad(holomorphic=True)`` works under ``jit``; the "needs a concrete value" error is
left for real Python control flow.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.traced import TracerError

RNG = np.random.default_rng(26)
A = RNG.normal(size=(3, 3))
SPD = A @ A.T + 3.0 * np.eye(3)
B = RNG.normal(size=(3, 2))
R = RNG.normal(size=(4, 3))
la = ad.linalg


def _first(r: Any) -> Any:
    return r[0] if isinstance(r, tuple) else r


LINALG: dict[str, Any] = {
    "cholesky": lambda a: la.cholesky(a),
    "det": lambda a: la.det(a),
    "inv": lambda a: la.inv(a),
    "slogdet": lambda a: la.slogdet(a)[1],
    "qr": lambda a: la.qr(a)[1],
    "eigh": lambda a: la.eigh(a)[0],
    "eigvalsh": lambda a: la.eigvalsh(a),
    "svd": lambda a: la.svd(a)[1],
    "eig": lambda a: ad.real(la.eigvals(a)) * 0.0 + ad.sum(ad.abs(la.eigvals(a))),
    "eigvals": lambda a: ad.abs(la.eigvals(a)),
    "expm": lambda a: la.expm(a * 0.3),
    "sqrtm": lambda a: la.sqrtm(a),
    "pinv": lambda a: la.pinv(a),
    "solve": lambda a: la.solve(a, a[:, :2] * 1.0),
    "solve_triangular": lambda a: la.solve_triangular(a, a[:, :2] * 1.0, lower=True),
    "solve_sylvester": lambda a: la.solve_sylvester(a, a, a * 1.0),
    "norm": lambda a: la.norm(a, 2),
    "matrix_power": lambda a: la.matrix_power(a, 3),
    "lstsq": lambda a: la.lstsq(a, a[:, :2] * 1.0)[0],
    "cho_solve": lambda a: la.cho_solve(la.cho_factor(a), a[:, :2] * 1.0),
    "trace": lambda a: la.trace(a),
    "diagonal": lambda a: la.diagonal(a),
    "tril": lambda a: la.tril(a),
    "triu": lambda a: la.triu(a),
    "matmul": lambda a: la.matmul(a, a),
}


def _np(x: Any) -> np.ndarray:
    return np.asarray(x.to_numpy())


@pytest.mark.parametrize("name", list(LINALG))
def test_linalg_function_under_jit_vmap_and_jit_grad_matches_eager(name: str) -> None:
    f = LINALG[name]
    eager = _np(f(ts.from_numpy(SPD)))
    assert np.allclose(_np(ad.jit(f)(SPD)), eager, rtol=1e-9, atol=1e-9)
    batch = np.stack([SPD, SPD + 0.5 * np.eye(3)])
    mapped = _np(ad.vmap(f)(batch))
    assert np.allclose(mapped[0], eager, rtol=1e-9, atol=1e-9)
    assert np.allclose(mapped[1], _np(f(ts.from_numpy(batch[1]))), rtol=1e-9, atol=1e-9)

    def loss(a: Any) -> Any:
        return ad.sum(f(a) * f(a))

    g_eager = _np(ad.grad(loss)(ts.from_numpy(SPD)))
    assert np.allclose(_np(ad.jit(ad.grad(loss))(SPD)), g_eager, rtol=1e-7, atol=1e-7)


def test_lstsq_traced_returns_rank_and_residuals() -> None:
    x, resid, rank, s = ad.jit(lambda a, b: la.lstsq(a, b))(R, RNG.normal(size=(4, 2)))
    assert int(_np(rank)) == 3 and _np(resid).shape == (2,) and _np(s).shape == (3,)
    assert _np(x).shape == (3, 2)


@pytest.mark.parametrize("f", [
    lambda x: ad.sort(x), lambda x: ad.sort(x, axis=0), lambda x: ad.sort(x, descending=True),
    lambda x: ad.median(x), lambda x: ad.median(x, axis=1), lambda x: ad.sort(x, axis=None),
], ids=["sort", "sort_axis0", "sort_desc", "median", "median_axis1", "sort_none"])
def test_sort_and_median_under_jit_vmap_and_their_gradients(f: Any) -> None:
    x = RNG.permutation(12).reshape(3, 4) * 0.5 + 0.1
    eager = _np(f(ts.from_numpy(x)))
    assert np.array_equal(_np(ad.jit(f)(x)), eager)
    xs = np.stack([x, -x])
    mapped = _np(ad.vmap(f)(xs))
    assert np.array_equal(mapped[1], _np(f(ts.from_numpy(-x))))
    w = RNG.normal(size=eager.shape)

    def loss(a: Any) -> Any:
        return ad.sum(f(a) * w)

    ge = _np(ad.grad(loss)(ts.from_numpy(x)))
    assert np.allclose(_np(ad.jit(ad.grad(loss))(x)), ge)
    assert np.allclose(_np(ad.vmap(ad.grad(loss))(xs))[0], ge)


def test_take_along_axis_with_traced_indices_matches_eager() -> None:
    x = RNG.normal(size=(3, 4))
    idx = np.argsort(x, axis=1)

    def f(a: Any) -> Any:
        return ad.take_along_axis(a, ad.argsort(a, axis=1), axis=1)

    assert np.allclose(_np(ad.jit(f)(x)), np.take_along_axis(x, idx, 1))
    g = ad.jit(ad.grad(lambda a: ad.sum(f(a) * np.arange(4.0))))(x)
    want = np.zeros_like(x)
    np.put_along_axis(want, idx, np.broadcast_to(np.arange(4.0), (3, 4)), 1)
    assert np.allclose(_np(g), want)


@pytest.mark.parametrize("name", ["jacrev", "jacfwd", "jacobian", "hessian"])
def test_jacobians_inside_jit_match_eager_also_with_closures(name: str) -> None:
    tr = getattr(ad, name)
    x, y = RNG.normal(size=3), RNG.normal(size=3)

    def f(a: Any, b: Any) -> Any:
        return ad.sum(ad.sin(a) * b * a) if name == "hessian" else ad.sin(a) * b

    eager = _np(tr(f)(ts.from_numpy(x), ts.from_numpy(y)))
    assert np.allclose(_np(ad.jit(tr(f))(x, y)), eager)
    closed = ad.jit(lambda a, b: tr(lambda c: f(c, b))(a))  # closes over the traced b
    assert np.allclose(_np(closed(x, y)), eager)


def test_holomorphic_grad_under_jit() -> None:
    z = np.array([1.0 + 2.0j, -0.5 + 0.3j])
    f = ad.grad(lambda v: ad.sum(v * v * v), holomorphic=True)
    assert np.allclose(_np(ad.jit(f)(z)), 3.0 * z * z)
    assert np.allclose(_np(ad.jit(f)(z)), _np(f(ts.from_numpy(z))))


def test_concrete_value_error_fires_only_for_python_control_flow() -> None:
    def branchy(x: Any) -> Any:
        return x * 2.0 if ad.sum(x) > 0 else x

    with pytest.raises(TracerError, match="bool"):
        ad.jit(branchy)(np.ones(3))
    ad.jit(lambda a: la.det(a) + ad.median(ad.sort(a)))(SPD)  # no control flow: traced
