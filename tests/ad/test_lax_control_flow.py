"""``tenferro_ad.lax`` (scan, fori_loop, while_loop, cond, switch) against ``jax.lax``.

Each construct is one small program written once against a namespace (ours or JAX's),
with pytree carries, and run x {eager, jit on the host engine, jit on the XLA engine,
grad (eager and jitted), jvp (eager and jitted), vmap, a checkpointed body} x {float32,
float64} x {zero-length, one-step, three-step loops}.  The JAX oracle runs op by op
(``jax.disable_jit``), so the module stays fast.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
from tenferro_ad import lax
from tenferro_ad._control import _scan, _while
from tenferro_ad.errors import ArgumentTypeError, ReverseModeError
from tests.ad._oracle import to_np

OURS = SimpleNamespace(tanh=ad.tanh, sin=ad.sin, cos=ad.cos, sum=ad.sum, where=ad.where,
                       lax=lax, checkpoint=ad.checkpoint)
JAX = SimpleNamespace(tanh=jnp.tanh, sin=jnp.sin, cos=jnp.cos, sum=jnp.sum, where=jnp.where,
                      lax=jax.lax, checkpoint=jax.checkpoint)


def _dt(a: Any) -> np.dtype[Any]:
    return np.dtype(getattr(a.dtype, "numpy", a.dtype))


def p_scan(M: Any, w: Any, x: Any, T: int, ck: bool) -> Any:
    xs = (np.arange(T * 3).reshape(T, 3) / 7.0).astype(_dt(w))

    def step(c: Any, xt: Any) -> Any:
        h = M.tanh(c["h"] * w + xt)
        return {"h": h, "s": c["s"] + M.sum(h)}, (h * 2.0, M.sin(h))

    body = M.checkpoint(step) if ck else step
    c, (y1, y2) = M.lax.scan(body, {"h": x, "s": M.sum(x) * 0.0}, xs)
    return M.sum(c["h"]) + c["s"] * 0.5 + M.sum(y1 * y2)


def p_scan_reverse(M: Any, w: Any, x: Any, T: int, ck: bool) -> Any:
    xs = (np.arange(T * 3).reshape(T, 3) / 5.0).astype(_dt(w))

    def step(c: Any, xt: Any) -> Any:
        c = M.sin(c * w) + xt
        return c, c * xt

    c, ys = M.lax.scan(M.checkpoint(step) if ck else step, x, xs, reverse=True)
    return M.sum(c) + M.sum(ys * np.linspace(1, 2, max(T, 1))[:T, None].astype(_dt(w)))


def p_fori(M: Any, w: Any, x: Any, T: int, ck: bool) -> Any:
    def body(i: Any, c: Any) -> Any:
        a, b = c
        return (M.tanh(a * w + b), b * 0.9 + a * 0.1)

    a, b = M.lax.fori_loop(0, T, M.checkpoint(body) if ck else body, (x, x * 0.5))
    return M.sum(a) + M.sum(b * b)


def p_while(M: Any, w: Any, x: Any, T: int, ck: bool) -> Any:
    def cond(s: Any) -> Any:
        return M.sum(s[1] * s[1]) < 4.0 + T

    def body(s: Any) -> Any:
        return (s[0] + 1, s[1] * 1.3 + w * 0.05)

    _, h = M.lax.while_loop(cond, body, (0, x))
    return M.sum(h * h)


def p_cond(M: Any, w: Any, x: Any, T: int, ck: bool) -> Any:
    a, b = M.lax.cond(M.sum(x) > 0.0, lambda a, b: (M.sin(a) * b, a),
                      lambda a, b: (M.cos(a) + b, b * 2.0), x, w)
    return M.sum(a) + M.sum(b * b)


def p_switch(M: Any, w: Any, x: Any, T: int, ck: bool) -> Any:
    k = M.where(M.sum(x) > 0.0, T % 3, (T + 1) % 3)
    out = M.lax.switch(k, [lambda a: M.sin(a) * w, lambda a: M.cos(a) * w, lambda a: a * a * w],
                       x)
    return M.sum(out)


PROGRAMS: dict[str, Callable[..., Any]] = {
    "scan": p_scan, "scan_reverse": p_scan_reverse, "fori_loop": p_fori,
    "while_loop": p_while, "cond": p_cond, "switch": p_switch,
}
REVERSE = {"scan", "scan_reverse", "fori_loop", "cond", "switch"}


def _inputs(dtype: Any, sign: float = 1.0) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 1.0, 3).astype(dtype)
    x = (sign * rng.uniform(0.2, 0.6, 3)).astype(dtype)
    return w, x


def _oracle(fn: Callable[..., Any], *args: Any, jit: bool = False) -> Any:
    """JAX's value, op by op (``jit=True``: compiled, which a zero-length scan needs)."""
    if jit:
        return jax.tree_util.tree_map(np.asarray, jax.jit(fn)(*args))
    with jax.disable_jit():
        return jax.tree_util.tree_map(np.asarray, fn(*args))


def _close(got: Any, want: Any, dtype: Any) -> None:
    tol = 2e-5 if dtype == np.float32 else 1e-10
    got_l, want_l = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l, strict=True):
        g = to_np(g)
        assert g.dtype == np.asarray(w).dtype or g.dtype.kind != "f"
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


MODES = ("eager", "jit_host", "jit_xla", "grad", "grad_jit", "jvp", "jvp_jit", "vmap")
CASES = [
    pytest.param(name, mode, T, ck, dt,
                 id=f"{name}-{mode}-T{T}{'-ckpt' if ck else ''}-{dt.__name__}")
    for name in PROGRAMS
    for mode in MODES
    for T in ((0, 1, 3) if name in ("scan", "fori_loop") else (3,))
    for ck in ((False, True) if name in ("scan", "scan_reverse", "fori_loop") else (False,))
    for dt in (np.float32, np.float64)
    if not (mode.startswith("grad") and name not in REVERSE)
]


@pytest.mark.parametrize(("name", "mode", "T", "ck", "dtype"), CASES)
def test_construct_matches_jax(name: str, mode: str, T: int, ck: bool, dtype: Any) -> None:
    prog = PROGRAMS[name]

    def ours(w: Any, x: Any) -> Any:
        return prog(OURS, w, x, T, ck)

    def theirs(w: Any, x: Any) -> Any:
        return prog(JAX, w, x, T, ck)

    w, x = _inputs(dtype)
    oracle = functools.partial(_oracle, jit=T == 0)
    if mode in ("eager", "jit_host", "jit_xla"):
        fn = ours if mode == "eager" else ad.jit(ours, engine=mode[4:])
        _close(fn(w, x), oracle(theirs, w, x), dtype)
    elif mode.startswith("grad"):
        g = ad.grad(ours, argnums=(0, 1))
        fn = ad.jit(g, engine="xla") if mode == "grad_jit" else g
        _close(fn(w, x), oracle(jax.grad(theirs, argnums=(0, 1)), w, x), dtype)
    elif mode.startswith("jvp"):
        tw, tx = np.full(3, 0.3, dtype), np.linspace(-1, 1, 3).astype(dtype)

        def fj(w: Any, x: Any, tw: Any, tx: Any) -> Any:
            return ad.jvp(ours, (w, x), (tw, tx))

        fn = ad.jit(fj, engine="host") if mode == "jvp_jit" else fj
        want = oracle(lambda *a: jax.jvp(theirs, a[:2], a[2:]), w, x, tw, tx)
        _close(fn(w, x, tw, tx), want, dtype)
    else:  # vmap over x (and so over every predicate that reads it)
        xb = np.stack([x, -x, 2 * x]).astype(dtype)
        got = ad.vmap(ours, in_axes=(None, 0))(w, xb)
        _close(got, oracle(jax.vmap(theirs, in_axes=(None, 0)), w, xb), dtype)


@pytest.mark.parametrize("engine", ["host", "xla"])
def test_vmap_inside_jit_batches_predicates(engine: str) -> None:
    w, x = _inputs(np.float64)
    xb = np.stack([x, -x, 3 * x])
    for name in ("while_loop", "cond", "switch"):
        prog = PROGRAMS[name]
        got = ad.jit(ad.vmap(lambda w, x, p=prog: p(OURS, w, x, 2, False), in_axes=(None, 0)),
                     engine=engine)(w, xb)
        want = _oracle(jax.vmap(lambda w, x, p=prog: p(JAX, w, x, 2, False),
                                in_axes=(None, 0)), w, xb)
        _close(got, want, np.float64)


def test_traced_loop_is_one_equation_with_its_body_printed() -> None:
    w, x = _inputs(np.float64)
    for T in (3, 300):
        graph = ad.traced.trace(lambda w, x, T=T: p_scan(OURS, w, x, T, False))(w, x)
        scans = [e for e in graph.eqns if e.prim.name == "scan"]
        assert len(scans) == 1 and len(graph.eqns) < 40  # never unrolled
    text = str(graph)
    assert "scan[" in text and "body = { lambda" in text and "tanh" in text
    text = str(ad.traced.trace(lambda w, x: p_cond(OURS, w, x, 1, False))(w, x))
    assert "branches[0] = { lambda" in text and "branches[1] = { lambda" in text
    text = str(ad.traced.trace(lambda w, x: p_while(OURS, w, x, 1, False))(w, x))
    assert "cond = { lambda" in text and "body = { lambda" in text


def test_while_loop_refuses_reverse_mode_eager_and_traced() -> None:
    w, x = _inputs(np.float64)

    def f(w: Any, x: Any) -> Any:
        return p_while(OURS, w, x, 1, False)

    with pytest.raises(ReverseModeError, match="while_loop: reverse-mode"):
        ad.grad(f)(w, x)
    with pytest.raises(ReverseModeError, match=r"Use scan"):
        ad.jit(ad.grad(f), engine="host")(w, x)


def test_fori_loop_with_traced_bounds_is_a_while_loop() -> None:
    _, x = _inputs(np.float64)

    def f(n: Any, x: Any) -> Any:
        return lax.fori_loop(0, n, lambda i, c: c * 1.5 + 1.0, x)

    got = ad.jit(f, engine="host")(np.int64(4), x)
    _close(got, _oracle(lambda n, x: jax.lax.fori_loop(0, n, lambda i, c: c * 1.5 + 1.0, x),
                        np.int64(4), x), np.float64)
    graph = ad.traced.trace(f)(np.int64(4), x)
    assert [e.prim.name for e in graph.eqns].count("while_loop") == 1


@pytest.mark.parametrize("lower, upper, what, got", [
    (0.0, 3, "lower", "float"),
    (0, 2.5, "upper", "float"),
    (np.float32(0), 3, "lower", "dtype float32"),
    (0, np.arange(3), "upper", "shape (3,)"),
    (True, 3, "lower", "bool"),
])
def test_fori_loop_refuses_a_bound_that_is_not_an_integer_naming_it(
    lower: Any, upper: Any, what: str, got: str
) -> None:
    """As JAX: loop bounds are integers (a float would silently truncate); the error names
    the operation, the argument and what it got, and nothing runs."""
    calls: list[int] = []

    def body(i: Any, c: Any) -> Any:
        calls.append(1)
        return c + 1.0

    pattern = rf"fori_loop: argument '{what}' .*{re.escape(got)}"
    with pytest.raises(ArgumentTypeError, match=pattern):
        lax.fori_loop(lower, upper, body, np.ones(2))
    assert calls == []


def test_scan_body_that_changes_the_carry_type_is_refused_naming_the_leaf() -> None:
    x = np.ones(3)
    with pytest.raises(ArgumentTypeError, match="carry leaf 0 has type float32"):
        lax.scan(lambda c, _: (ad.astype(c, np.float32), None), x, None, length=2)
    with pytest.raises(ArgumentTypeError, match="carry leaf 0"):
        ad.jit(lambda x: lax.scan(lambda c, _: (c[:2], None), x, None, length=2))(x)


def test_checkpointed_scan_body_keeps_only_the_carries() -> None:
    """Eagerly, a checkpointed body's tape keeps only each step's inputs (the carry): the
    tape's retained bytes shrink against the plain body."""
    w = np.linspace(0.5, 1.0, 64)

    def loss(w: Any, ck: bool) -> Any:
        def step(c: Any, _: Any) -> Any:
            h = ad.tanh(c * w)
            return ad.sin(h) * ad.cos(h) + c, None

        c, _ = lax.scan(ad.checkpoint(step) if ck else step, w, None, length=20)
        return ad.sum(c)

    kept = {}
    for ck in (False, True):
        with ad.Tape() as tape:
            wt = tape.watch(ad.from_numpy(w.copy()))
            out = loss(wt, ck)
            kept[ck] = sum(e.nbytes for e in tape.retained())
            tape.backward(out)
    assert kept[True] < kept[False] / 2


@pytest.mark.parametrize("name", sorted(REVERSE))
def test_grad_of_jit_and_second_order_match_jax(name: str) -> None:
    """``grad(jit(f))`` records the loop equation on the tape (its rules run on numpy);
    grad of grad, eager and jitted, differentiates the backward loop again."""
    prog = PROGRAMS[name]
    w, x = _inputs(np.float64)
    for engine in ("host", "xla"):
        got = ad.grad(ad.jit(lambda w, x: prog(OURS, w, x, 3, False), engine=engine),
                      argnums=(0, 1))(w, x)
        _close(got, _oracle(jax.grad(lambda w, x: prog(JAX, w, x, 3, False), argnums=(0, 1)),
                            w, x), np.float64)

    def ours(w: Any) -> Any:
        return ad.sum(ad.grad(lambda w: prog(OURS, w, x, 3, False))(w) ** 2)

    want = _oracle(jax.grad(lambda w: jnp.sum(jax.grad(lambda w: prog(JAX, w, x, 3, False))(w)
                                               ** 2)), w)
    _close(ad.grad(ours)(w), want, np.float64)
    _close(ad.jit(ad.grad(ours), engine="host")(w), want, np.float64)


def _scan_xs(M: Any, w: Any, xs: Any) -> Any:
    c, ys = M.lax.scan(lambda c, x: (M.sin(c * w) + x, c * x), np.ones(3), xs)
    return M.sum(c) + M.sum(ys)


@pytest.mark.parametrize("axes", [(None, 0), (0, None), (0, 0)])
def test_vmap_of_scan_batches_xs_and_constants(axes: tuple[int | None, int | None]) -> None:
    rng = np.random.default_rng(1)
    xs, w = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 3))
    args = (w if axes[0] == 0 else w[0], xs if axes[1] == 0 else xs[0])
    for wrap in (lambda f: f, ad.grad):
        got = ad.vmap(wrap(lambda w, xs: _scan_xs(OURS, w, xs)), in_axes=axes)(*args)
        jwrap = jax.grad if wrap is ad.grad else (lambda f: f)
        want = _oracle(jax.vmap(jwrap(lambda w, xs: _scan_xs(JAX, w, xs)), in_axes=axes), *args)
        _close(got, want, np.float64)


def test_while_loop_that_never_runs_and_switch_index_clamped() -> None:
    x = np.array([5.0, 1.0])

    def f(x: Any, k: Any) -> Any:
        y = lax.while_loop(lambda v: ad.sum(v) < 1.0, lambda v: v * 2.0, x)
        return lax.switch(k, [lambda v: v + 1.0, lambda v: v * 3.0], y)

    for k in (-4, 0, 1, 7):
        want = np.asarray(jax.lax.switch(k, [lambda v: v + 1.0, lambda v: v * 3.0], x))
        _close(f(x, k), want, np.float64)
        _close(ad.jit(f, engine="host")(x, np.int64(k)), want, np.float64)
        _close(ad.jit(f, engine="xla")(x, np.int64(k)), want, np.float64)


def test_tracing_never_runs_a_loop_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop primitives declare their output types (``Primitive.abstract``): tracing
    does not run the body on probe values (a 10^9-step scan traces at once; a while loop
    that never ends on probes traces too)."""
    def refuse(*_: Any) -> Any:
        raise AssertionError("a loop kernel ran while tracing")

    monkeypatch.setattr(_scan, "run_graph", refuse)
    monkeypatch.setattr(_while, "run_graph", refuse)

    def f(x: Any, k: Any) -> Any:
        c, _ = lax.scan(lambda c, _: (c * 0.5, None), x, None, length=10**9)
        return lax.while_loop(lambda v: ad.sum(v) < 10.0, lambda v: v * k, c)

    graph = ad.traced.trace(f)(np.ones(2), np.ones(2))
    assert [e.prim.name for e in graph.eqns] == ["scan", "while_loop"]


def test_gradient_program_runs_the_loop_forward_once() -> None:
    """Traced reverse mode: one forward scan that keeps the per-step carries, one
    backward scan -- never a second forward loop."""
    w, x = _inputs(np.float64)
    graph = ad.traced.trace(ad.value_and_grad(lambda w, x: p_scan(OURS, w, x, 5, True)))(w, x)
    assert [e.prim.name for e in graph.eqns].count("scan") == 2


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jitted_loop_on_the_tape_nested_and_forward(name: str) -> None:
    """A jitted construct bound on handles: its rules run recording (grad of grad of
    jit: the handle namespace) and in eager forward mode (jvp of jit)."""
    prog = PROGRAMS[name]
    w, x = _inputs(np.float64)
    jf = ad.jit(lambda w: prog(OURS, w, x, 3, False), engine="host")

    def theirs(w: Any) -> Any:
        return prog(JAX, w, x, 3, False)

    if name in REVERSE:
        got = ad.grad(lambda w: ad.sum(ad.grad(jf)(w) ** 2))(w)
        _close(got, _oracle(jax.grad(lambda w: jnp.sum(jax.grad(theirs)(w) ** 2)), w),
               np.float64)
    t = np.linspace(0.5, 1.5, 3)
    _close(ad.jvp(jf, (w,), (t,)), _oracle(lambda w, t: jax.jvp(theirs, (w,), (t,)), w, t),
           np.float64)


@pytest.mark.parametrize("name", sorted(REVERSE))
def test_construct_inside_a_checkpoint_region(name: str) -> None:
    """A loop or branch (with a checkpointed body) inside a checkpointed function: the
    region's backward recomputes the construct, eagerly and on both engines."""
    prog = PROGRAMS[name]
    w, x = _inputs(np.float64)
    f = ad.checkpoint(lambda w, x: prog(OURS, w, x, 3, True))
    want = _oracle(jax.grad(jax.checkpoint(lambda w, x: prog(JAX, w, x, 3, True)),
                            argnums=(0, 1)), w, x)
    g = ad.grad(f, argnums=(0, 1))
    for fn in (g, ad.jit(g, engine="host"), ad.jit(g, engine="xla")):
        _close(fn(w, x), want, np.float64)
