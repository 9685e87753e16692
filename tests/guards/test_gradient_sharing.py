"""Delivered gradients never share memory they should not (issue 16).

Every gradient bundle of a fan-out program (one value feeding several ops, one
cotangent handed to several arguments by ``add``, broadcasting, metadata-only ops whose
VJP is a view of the cotangent) is checked for shared buffers with ``np.shares_memory``
over all delivered gradients, read through ``ts.borrow_arrays`` (borrow debug mode off
so the arrays are the owners' own memory), for each way a user receives gradients:
``grad``, ``value_and_grad``, ``vjp`` and ``Tape.backward``.  Values are checked
against JAX at the same time (a bundle that shares nothing but is wrong is no better).

``Tape.backward`` is the one documented exception: two arguments that receive *the
same cotangent* share one allocation in its ``Gradients`` group (no copy); ``grad``
borrows both and ``take_grad`` refuses with ``ExtractError(reason="aliased")``.  That
contract is tested too.

Also here: the caller's own cotangent/tangent arrays, a residual returned by a VJP
rule, and a kernel that returns one of its inputs are never adopted as a second owner.

Checked by hand (on a temporary copy): the fan-out tests fail when the gradient
delivery stops copying memory already delivered (``_gradients`` /
``adopt_output``'s ``id(array) in _BUFFERS``), when ``Tape.sweep`` stops accumulating
(``add(prev, ct)``) or unbroadcasting, and when seeds/tangents are not treated as the
caller's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_storage import CopyReason, _access, ledger
from tenferro_storage.errors import ExtractError


@pytest.fixture(autouse=True)
def plain_borrows() -> Iterator[None]:
    """Borrow debug mode off: ``borrow_arrays`` hands out the values' own memory (in
    debug mode it hands out staged copies, which never share memory)."""
    previous = _access._set_debug_borrows(False)
    try:
        yield
    finally:
        _access._set_debug_borrows(previous)


def _arg(shape: tuple[int, ...], k: int) -> np.ndarray[Any, Any]:
    n = int(np.prod(shape))
    return (np.linspace(0.1, 0.9, n) + 0.05 * k).reshape(shape)


Program = tuple[str, Callable[..., Any], list[tuple[int, ...]]]

#: Fan-out programs: (name, f(m, *args) with m = tenferro_ad or jax.numpy, arg shapes).
PROGRAMS: list[Program] = [
    ("exp_of_sum", lambda m, a, b: m.sum(m.exp(a + b)), [(3,), (3,)]),
    ("three_way_add", lambda m, a, b, c: m.sum(a + b + c), [(4,), (4,), (4,)]),
    ("reuse", lambda m, a: m.sum(a * a + m.sin(a) + a), [(5,)]),
    ("same_twice", lambda m, a, b: m.sum((a + a) * b), [(3,), (3,)]),
    ("broadcast", lambda m, a, b: m.sum(m.exp(a + b)), [(3, 1), (1, 4)]),
    ("broadcast_plain", lambda m, a, b: m.sum(a + b), [(3, 1), (1, 4)]),
    ("sub_and_mul", lambda m, a, b: m.sum(a - b) + m.sum(a * b), [(3,), (3,)]),
    ("reshape_view", lambda m, a, b: m.sum(m.exp(m.reshape(a, (6,)) + b)), [(2, 3), (6,)]),
    ("transpose_view", lambda m, a, b: m.sum(m.exp(m.transpose(a) + b)), [(2, 3), (3, 2)]),
    ("plain_sum", lambda m, a, b: m.sum(m.reshape(a, (6,)) + b), [(2, 3), (6,)]),
]


def _jax_grads(f: Callable[..., Any], args: list[np.ndarray[Any, Any]]) -> list[Any]:
    g = jax.grad(lambda *xs: f(jnp, *xs), argnums=tuple(range(len(args))))(*args)
    return [np.asarray(x) for x in g]


def _check_unshared(grads: list[Any], expected: list[Any], also: list[Any] = ()) -> None:  # type: ignore[assignment]
    """No two gradients (or a gradient and one of ``also``) share memory; values match."""
    with ts.borrow_arrays(list(grads)) as arrays:
        for i, a in enumerate(arrays):
            np.testing.assert_allclose(a, expected[i], rtol=1e-12, atol=1e-12)
            for j in range(i + 1, len(arrays)):
                assert not np.shares_memory(a, arrays[j]), f"gradients {i} and {j} share memory"
            for k, other in enumerate(also):
                assert not np.shares_memory(a, other), f"gradient {i} shares memory with {k}"


@pytest.mark.parametrize("how", ["grad", "value_and_grad", "vjp"])
@pytest.mark.parametrize(("name", "f", "shapes"), PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_functional_gradients_of_fan_out_share_no_buffer(
    how: str, name: str, f: Callable[..., Any], shapes: list[tuple[int, ...]]
) -> None:
    """Each argument's gradient is its own owner: no shared memory, JAX's values."""
    args = [_arg(s, k) for k, s in enumerate(shapes)]
    owners = [ts.from_numpy(a) for a in args]
    nums = tuple(range(len(args)))
    fn = lambda *xs: f(ad, *xs)  # noqa: E731
    if how == "grad":
        grads = list(ad.grad(fn, argnums=nums)(*owners))
    elif how == "value_and_grad":
        _, gs = ad.value_and_grad(fn, argnums=nums)(*owners)
        grads = list(gs)
    else:
        _, pull = ad.vjp(fn, *owners)
        grads = list(pull(np.array(1.0)))
        del pull
    _check_unshared(grads, _jax_grads(f, args), [ts.kernel.read_array(o) for o in owners])
    for g in grads:
        g.fill(0.0)  # every gradient is a writable owner of its own


@pytest.mark.parametrize(("name", "f", "shapes"), PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_tape_gradients_share_only_one_cotangent_and_then_refuse_extraction(
    name: str, f: Callable[..., Any], shapes: list[tuple[int, ...]]
) -> None:
    """``Tape.backward``: correct values; two gradients share memory only when they are
    one cotangent (one allocation, no copy), and then ``take_grad`` refuses; any
    gradient that shares nothing moves out and is written freely."""
    args = [_arg(s, k) for k, s in enumerate(shapes)]
    expected = _jax_grads(f, args)
    with ad.Tape() as tape:
        hs = [tape.watch(ts.from_numpy(a)) for a in args]
        loss = f(ad, *hs)
    with ledger.capture() as rec:
        g = tape.backward(loss, wrt=hs)
    assert rec.copies == {}, "a fan-out backward copies nothing"
    views = [g.grad(h) for h in hs]
    shared: set[int] = set()
    with ts.borrow_arrays(views) as arrays:
        for i, a in enumerate(arrays):
            np.testing.assert_allclose(a, expected[i], rtol=1e-12, atol=1e-12)
            for j in range(i + 1, len(arrays)):
                if np.shares_memory(a, arrays[j]):
                    shared |= {i, j}
    for v in views:
        v.release()
    for i, h in enumerate(hs):
        if i in shared:
            with pytest.raises(ExtractError) as err:
                g.take_grad(h)
            assert err.value.reason == "aliased"
        else:
            owner = g.take_grad(h)
            assert owner is not None
            owner.fill(7.0)
    del g, hs, loss


def test_three_way_add_backward_delivers_one_allocation() -> None:
    """``a + b + c``: one cotangent for three arguments: one allocation, no copy, three
    equal gradients borrowed from one bundle."""
    with ad.Tape() as tape:
        hs = [tape.watch(ts.from_numpy(np.zeros(4))) for _ in range(3)]
        loss = ad.sum(hs[0] + hs[1] + hs[2])
    with ledger.capture() as rec:
        g = tape.backward(loss)
    assert rec.allocations == {ts.AllocationReason.OPERATION_OUTPUT: 1}
    for h in hs:
        np.testing.assert_array_equal(g.grad(h).to_numpy(), np.ones(4))
    del g, hs, loss


# -- the caller's memory: seeds, cotangents, tangents -------------------------------------


def test_backward_never_adopts_the_callers_cotangent_array() -> None:
    """``tape.backward(x + 0.0, cotangent=c)`` with ``c`` a numpy array: add's VJP hands
    ``c`` itself back; the gradient is a recorded copy, never ``c``'s memory.

    Fails when ``Gradients._build`` adopts a foreign seed (checked)."""
    with ad.Tape() as tape:
        h = tape.watch(ts.from_numpy(np.zeros(3)))
        y = h + 0.0
    c = np.array([1.0, 2.0, 3.0])
    with ledger.capture() as rec:
        g = tape.backward(y, cotangent=c)
    assert rec.copies == {CopyReason.MATERIALIZE: 1}
    gx = g.take_grad(h)
    assert gx is not None
    assert not np.shares_memory(ts.kernel.read_array(gx), c)
    gx.fill(0.0)
    np.testing.assert_array_equal(c, [1.0, 2.0, 3.0])
    del y, h


def test_vjp_never_adopts_the_callers_cotangent_array() -> None:
    """``vjp(lambda a: a + 0.0, x)(c)``: the gradient is a copy, not ``c``."""
    _, pull = ad.vjp(lambda a: a + 0.0, ts.from_numpy(np.zeros(3)))
    c = np.array([1.0, 2.0, 3.0])
    (gx,) = pull(c)
    assert not np.shares_memory(ts.kernel.read_array(gx), c)
    gx.fill(0.0)
    np.testing.assert_array_equal(c, [1.0, 2.0, 3.0])
    del pull


def test_jvp_never_adopts_the_callers_tangent_array() -> None:
    """``jvp(lambda a: a + 0.0, (x,), (t,))``: the output tangent is a copy, not ``t``.

    Fails when jvp's foreign set omits the input tangents (checked)."""
    t = np.array([1.0, 2.0, 3.0])
    _, tout = ad.jvp(lambda a: a + 0.0, (ts.from_numpy(np.zeros(3)),), (t,))
    assert not np.shares_memory(ts.kernel.read_array(tout), t)
    tout.fill(0.0)
    np.testing.assert_array_equal(t, [1.0, 2.0, 3.0])


# -- rules and kernels that return memory they were given --------------------------------

RETURNS_RESIDUAL = extend.defprimitive(
    "guards_square_returning_residual",
    lambda x: x * x,
    1,
    save_in=(0,),
    vjp=(lambda ops, g, x: x,),  # deliberately returns its residual
)

IDENTITY = extend.defprimitive(
    "guards_identity", lambda x: x, 1, vjp=(lambda ops, g: g,), jvp=(lambda ops, t: t,)
)


def test_a_vjp_returning_its_residual_gives_a_gradient_of_its_own() -> None:
    """The residual stays the tape's; the gradient is a recorded copy (Tape.backward and
    grad), and writing it leaves the residual intact."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.array([1.0, 2.0, 3.0])))
        y = extend.bind(RETURNS_RESIDUAL, x)
    g = tape.backward(y, cotangent=np.ones(3), keep=True)
    gx = g.take_grad(x)
    assert gx is not None
    with x.value() as vx:
        assert not np.shares_memory(ts.kernel.read_array(gx), ts.kernel.read_array(vx))
    gx.fill(0.0)
    g2 = tape.backward(y, cotangent=np.ones(3))
    np.testing.assert_array_equal(g2.grad(x).to_numpy(), [1.0, 2.0, 3.0])
    owner = ts.from_numpy(np.array([4.0, 5.0]))
    (ga,) = ad.grad(lambda a: ad.sum(extend.bind(RETURNS_RESIDUAL, a)), argnums=(0,))(owner)
    assert not np.shares_memory(ts.kernel.read_array(ga), ts.kernel.read_array(owner))
    np.testing.assert_array_equal(ga.to_numpy(), [4.0, 5.0])
    del y, g, g2, x


def test_a_kernel_returning_its_input_gives_a_fresh_owner() -> None:
    """An identity kernel on a value on the tape: the output is a recorded MATERIALIZE
    copy, never a second owner of the input's buffer.

    Fails when ``adopt_output``'s fast path stops checking ``id(array) in _BUFFERS``
    (checked)."""
    with ad.Tape() as tape:
        h = tape.watch(ts.from_numpy(np.arange(4.0)))
        with ledger.capture() as rec:
            y = extend.bind(IDENTITY, h)
    assert rec.copies == {CopyReason.MATERIALIZE: 1}
    with y.value() as vy, h.value() as vh:
        assert not np.shares_memory(ts.kernel.read_array(vy), ts.kernel.read_array(vh))
    plain = ad.exp(ts.from_numpy(np.zeros(2)))
    with ledger.capture() as rec2:
        y2 = extend.bind(IDENTITY, plain)
    assert rec2.copies == {CopyReason.MATERIALIZE: 1}
    owner = y2.into_value()
    owner.fill(5.0)
    np.testing.assert_array_equal(plain.to_numpy(), [1.0, 1.0])
    del y, h, tape


def test_a_broadcast_of_the_seed_is_new_data_not_a_copy() -> None:
    """``sum``'s VJP broadcasts the caller's scalar cotangent: laying that out is a
    kernel write (one allocation), not a ``MATERIALIZE`` copy of the caller's bytes.

    Fails when ``is_foreign`` stops requiring the whole seed (checked)."""
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy(np.zeros(3)))
        y = ad.sum(x)
    c = np.array(2.0)
    with ledger.capture() as rec:
        g = tape.backward(y, cotangent=c)
    assert rec.copies == {}
    np.testing.assert_array_equal(g.grad(x).to_numpy(), [2.0, 2.0, 2.0])
    del g, x, y
