"""``bind1``/``bind2``, the straight per-op paths of the public unary and binary ops, record
exactly what the general ``bind`` records: the same value, the same tape node (argument
ids, residuals and their counts, cotangent targets), the same ledger events, the same
gradients and the same errors.  Each argument kind they take is drawn: tracked and
untracked handles, Python scalars, borrowed owners, rank 0, broadcasting shapes, float32,
float64, complex and integer dtypes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad._core._dispatch import bind, bind1, bind2
from tenferro_ad._core._primitive import Primitive
from tenferro_ad._core._retention import AdValueRecord
from tenferro_ad.ops import elementwise as E
from tenferro_ad.ops import linalg as L
from tenferro_storage import ledger

UNARY = [E.SIN, E.TANH, E.EXP, E.NEG, E.ABS, E.SQRT, E.SIGN]
BINARY = [E.ADD, E.SUB, E.MUL, E.DIV, E.MAXIMUM, E.LT, E.POW]
DTYPES = [np.float32, np.float64, np.complex128, np.int64]
SHAPES = [(), (3,), (2, 3), (1, 3)]


def _kinds() -> st.SearchStrategy[str]:
    return st.sampled_from(["tracked", "untracked", "scalar", "owner"])


def _value(kind: str, tape: ad.Tape, dtype: Any, shape: tuple[int, ...], seed: int) -> Any:
    a = (np.random.default_rng(seed).uniform(0.5, 2.0, size=shape) * 3).astype(dtype)
    if kind == "scalar":
        return 1.5 if np.dtype(dtype).kind in "fc" else 2
    if kind == "owner":
        return ts.from_numpy(a)
    if kind == "tracked":
        return tape.watch(ts.from_numpy(a))
    return ad.constant(ts.from_numpy(a))


def _node_summary(tape: ad.Tape, h: Any) -> Any:
    if not isinstance(h, ad.EagerTensor) or h._id < 0:
        return None
    node = tape.nodes[h._id]
    assert node is not None
    res = [
        ("record", r.count, r.a.dtype.str, r.a.shape) if type(r) is AdValueRecord else r
        for r in (node.res or [])
    ]
    return (node.prim.name, tuple(node.ids), dict(node.params), res, node.shapes)


def _run(fn: Callable[..., Any], prim: Primitive, kinds: list[str], dtype: Any,
         shapes: list[tuple[int, ...]]) -> tuple[Any, ...]:
    """Run one call through ``fn`` on a fresh tape; what it observably did.  ``dtype``: one
    for every argument, or a list of one per argument."""
    dtypes = dtype if isinstance(dtype, list) else [dtype] * len(kinds)
    tape = ad.Tape()
    with tape:
        pairs = enumerate(zip(kinds, shapes, dtypes, strict=True))
        args = [_value(k, tape, d, s, i) for i, (k, s, d) in pairs]
        with ledger.capture() as rec:
            try:
                h = fn(prim, *args)
            except Exception as e:  # the error itself is compared
                return ("raised", type(e), str(e))
        events = sorted((str(e.kind), str(e.reason), e.nbytes, e.operation) for e in rec.events)
        node = _node_summary(tape, h)
        value = h.to_numpy()
        tracked = [a for a in args if isinstance(a, ad.EagerTensor) and a._id >= 0]
        loss = None
        if tracked and node is not None and value.dtype.kind in "fc":
            loss = ad.sum(ad.real(h)) if value.dtype.kind == "c" else ad.sum(h)
    grads = None
    if loss is not None:
        g = tape.backward(loss, wrt=tracked)
        grads = [g.grad(t).to_numpy() for t in tracked]
    return ("ok", value.dtype, value.tolist(), node, events, grads)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    assert a[0] == b[0], (a, b)
    if a[0] == "raised":
        assert a[1:] == b[1:]
        return
    assert a[1] == b[1] and a[2] == b[2] and a[3] == b[3] and a[4] == b[4]
    if a[5] is None or b[5] is None:
        assert a[5] is b[5]
    else:
        for x, y in zip(a[5], b[5], strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y)


@given(
    prim=st.sampled_from(UNARY),
    kind=_kinds(),
    dtype=st.sampled_from(DTYPES),
    shape=st.sampled_from(SHAPES),
)
def test_bind1_records_what_bind_records(prim: Primitive, kind: str, dtype: Any,
                                         shape: tuple[int, ...]) -> None:
    """One argument of every kind: value, node, residual counts, ledger events, gradients
    and errors agree with the general path."""
    _same(_run(bind1, prim, [kind], dtype, [shape]), _run(bind, prim, [kind], dtype, [shape]))


@given(
    prim=st.sampled_from([*BINARY, L.MATMUL]),
    ka=_kinds(),
    kb=_kinds(),
    dtype=st.sampled_from(DTYPES),
    sa=st.sampled_from(SHAPES),
    sb=st.sampled_from(SHAPES),
)
def test_bind2_records_what_bind_records(prim: Primitive, ka: str, kb: str, dtype: Any,
                                         sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    """Two arguments of every kind and broadcasting shapes (or shapes that do not
    broadcast: the same error): everything observable agrees with the general path."""
    kinds, shapes = [ka, kb], [sa, sb]
    _same(_run(bind2, prim, kinds, dtype, shapes), _run(bind, prim, kinds, dtype, shapes))


@pytest.mark.parametrize("fast", [bind1, bind2])
def test_the_fast_paths_hand_a_rank0_kernel_scalar_over_as_an_array(fast: Any) -> None:
    """A rank-0 kernel returns a numpy scalar; the record keeps the adopted 0-d array, so
    a later view of the value (a reshape) describes the right bytes."""
    x = ad.constant(ts.from_numpy(np.array(0.5)))
    y = fast(E.SIN, x) if fast is bind1 else fast(E.MUL, x, 2.0)
    assert type(y._rec.a) is np.ndarray
    want = np.sin(0.5) if fast is bind1 else 1.0
    np.testing.assert_allclose(y.reshape(1).to_numpy(), [want])


def test_the_fast_paths_step_aside_for_forward_mode_and_checkpoint_regions() -> None:
    """Inside jvp and inside a checkpoint region the general path runs (tangents pushed,
    the op stored for replay): the results agree with JAX-checked formulas."""
    x0 = np.linspace(0.1, 1.0, 4)
    _, t = ad.jvp(lambda x: ad.sin(x) * 2.0, (x0,), (np.ones(4),))
    np.testing.assert_allclose(t.to_numpy(), 2.0 * np.cos(x0))
    g = ad.grad(lambda x: ad.sum(ad.checkpoint(lambda y: ad.tanh(y) * y)(x)))(x0)
    want = np.tanh(x0) + x0 * (1 - np.tanh(x0) ** 2)
    np.testing.assert_allclose(g.to_numpy(), want)


@pytest.mark.parametrize(
    ("f", "want"),
    [
        (lambda x: x + x, lambda x: np.full_like(x, 2.0)),
        (lambda x: x - x, lambda x: np.zeros_like(x)),
        (lambda x: x * x, lambda x: 2.0 * x),
        (lambda x: ad.sin(x) + ad.sin(x), lambda x: 2.0 * np.cos(x)),
    ],
)
def test_a_value_used_twice_accumulates_both_cotangents(f: Any, want: Any) -> None:
    """The same handle as both operands: its two cotangents are added even when a rule
    hands back the very same array for both (``add``'s is the incoming cotangent)."""
    x0 = np.linspace(-1.0, 1.0, 5)
    g = ad.grad(lambda x: ad.sum(f(x)))(x0)
    np.testing.assert_allclose(g.to_numpy(), want(x0))


def _user(name: str, impl: Callable[..., Any], nargs: int, **kw: Any) -> Primitive:
    """An unregistered primitive with VJP rules (``checked``: as ``ad.extend`` makes it)."""
    checked = kw.pop("checked", False)
    prim = Primitive(name, impl, nargs, **kw)
    prim.checked = checked
    prim.defvjp(*[(lambda ops, g, *res: g)] * nargs)
    return prim


@pytest.mark.parametrize("kind", ["tracked", "untracked", "owner"])
def test_the_fast_paths_hand_views_and_user_primitives_to_bind(kind: str) -> None:
    """A view primitive (``alias``: a descriptor alias, no allocation) and a user primitive
    (``checked``: every argument's layout kept for the rule checks) go to ``bind``: the
    same value, node, residual counts, ledger events and gradients."""
    user1 = _user("test_fast_user1", lambda a: a * 2.0, 1, save_in=(0,), checked=True)
    user2 = _user("test_fast_user2", np.multiply, 2, save_in=(0, 1), broadcasts=True,
                  checked=True)
    for prim in (E.STOP_GRADIENT, user1):
        _same(_run(bind1, prim, [kind], np.float64, [(2, 3)]),
              _run(bind, prim, [kind], np.float64, [(2, 3)]))
    for other in ("tracked", "scalar", "owner"):
        kinds, shapes = [kind, other], [(2, 3), (3,)]
        _same(_run(bind2, user2, kinds, np.float64, shapes),
              _run(bind, user2, kinds, np.float64, shapes))


def _consumed(kind: str) -> Any:
    if kind == "handle":  # a handle whose value was moved out
        h = ad.sin(ad.constant(np.ones(3)))
        h.into_value()
        return h
    owner = ts.from_numpy(np.ones(3))  # an owner moved into a tape
    ad.Tape().watch(owner)
    return owner


@pytest.mark.parametrize("kind", ["handle", "owner"])
def test_refused_arguments_raise_what_bind_raises(kind: str) -> None:
    """A consumed handle or a moved owner, in either position: the fast paths raise
    ``bind``'s error (same class, same message naming the op and the argument)."""
    live = ad.constant(ts.from_numpy(np.full(3, 2.0)))

    def outcome(fn: Callable[..., Any], *args: Any) -> tuple[type, str]:
        with pytest.raises(Exception) as info:
            fn(*args)
        return type(info.value), str(info.value)

    assert outcome(bind1, E.SIN, _consumed(kind)) == outcome(bind, E.SIN, _consumed(kind))
    for pos in (0, 1):
        def args(pos: int = pos) -> tuple[Any, ...]:
            bad = _consumed(kind)
            return (E.MUL, bad, live) if pos == 0 else (E.MUL, live, bad)

        got, want = outcome(bind2, *args()), outcome(bind, *args())
        assert got == want
        assert f"argument {pos}" in want[1], want


@pytest.mark.parametrize("kind", ["tracked", "untracked"])
def test_a_kernel_returning_its_argument_is_materialized_by_every_path(kind: str) -> None:
    """A kernel that hands back its input's memory: each path materializes it (one
    recorded ``MATERIALIZE`` copy), never adopting a live value's buffer twice."""
    first = _user("test_fast_passthrough", lambda a: a, 1)
    first2 = _user("test_fast_first", lambda a, b: a, 2)
    one = _run(bind1, first, [kind], np.float64, [(3,)])
    _same(one, _run(bind, first, [kind], np.float64, [(3,)]))
    assert any(e[1] == "materialize" for e in one[4]), one[4]  # a reason prints by its value
    for other in ("tracked", "scalar", "owner"):
        kinds = [kind, other]
        _same(_run(bind2, first2, kinds, np.float64, [(3,), (3,)]),
              _run(bind, first2, kinds, np.float64, [(3,), (3,)]))


@pytest.mark.parametrize("prim", [E.ADD, E.MUL, L.MATMUL])
@pytest.mark.parametrize(
    "dtypes",
    [[np.float32, np.float64], [np.float64, np.float32], [np.complex128, np.float64],
     [np.float64, np.complex128], [np.int64, np.float64]],
)
@pytest.mark.parametrize("kinds", [["tracked", "tracked"], ["tracked", "owner"],
                                   ["owner", "tracked"], ["tracked", "untracked"]])
def test_mixed_dtypes_keep_the_cotangent_targets_bind_keeps(
    prim: Primitive, dtypes: list[Any], kinds: list[str]
) -> None:
    """Arguments of different dtypes (promoted by the kernel): the node keeps the same
    cotangent targets (each argument's dtype, cast back as in JAX) and the gradients
    agree in value and dtype."""
    shapes = [(2, 2), (2, 2)]
    _same(_run(bind2, prim, kinds, dtypes, shapes), _run(bind, prim, kinds, dtypes, shapes))


def _sum_to(a: np.ndarray[Any, Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    lead = a.ndim - len(shape)
    a = a.sum(axis=tuple(range(lead)))
    return a.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)


@pytest.mark.parametrize("xs, ys", [((1,), (1, 4)), ((3, 1), (1, 4)), ((4,), (3, 4))])
def test_a_broadcast_argument_of_the_same_dtype_gets_its_gradient_summed_to_its_shape(
    xs: tuple[int, ...], ys: tuple[int, ...]
) -> None:
    """``x * y`` with ``x`` broadcast against ``y`` (one dtype object for both, so only the
    shape tells the node it needs cotangent targets): each gradient is the other factor
    summed to the argument's shape (issue 28's ``(1,)`` times ``(1, 4)``).  Mutant:
    ``_arg_shapes``' first ``v.shape != osh`` turned into ``is`` (no targets recorded)."""
    x = np.arange(1.0, 1.0 + np.prod(xs)).reshape(xs)
    y = np.arange(2.0, 2.0 + np.prod(ys)).reshape(ys)
    gx, gy = ad.grad(lambda a, b: ad.sum(a * b), argnums=(0, 1))(x, y)
    shape = np.broadcast_shapes(xs, ys)
    np.testing.assert_array_equal(gx.to_numpy(), _sum_to(np.broadcast_to(y, shape), xs))
    np.testing.assert_array_equal(gy.to_numpy(), _sum_to(np.broadcast_to(x, shape), ys))
