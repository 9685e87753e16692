"""The linear-algebra surface added for JAX/numpy users (norm, pinv, eig, eigvals, eigvalsh,
matrix_power, expm, sqrtm, solve_sylvester, cho_factor/cho_solve, lstsq, solve_triangular
with broadcasting, svd(full_matrices), eigh's UPLO, det at singular matrices) against JAX:
values, VJPs, JVPs in float32, float64 and complex128 (where JAX differentiates the op),
and second derivatives (reverse over reverse) against JAX or finite differences."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import tenferro_ad as ad
from tenferro_ad import linalg as la
from tenferro_ad.errors import MissingRuleError
from tests.ad._oracle import close, rand, to_np

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def _jax_op_by_op() -> Iterator[None]:
    """JAX (the oracle) runs op by op here, as in ``tests/ad/_opcheck.oracle``: no XLA
    compile of each whole oracle function; per-primitive executables are cached."""
    with jax.disable_jit():
        yield


Fn = Callable[..., Any]
W = np.random.default_rng(123).standard_normal((4, 4))
WV = np.random.default_rng(124).standard_normal(4)
B42 = np.random.default_rng(125).standard_normal((4, 2))
B62 = np.random.default_rng(126).standard_normal((6, 2))
W36 = np.random.default_rng(127).standard_normal((3, 6))


def _abs2(x: Any, xp: Any) -> Any:
    return xp.real(x * xp.conj(x))


def _jeig(x: Any) -> Any:
    return jax.lax.linalg.eig(x, compute_left_eigenvectors=False, enable_eigvec_derivs=True)


def _sym_jax(f: Fn) -> Fn:
    """JAX's scipy cho_factor reads one triangle and assumes a symmetric tangent; through a
    symmetrized input its derivatives are comparable with ours (which symmetrize)."""
    return lambda x: f((x + jnp.conj(jnp.swapaxes(x, -1, -2))) / 2)


# name -> (input kind, complex supported, our loss, JAX loss); all losses are real.
CASES: dict[str, tuple[str, bool, Fn, Fn]] = {
    "det": ("sq", True, lambda x: _abs2(la.det(x), ad), lambda x: _abs2(jnp.linalg.det(x), jnp)),
    "expm": (
        "small", True,
        lambda x: (_abs2(la.expm(x), ad) * W).sum(),
        lambda x: (_abs2(jsl.expm(x), jnp) * W).sum(),
    ),
    "pinv_tall": (
        "tall", True,
        lambda x: (_abs2(la.pinv(x), ad) * W36).sum(),
        lambda x: (_abs2(jnp.linalg.pinv(x), jnp) * W36).sum(),
    ),
    "pinv_wide": (
        "wide", True,
        lambda x: (_abs2(la.pinv(x), ad) * W[:, :3]).sum(),
        lambda x: (_abs2(jnp.linalg.pinv(x), jnp) * W[:, :3]).sum(),
    ),
    # eigen-pair order is LAPACK's and each eigenvector's sign too (its largest entry is
    # real, of either sign): the losses are invariant under both, not under other phases
    "eig": (
        "sq", True,
        lambda x: (ad.real(la.eig(x)[1]) ** 2 * WV[:, None]).sum()
        + (ad.real(la.eig(x)[0]) * (ad.imag(la.eig(x)[1]) ** 2 * WV[:, None]).sum(axis=0)).sum()
        + _abs2(la.eig(x)[0], ad).sum(),
        lambda x: (jnp.real(_jeig(x)[1]) ** 2 * WV[:, None]).sum()
        + (jnp.real(_jeig(x)[0]) * (jnp.imag(_jeig(x)[1]) ** 2 * WV[:, None]).sum(axis=0)).sum()
        + _abs2(_jeig(x)[0], jnp).sum(),
    ),
    "eigvals": (
        "sq", True,
        lambda x: ad.real(la.eigvals(x) * la.eigvals(x) * la.eigvals(x)).sum(),
        lambda x: jnp.real(_jeig(x)[0] ** 3).sum(),  # its 2nd order needs eigvec derivs
    ),
    "eigvalsh": (
        "herm", True,
        lambda x: (la.eigvalsh(x) ** 3 * WV).sum(),
        lambda x: (jnp.linalg.eigvalsh(x) ** 3 * WV).sum(),
    ),
    "matrix_power_3": (
        "sq", True,
        lambda x: (_abs2(la.matrix_power(x, 3), ad) * W).sum(),
        lambda x: (_abs2(jnp.linalg.matrix_power(x, 3), jnp) * W).sum(),
    ),
    "matrix_power_-2": (
        "sq", True,
        lambda x: (_abs2(la.matrix_power(x, -2), ad) * W).sum(),
        lambda x: (_abs2(jnp.linalg.matrix_power(x, -2), jnp) * W).sum(),
    ),
    "cho_solve_upper": (
        "spd", True,
        lambda x: (_abs2(la.cho_solve(la.cho_factor(x), B42), ad)).sum(),
        _sym_jax(lambda x: _abs2(jsl.cho_solve(jsl.cho_factor(x), B42), jnp).sum()),
    ),
    "cho_solve_lower": (
        "spd", True,
        lambda x: (_abs2(la.cho_solve(la.cho_factor(x, lower=True), B42), ad)).sum(),
        _sym_jax(lambda x: _abs2(jsl.cho_solve(jsl.cho_factor(x, lower=True), B42), jnp).sum()),
    ),
    "lstsq": (
        "tall", True,
        lambda x: _abs2(la.lstsq(x, B62)[0], ad).sum() + la.lstsq(x, B62)[1].sum()
        + (la.lstsq(x, B62)[3] ** 2).sum(),
        lambda x: _abs2(jnp.linalg.lstsq(x, B62)[0], jnp).sum()
        + jnp.linalg.lstsq(x, B62)[1].sum() + (jnp.linalg.lstsq(x, B62)[3] ** 2).sum(),
    ),
}
for _o in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf):
    CASES[f"matrix_norm_{_o}"] = (
        "sq", True,
        lambda x, o=_o: la.norm(x, o),  # type: ignore[misc]
        lambda x, o=_o: jnp.linalg.norm(x, o),  # type: ignore[misc]
    )
for _o in (None, 1, 2, 3, 0.5, np.inf, -np.inf):
    CASES[f"vector_norm_{_o}"] = (
        "sq", True,
        lambda x, o=_o: (la.norm(x, o, axis=1) * WV).sum(),  # type: ignore[misc]
        lambda x, o=_o: (jnp.linalg.norm(x, o, axis=1) * WV).sum(),  # type: ignore[misc]
    )


def _input(kind: str, rng: np.random.Generator, cplx: bool, dtype: Any) -> Any:
    if kind == "tall":
        x = rand(rng, (6, 3), cplx)
    elif kind == "wide":
        x = rand(rng, (3, 4), cplx)
    elif kind == "small":
        x = 0.5 * rand(rng, (4, 4), cplx)
    else:
        x = rand(rng, (4, 4), cplx) + 2 * np.eye(4)
        if kind in ("herm", "spd"):
            x = x @ np.conj(x.T) + np.eye(4) if kind == "spd" else x + np.conj(x.T)
    return x.astype(dtype)


DTYPES = [(np.float64, False), (np.float32, False), (np.complex128, True)]


@pytest.mark.parametrize(("dtype", "cplx"), DTYPES, ids=["f64", "f32", "c128"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_value_vjp_and_jvp_match_jax(name: str, dtype: Any, cplx: bool) -> None:
    kind, has_complex, f, jf = CASES[name]
    if cplx and not has_complex:
        pytest.skip("JAX has no complex derivative for this op")
    rng = np.random.default_rng(abs(hash(name)) % 2**31)
    x = _input(kind, rng, cplx, dtype)
    f32 = dtype == np.float32
    rtol, atol = (2e-3, 2e-4) if f32 else (1e-7, 1e-8)
    close(f(ad.stop_gradient(x)), jf(x), rtol=rtol, atol=atol)
    g = to_np(ad.grad(f)(x))
    close(g, jax.grad(jf)(x), rtol=rtol, atol=atol * 10)
    t = rand(rng, x.shape, cplx).astype(dtype)
    _, got = ad.jvp(f, (x,), (t,))
    close(got, jax.jvp(jf, (x,), (t,))[1], rtol=rtol, atol=atol * 10)


SECOND_ORDER = [
    "det", "expm", "pinv_tall", "pinv_wide", "eig", "eigvals", "matrix_power_-2",
    "cho_solve_lower", "matrix_norm_nuc", "vector_norm_3", "lstsq",
]


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_reverse_over_reverse_and_forward_over_reverse_match_jax(name: str) -> None:
    """Hessian-vector products on a random direction, both ways, against JAX's."""
    kind, _, f, jf = CASES[name]
    rng = np.random.default_rng(7)
    x = _input(kind, rng, False, np.float64)
    v = rng.standard_normal(x.shape)
    want = jax.grad(lambda x: (jax.grad(jf)(x) * v).sum())(x)
    hv = ad.grad(lambda x: (ad.grad(f)(x) * v).sum())(x)
    close(hv, want, rtol=1e-6, atol=1e-7)
    _, fwd = ad.jvp(ad.grad(f), (x,), (v,))
    close(fwd, want, rtol=1e-6, atol=1e-7)


def _fd_grad(fn: Callable[[Any], float], x: Any, eps: float = 1e-6) -> Any:
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (fn(x + e) - fn(x - e)) / (2 * eps)
    return g


def test_sqrtm_value_gradient_jvp_and_second_order_match_finite_differences() -> None:
    """JAX's sqrtm has no derivative (schur); scipy's value and central differences."""
    import scipy.linalg as sl

    rng = np.random.default_rng(3)
    a = rand(rng, (3, 3), False)
    a = a @ a.T + np.eye(3)
    w = rng.standard_normal((3, 3))

    def f(x: Any) -> Any:
        return (la.sqrtm(x) ** 2 * w).sum()

    def fn(x: Any) -> float:
        return float(np.sum(np.real(sl.sqrtm(x)) ** 2 * w))

    close(la.sqrtm(a), sl.sqrtm(a), rtol=1e-10, atol=1e-12)
    g = to_np(ad.grad(f)(a))
    np.testing.assert_allclose(g, _fd_grad(fn, a), rtol=1e-5, atol=1e-7)
    t = rng.standard_normal(a.shape)
    _, jt = ad.jvp(f, (a,), (t,))
    assert float(to_np(jt)) == pytest.approx(float(np.sum(g * t)), rel=1e-8)
    v = rng.standard_normal(a.shape)
    hv = to_np(ad.grad(lambda x: (ad.grad(f)(x) * v).sum())(a))
    fd = _fd_grad(lambda x: float(np.sum(to_np(ad.grad(f)(x)) * v)), a, 1e-5)
    np.testing.assert_allclose(hv, fd, rtol=1e-4, atol=1e-6)


def test_solve_sylvester_gradients_in_all_three_arguments_match_jax_solve() -> None:
    """a X + X b = c is the linear system (I (x) a + b^T (x) I) vec X = vec c."""
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal((3, 3)) + 3 * np.eye(3) for _ in range(3))
    w = rng.standard_normal((3, 3))

    def jf(a: Any, b: Any, c: Any) -> Any:
        k = jnp.kron(jnp.eye(3), a) + jnp.kron(b.T, jnp.eye(3))
        x = jnp.linalg.solve(k, c.T.reshape(-1)).reshape(3, 3).T
        return (x**2 * w).sum()

    def f(a: Any, b: Any, c: Any) -> Any:
        return (la.solve_sylvester(a, b, c) ** 2 * w).sum()

    got = ad.grad(f, argnums=(0, 1, 2))(a, b, c)
    want = jax.grad(jf, argnums=(0, 1, 2))(a, b, c)
    for g_, w_ in zip(got, want, strict=True):
        close(g_, w_, rtol=1e-8, atol=1e-10)


def test_det_gradient_at_an_exactly_singular_matrix_is_the_adjugate_like_jax() -> None:
    rank2 = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    rank1 = np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 2.0])
    for a in (rank2, rank1, np.zeros((3, 3))):
        g = ad.grad(la.det)(a)
        close(g, jax.grad(jnp.linalg.det)(a), rtol=1e-10, atol=1e-12)
    # adjugate of the rank-2 matrix, by cofactors: nonzero, so the test can fail
    assert np.abs(to_np(ad.grad(la.det)(rank2))).max() > 1
    t = np.random.default_rng(0).standard_normal((3, 3))
    _, jt = ad.jvp(la.det, (rank2,), (t,))
    close(jt, jax.jvp(jnp.linalg.det, (rank2,), (t,))[1], rtol=1e-10, atol=1e-12)


def test_solve_and_solve_triangular_broadcast_batch_shapes_and_sum_gradients_back() -> None:
    rng = np.random.default_rng(5)
    a = np.tril(rng.standard_normal((3, 3))) + 3 * np.eye(3)
    ab = a + 0.1 * rng.standard_normal((2, 1, 1, 3, 3))
    b = rng.standard_normal((4, 3, 2))
    for aa in (a, ab):
        batch = np.broadcast_shapes(aa.shape[:-2], b.shape[:-2])

        def f(a: Any, b: Any) -> Any:
            x = la.solve_triangular(a, b, lower=True)
            return (x**2).sum() + (la.solve(a, b) ** 2).sum()

        def jf(a: Any, b: Any, batch: tuple[int, ...] = batch) -> Any:
            a_, b_ = jnp.broadcast_to(a, (*batch, 3, 3)), jnp.broadcast_to(b, (*batch, 3, 2))
            x = jsl.solve_triangular(a_, b_, lower=True)
            return (x**2).sum() + (jnp.linalg.solve(a_, b_) ** 2).sum()

        got = ad.grad(f, argnums=(0, 1))(aa, b)
        want = jax.grad(jf, argnums=(0, 1))(aa, b)
        for g_, w_ in zip(got, want, strict=True):
            assert to_np(g_).shape == np.asarray(w_).shape
            close(g_, w_, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(
    "op",
    [la.det, la.expm, la.pinv, la.sqrtm, la.inv, la.eigvalsh, la.cholesky,
     lambda a: ad.real(la.eig(a)[1]), lambda a: la.norm(a, "nuc"), lambda a: la.norm(a, 3, 1),
     lambda a: la.matrix_power(a, 3)],
)
def test_float32_inputs_give_float32_values_and_gradients(op: Fn) -> None:
    rng = np.random.default_rng(13)
    a = rng.standard_normal((3, 3))
    a = (a @ a.T + np.eye(3)).astype(np.float32)
    assert to_np(op(a)).dtype == np.float32
    assert to_np(ad.grad(lambda a: op(a).sum())(a)).dtype == np.float32


def test_solve_triangular_float32_stays_float32_and_reads_one_triangle() -> None:
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
    b = rng.standard_normal((3, 2)).astype(np.float32)
    x = to_np(la.solve_triangular(a, b, lower=False))
    assert x.dtype == np.float32
    close(x, np.linalg.solve(np.triu(a), b), rtol=1e-5, atol=1e-6)
    g = to_np(ad.grad(lambda a: la.solve_triangular(a, b, lower=False).sum())(a))
    assert g.dtype == np.float32 and not np.any(np.tril(g, -1))


def test_svd_full_matrices_values_and_its_derivative_is_refused_like_jax() -> None:
    rng = np.random.default_rng(8)
    for shp in ((2, 5, 3), (3, 4)):
        a = rng.standard_normal(shp)
        u, s, vh = la.svd(a, full_matrices=True)
        m, n = shp[-2:]
        assert to_np(u).shape == (*shp[:-2], m, m) and to_np(vh).shape == (*shp[:-2], n, n)
        k = min(m, n)
        rec = (to_np(u)[..., :, :k] * to_np(s)[..., None, :]) @ to_np(vh)[..., :k, :]
        close(rec, a, rtol=1e-10, atol=1e-12)
        eye = np.broadcast_to(np.eye(m), (*shp[:-2], m, m))
        close(to_np(u) @ np.swapaxes(to_np(u), -1, -2), eye, atol=1e-12)
        with pytest.raises(MissingRuleError, match="svd_full_matrices"):
            ad.grad(lambda a: la.svd(a, full_matrices=True)[1].sum())(a)
    sq = rng.standard_normal((3, 3))
    g = ad.grad(lambda a: la.svd(a, full_matrices=True)[1].sum())(sq)
    close(g, jax.grad(lambda a: jnp.linalg.svd(a)[1].sum())(sq), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_uplo_reads_one_triangle_without_symmetrization(uplo: str, cplx: bool) -> None:
    rng = np.random.default_rng(9)
    a = rand(rng, (4, 4), cplx)  # not Hermitian: the other triangle must not matter
    w_np = np.linalg.eigh(a, UPLO=uplo)[0]
    close(la.eigh(a, UPLO=uplo, symmetrize_input=False)[0], w_np, rtol=1e-10, atol=1e-12)
    close(la.eigvalsh(a, UPLO=uplo, symmetrize_input=False), w_np, rtol=1e-10, atol=1e-12)
    g = to_np(ad.grad(lambda a: (la.eigvalsh(a, uplo, symmetrize_input=False) ** 3).sum())(a))
    other = np.triu(g, 1) if uplo == "L" else np.tril(g, -1)
    assert not np.any(other)
    if not cplx:
        fd = _fd_grad(lambda x: float(np.sum(np.linalg.eigh(x, UPLO=uplo)[0] ** 3)), a)
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
    else:  # the real and imaginary directions separately (JAX's cotangent convention)
        fre = _fd_grad(lambda x: float(np.sum(np.linalg.eigh(x + 1j * a.imag, UPLO=uplo)[0] ** 3)),
                       a.real.copy())
        fim = _fd_grad(lambda y: float(np.sum(np.linalg.eigh(a.real + 1j * y, UPLO=uplo)[0] ** 3)),
                       a.imag.copy())
        np.testing.assert_allclose(g, fre - 1j * fim, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="UPLO"):
        la.eigh(a, UPLO="X")


def test_norm_keepdims_axis_tuples_and_flattening_match_numpy() -> None:
    x = np.random.default_rng(10).standard_normal((2, 3, 4))
    for ordv, axis in ((None, None), (2, (1, 2)), ("fro", (0, 2)), (np.inf, (2, 1)), (1, -1)):
        for keep in (False, True):
            close(la.norm(x, ordv, axis, keep), np.linalg.norm(x, ordv, axis, keep),
                  rtol=1e-12, atol=1e-12)
    close(la.norm(x, 0, axis=2), np.linalg.norm(x, 0, axis=2))
    with pytest.raises(ValueError, match="norm"):
        la.norm(x, "nuc", axis=1)


def test_matrix_power_zero_is_the_identity_and_the_exponent_must_be_an_integer() -> None:
    a = np.random.default_rng(11).standard_normal((2, 3, 3))
    close(la.matrix_power(a, 0), np.broadcast_to(np.eye(3), a.shape))
    assert isinstance(la.matrix_power(a, 1), ad.EagerTensor)
    close(la.matrix_power(a, 1), a)
    close(la.matrix_power(a, 5), np.linalg.matrix_power(a, 5), rtol=1e-10, atol=1e-10)
    with pytest.raises(TypeError, match="matrix_power"):
        la.matrix_power(a, 1.5)  # type: ignore[arg-type]


def test_lstsq_matches_numpy_including_rank_deficient_inputs() -> None:
    rng = np.random.default_rng(12)
    full = rng.standard_normal((6, 3))
    deficient = np.column_stack([full[:, 0], full[:, 0], full[:, 1]])
    for a in (full, deficient):
        for b in (B62, B62[:, 0]):
            x, r, k, s = la.lstsq(a, b)
            nx, nr, nk, ns = np.linalg.lstsq(a, b)
            close(x, nx, rtol=1e-8, atol=1e-10)
            close(r, nr, rtol=1e-8, atol=1e-10)
            assert int(k) == int(nk)
            close(s, ns, rtol=1e-10, atol=1e-12)


def test_every_function_accepts_owners_and_leaves_them_usable() -> None:
    """Storage owners are read in place (borrowed); each result matches numpy's input."""
    import tenferro_storage as ts

    rng = np.random.default_rng(14)
    a = rng.standard_normal((3, 3))
    spd = a @ a.T + np.eye(3)
    tall = rng.standard_normal((5, 3))
    calls: list[tuple[Fn, tuple[Any, ...]]] = [
        (lambda x: la.norm(x), (spd,)),
        (lambda x: la.norm(x, 2), (spd,)),
        (lambda x: la.norm(x, 1, axis=0), (spd,)),
        (lambda x: la.matrix_power(x, 3), (spd,)),
        (lambda x, b: la.cho_solve(la.cho_factor(x), b), (spd, tall[:3, :2])),
        (lambda x: la.eig(x)[0], (spd,)),
        (la.expm, (spd,)),
        (la.sqrtm, (spd,)),
        (la.pinv, (tall,)),
        (lambda x, b: la.lstsq(x, b)[0], (tall, tall[:, 0])),
        (la.det, (spd,)),
        (lambda x: la.eigvalsh(x, "U", symmetrize_input=False), (spd,)),
        (lambda x: la.eigh(x)[0], (spd,)),
        (lambda x: la.svd(x, full_matrices=True)[1], (tall,)),
        (lambda x: la.slogdet(x)[1], (spd,)),
    ]
    for fn, args in calls:
        owners = [ts.from_numpy(np.array(x)) for x in args]
        close(fn(*owners), to_np(fn(*args)), rtol=1e-12, atol=1e-12)
        for o, x in zip(owners, args, strict=True):
            close(o, x)  # still readable, unchanged


def test_argument_errors_name_the_op_and_subclass_the_package_roots() -> None:
    from tenferro_ad import errors

    x = np.ones((2, 3))
    cases: list[tuple[Fn, type[Exception], str]] = [
        (lambda: la.norm(x, 1, axis=5), errors.AxisError, "norm"),
        (lambda: la.norm(x, "nuc", axis=0), errors.ArgumentError, "norm: invalid ord"),
        (lambda: la.norm(np.ones((2, 2, 2)), 2), errors.ArgumentError, "norm: ord=2"),
        (lambda: la.matrix_power(np.eye(2), 1.5), errors.ArgumentTypeError, "matrix_power"),
        (lambda: la.matrix_power(x, 2), errors.ArgumentError, "matrix_power: expected"),
        (lambda: la.eigh(np.eye(2), "X"), errors.ArgumentError, "eigh: UPLO"),
        (lambda: la.solve(np.ones((2, 2, 2)), np.ones((3, 2, 1))), errors.ArgumentError,
         "solve: the batch shapes"),
        (lambda: la.solve_sylvester(np.eye(2), np.eye(3), np.ones((3, 3))),
         errors.ArgumentError, "solve_sylvester: c has shape"),
        (lambda: la.lstsq(x, np.ones(3)), errors.ArgumentError, "lstsq"),
        (lambda: la.pinv(np.ones(3)), errors.ArgumentError, "pinv"),
        (lambda: la.expm(x), errors.ArgumentError, "expm"),
    ]
    for call, cls, msg in cases:
        with pytest.raises(cls, match=msg) as info:
            call()
        assert isinstance(info.value, errors.TenferroError)
    with pytest.raises(np.linalg.LinAlgError, match="solve_triangular"):
        la.solve_triangular(np.zeros((2, 2)), np.ones((2, 1)), lower=True)


def test_complex_sqrtm_gradient_matches_finite_differences_in_both_directions() -> None:
    """JAX's convention for a real loss of complex input: grad = d/dRe - i d/dIm."""
    import scipy.linalg as sl

    rng = np.random.default_rng(15)
    a = rand(rng, (3, 3), True) + 3 * np.eye(3)
    w = rng.standard_normal((3, 3))

    def f(x: Any) -> Any:
        return (_abs2(la.sqrtm(x), ad) * w).sum()

    def fn(x: Any) -> float:
        return float(np.sum(np.abs(sl.sqrtm(x)) ** 2 * w))

    close(la.sqrtm(a), sl.sqrtm(a), rtol=1e-10, atol=1e-12)
    g = to_np(ad.grad(f)(a))
    fre = _fd_grad(lambda r: fn(r + 1j * a.imag), a.real.copy())
    fim = _fd_grad(lambda i: fn(a.real + 1j * i), a.imag.copy())
    np.testing.assert_allclose(g, fre - 1j * fim, rtol=1e-5, atol=1e-7)
