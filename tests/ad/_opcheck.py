"""The eager JAX cross-validation checks run on the rows of the one op table
(``tests/_opspecs.py``): its ``first`` and ``second`` modes, used by the family suites
(``test_ops_*.py``, fft, scipy) and by ``test_jax_oracle.py`` for the core rows.

An :class:`~tests._opspecs.Op` row names our function, JAX's, the argument shapes, the
input domain and the dtypes to run.  :func:`check_first_order` compares value, VJP (random
cotangent) and JVP (random tangent) with ``jax.vjp``/``jax.jvp`` and checks that dtypes are
preserved (float32 stays float32 in outputs, cotangents and tangents); :func:`check_second_order`
compares reverse-over-reverse (the gradient of ``<grad <f, ct>, v>``) on a random
direction.  :func:`check_edges` compares elementwise values and derivatives at edge points
(0, +-inf, NaN, domain ends), NaN-aware.

JAX runs as the oracle op by op (``jax.disable_jit``, see :func:`oracle`): each case is
evaluated once, so compiling a fused XLA program per op/shape/dtype/transform costs far more
than it saves, while the per-primitive executables are cached and shared by every row of
the same shape and dtype (about half the oracle's CPU time of the jitted path).
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tests._opspecs import Op, values

__all__ = [
    "Op", "THOROUGH", "cases", "check_edges", "check_first_order", "check_forward_over_reverse",
    "check_second_order", "close", "inputs", "oracle", "second_cases",
]


@contextlib.contextmanager
def oracle() -> Iterator[None]:
    """The context every JAX oracle call runs in: op-by-op (no per-case XLA compile of the
    whole function) and with numpy floating-point errors ignored (JAX reports them as
    values, which the comparisons judge)."""
    with jax.disable_jit(), np.errstate(all="ignore"):
        yield


def inputs(op: Op, bucket: int, dtype: str) -> tuple[list[np.ndarray], np.random.Generator]:
    """Deterministic inputs for one (op, shape bucket, dtype)."""
    rng = np.random.default_rng(zlib.crc32(f"{op.name}/{bucket}".encode()))
    xs = []
    for s in op.shapes[bucket]:
        x = values(rng, s, op.domain)
        if dtype.startswith("complex"):
            x = x + 1j * values(rng, s, op.domain) * 0.5
        xs.append(np.asarray(x).astype(dtype))
    return xs, rng


def _tol(op: Op, dtype: str) -> float:
    return op.rtol32 if dtype in ("float32", "complex64") else op.rtol64


def close(ours: Any, theirs: Any, tol: float, what: str) -> None:
    a = np.asarray(ours)
    b = np.asarray(theirs)
    scale = max(1.0, float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale, equal_nan=True, err_msg=what)


def _rand_like(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    x = rng.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.normal(size=shape)
    return np.asarray(x).astype(dtype)


def check_first_order(op: Op, bucket: int, dtype: str) -> None:
    """Value, VJP and JVP against JAX, and dtype preservation."""
    xs, rng = inputs(op, bucket, dtype)
    tol = _tol(op, dtype)
    with oracle():
        ref_out, ref_vjp = jax.vjp(op.theirs, *[jnp.asarray(x) for x in xs])
        ref_np = np.asarray(ref_out)
        ct = _rand_like(rng, ref_np.shape, ref_np.dtype)
        ref_cts = ref_vjp(jnp.asarray(ct))
        tans = [_rand_like(rng, x.shape, x.dtype) for x in xs]
        _, ref_tan = jax.jvp(
            op.theirs, tuple(jnp.asarray(x) for x in xs), tuple(jnp.asarray(t) for t in tans)
        )
    out, vjp_fn = ad.vjp(op.ours, *[ts.from_numpy(x) for x in xs])
    got = out.to_numpy()
    assert got.shape == ref_np.shape, (got.shape, ref_np.shape)
    assert got.dtype == ref_np.dtype, f"output dtype {got.dtype}, JAX {ref_np.dtype}"
    close(got, ref_np, tol, "value")
    cts = vjp_fn(ts.from_numpy(ct))
    vjp_fn.release()
    if not isinstance(cts, tuple):
        cts = (cts,)
    for i, (c, r) in enumerate(zip(cts, ref_cts, strict=True)):
        cn = c.to_numpy()
        assert cn.dtype == xs[i].dtype, f"cotangent {i} dtype {cn.dtype} for {xs[i].dtype}"
        assert cn.shape == xs[i].shape
        close(cn, r, tol, f"vjp arg {i}")
    del out, cts
    value, tangent = ad.jvp(
        op.ours, [ts.from_numpy(x) for x in xs], [ts.from_numpy(t) for t in tans]
    )
    close(value.to_numpy(), ref_np, tol, "jvp primal")
    tn = tangent.to_numpy()
    assert tn.dtype == ref_np.dtype, f"tangent dtype {tn.dtype}, JAX {ref_np.dtype}"
    close(tn, ref_tan, tol, "jvp tangent")


def _real_part(x: Any) -> Any:
    return ad.real(x) if ad.ops.complex.is_complex(x) else x


def _second_dtype(op: Op, dtype: str | None) -> str:
    if dtype is not None:
        return dtype
    return "float64" if "float64" in op.dtypes else op.dtypes[-1]


def check_second_order(op: Op, bucket: int, dtype: str | None = None) -> None:
    """Reverse-over-reverse on a random direction: d/dx <grad_x <f(x), ct>, v> vs JAX
    (float64, or the op's widest dtype when it has no float64 row)."""
    dtype = _second_dtype(op, dtype)
    xs, rng = inputs(op, bucket, dtype)
    with oracle():
        out_shape = np.shape(np.asarray(op.theirs(*[jnp.asarray(x) for x in xs])))
    ct = rng.normal(size=out_shape)
    vs = [rng.normal(size=x.shape) for x in xs]
    argnums = tuple(range(len(xs)))

    def inner_ours(*ys: Any) -> Any:
        return ad.sum(_real_part(op.ours(*ys)) * ct)

    def outer_ours(*ys: Any) -> Any:
        gs = ad.grad(inner_ours, argnums=argnums)(*ys)
        total = ad.sum(_real_part(gs[0]) * vs[0])
        for g, v in zip(gs[1:], vs[1:], strict=True):
            total = total + ad.sum(_real_part(g) * v)
        return total

    def inner_theirs(*ys: Any) -> Any:
        return jnp.sum(jnp.real(op.theirs(*ys)) * ct)

    def outer_theirs(*ys: Any) -> Any:
        gs = jax.grad(inner_theirs, argnums=argnums)(*ys)
        return sum(jnp.sum(jnp.real(g) * v) for g, v in zip(gs, vs, strict=True))

    with oracle():
        ref = jax.grad(outer_theirs, argnums=argnums)(*[jnp.asarray(x) for x in xs])
    got = ad.grad(outer_ours, argnums=argnums)(*[ts.from_numpy(x) for x in xs])
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        close(np.asarray(g.to_numpy() if hasattr(g, "to_numpy") else ts.kernel.read_array(g)),
              r, max(_tol(op, dtype) * 100, 1e-7), f"second order arg {i}")


def check_edges(
    ours: Callable[..., Any], theirs: Callable[..., Any], points: Sequence[Sequence[float]],
    dtype: str = "float64",
) -> None:
    """Elementwise value and partial derivatives at edge points (NaN compares equal)."""
    cols = [np.asarray(c, dtype=dtype) for c in zip(*points, strict=True)]
    n = len(cols)
    with oracle():
        ref_val = np.asarray(theirs(*[jnp.asarray(c) for c in cols]))
        ref_grads = [
            np.asarray(jax.vmap(jax.grad(theirs, argnums=i))(*[jnp.asarray(c) for c in cols]))
            for i in range(n)
        ]
        out, vjp_fn = ad.vjp(ours, *[ts.from_numpy(c) for c in cols])
        cts = vjp_fn(ts.from_numpy(np.ones(cols[0].shape, dtype)))
        vjp_fn.release()
    if not isinstance(cts, tuple):
        cts = (cts,)
    np.testing.assert_allclose(out.to_numpy(), ref_val, rtol=1e-12, equal_nan=True,
                               err_msg=f"edge values at {points}")
    for i in range(n):
        np.testing.assert_allclose(cts[i].to_numpy(), ref_grads[i], rtol=1e-9, atol=1e-12,
                                   equal_nan=True, err_msg=f"edge d/darg{i} at {points}")


THOROUGH = os.environ.get("TENFERRO_THOROUGH", "").lower() in {"1", "true", "yes"}


def _buckets(op: Op) -> list[int]:
    """The shape buckets a default (dev/CI) run checks: all of them for an op with several
    arguments (its extra buckets are broadcasting patterns, which exercise the VJP's
    unbroadcast), otherwise the first and one more, picked by the op's name so that across
    a table every extra bucket (scalar, 1-D ...) is still covered by many ops."""
    n = len(op.shapes)
    if THOROUGH or op.nargs > 1 or n <= 2:
        return list(range(n))
    return [0, 1 + zlib.crc32(op.name.encode()) % (n - 1)]


def cases(table: Sequence[Op]) -> list[Any]:
    """pytest params, one per (op, shape bucket, dtype): every dtype on the first bucket,
    float64 on the others (see :func:`_buckets` for which).  ``TENFERRO_THOROUGH=1`` runs
    the dense grid instead: every dtype on every bucket."""
    import pytest

    out = []
    for op in table:
        if "first" not in op.modes:
            continue
        for b in _buckets(op):
            for dt in op.dtypes:
                if b and not THOROUGH and dt != "float64" and "float64" in op.dtypes:
                    continue  # other dtypes: first shape bucket only (keeps the suite fast)
                out.append(pytest.param(op, b, dt, id=f"{op.name}-{b}-{dt}"))
    return out


def second_cases(table: Sequence[Op]) -> list[Any]:
    """pytest params for the second-order checks: one per op that runs the ``second`` mode
    (bucket 0, float64)."""
    import pytest

    return [pytest.param(op, id=op.name) for op in table if "second" in op.modes]


def check_forward_over_reverse(op: Op, bucket: int, dtype: str | None = None) -> None:
    """Forward-over-reverse on random directions: ``jvp`` of ``x -> <grad_x <f(x), ct>, v>``
    along ``u`` (``u^T H v``) agrees with JAX."""
    dtype = _second_dtype(op, dtype)
    xs, rng = inputs(op, bucket, dtype)
    with oracle():
        out_shape = np.shape(np.asarray(op.theirs(*[jnp.asarray(x) for x in xs])))
    ct = rng.normal(size=out_shape)
    vs = [rng.normal(size=x.shape) for x in xs]
    us = [rng.normal(size=x.shape).astype(x.dtype) for x in xs]
    argnums = tuple(range(len(xs)))

    def inner_ours(*ys: Any) -> Any:
        return ad.sum(_real_part(op.ours(*ys)) * ct)

    def outer_ours(*ys: Any) -> Any:
        gs = ad.grad(inner_ours, argnums=argnums)(*ys)
        total = ad.sum(_real_part(gs[0]) * vs[0])
        for g, v in zip(gs[1:], vs[1:], strict=True):
            total = total + ad.sum(_real_part(g) * v)
        return total

    def inner_theirs(*ys: Any) -> Any:
        return jnp.sum(jnp.real(op.theirs(*ys)) * ct)

    def outer_theirs(*ys: Any) -> Any:
        gs = jax.grad(inner_theirs, argnums=argnums)(*ys)
        return sum(jnp.sum(jnp.real(g) * v) for g, v in zip(gs, vs, strict=True))

    with oracle():
        _, ref = jax.jvp(
            outer_theirs, tuple(jnp.asarray(x) for x in xs), tuple(jnp.asarray(u) for u in us)
        )
    _, got = ad.jvp(outer_ours, [ts.from_numpy(x) for x in xs], [ts.from_numpy(u) for u in us])
    close(np.asarray(got.to_numpy() if hasattr(got, "to_numpy") else ts.kernel.read_array(got)),
          ref, max(_tol(op, dtype) * 100, 1e-7), "forward over reverse")
