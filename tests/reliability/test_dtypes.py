"""Dtype preservation against JAX: every primitive's output, VJP cotangents and JVP tangent
keep float32, float64, complex64 and complex128 exactly as ``jax.vjp``/``jax.jvp`` do
(including Python-scalar operands, which are weakly typed: ``w ** 2.0`` for float32 ``w``
stays float32).  Case ids read ``<op>-<dtype>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts

DTYPES = ("float32", "float64", "complex64", "complex128")
REAL = ("float32", "float64")


@dataclass(frozen=True)
class Op:
    name: str
    ours: Callable[..., Any]
    theirs: Callable[..., Any]
    shapes: tuple[tuple[int, ...], ...] = ((2, 3),)
    dtypes: tuple[str, ...] = DTYPES
    positive: bool = False


def _binary(name: str, ours: Any, theirs: Any, dtypes: tuple[str, ...] = DTYPES) -> Op:
    return Op(name, ours, theirs, ((2, 3), (3,)), dtypes)


OPS = [
    _binary("add", ad.add, jnp.add),
    _binary("sub", ad.sub, jnp.subtract),
    _binary("mul", ad.mul, jnp.multiply),
    _binary("div", ad.div, jnp.divide),
    _binary("pow", ad.pow, jnp.power),
    _binary("maximum", ad.maximum, jnp.maximum, REAL),
    _binary("minimum", ad.minimum, jnp.minimum, REAL),
    _binary("where", lambda x, y: ad.where(x > y, x, y), lambda x, y: jnp.where(x > y, x, y), REAL),
    Op("neg", ad.neg, jnp.negative),
    Op("exp", ad.exp, jnp.exp),
    Op("log", ad.log, jnp.log, positive=True),
    Op("log1p", ad.log1p, jnp.log1p, positive=True),
    Op("expm1", ad.expm1, jnp.expm1),
    Op("sin", ad.sin, jnp.sin),
    Op("cos", ad.cos, jnp.cos),
    Op("tanh", ad.tanh, jnp.tanh),
    Op("sqrt", ad.sqrt, jnp.sqrt, positive=True),
    Op("abs", ad.abs, jnp.abs),
    Op("sign*x", lambda x: ad.sign(x) * x, lambda x: jnp.sign(x) * x, dtypes=REAL),
    Op("clip", lambda x: ad.clip(x, -0.5, 0.5), lambda x: jnp.clip(x, -0.5, 0.5), dtypes=REAL),
    Op("x**2.0", lambda x: x**2.0, lambda x: x**2.0),
    Op("x**2", lambda x: x**2, lambda x: x**2),
    Op("2.0**x", lambda x: 2.0**x, lambda x: 2.0**x),
    Op("x*2.0", lambda x: x * 2.0, lambda x: x * 2.0),
    Op("1-x", lambda x: 1 - x, lambda x: 1 - x),
    Op("x/3", lambda x: x / 3, lambda x: x / 3),
    Op("1.5/x", lambda x: 1.5 / x, lambda x: 1.5 / x, positive=True),
    Op("stop_gradient", lambda x: ad.stop_gradient(x) * x, lambda x: jax.lax.stop_gradient(x) * x),
    Op("sum", lambda x: ad.sum(x, axis=0), lambda x: jnp.sum(x, axis=0)),
    Op("mean", lambda x: ad.mean(x, axis=-1), lambda x: jnp.mean(x, axis=-1)),
    Op("prod", lambda x: ad.prod(x, axis=1), lambda x: jnp.prod(x, axis=1)),
    Op("max", lambda x: ad.max(x, axis=1), lambda x: jnp.max(x, axis=1), dtypes=REAL),
    Op("min", lambda x: ad.min(x), jnp.min, dtypes=REAL),
    Op("logsumexp", lambda x: ad.logsumexp(x, axis=1), lambda x: jax.nn.logsumexp(x, axis=1),
       dtypes=REAL),
    Op("softmax", lambda x: ad.softmax(x), jax.nn.softmax, dtypes=REAL),
    Op("log_softmax", lambda x: ad.log_softmax(x), jax.nn.log_softmax, dtypes=REAL),
    Op("reshape", lambda x: ad.reshape(x, (3, 2)), lambda x: jnp.reshape(x, (3, 2))),
    Op("transpose", ad.transpose, jnp.transpose),
    Op("swapaxes", lambda x: ad.swapaxes(x, 0, 1), lambda x: jnp.swapaxes(x, 0, 1)),
    Op("expand_dims", lambda x: ad.expand_dims(x, 1), lambda x: jnp.expand_dims(x, 1)),
    Op("broadcast_to", lambda x: ad.broadcast_to(x, (4, 2, 3)),
       lambda x: jnp.broadcast_to(x, (4, 2, 3))),
    Op("slice", lambda x: x[1:, ::2], lambda x: x[1:, ::2]),
    Op("gather", lambda x: x[np.array([1, 0, 1])], lambda x: x[jnp.array([1, 0, 1])]),
    Op("concatenate", lambda x, y: ad.concatenate([x, y]), lambda x, y: jnp.concatenate([x, y]),
       ((2, 3), (1, 3))),
    Op("stack", lambda x, y: ad.stack([x, y], 1), lambda x, y: jnp.stack([x, y], 1),
       ((2, 3), (2, 3))),
    Op("matmul", ad.matmul, jnp.matmul, ((2, 3), (3, 4))),
    Op("einsum", lambda x, y: ad.einsum("ij,jk->ik", x, y),
       lambda x, y: jnp.einsum("ij,jk->ik", x, y), ((2, 3), (3, 4))),
    Op("astype-same", lambda x: ad.astype(x, x.dtype), lambda x: x.astype(x.dtype)),
    Op("conj", ad.conj, jnp.conj),
    Op("real", ad.real, jnp.real),
    Op("imag", ad.imag, jnp.imag),
]

CASES = [(op, dt) for op in OPS for dt in op.dtypes]


def _values(rng: np.random.Generator, shape: tuple[int, ...], dt: str, positive: bool) -> Any:
    x = rng.uniform(0.5, 2.0, shape) if positive else rng.uniform(-2.0, 2.0, shape)
    if dt.startswith("complex"):
        x = x + 1j * rng.uniform(-1.0, 1.0, shape)
    return x.astype(dt)


@pytest.mark.parametrize(("op", "dt"), CASES, ids=[f"{op.name}-{dt}" for op, dt in CASES])
def test_output_gradient_and_tangent_dtypes_match_jax(op: Op, dt: str) -> None:
    """Output, every VJP cotangent and the JVP tangent have JAX's dtype."""
    rng = np.random.default_rng(0)
    xs = [_values(rng, s, dt, op.positive) for s in op.shapes]
    with np.errstate(all="ignore"):
        ref, pullback = jax.vjp(op.theirs, *[jnp.asarray(x) for x in xs])
        ref_cts = pullback(jnp.ones_like(ref))
        _, ref_t = jax.jvp(
            op.theirs, tuple(jnp.asarray(x) for x in xs), tuple(jnp.ones_like(x) for x in xs)
        )
        out, vjp_fn = ad.vjp(op.ours, *[ts.from_numpy(x) for x in xs])
        out_dt = str(out.dtype)
        cts = vjp_fn(np.ones(out.shape, dtype=str(ref.dtype)))
        vjp_fn.release()
        ct_dts = [str(c.dtype) for c in cts]
        del out, cts
        value, tangent = ad.jvp(
            op.ours, [ts.from_numpy(x) for x in xs], [ts.from_numpy(np.ones_like(x)) for x in xs]
        )
        t_dt = str(tangent.dtype)
        del value, tangent
    assert out_dt == str(ref.dtype), f"{op.name}-{dt}: output {out_dt}, JAX {ref.dtype}"
    assert ct_dts == [str(c.dtype) for c in ref_cts], (
        f"{op.name}-{dt}: cotangents {ct_dts}, JAX {[str(c.dtype) for c in ref_cts]}"
    )
    assert t_dt == str(ref_t.dtype), f"{op.name}-{dt}: tangent {t_dt}, JAX {ref_t.dtype}"


@pytest.mark.parametrize("dt", REAL)
def test_a_float32_training_step_stays_float32(dt: str) -> None:
    """The issue's example: grad of ``sum(w ** 2.0)`` (and a small MLP loss) keeps w's dtype."""
    w = ts.from_numpy(np.array([1.0, -2.0, 3.0], dtype=dt))
    g = ad.grad(lambda w: ad.sum(w**2.0))(w)
    assert str(g.dtype) == dt
    x = ts.from_numpy(np.ones((4, 3), dtype=dt))
    g2 = ad.grad(lambda w, x: ad.mean(ad.tanh(x @ w) ** 2 + 0.5 * ad.logsumexp(x * w)))(w, x)
    assert str(g2.dtype) == dt
    del g, g2
