"""The autoray backend (``tenferro_ad.tn.register_autoray``): the functions quimb calls,
one table, each run on tenferro values and on numpy and compared; results stay tenferro
values; the decompositions' derivatives agree with JAX; copies are the recorded ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import autoray as ar
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_ad.tn as tn
import tenferro_storage as ts
from tenferro_ad import testing as tt
from tenferro_storage import ledger

tn.register_autoray()
RNG = np.random.default_rng(0)


def _r(*shape: int, cplx: bool = False) -> np.ndarray[Any, Any]:
    x = RNG.standard_normal(shape)
    if cplx:
        x = x + 1j * RNG.standard_normal(shape)
    return x


def _spd(n: int) -> np.ndarray[Any, Any]:
    a = _r(n, n)
    return a @ a.T + n * np.eye(n)


A34, B45, C4, Z34 = _r(3, 4), _r(4, 5), _r(4), _r(3, 4, cplx=True)
POS = np.abs(_r(3, 4)) + 0.5
T234 = _r(2, 3, 4)

# name, arrays, extra args/kwargs: every function quimb's MPS/PEPS/circuit code calls
# through autoray (collected by spying on autoray's lookup table), plus the numpy namespace
# around them that quimb's utilities use
TABLE: list[tuple[str, tuple[Any, ...], tuple[Any, ...], dict[str, Any]]] = [
    ("tensordot", (A34, B45), (1,), {}),
    ("tensordot", (T234, _r(4, 3)), (([1, 2], [1, 0]),), {}),
    ("einsum", (A34, B45), (), {}),
    ("matmul", (A34, B45), (), {}),
    ("transpose", (T234,), ((2, 0, 1),), {}),
    ("reshape", (T234,), ((6, 4),), {}),
    ("conj", (Z34,), (), {}),
    ("real", (Z34,), (), {}),
    ("imag", (Z34,), (), {}),
    ("abs", (Z34,), (), {}),
    ("sqrt", (POS,), (), {}),
    ("exp", (A34,), (), {}),
    ("log", (POS,), (), {}),
    ("sin", (A34,), (), {}),
    ("cos", (A34,), (), {}),
    ("sum", (A34,), (), {}),
    ("sum", (A34,), (), {"axis": 1}),
    ("max", (A34,), (), {}),
    ("multiply", (A34, A34), (), {}),
    ("divide", (A34, POS), (), {}),
    ("subtract", (A34, POS), (), {}),
    ("power", (POS, POS), (), {}),
    ("stack", ([A34, A34],), (), {}),
    ("concatenate", ([A34, A34],), (), {"axis": 1}),
    ("trace", (_r(4, 4),), (), {}),
    ("diag", (C4,), (), {}),
    ("linalg.norm", (A34,), (), {}),
    ("norm_fro", (A34,), (), {}),
    ("clip", (A34,), (-0.5, 0.5), {}),
    ("where", (A34 > 0, A34, POS), (), {}),
]


def _tf(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return ts.from_numpy(x)
    if isinstance(x, list):
        return [_tf(v) for v in x]
    return x


@pytest.mark.parametrize(("name", "arrays", "args", "kwargs"), TABLE, ids=lambda v: str(v)[:20])
def test_function_table_matches_numpy(
    name: str, arrays: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """``autoray.do(name, ...)`` on tenferro values equals numpy's and stays a tenferro value."""
    if name == "einsum":
        arrays, args = ("ij,jk->ik", *arrays), ()
    want = ar.do(name, *arrays, *args, **kwargs)
    got = ar.do(name, *(_tf(a) for a in arrays), *args, **kwargs)
    assert ar.infer_backend(got) == tn.BACKEND
    tt.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_creation_like_backend(name: str) -> None:
    """Creation with ``like="tenferro_ad"`` gives tenferro owners of the shape and dtype."""
    x = ar.do(name, (2, 3), like=tn.BACKEND, dtype="complex128")
    assert isinstance(x, ts.Tensor) and x.shape == (2, 3) and x.dtype.name == "complex128"
    if name != "empty":
        tt.assert_allclose(x, getattr(np, name)((2, 3)))
    e = ar.do("eye", 3, like=tn.BACKEND)
    tt.assert_allclose(e, np.eye(3))


def test_shape_dtype_astype_and_to_numpy() -> None:
    """Metadata queries, ``astype``, and ``to_numpy`` as the one recorded TRANSFER copy."""
    x = ts.from_numpy(A34)
    assert ar.shape(x) == (3, 4) and ar.ndim(x) == 2 and ar.get_dtype_name(x) == "float64"
    z = ar.astype(x, "complex128")
    assert ar.get_dtype_name(z) == "complex128"
    with ledger.capture() as rec:
        a = ar.to_numpy(x)
    assert isinstance(a, np.ndarray) and rec.copies.total() == 1
    assert dict(rec.copies) == {ts.CopyReason.TRANSFER: 1}
    np.testing.assert_array_equal(a, A34)


def test_random_is_seeded_and_tenferro() -> None:
    """``random.seed`` then ``random.normal`` repeats its draws; ``uniform`` lies in range."""
    ar.do("random.seed", 7, like=tn.BACKEND)
    a = ar.do("random.normal", size=(3, 2), like=tn.BACKEND)
    ar.do("random.seed", 7, like=tn.BACKEND)
    b = ar.do("random.normal", size=(3, 2), like=tn.BACKEND)
    assert isinstance(a, ts.Tensor) and a.shape == (3, 2)
    tt.assert_array_equal(a, b)
    u = ar.do("random.uniform", low=1.0, high=2.0, size=5, like=tn.BACKEND)
    assert float(ad.min(u)) >= 1.0 and float(ad.max(u)) < 2.0


def test_decompositions_match_numpy() -> None:
    """qr, svd and eigh through autoray factor the matrix as numpy's do (up to signs)."""
    a = ts.from_numpy(A34.T)
    q, r = ar.do("linalg.qr", a)
    tt.assert_allclose(ad.matmul(q, r), A34.T, atol=1e-12)
    tt.assert_allclose(ad.matmul(ad.transpose(q), q), np.eye(3), atol=1e-12)
    u, s, vh = ar.do("linalg.svd", a)
    tt.assert_allclose(s, np.linalg.svd(A34.T, compute_uv=False), atol=1e-12)
    tt.assert_allclose(ad.matmul(u * s, vh), A34.T, atol=1e-12)
    m = _spd(4)
    w, v = ar.do("linalg.eigh", ts.from_numpy(m))
    tt.assert_allclose(w, np.linalg.eigh(m)[0], rtol=1e-12)
    tt.assert_allclose(ad.matmul(v * w, ad.transpose(v)), m, atol=1e-10)


def _jax_twin(name: str) -> Callable[[Any], Any]:
    return {"linalg.qr": jnp.linalg.qr, "linalg.svd": jnp.linalg.svd,
            "linalg.eigh": jnp.linalg.eigh}[name]


@pytest.mark.parametrize("name", ["linalg.qr", "linalg.svd", "linalg.eigh"])
def test_decomposition_gradients_follow_jax(name: str) -> None:
    """The gradient of a gauge-invariant loss through ``do(name)`` equals JAX's."""
    m = _spd(4) if name == "linalg.eigh" else A34.T

    def loss(x: Any, do: Callable[..., Any], mod: Any) -> Any:
        if name == "linalg.svd":
            u, s, vh = do(name, x, full_matrices=False) if mod is jnp else do(name, x)
            return mod.sum(s**3) + mod.sum((u * s) @ vh)
        if name == "linalg.qr":
            q, r = do(name, x)
            return mod.sum(r * r * r) + mod.sum(q @ r)
        w, v = do(name, x)
        return mod.sum(w**2) + mod.sum((v * w) @ v.T)

    got = ad.grad(lambda x: loss(x, ar.do, ad))(ts.from_numpy(m))
    want = jax.grad(lambda x: loss(x, lambda n, y, **k: _jax_twin(n)(y, **k), jnp))(m)
    tt.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-10)
