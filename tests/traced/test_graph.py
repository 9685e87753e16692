"""The traced IR itself: tracing, printing, checking, immutability, pytrees, DCE, the
errors of data-dependent control flow, and evaluation's ownership and ledger accounting."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import traced
from tenferro_storage import AllocationReason, CopyReason, ledger

X = np.arange(6.0).reshape(2, 3) / 10


def _f(x: object, w: object) -> object:
    return ad.sum(ad.tanh(x @ w) * 2.0)


def test_trace_records_typed_equations_and_prints_like_a_jaxpr() -> None:
    """Each op is one equation with static parameters; shapes and dtypes are inferred."""
    g = traced.trace(_f)(X, np.ones((3, 4)))
    assert [e.prim.name for e in g.eqns] == ["matmul", "tanh", "mul", "sum"]
    assert [(v.shape, v.dtype.name) for v in g.invars] == [((2, 3), "float64"), ((3, 4), "float64")]
    assert dict(g.eqns[3].params)["axes"] == (0, 1)
    text = str(g)
    assert text.splitlines()[0] == "{ lambda a:f64[2,3] b:f64[3,4] . let"
    assert "    c:f64[2,4] = matmul a b" in text
    assert "e:f64[2,4] = mul d 2.0" in text
    assert text.endswith("in (f) }")


def test_graph_is_immutable_and_owns_no_storage() -> None:
    """Graphs, equations, variables and literals refuse mutation; tracing allocates
    nothing but the recorded snapshot of the numpy constant it closes over (one
    ``TRANSFER`` into one ``TRANSFER_DESTINATION``)."""
    with ledger.capture() as rec:
        g = traced.trace(lambda x: x * np.array([1.0, 2.0, 3.0]))(X)
    assert rec.allocations == {AllocationReason.TRANSFER_DESTINATION: 1}
    assert rec.copies == {CopyReason.TRANSFER: 1}
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        g.eqns = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        g.invars[0].shape = (1,)  # type: ignore[misc]
    lit = g.eqns[0].inputs[1]
    assert isinstance(lit, traced.Lit) and not lit.value.flags.writeable
    with pytest.raises(TypeError):
        g.eqns[0].params["x"] = 1  # type: ignore[index]


def test_captured_constants_are_snapshots() -> None:
    """Mutating a captured numpy array after tracing does not change the graph."""
    c = np.array([1.0, 2.0, 3.0])
    g = traced.trace(lambda x: x + c)(X)
    c[:] = 100.0
    np.testing.assert_array_equal(traced.eval_graph(g, X).to_numpy(), X + np.array([1.0, 2.0, 3.0]))


def test_python_control_flow_unrolls_and_data_dependence_is_refused_by_name() -> None:
    """Loops unroll; bool()/float()/int()/index on a traced value raise TracerError naming it."""
    g = traced.trace(lambda x: [x := ad.sin(x) for _ in range(3)][-1])(X)
    assert [e.prim.name for e in g.eqns] == ["sin"] * 3
    with pytest.raises(traced.TracerError, match=r"bool\(\).*bool\[2,3\].*`gt` at equation 0"):
        traced.trace(lambda x: x if x > 0 else -x)(X)
    with pytest.raises(traced.TracerError, match=r"float\(\).*f64\[\].*`sum`"):
        traced.trace(lambda x: float(ad.sum(x)))(X)
    with pytest.raises(traced.TracerError, match=r"int\(\).*an input"):
        traced.trace(lambda x: int(x))(np.float64(1.0))
    with pytest.raises(traced.TracerError, match="item"):
        traced.trace(lambda x: x.item())(X)
    with pytest.raises(traced.TracerError, match=r"np\.asarray"):
        traced.trace(lambda x: np.asarray(x))(X)
    assert issubclass(traced.TracerError, TypeError)


def test_escaped_tracer_is_refused() -> None:
    """A tracer kept after its trace finished cannot be computed with."""
    kept: list[object] = []
    traced.trace(lambda x: kept.append(x) or x)(X)
    with pytest.raises(traced.TracerError, match="escaped"):
        ad.sin(kept[0])


def test_check_shows_the_equations_around_a_type_error() -> None:
    """A corrupted graph fails check with the failing equation marked and its neighbours."""
    g = traced.trace(_f)(X, np.ones((3, 4)))
    traced.check(g)
    bad_out = traced.Var((9,), "float64")
    e = g.eqns[1]
    broken = attrs.evolve(g, eqns=(g.eqns[0], traced.Eqn(e.prim, e.inputs, e.params,
                                                          out=bad_out), *g.eqns[2:]))
    with pytest.raises(traced.GraphTypeError) as ei:
        traced.check(broken)
    msg = str(ei.value)
    assert "equation 1: tanh produces f64[2,4] but the equation declares f64[9]" in msg
    assert ">> d:f64[9] = tanh c" in msg and "c:f64[2,4] = matmul a b" in msg
    unordered = attrs.evolve(g, eqns=g.eqns[1:])
    with pytest.raises(traced.GraphTypeError, match="used before it is defined"):
        traced.check(unordered)
    assert issubclass(traced.GraphTypeError, TypeError)


def test_pytrees_in_and_out() -> None:
    """Dict/list/tuple arguments and results keep their structure through eval and grad."""
    p = {"w": np.ones((3, 2)), "b": np.zeros(2)}

    def f(params: dict[str, object], x: object) -> object:
        h = ad.tanh(x @ params["w"] + params["b"])
        return {"loss": ad.sum(h), "parts": [h, (h.T,)]}

    g = traced.trace(f)(p, X)
    out = traced.eval_graph(g, p, X)
    assert set(out) == {"loss", "parts"} and isinstance(out["parts"], list)
    assert out["parts"][1][0].shape == (2, 2)
    loss = traced.trace(lambda params, x: f(params, x)["loss"])(p, X)
    grads = traced.eval_graph(traced.grad(loss), p, X)
    assert set(grads) == {"w", "b"} and grads["w"].shape == (3, 2)
    with pytest.raises(TypeError, match="structure"):
        traced.eval_graph(g, [p["w"], p["b"]], X)


def test_dce_drops_unused_equations_and_grad_graphs_are_minimal() -> None:
    """Unused values disappear; a gradient w.r.t. one argument keeps no other argument's
    backward (symbolic zeros emit nothing)."""
    g = traced.trace(lambda x, y: (ad.sin(x), ad.exp(y))[0])(X, X)
    assert [e.prim.name for e in traced.dce(g).eqns] == ["sin"]
    two = traced.trace(lambda x, y: ad.sum(ad.sin(x) * y))(X, X)
    gx = traced.grad(two, argnums=0)
    assert "cos" in {e.prim.name for e in gx.eqns}
    gy = traced.grad(two, argnums=1)
    assert "cos" not in {e.prim.name for e in gy.eqns}


def test_grad_of_an_unused_argument_is_zeros_and_nonscalar_grad_is_refused() -> None:
    """As in JAX: zeros for an argument the output ignores; grad needs a real scalar."""
    g = traced.trace(lambda x, y: ad.sum(x))(X, X)
    _, gy = traced.eval_graph(traced.grad(g, argnums=(0, 1)), X, X)
    np.testing.assert_array_equal(gy.to_numpy(), np.zeros((2, 3)))
    with pytest.raises(TypeError, match="one real floating scalar output"):
        traced.grad(traced.trace(ad.sin)(X))
    with pytest.raises(TypeError, match="only floating"):
        traced.grad(traced.trace(lambda i: ad.sum(i * 1.0))(np.arange(3)))


def test_eval_borrows_owners_and_makes_one_allocation_per_output() -> None:
    """Owners are borrowed (usable afterwards); each output is one OPERATION_OUTPUT
    allocation; intermediates are numpy scratch; no copy event."""
    g = traced.trace(lambda x: (ad.sum(ad.exp(ad.sin(x))), ad.cos(x)))(X)
    x = ts.from_numpy(X)
    with ledger.capture() as rec:
        _, c = traced.eval_graph(g, x)
    assert rec.allocations == {AllocationReason.OPERATION_OUTPUT: 2}
    assert not rec.copies
    with x.as_view_mut():  # the borrow ended with the call
        pass
    np.testing.assert_allclose(c.to_numpy(), np.cos(X))


def test_outputs_that_alias_inputs_or_repeat_are_recorded_copies() -> None:
    """An input returned as is, or a value returned twice, is copied explicitly — never a
    silent alias of the caller's storage."""
    g = traced.trace(lambda x: (x, ad.sin(x), ad.sin(x) * 1.0, x.T))(X)
    same = traced.trace(lambda x: (ad.sin(x), ad.sin(x)))(X)
    x = ts.from_numpy(X)
    with ledger.capture() as rec:
        a, _, _, d = traced.eval_graph(g, x)
    assert rec.copies == {CopyReason.MATERIALIZE: 2}  # x itself and its transpose
    np.testing.assert_array_equal(a.to_numpy(), X)
    np.testing.assert_array_equal(d.to_numpy(), X.T)
    s = traced.trace(lambda x: ad.sin(x))(X)
    rep = attrs.evolve(s, outvars=(s.outvars[0], s.outvars[0]),
                       out_tree=same.out_tree)
    with ledger.capture() as rec:
        p, q = traced.eval_graph(rep, x)
    assert rec.copies == {CopyReason.MATERIALIZE: 1}
    np.testing.assert_array_equal(p.to_numpy(), q.to_numpy())


def test_eval_refuses_wrong_types_naming_the_leaf() -> None:
    """A leaf of another shape or dtype is refused before anything runs."""
    g = traced.trace(_f)(X, np.ones((3, 4)))
    with pytest.raises(TypeError, match=r"input leaf 1 has type f32\[3,4\].*expects f64\[3,4\]"):
        traced.eval_graph(g, X, np.ones((3, 4), np.float32))


def test_tracer_operators_and_metadata_mirror_eager_tensors() -> None:
    """Operators, reflected operators with numpy constants, T, reshape, mean, astype, len."""
    def f(x: object) -> object:
        y = 2.0 - x
        y = np.ones(3) * y / (1.0 + x ** 2.0)
        z = (y @ x.T).reshape(-1)
        assert len(x) == 2 and x.ndim == 2 and x.size == 6 and x.dtype == np.float64
        return z.mean() + (-z).sum() + (x < 0.5).astype("float64").sum() + abs(x)[0, 1]

    g = traced.trace(f)(X)
    xx = X
    y = np.ones(3) * (2.0 - xx) / (1.0 + xx ** 2.0)
    z = (y @ xx.T).reshape(-1)
    want = z.mean() - z.sum() + (xx < 0.5).sum() + abs(xx)[0, 1]
    np.testing.assert_allclose(traced.eval_graph(g, X).to_numpy(), want)


def test_public_ops_accept_tracers_in_any_position() -> None:
    """ad.add(numpy, tracer) and friends trace (the constant becomes a literal)."""
    g = traced.trace(lambda x: ad.add(np.ones((2, 3)), x) + ad.maximum(0.0, x))(X)
    np.testing.assert_allclose(traced.eval_graph(g, X).to_numpy(), 1 + X + np.maximum(0, X))


def test_checkpoint_blocks_close_at_their_depth_before_the_next_equation() -> None:
    """A printed graph shows each checkpoint region as a block: a nested region closes at
    its own indentation before the enclosing region's next equation, and the outer block
    closes before the equations after it (the last lines are not left to the end).
    Mutants: the mid-graph closing line's ``+`` turned into ``%`` or ``|`` (TypeError)."""

    def inner(v: Any) -> Any:
        return ad.exp(ad.sin(v) * 0.5)

    def outer(a: Any) -> Any:
        return ad.tanh(ad.checkpoint(inner)(a * 2.0)) + 1.0

    text = str(ad.trace(lambda x: ad.sum(ad.checkpoint(outer)(x) * 3.0))(np.ones(3)))
    lines = text.split("\n")
    shape = [ln[: len(ln) - len(ln.lstrip())] + ln.strip().split(" ")[0] for ln in lines[1:-1]]
    assert shape == [
        "    checkpoint[outer", "      b:f64[3]",
        "      checkpoint[inner", "        c:f64[3]", "        d:f64[3]", "        e:f64[3]",
        "      }", "      f:f64[3]", "      g:f64[3]",
        "    }", "    h:f64[3]", "    i:f64[]",
    ]
