"""Edge-point numerics against JAX: every primitive's value, VJP and JVP at 0, -0, +-inf, NaN,
ties and singular points, as one parametrized table.

Each case id reads as a table row, ``<op>-<inputs>-<mode>`` (``prod-[0,2,3]-vjp``): the
value and the cotangent (seed: ones) or tangent (ones) must equal ``jax.vjp``/``jax.jvp``
elementwise, NaN where JAX has NaN, the same infinities, and agree to 1e-12 elsewhere.
Binary ops run on the full grid of edge values at once (a failure names the pairs).
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

INF, NAN = float("inf"), float("nan")
UNARY_POINTS = (0.0, -0.0, INF, -INF, NAN, 1.0, -1.0)
GRID = (0.0, INF, -INF, NAN, 1.0, -2.0, 0.5)


@dataclass(frozen=True)
class Edge:
    """One table row: an op at given inputs (tuples of floats, one per argument)."""

    op: str
    ours: Callable[..., Any]
    theirs: Callable[..., Any]
    inputs: tuple[tuple[float, ...], ...]
    label: str = ""

    @property
    def id(self) -> str:
        if self.label:
            return f"{self.op}-{self.label}"
        return f"{self.op}-" + ",".join(
            "[" + ",".join(_fmt(v) for v in xs) + "]" for xs in self.inputs
        )


def _fmt(v: float) -> str:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "-0" if np.signbit(v) else "0"
    return f"{v:g}"


UNARY: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("neg", ad.neg, jnp.negative),
    ("exp", ad.exp, jnp.exp),
    ("log", ad.log, jnp.log),
    ("log1p", ad.log1p, jnp.log1p),
    ("expm1", ad.expm1, jnp.expm1),
    ("sin", ad.sin, jnp.sin),
    ("cos", ad.cos, jnp.cos),
    ("tanh", ad.tanh, jnp.tanh),
    ("sqrt", ad.sqrt, jnp.sqrt),
    ("abs", ad.abs, jnp.abs),
    ("sign", ad.sign, jnp.sign),
    ("square", lambda x: x * x, lambda x: x * x),
    ("pow2.0", lambda x: x**2.0, lambda x: x**2.0),
    ("pow0.5", lambda x: ad.pow(x, 0.5), lambda x: jnp.power(x, 0.5)),
    ("pow0", lambda x: ad.pow(x, 0.0), lambda x: jnp.power(x, 0.0)),
    ("rpow-2", lambda y: ad.pow(-2.0, y), lambda y: jnp.power(-2.0, y)),
    ("rpow0", lambda y: ad.pow(0.0, y), lambda y: jnp.power(0.0, y)),
    ("stop_gradient", lambda x: ad.stop_gradient(x) * x, lambda x: jax.lax.stop_gradient(x) * x),
    ("clip", lambda x: ad.clip(x, -1.0, 1.0), lambda x: jnp.clip(x, -1.0, 1.0)),
]

BINARY: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
    ("add", ad.add, jnp.add),
    ("sub", ad.sub, jnp.subtract),
    ("mul", ad.mul, jnp.multiply),
    ("div", ad.div, jnp.divide),
    ("pow", ad.pow, jnp.power),
    ("maximum", ad.maximum, jnp.maximum),
    ("minimum", ad.minimum, jnp.minimum),
    ("where", lambda x, y: ad.where(x > y, x, y), lambda x, y: jnp.where(x > y, x, y)),
]


def _norm(x: Any) -> Any:
    return ad.sqrt(ad.sum(x * x))


REDUCE_POINTS = {
    "prod": [(0, 2, 3), (0, 0, 3), (2, 3, 4), (0, 0, 0), (INF, 0, 1), (NAN, 0, 2), (-0.0, 5, 1)],
    "max": [(1, 3, 3), (3, 3, 3), (NAN, 1, 2), (INF, INF, 0), (-INF, -INF, -INF)],
    "min": [(1, 1, 3), (2, 2, 2), (NAN, 1, 2), (-INF, -INF, 0)],
    "sum": [(INF, 1, 2), (INF, -INF, 0), (NAN, 0, 0)],
    "mean": [(INF, 1, 2), (0, 0, 0), (NAN, 1, 1)],
    "logsumexp": [(INF, 0), (-INF, -INF), (INF, INF), (NAN, 0), (1000, 1000), (-1000, 0)],
    "softmax": [(1000, 0), (1000, 1000), (-INF, 0), (INF, 0), (NAN, 0), (0, 0)],
    "log_softmax": [(1000, 0), (-INF, 0), (INF, 0), (0, 0), (-1000, 1000)],
    "norm": [(0, 0, 0), (3, 4, 0), (INF, 1, 0), (1e-200, 0, 0)],
}
REDUCE_OPS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "prod": (ad.prod, jnp.prod),
    "max": (ad.max, jnp.max),
    "min": (ad.min, jnp.min),
    "sum": (ad.sum, jnp.sum),
    "mean": (ad.mean, jnp.mean),
    "logsumexp": (ad.logsumexp, jax.nn.logsumexp),
    "softmax": (ad.softmax, jax.nn.softmax),
    "log_softmax": (ad.log_softmax, jax.nn.log_softmax),
    "norm": (_norm, jnp.linalg.norm),
}

CASES: list[Edge] = []
for _name, _ours, _theirs in UNARY:
    for _v in UNARY_POINTS:
        CASES.append(Edge(_name, _ours, _theirs, ((_v,),)))
_gx, _gy = (tuple(float(v) for v in a.ravel()) for a in np.meshgrid(GRID, GRID, indexing="ij"))
for _name, _ours, _theirs in BINARY:
    CASES.append(Edge(_name, _ours, _theirs, (_gx, _gy), label="grid[0,inf,-inf,nan,1,-2,0.5]^2"))
for _name, _pts in REDUCE_POINTS.items():
    for _p in _pts:
        CASES.append(Edge(_name, *REDUCE_OPS[_name], (tuple(float(v) for v in _p),)))
CASES += [
    Edge("matmul", ad.matmul, jnp.matmul, ((0, 0, 0, 0), (1, 2, 3, 4)), label="zeros@x"),
    Edge("matmul", ad.matmul, jnp.matmul, ((1, 2, 2, 4), (INF, 0, 1, 1)), label="singular@inf"),
    Edge(
        "concatenate",
        lambda x, y: ad.concatenate([x, y, x]),
        lambda x, y: jnp.concatenate([x, y, x]),
        ((INF, NAN), (0.0, -0.0)),
    ),
]


def _args(case: Edge) -> list[np.ndarray[Any, Any]]:
    arrs = [np.array(xs, dtype=np.float64) for xs in case.inputs]
    if case.op == "matmul":
        arrs = [a.reshape(2, 2) for a in arrs]
    return arrs


def _same(what: str, case: Edge, ours: Any, theirs: Any) -> None:
    o = np.asarray(ours, dtype=np.float64)
    t = np.asarray(theirs, dtype=np.float64)
    assert o.shape == t.shape, f"{case.id}: {what} shape {o.shape}, JAX {t.shape}"
    bad = ~(
        (np.isnan(o) & np.isnan(t))
        | (o == t)
        | (np.isfinite(o) & np.isfinite(t) & np.isclose(o, t, rtol=1e-12, atol=1e-300))
    )
    if bad.any():
        where = [tuple(float(a.ravel()[i]) for a in _args(case)) for i in np.flatnonzero(bad)]
        raise AssertionError(
            f"{case.id}: {what} differs from JAX at inputs {where[:8]}: ours "
            f"{o.ravel()[bad.ravel()][:8]}, JAX {t.ravel()[bad.ravel()][:8]}"
        )


@pytest.mark.parametrize("mode", ["vjp", "jvp"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_edge_point_matches_jax(case: Edge, mode: str) -> None:
    """Value and derivative at an edge point equal JAX's (NaN for NaN, same infinities)."""
    xs = _args(case)
    with np.errstate(all="ignore"):
        if mode == "vjp":
            ref, pullback = jax.vjp(case.theirs, *[jnp.asarray(x) for x in xs])
            ref_d = pullback(jnp.ones_like(ref))
        else:
            ref, ref_t = jax.jvp(
                case.theirs,
                tuple(jnp.asarray(x) for x in xs),
                tuple(jnp.ones_like(jnp.asarray(x)) for x in xs),
            )
            ref_d = (ref_t,)
        owners = [ts.from_numpy(x) for x in xs]
        if mode == "vjp":
            out, vjp_fn = ad.vjp(case.ours, *owners)
            value = out.to_numpy()
            cts = vjp_fn(np.ones(value.shape))
            vjp_fn.release()
            ours_d = [c.to_numpy() for c in cts]
            del out, cts
        else:
            v, t = ad.jvp(case.ours, owners, [ts.ones(x.shape) for x in xs])
            value, ours_d = v.to_numpy(), [t.to_numpy()]
            del v, t
    _same("value", case, value, ref)
    for i, (o, r) in enumerate(zip(ours_d, ref_d, strict=True)):
        _same(f"{mode} (argument {i})", case, o, r)
