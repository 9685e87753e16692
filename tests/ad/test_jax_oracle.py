"""Every primitive's value, VJP and JVP against ``jax.vjp``/``jax.jvp`` (float64), driven by
one op-spec table, plus a finite-difference / dot-product check of our own rules.

Shapes come from small buckets so JAX's caches hit; examples are capped so the module
stays fast in the ``ci`` profile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts


@pytest.fixture(autouse=True)
def _jax_op_by_op() -> Iterator[None]:
    """JAX (the oracle) runs op by op here, as in ``tests/ad/_opcheck.oracle``: no XLA
    compile of each whole oracle function; per-primitive executables are cached."""
    with jax.disable_jit():
        yield


UNARY_SHAPES = [(), (3,), (2, 3), (2, 1, 3)]
BINARY_SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((3,), ())]
MAX_EXAMPLES = 6


@dataclass(frozen=True)
class OpSpec:
    name: str
    ours: Callable[..., Any]
    theirs: Callable[..., Any]
    nargs: int = 1
    domain: str = "any"  # any | positive | away (|x| >= 0.3)
    shapes: str = "unary"  # unary | binary | matrix | reduce | custom
    custom_shapes: tuple[tuple[tuple[int, ...], ...], ...] = ()


def _r(axis: Any = None, keepdims: bool = False) -> dict[str, Any]:
    return {"axis": axis, "keepdims": keepdims}


SPECS = [
    OpSpec("add", ad.add, jnp.add, 2, shapes="binary"),
    OpSpec("sub", ad.sub, jnp.subtract, 2, shapes="binary"),
    OpSpec("mul", ad.mul, jnp.multiply, 2, shapes="binary"),
    OpSpec("div", ad.div, jnp.divide, 2, "away", shapes="binary"),
    OpSpec("pow", ad.pow, jnp.power, 2, "positive", shapes="binary"),
    OpSpec("maximum", ad.maximum, jnp.maximum, 2, shapes="binary"),
    OpSpec("minimum", ad.minimum, jnp.minimum, 2, shapes="binary"),
    OpSpec("neg", ad.neg, jnp.negative),
    OpSpec("exp", ad.exp, jnp.exp),
    OpSpec("log", ad.log, jnp.log, domain="positive"),
    OpSpec("log1p", ad.log1p, jnp.log1p, domain="positive"),
    OpSpec("expm1", ad.expm1, jnp.expm1),
    OpSpec("sin", ad.sin, jnp.sin),
    OpSpec("cos", ad.cos, jnp.cos),
    OpSpec("tanh", ad.tanh, jnp.tanh),
    OpSpec("sqrt", ad.sqrt, jnp.sqrt, domain="positive"),
    OpSpec("abs", ad.abs, jnp.abs, domain="away"),
    OpSpec("sign*x", lambda x: ad.sign(x) * x, lambda x: jnp.sign(x) * x, domain="away"),
    OpSpec(
        "clip", lambda x: ad.clip(x, -0.5, 0.7), lambda x: jnp.clip(x, -0.5, 0.7), domain="away"
    ),
    OpSpec(
        "where",
        lambda x, y: ad.where(x > 0.1, x, y),
        lambda x, y: jnp.where(x > 0.1, x, y),
        2,
        shapes="binary",
    ),
    OpSpec(
        "stop_gradient", lambda x: ad.stop_gradient(x) * x, lambda x: jax.lax.stop_gradient(x) * x
    ),
    OpSpec("astype", lambda x: ad.astype(x, "float32"), lambda x: x.astype(jnp.float32)),
    OpSpec("sum", lambda x: ad.sum(x), jnp.sum),
    OpSpec(
        "sum_axis",
        lambda x: ad.sum(x, axis=-1, keepdims=True),
        lambda x: jnp.sum(x, axis=-1, keepdims=True),
        shapes="reduce",
    ),
    OpSpec("mean", lambda x: ad.mean(x, axis=0), lambda x: jnp.mean(x, axis=0), shapes="reduce"),
    OpSpec("max", lambda x: ad.max(x, axis=-1), lambda x: jnp.max(x, axis=-1), shapes="reduce"),
    OpSpec("min", lambda x: ad.min(x), jnp.min, shapes="reduce"),
    OpSpec(
        "prod", lambda x: ad.prod(x, axis=0), lambda x: jnp.prod(x, axis=0), "away", shapes="reduce"
    ),
    OpSpec("reshape", lambda x: ad.reshape(x, (-1,)), lambda x: jnp.reshape(x, (-1,))),
    OpSpec("transpose", lambda x: ad.transpose(x), lambda x: jnp.transpose(x)),
    OpSpec(
        "transpose_reshape",
        lambda x: ad.reshape(x.T, (-1,)),
        lambda x: jnp.reshape(x.T, (-1,)),
        shapes="reduce",
    ),
    OpSpec(
        "broadcast_to",
        lambda x: ad.broadcast_to(x, (2, 2, 3)),
        lambda x: jnp.broadcast_to(x, (2, 2, 3)),
        shapes="custom",
        custom_shapes=(((2, 3),), ((1, 3),)),
    ),
    OpSpec(
        "slice",
        lambda x: x[1:, ::2],
        lambda x: x[1:, ::2],
        shapes="custom",
        custom_shapes=(((3, 4),), ((2, 5),)),
    ),
    OpSpec(
        "int_index", lambda x: x[1], lambda x: x[1], shapes="custom", custom_shapes=(((3, 4),),)
    ),
    OpSpec(
        "gather",
        lambda x: x[np.array([0, 2, 0])],
        lambda x: x[jnp.array([0, 2, 0])],
        shapes="custom",
        custom_shapes=(((3, 4),), ((3,),)),
    ),
    OpSpec(
        "concatenate",
        lambda x, y: ad.concatenate([x, y, x], axis=0),
        lambda x, y: jnp.concatenate([x, y, x], axis=0),
        2,
        shapes="custom",
        custom_shapes=(((2, 3), (1, 3)), ((1,), (4,))),
    ),
    OpSpec(
        "stack",
        lambda x, y: ad.stack([x, y], axis=1),
        lambda x, y: jnp.stack([x, y], axis=1),
        2,
        shapes="custom",
        custom_shapes=(((2, 3), (2, 3)),),
    ),
    OpSpec(
        "matmul",
        ad.matmul,
        jnp.matmul,
        2,
        shapes="custom",
        custom_shapes=(
            ((2, 3), (3, 4)),
            ((3,), (3, 2)),
            ((2, 3), (3,)),
            ((3,), (3,)),
            ((2, 2, 3), (3, 2)),
        ),
    ),
    OpSpec(
        "logsumexp",
        lambda x: ad.logsumexp(x, axis=-1),
        lambda x: jax.nn.logsumexp(x, axis=-1),
        shapes="reduce",
    ),
    OpSpec(
        "softmax",
        lambda x: ad.softmax(x, axis=-1),
        lambda x: jax.nn.softmax(x, axis=-1),
        shapes="reduce",
    ),
]


def _shapes_for(spec: OpSpec) -> list[tuple[tuple[int, ...], ...]]:
    if spec.shapes == "unary":
        return [(s,) for s in UNARY_SHAPES]
    if spec.shapes == "binary":
        return list(BINARY_SHAPES)
    if spec.shapes == "reduce":
        return [((2, 3),), ((3, 1),), ((2, 2, 3),)]
    return list(spec.custom_shapes)


def _values(rng: np.random.Generator, shape: tuple[int, ...], domain: str) -> np.ndarray:
    if domain == "positive":
        return rng.uniform(0.5, 2.0, shape)
    x = rng.uniform(-2.0, 2.0, shape)
    if domain == "away":
        x = np.where(np.abs(x) < 0.3, 0.3 * np.sign(x + 1e-12) + x, x)
    return np.asarray(x)


def _case(spec: OpSpec, seed: int, bucket: int) -> tuple[list[np.ndarray], Any]:
    rng = np.random.default_rng(seed)
    shapes = _shapes_for(spec)[bucket % len(_shapes_for(spec))]
    return [_values(rng, s, spec.domain) for s in shapes], rng


def _close(a: Any, b: Any, tol: float = 1e-9) -> None:
    np.testing.assert_allclose(
        np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=tol, atol=tol
    )


def _tol(spec: OpSpec) -> float:
    return 1e-6 if spec.name == "astype" else 1e-9


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bucket=st.integers(0, 7))
def test_value_vjp_jvp_match_jax(spec: OpSpec, seed: int, bucket: int) -> None:
    """Value, VJP (random cotangent) and JVP (random tangent) agree with JAX in float64."""
    xs, rng = _case(spec, seed, bucket)
    with np.errstate(all="ignore"):
        ref_out, ref_vjp = jax.vjp(spec.theirs, *[jnp.asarray(x) for x in xs])
        ct = rng.normal(size=np.shape(ref_out)).astype(np.asarray(ref_out).dtype)
        ref_cts = ref_vjp(jnp.asarray(ct))
        tans = [rng.normal(size=x.shape) for x in xs]
        _, ref_tan = jax.jvp(
            spec.theirs, tuple(jnp.asarray(x) for x in xs), tuple(jnp.asarray(t) for t in tans)
        )
    owners = [ts.from_numpy(x) for x in xs]
    out, vjp_fn = ad.vjp(spec.ours, *owners)
    _close(out.to_numpy(), ref_out, _tol(spec))
    cts = vjp_fn(ts.from_numpy(ct))
    vjp_fn.release()
    for ours, theirs in zip(cts, ref_cts, strict=True):
        _close(ours.to_numpy(), theirs, _tol(spec))
    del out, cts
    value, tangent = ad.jvp(spec.ours, owners, [ts.from_numpy(t) for t in tans])
    _close(value.to_numpy(), ref_out, _tol(spec))
    _close(tangent.to_numpy(), ref_tan, _tol(spec))


FD_SPECS = [
    s
    for s in SPECS
    if s.name
    not in {
        "astype",
        "clip",
        "maximum",
        "minimum",
        "where",
        "max",
        "min",
        "sign*x",
        "abs",
        "stop_gradient",
    }
]


@pytest.mark.parametrize("spec", FD_SPECS, ids=[s.name for s in FD_SPECS])
def test_dot_product_and_finite_differences(spec: OpSpec) -> None:
    """<ct, J t> from our JVP equals <J^T ct, t> from our VJP, and J t matches central
    finite differences of our own primal."""
    xs, rng = _case(spec, 1234, 0)
    tans = [rng.normal(size=x.shape) for x in xs]
    owners = [ts.from_numpy(x) for x in xs]
    value, jt = ad.jvp(spec.ours, owners, [ts.from_numpy(t) for t in tans])
    ct = rng.normal(size=value.shape)
    out, vjp_fn = ad.vjp(spec.ours, *owners)
    cts = vjp_fn(ts.from_numpy(ct))
    vjp_fn.release()
    lhs = float(np.sum(ct * jt.to_numpy()))
    rhs = float(sum(np.sum(c.to_numpy() * t) for c, t in zip(cts, tans, strict=True)))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)
    eps = 1e-6

    def primal(shift: float) -> np.ndarray:
        args = [ts.from_numpy(x + shift * t) for x, t in zip(xs, tans, strict=True)]
        o, _ = ad.jvp(spec.ours, args, [ts.zeros(x.shape) for x in xs])
        return o.to_numpy()

    fd = (primal(eps) - primal(-eps)) / (2 * eps)
    np.testing.assert_allclose(jt.to_numpy(), fd, rtol=1e-5, atol=1e-6)
    del out, cts, value, jt
