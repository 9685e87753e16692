"""Every row of the one op table (``tests/_opspecs.py``) that runs the ``traced`` mode,
traced and transformed, against JAX and against eager mode.

* The core primitives: values and output types (``jax.make_jaxpr``), ``grad``, ``vjp``,
  ``jvp`` and ``vmap`` graphs on every shape bucket -- each produced graph also
  type-checks -- and per-example gradients (``vmap`` of ``grad``) for the unary ones.
* The op families (math, manip, scan, fft, scipy): one check per row -- value and type of
  the traced graph -- on the first shape bucket in float64 (the row's widest dtype when it
  has no float64); under ``TENFERRO_THOROUGH=1`` on every bucket and with its ``vjp`` and
  ``jvp`` graphs too (the dev/CI budget cannot afford those for every row).  Rows that
  cannot run traced say why in the table (``TRACED_GAPS``).
"""

from __future__ import annotations

import zlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tests._opspecs import Op, table, values
from tests.ad._opcheck import THOROUGH, inputs
from tests.traced._specs import close

CORE = table("core", "traced")
IDS = [s.name for s in CORE]


def _checked(g: traced.Graph) -> traced.Graph:
    traced.check(g)
    return g


def cases(spec: Op, seed: int = 0) -> list[list[np.ndarray]]:
    """One float64 argument list per shape bucket of ``spec``."""
    rng = np.random.default_rng(seed)
    return [[values(rng, s, spec.domain) for s in shapes] for shapes in spec.shapes]


def _tol(spec: Op) -> float:
    return spec.rtol64


@pytest.mark.parametrize("spec", CORE, ids=IDS)
def test_traced_value_and_type_match_jax_and_eager(spec: Op) -> None:
    """eval(trace(f)) == eager f == jax f, and the graph's output type is JAX's."""
    for xs in cases(spec):
        g = _checked(traced.trace(spec.ours)(*xs))
        jaxpr = jax.make_jaxpr(spec.theirs)(*xs)
        (aval,) = jaxpr.out_avals
        (out,) = g.outvars
        assert out.shape == tuple(aval.shape)
        assert out.dtype == np.dtype(aval.dtype)
        got = traced.eval_graph(g, *xs)
        close(got, spec.theirs(*xs), _tol(spec))
        close(got, spec.ours(*[ts.from_numpy(x) for x in xs]), _tol(spec))


def _loss(spec: Op, m: Any, w: np.ndarray, *xs: Any) -> Any:
    f = spec.ours if m is ad else spec.theirs
    return m.sum(f(*xs) * w)


@pytest.mark.parametrize("spec", CORE, ids=IDS)
def test_grad_graph_matches_jax(spec: Op) -> None:
    """traced.grad (every argument) equals jax.grad of the same weighted loss."""
    rng = np.random.default_rng(1)
    for xs in cases(spec):
        w = rng.normal(size=np.shape(spec.theirs(*xs)))
        g = traced.trace(lambda *a, w=w: _loss(spec, ad, w, *a))(*xs)
        nums = tuple(range(len(xs)))
        got = traced.eval_graph(_checked(traced.grad(g, argnums=nums)), *xs)
        want = jax.grad(lambda *a, w=w: _loss(spec, jnp, w, *a), argnums=nums)(*xs)
        for a, b in zip(got, want, strict=True):
            close(a, b, _tol(spec))


def _vjp_jvp(spec: Op, xs: list[np.ndarray], rng: np.random.Generator, tol: float) -> None:
    g = traced.trace(spec.ours)(*xs)
    ref, pullback = jax.vjp(spec.theirs, *xs)
    ct = rng.normal(size=np.shape(ref)).astype(np.asarray(ref).dtype)
    out, cts = traced.eval_graph(_checked(traced.vjp(g)), *xs, ct)
    close(out, ref, tol)
    for a, b in zip(cts, pullback(ct), strict=True):
        close(a, b, tol)
    tans = [rng.normal(size=np.shape(x)).astype(x.dtype) for x in xs]
    out, tan = traced.eval_graph(_checked(traced.jvp(g)), *xs, *tans)
    _, ref_tan = jax.jvp(spec.theirs, tuple(xs), tuple(tans))
    close(out, ref, tol)
    close(tan, ref_tan, tol)


@pytest.mark.parametrize("spec", CORE, ids=IDS)
def test_vjp_and_jvp_graphs_match_jax(spec: Op) -> None:
    """traced.vjp with a random cotangent and traced.jvp with random tangents equal JAX's."""
    rng = np.random.default_rng(2)
    for xs in cases(spec):
        _vjp_jvp(spec, xs, rng, _tol(spec))


@pytest.mark.parametrize("spec", CORE, ids=IDS)
def test_vmap_graph_matches_jax_vmap(spec: Op) -> None:
    """traced.vmap over every argument, and over the first only, equals jax.vmap."""
    rng = np.random.default_rng(3)
    for xs in cases(spec):
        g = traced.trace(spec.ours)(*xs)
        batch = [np.stack([x + 0.01 * k * rng.uniform(size=np.shape(x)) for k in range(3)])
                 for x in xs]
        got = traced.eval_graph(_checked(traced.vmap(g, 3)), *batch)
        close(got, jax.vmap(spec.theirs)(*batch), _tol(spec))
        axes = (0,) + (None,) * (len(xs) - 1)
        mixed = [batch[0], *xs[1:]]
        got = traced.eval_graph(_checked(traced.vmap(g, 3, in_axes=axes)), *mixed)
        close(got, jax.vmap(spec.theirs, in_axes=axes)(*mixed), _tol(spec))


UNARY = [s for s in CORE if s.nargs == 1]


@pytest.mark.parametrize("spec", UNARY, ids=[s.name for s in UNARY])
def test_vmap_of_grad_matches_jax(spec: Op) -> None:
    """Per-example gradients: vmap(grad(g)) equals jax.vmap(jax.grad(f))."""
    rng = np.random.default_rng(4)
    (x,) = cases(spec)[-1]
    w = rng.normal(size=np.shape(spec.theirs(x)))
    g = traced.grad(traced.trace(lambda a: _loss(spec, ad, w, a))(x))
    batch = np.stack([x, x * 0.9 + 0.05, x * 1.1])
    got = traced.eval_graph(_checked(traced.vmap(g, 3)), batch)
    close(got, jax.vmap(jax.grad(lambda a: _loss(spec, jnp, w, a)))(batch), _tol(spec))


# --- the op families: one combined traced check per row -----------------------------------


def _family_cases() -> list[Any]:
    out = []
    for family in ("math", "manip", "scan", "fft", "scipy", "linalg", "coverage"):
        for op in table(family, "traced"):
            dtype = "float64" if "float64" in op.dtypes else op.dtypes[-1]
            buckets = range(len(op.shapes)) if THOROUGH else (0,)
            out += [pytest.param(op, b, dtype, id=f"{op.name}-{b}-{dtype}") for b in buckets]
    return out


@pytest.mark.parametrize(("op", "bucket", "dtype"), _family_cases())
def test_family_op_traced_matches_jax(op: Op, bucket: int, dtype: str) -> None:
    """The traced graph's value and type, and its vjp and jvp graphs, equal JAX's."""
    xs, _ = inputs(op, bucket, dtype)
    rng = np.random.default_rng(zlib.crc32(f"traced/{op.name}/{bucket}".encode()))
    tol = max(op.rtol64, 1e-8)
    with jax.disable_jit():  # JAX op by op, as in tests/ad/_opcheck.oracle
        g = _checked(traced.trace(op.ours)(*xs))
        (aval,) = jax.make_jaxpr(op.theirs)(*xs).out_avals
        (out,) = g.outvars
        assert out.shape == tuple(aval.shape)
        assert out.dtype == np.dtype(aval.dtype)
        close(traced.eval_graph(g, *xs), op.theirs(*xs), tol)
        if THOROUGH:  # the transformed graphs too (dev/CI: the traced value and type only)
            _vjp_jvp(op, xs, rng, tol)
