"""One op-spec table for the traced suites: each entry is the same function written once
against a namespace ``m`` (``tenferro_ad`` or ``jax.numpy``), with the argument shapes and
value domain to test it on.  Shapes are small so JAX's caches hit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import tenferro_ad as ad

Arr = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Spec:
    name: str
    fn: Callable[..., Any]  # fn(m, *args)
    shapes: tuple[tuple[tuple[int, ...], ...], ...]
    domain: str = "any"  # any | positive | away (|x| >= 0.3)
    smooth: bool = True  # differentiable at the sampled points (no ties, no kinks)


def is_ad(m: Any) -> bool:
    return m is ad


def _lse(m: Any, x: Any) -> Any:
    return ad.logsumexp(x, axis=-1) if is_ad(m) else jax.nn.logsumexp(x, axis=-1)


def _softmax(m: Any, x: Any) -> Any:
    return ad.softmax(x, axis=-1) if is_ad(m) else jax.nn.softmax(x, axis=-1)


def _stop(m: Any, x: Any) -> Any:
    return ad.stop_gradient(x) if is_ad(m) else jax.lax.stop_gradient(x)


U = (((),), ((3,),), ((2, 3),), ((2, 1, 3),))
B = (((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)))
R = (((2, 3),), ((3, 1),), ((2, 2, 3),))

SPECS = [
    Spec("add", lambda m, x, y: m.add(x, y), B),
    Spec("sub", lambda m, x, y: m.subtract(x, y) if not is_ad(m) else m.sub(x, y), B),
    Spec("mul", lambda m, x, y: x * y, B),
    Spec("div", lambda m, x, y: x / y, B, "away"),
    Spec("pow", lambda m, x, y: x ** y, B, "positive"),
    Spec("maximum", lambda m, x, y: m.maximum(x, y), B),
    Spec("minimum", lambda m, x, y: m.minimum(x, y), B),
    Spec("neg", lambda m, x: -x, U),
    Spec("exp", lambda m, x: m.exp(x), U),
    Spec("log", lambda m, x: m.log(x), U, "positive"),
    Spec("log1p", lambda m, x: m.log1p(x), U, "positive"),
    Spec("expm1", lambda m, x: m.expm1(x), U),
    Spec("sin", lambda m, x: m.sin(x), U),
    Spec("cos", lambda m, x: m.cos(x), U),
    Spec("tanh", lambda m, x: m.tanh(x), U),
    Spec("sqrt", lambda m, x: m.sqrt(x), U, "positive"),
    Spec("abs", lambda m, x: m.abs(x), U, "away"),
    Spec("sign_x", lambda m, x: m.sign(x) * x, U, "away"),
    Spec("clip", lambda m, x: m.clip(x, -0.5, 0.7), U, "away"),
    Spec("where", lambda m, x, y: m.where(x > 0.1, x, y), B),
    Spec("stop_gradient", lambda m, x: _stop(m, x) * x, U),
    Spec("sum", lambda m, x: m.sum(x), R),
    Spec("sum_axis", lambda m, x: m.sum(x, axis=-1, keepdims=True), R),
    Spec("mean", lambda m, x: m.mean(x, axis=0), R),
    Spec("max", lambda m, x: m.max(x, axis=-1), R),
    Spec("min", lambda m, x: m.min(x), R),
    Spec("prod", lambda m, x: m.prod(x, axis=0), R, "away"),
    Spec("reshape", lambda m, x: m.reshape(x, (-1,)), U),
    Spec("transpose", lambda m, x: m.transpose(x), U),
    Spec("transpose_reshape", lambda m, x: m.reshape(x.T, (-1,)), R),
    Spec("broadcast_to", lambda m, x: m.broadcast_to(x, (2, 2, 3)), (((2, 3),), ((1, 3),))),
    Spec("slice", lambda m, x: x[1:, ::2], (((3, 4),), ((2, 5),))),
    Spec("int_index", lambda m, x: x[1], (((3, 4),),)),
    Spec("gather", lambda m, x: x[np.array([0, 2, 0])], (((3, 4),), ((3,),))),
    Spec(
        "concatenate",
        lambda m, x, y: m.concatenate([x, y, x], axis=0),
        (((2, 3), (1, 3)), ((1,), (4,))),
    ),
    Spec("stack", lambda m, x, y: m.stack([x, y], axis=1), (((2, 3), (2, 3)),)),
    Spec(
        "matmul",
        lambda m, x, y: x @ y,
        (((2, 3), (3, 4)), ((3,), (3, 2)), ((2, 3), (3,)), ((3,), (3,)), ((2, 2, 3), (3, 2))),
    ),
    Spec("einsum", lambda m, x, y: m.einsum("ij,jk->ik", x, y), (((2, 3), (3, 4)),)),
    Spec("logsumexp", _lse, R),
    Spec("softmax", _softmax, R),
]
NONSMOOTH = {"maximum", "minimum", "abs", "sign_x", "clip", "where", "max", "min"}


def values(rng: np.random.Generator, shape: tuple[int, ...], domain: str) -> Arr:
    if domain == "positive":
        return rng.uniform(0.5, 2.0, shape)
    x = rng.uniform(-2.0, 2.0, shape)
    if domain == "away":
        x = np.where(np.abs(x) < 0.3, 0.3 * np.sign(x + 1e-12) + x, x)
    return np.asarray(x)


def cases(spec: Spec, seed: int = 0) -> list[list[Arr]]:
    """One argument list per shape bucket of ``spec``."""
    rng = np.random.default_rng(seed)
    return [[values(rng, s, spec.domain) for s in shapes] for shapes in spec.shapes]


def ours(spec: Spec) -> Callable[..., Any]:
    return lambda *a: spec.fn(ad, *a)


def theirs(spec: Spec) -> Callable[..., Any]:
    return lambda *a: spec.fn(jnp, *a)


def close(got: Any, want: Any, tol: float = 1e-9) -> None:
    got, want = (x.to_numpy() if hasattr(x, "to_numpy") else x for x in (got, want))
    np.testing.assert_allclose(
        np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64), rtol=tol, atol=tol
    )
