"""The core primitives of the one op table (``tests/_opspecs.py``, family ``core``) in eager
mode: value, VJP and JVP against ``jax.vjp``/``jax.jvp`` (float64, hypothesis-drawn inputs
over every shape bucket), a finite-difference / dot-product check of our own rules, and
the shared per-dtype first-order and second-order checks of ``tests/ad/_opcheck.py``.

Shapes come from small buckets so JAX's caches hit; examples are capped so the module
stays fast in the ``ci`` profile.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts
from tests._opspecs import Op, table, values
from tests.ad._opcheck import (
    cases,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)


@pytest.fixture(autouse=True)
def _jax_op_by_op() -> Iterator[None]:
    """JAX (the oracle) runs op by op here, as in ``tests/ad/_opcheck.oracle``: no XLA
    compile of each whole oracle function; per-primitive executables are cached."""
    with jax.disable_jit():
        yield


MAX_EXAMPLES = 6
CORE = table("core")


def _case(spec: Op, seed: int, bucket: int) -> tuple[list[np.ndarray], Any]:
    rng = np.random.default_rng(seed)
    shapes = spec.shapes[bucket % len(spec.shapes)]
    return [values(rng, s, spec.domain) for s in shapes], rng


def _close(a: Any, b: Any, tol: float = 1e-9) -> None:
    np.testing.assert_allclose(
        np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=tol, atol=tol
    )


def _tol(spec: Op) -> float:
    return spec.rtol64


ORACLE = table("core", "oracle")


@pytest.mark.parametrize("spec", ORACLE, ids=[s.name for s in ORACLE])
@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), bucket=st.integers(0, 7))
def test_value_vjp_jvp_match_jax(spec: Op, seed: int, bucket: int) -> None:
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


FD_SPECS = table("core", "fd")  # the rows that skip it say why (tests/_opspecs.py)


@pytest.mark.parametrize("spec", FD_SPECS, ids=[s.name for s in FD_SPECS])
def test_dot_product_and_finite_differences(spec: Op) -> None:
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


@pytest.mark.parametrize(("op", "bucket", "dtype"), cases(CORE))
def test_dtypes_and_buckets_match_jax(op: Op, bucket: int, dtype: str) -> None:
    """Value, VJP and JVP per (shape bucket, dtype) agree with JAX and keep the dtype."""
    check_first_order(op, bucket, dtype)


@pytest.mark.parametrize("op", second_cases(CORE))
def test_reverse_over_reverse_matches_jax(op: Op) -> None:
    """The gradient of a directional gradient (second order) agrees with JAX."""
    check_second_order(op, 0)


@pytest.mark.parametrize("op", second_cases(CORE))
def test_forward_over_reverse_matches_jax(op: Op) -> None:
    """jvp of a directional gradient (u^T H v) agrees with JAX."""
    check_forward_over_reverse(op, 0)
