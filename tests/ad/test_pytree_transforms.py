"""Every transform reads its arguments and results with the one pytree module
(``tenferro_ad.tree_util``, JAX's semantics), in eager mode and in traced mode: a namedtuple,
a dict (sorted keys), ``None`` as an empty subtree, a registered dataclass, a
``register_pytree_node`` class and nested mixes come back in JAX's structure with JAX's
values, for grad / value_and_grad / vjp / jvp / linearize / jacfwd / jacrev / jacobian /
hessian / vmap / jit / checkpoint / custom_vjp / custom_jvp and the optimizers."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import tree_util as tu
from tenferro_ad.errors import ArgumentError

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

P = collections.namedtuple("P", "w b")


@dataclasses.dataclass
class Layer:
    w: Any
    b: Any
    name: str = dataclasses.field(default="layer", metadata={"static": True})


tu.register_dataclass(Layer)
jax.tree_util.register_dataclass(Layer, data_fields=["w", "b"], meta_fields=["name"])


class Pair:
    """A class registered with ``register_pytree_node`` (in both registries)."""

    def __init__(self, left: Any, right: Any) -> None:
        self.left, self.right = left, right


def _pair_flatten(p: Pair) -> tuple[tuple[Any, Any], str]:
    return (p.left, p.right), "pair"


def _pair_unflatten(aux: str, children: tuple[Any, ...]) -> Pair:
    return Pair(*children)


tu.register_pytree_node(Pair, _pair_flatten, _pair_unflatten)
jax.tree_util.register_pytree_node(Pair, _pair_flatten, _pair_unflatten)

RNG = np.random.default_rng(3)


def _a(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.normal(size=shape)


A, B, C, D = _a(2), _a(1), _a(1, 2), _a()
TREES: dict[str, Any] = {
    "namedtuple": P(A, B),
    "dict": {"w": A, "b": B, "a": C},  # insertion order differs from the sorted order
    "none": (A, None, {"c": B, "n": None}),
    "dataclass": Layer(A, B),
    "registered": Pair(A, (B, D)),
    "nested": [P(A, {"z": B, "y": (C, None)}), Layer(D, A)],
}
KINDS = list(TREES)


# -- helpers -------------------------------------------------------------------------------------
def _np(x: Any) -> Any:
    """One of our leaves as numpy (owners, handles, arrays)."""
    if isinstance(x, ad.EagerTensor):
        return np.array(x.to_numpy())
    if isinstance(x, ts.Tensor):
        return np.array(ts.kernel.read_array(x))
    return np.asarray(x)


def same(ours: Any, theirs: Any, rtol: float = 1e-10) -> None:
    """Same structure (through JAX's registry: ``None`` empty, dicts sorted) and values."""
    mine = jax.tree_util.tree_map(_np, ours)
    assert jax.tree_util.tree_structure(mine) == jax.tree_util.tree_structure(theirs), (
        jax.tree_util.tree_structure(mine),
        jax.tree_util.tree_structure(theirs),
    )
    for a, b in zip(jax.tree_util.tree_leaves(mine), jax.tree_util.tree_leaves(theirs),
                    strict=True):
        assert a.shape == np.shape(b)
        np.testing.assert_allclose(a, np.asarray(b), rtol=rtol, atol=1e-12)


def _j(tree: Any) -> Any:
    return jax.tree_util.tree_map(jnp.asarray, tree)


def loss(m: Any, tree: Any) -> Any:
    """A scalar of every leaf (``m``: ``ad`` or ``jnp``)."""
    leaves = (tu if m is ad else jax.tree_util).tree_leaves(tree)
    total = m.sum(m.sin(leaves[0]) * leaves[0])
    for x in leaves[1:]:
        total = total + m.sum(m.sin(x) * x)
    return total


def mapped(m: Any, tree: Any) -> Any:
    """A tree of the argument's structure (the output structure under test)."""
    return (tu if m is ad else jax.tree_util).tree_map(lambda x: m.sin(x) * 2.0, tree)


def _ones_like(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda x: np.ones(np.shape(x)), tree)


def _xp(tree: Any) -> Any:
    """numpy for our (numpy) inputs, jax.numpy for JAX's (traced: the oracle is jitted)."""
    leaves = jax.tree_util.tree_leaves(tree)
    return np if all(isinstance(x, np.ndarray) for x in leaves) else jnp


def _tangent(tree: Any) -> Any:
    xp = _xp(tree)
    return jax.tree_util.tree_map(lambda x: xp.cos(x) + 0.5, tree)


def _batch(tree: Any, n: int = 3) -> Any:
    xp = _xp(tree)
    return jax.tree_util.tree_map(lambda x: xp.stack([x * (k + 1) for k in range(n)]), tree)


def _oracle(case: Callable[[Any, Any], Any], t: Any) -> Any:
    """JAX's result, jitted (one compilation instead of op-by-op dispatch: fast)."""
    return jax.jit(lambda x: case(jnp, x))(_j(t))


# -- the transforms: (ours, JAX's), each applied to one tree --------------------------------------
def _vjp_case(m: Any, t: Any) -> Any:
    if m is ad:
        out, fn = ad.vjp(lambda x: mapped(ad, x), t)
        try:
            return out, fn(_ones_like(jax.tree_util.tree_map(_np, out)))
        finally:
            fn.release()
    out, fn = jax.vjp(lambda x: mapped(jnp, x), t)
    return out, fn(_ones_like(out))


EAGER: dict[str, Callable[[Any, Any], Any]] = {
    "grad": lambda m, t: (ad.grad if m is ad else jax.grad)(lambda x: loss(m, x))(t),
    "value_and_grad": lambda m, t: (ad.value_and_grad if m is ad else jax.value_and_grad)(
        lambda x: loss(m, x))(t),
    "vjp": _vjp_case,
    "jvp": lambda m, t: (ad.jvp if m is ad else jax.jvp)(
        lambda x: mapped(m, x), (t,), (_tangent(t),)),
    "linearize": lambda m, t: (ad.linearize if m is ad else jax.linearize)(
        lambda x: mapped(m, x), t)[1](_tangent(t)),
    "jacfwd": lambda m, t: (ad.jacfwd if m is ad else jax.jacfwd)(lambda x: mapped(m, x))(t),
    "jacrev": lambda m, t: (ad.jacrev if m is ad else jax.jacrev)(lambda x: mapped(m, x))(t),
    "jacobian": lambda m, t: (ad.jacobian if m is ad else jax.jacobian)(
        lambda x: loss(m, x))(t),
    "hessian": lambda m, t: (ad.hessian if m is ad else jax.hessian)(lambda x: loss(m, x))(t),
    "vmap": lambda m, t: (ad.vmap if m is ad else jax.vmap)(lambda x: mapped(m, x))(_batch(t)),
    "checkpoint": lambda m, t: (ad.grad if m is ad else jax.grad)(
        lambda x: loss(m, (ad.checkpoint if m is ad else jax.checkpoint)(
            lambda y: mapped(m, y))(x)))(t),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("transform", list(EAGER))
def test_eager_transform_keeps_jax_structure_and_values(transform: str, kind: str) -> None:
    t = TREES[kind]
    same(EAGER[transform](ad, t), _oracle(EAGER[transform], t))


def _jit_vjp(m: Any, t: Any) -> Any:
    ct = _ones_like(t)
    if m is ad:
        return ad.jit(lambda x, c: ad.vjp(lambda y: mapped(ad, y), x)[1](c))(t, ct)
    return jax.vjp(lambda y: mapped(jnp, y), t)[1](_j(ct))


TRACED: dict[str, Callable[[Any, Any], Any]] = {
    "jit": lambda m, t: (ad.jit if m is ad else jax.jit)(lambda x: mapped(m, x))(t),
    "jit_grad": lambda m, t: (ad.jit if m is ad else jax.jit)(
        (ad.grad if m is ad else jax.grad)(lambda x: loss(m, x)))(t),
    "jit_value_and_grad": lambda m, t: (ad.jit if m is ad else jax.jit)(
        (ad.value_and_grad if m is ad else jax.value_and_grad)(lambda x: loss(m, x)))(t),
    "jit_vjp": _jit_vjp,
    "jit_jvp": lambda m, t: (ad.jit if m is ad else jax.jit)(
        lambda x, u: (ad.jvp if m is ad else jax.jvp)(lambda y: mapped(m, y), (x,), (u,)))(
        t, _tangent(t)),
    "jit_jacfwd": lambda m, t: (ad.jit if m is ad else jax.jit)(
        (ad.jacfwd if m is ad else jax.jacfwd)(lambda x: mapped(m, x)))(t),
    "jit_jacrev": lambda m, t: (ad.jit if m is ad else jax.jit)(
        (ad.jacrev if m is ad else jax.jacrev)(lambda x: mapped(m, x)))(t),
    "jit_hessian": lambda m, t: (ad.jit if m is ad else jax.jit)(
        (ad.hessian if m is ad else jax.hessian)(lambda x: loss(m, x)))(t),
    "jit_vmap": lambda m, t: (ad.jit if m is ad else jax.jit)(
        (ad.vmap if m is ad else jax.vmap)(lambda x: mapped(m, x)))(_batch(t)),
    "vmap_grad": lambda m, t: (ad.vmap if m is ad else jax.vmap)(
        (ad.grad if m is ad else jax.grad)(lambda x: loss(m, x)))(_batch(t)),
    "grad_jit": lambda m, t: (ad.grad if m is ad else jax.grad)(
        (ad.jit if m is ad else jax.jit)(lambda x: loss(m, x)))(t),
    "jit_grad_checkpoint": lambda m, t: (ad.jit if m is ad else jax.jit)(
        (ad.grad if m is ad else jax.grad)(lambda x: loss(m, (
            ad.checkpoint if m is ad else jax.checkpoint)(lambda y: mapped(m, y))(x))))(t),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("transform", list(TRACED))
def test_traced_transform_keeps_jax_structure_and_values(transform: str, kind: str) -> None:
    t = TREES[kind]
    same(TRACED[transform](ad, t), _oracle(TRACED[transform], t))


# -- arguments beyond the first, and outputs mixing structures ------------------------------------
@pytest.mark.parametrize("wrap", ["eager", "jit"])
def test_grad_of_several_pytree_arguments_and_a_pytree_output(wrap: str) -> None:
    """argnums over two pytree arguments; jvp of a function returning (dict, None, P)."""
    p, d = TREES["namedtuple"], TREES["dict"]

    def f(m: Any, x: Any, y: Any) -> Any:
        return loss(m, x) * loss(m, y)

    def h(m: Any, x: Any) -> Any:
        return {"s": m.sin(x.w), "t": None}, None, P(m.cos(x.b), x.w * 3.0)

    ours = ad.grad(lambda x, y: f(ad, x, y), argnums=(0, 1))
    if wrap == "jit":
        ours = ad.jit(ours)
    same(ours(p, d), jax.grad(lambda x, y: f(jnp, x, y), argnums=(0, 1))(_j(p), _j(d)))
    ourj = (ad.jit if wrap == "jit" else (lambda g: g))(
        lambda x, u: ad.jvp(lambda y: h(ad, y), (x,), (u,)))
    same(ourj(p, _tangent(p)), jax.jvp(lambda y: h(jnp, y), (_j(p),), (_j(_tangent(p)),)))


def test_dict_results_come_back_with_sorted_keys() -> None:
    """As JAX: a dict argument's gradient and a dict output list their keys sorted."""
    g = ad.grad(lambda x: loss(ad, x))(TREES["dict"])
    assert list(g) == ["a", "b", "w"]
    out = ad.jit(lambda x: {"z": x["w"] * 1.0, "a": x["b"] * 1.0})(TREES["dict"])
    assert list(out) == ["a", "z"]


def test_vjp_refuses_a_cotangent_of_another_structure() -> None:
    _, fn = ad.vjp(lambda x: mapped(ad, x), TREES["namedtuple"])
    with pytest.raises(ad.errors.ArgumentError, match="structure"):
        fn((np.ones(2), np.ones(1)))  # a plain tuple for a namedtuple output
    fn.release()


def test_jvp_refuses_a_tangent_of_another_structure() -> None:
    with pytest.raises(ad.errors.ArgumentError, match="structure"):
        ad.jvp(lambda x: mapped(ad, x), (TREES["namedtuple"],), ((np.ones(2), np.ones(1)),))


# -- custom rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["eager", "nested", "tuple_out"])
def test_custom_vjp_on_pytrees_uses_its_rule(kind: str, mode: str) -> None:
    """A custom_vjp whose argument is a pytree (a list, a dict, None inside...) runs its
    bwd (seen by a counter; the rule scales by 2, so the result proves it was used) and
    its output may be a pytree (a tuple here)."""
    calls = []

    @ad.custom_vjp
    def f(x: Any) -> Any:
        out = mapped(ad, x)
        return (out, ad.sum(tu.tree_leaves(x)[0])) if mode == "tuple_out" else out

    def fwd(x: Any) -> Any:
        return f(x), x

    def bwd(x: Any, g: Any) -> Any:
        calls.append(1)
        gt = g[0] if mode == "tuple_out" else g
        # twice the true VJP of mapped: 2 * (2 cos(x) g)
        ct = tu.tree_map(lambda xi, gi: ad.cos(xi) * gi * 4.0, x, gt)
        if mode == "tuple_out":
            leaves, tree = tu.tree_flatten(ct)
            leaves[0] = leaves[0] + g[1] * 2.0
            ct = tree.unflatten(leaves)
        return (ct,)

    f.defvjp(fwd, bwd)

    def jf(x: Any) -> Any:
        out = loss(jnp, mapped(jnp, x))
        if mode == "tuple_out":
            return out + jnp.sum(jax.tree_util.tree_leaves(x)[0])
        return out

    def of(x: Any) -> Any:
        out = f(x)
        if mode == "tuple_out":
            return loss(ad, out[0]) + out[1]
        return loss(ad, out)

    t = TREES[kind]
    if mode == "nested":
        t = [t, None]  # a list argument holding the tree and an empty subtree

    want = jax.tree_util.tree_map(lambda g: 2 * g, jax.grad(jf)(_j(t)))
    same(ad.grad(of)(t), want)
    assert calls


@pytest.mark.parametrize("kind", ["namedtuple", "dict", "none", "registered"])
def test_custom_jvp_on_pytrees_uses_its_rule(kind: str) -> None:
    """A custom_jvp on a pytree argument with a pytree output: forward mode and reverse
    mode (the transposed rule) both use the rule (doubled, so its use is visible)."""

    @ad.custom_jvp
    def f(x: Any) -> Any:
        return mapped(ad, x)

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (u,) = primals, tangents
        return f(x), tu.tree_map(lambda xi, ui: ad.cos(xi) * ui * 4.0, x, u)

    t = TREES[kind]
    u = _tangent(t)
    out, tan = ad.jvp(f, (t,), (u,))
    jout, jtan = jax.jvp(lambda x: mapped(jnp, x), (_j(t),), (_j(u),))
    same(out, jout)
    same(tan, jax.tree_util.tree_map(lambda a: 2 * a, jtan))
    g = ad.grad(lambda x: loss(ad, f(x)))(t)
    y, pull = jax.vjp(lambda x: mapped(jnp, x), _j(t))
    (want,) = pull(jax.grad(lambda o: loss(jnp, o))(y))
    same(g, jax.tree_util.tree_map(lambda a: 2 * a, want))


# -- checkpoint returning a dict, optimizers on any pytree ----------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_checkpoint_region_takes_and_returns_pytrees_under_a_tape(kind: str) -> None:
    t = TREES[kind]

    def region(x: Any) -> Any:
        return {"out": mapped(ad, x), "none": None}

    got = ad.grad(lambda x: loss(ad, ad.checkpoint(region)(x)["out"]))(t)
    want = jax.grad(lambda x: loss(jnp, jax.checkpoint(lambda y: {"out": mapped(jnp, y)})(x)
                                   ["out"]))(_j(t))
    same(got, want)


@pytest.mark.parametrize("kind", KINDS)
def test_optimizer_steps_any_pytree_of_parameters(kind: str) -> None:
    t = TREES[kind]
    params = tu.tree_map(lambda x: ts.from_numpy(np.array(x, dtype=np.float64)), t)
    grads = ad.grad(lambda x: loss(ad, x))(params)
    want = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, _j(t), jax.grad(
        lambda x: loss(jnp, x))(_j(t)))
    ad.optim.SGD(lr=0.1).step(params, grads)
    same(params, want)


def test_optimizer_skips_a_none_gradient_at_a_parameter_position() -> None:
    params = {"a": ts.from_numpy(A.copy()), "b": ts.from_numpy(B.copy())}
    ad.optim.SGD(lr=1.0).step(params, {"a": None, "b": np.ones(1)})
    same(params, {"a": A, "b": B - 1.0})
    with pytest.raises(ad.errors.ArgumentError, match="structure"):
        ad.optim.SGD(lr=1.0).step(params, {"a": np.ones(2)})


def test_traced_treedef_is_the_one_pytreedef() -> None:
    graph = ad.trace(lambda x: mapped(ad, x))(TREES["nested"])
    assert ad.traced.TreeDef is tu.PyTreeDef
    assert graph.in_tree == tu.tree_structure((TREES["nested"],))
    assert graph.out_tree == tu.tree_structure(TREES["nested"])
    assert "namedtuple[P]" in str(graph.out_tree)


# -- vmap's in_axes / out_axes as pytree prefixes (JAX's semantics) ---------------------------

_VP = {"w": np.arange(6.0).reshape(2, 3), "b": np.arange(3.0)}
_VX = np.arange(12.0).reshape(4, 3)


def _vf(m: Any, p: Any, x: Any) -> Any:
    return {"y": m.sin(x) * p["b"] + m.sum(p["w"]), "z": m.cos(x)}


@pytest.mark.parametrize(
    ("in_axes", "out_axes"),
    [
        ((None, 0), 0),
        (({"w": None, "b": None}, 0), {"y": 0, "z": 1}),
        ([None, 1], {"y": 1, "z": 0}),
        (({"b": None, "w": 1}, 0), 0),
    ],
    ids=["none-int", "dict-prefixes", "list-and-dict-out", "batched-dict-leaf"],
)
def test_vmap_takes_pytree_prefix_axes_as_jax(in_axes: Any, out_axes: Any) -> None:
    import jax
    import jax.numpy as jnp

    p = dict(_VP)
    x = _VX if in_axes[1] == 0 else _VX.T
    if isinstance(in_axes[0], dict) and in_axes[0]["w"] == 1:
        p["w"] = np.stack([_VP["w"]] * 4, axis=1)
    want = jax.vmap(lambda p, x: _vf(jnp, p, x), in_axes=tuple(in_axes), out_axes=out_axes)(p, x)
    for mode in ("eager", "jit"):
        g = ad.vmap(lambda p, x: _vf(ad, p, x), in_axes=in_axes, out_axes=out_axes)
        got = (ad.jit(g) if mode == "jit" else g)(p, x)
        assert sorted(got) == sorted(want)
        for k in want:
            np.testing.assert_allclose(_np(got[k]), np.asarray(want[k]), rtol=1e-12)


def test_vmap_refuses_axes_that_are_not_a_prefix_or_not_ints() -> None:
    f = ad.vmap(lambda p, x: _vf(ad, p, x), in_axes=({"w": 0}, 0))
    with pytest.raises(ArgumentError, match=r"^vmap: argument 'in_axes': .* not a pytree prefix"):
        f(_VP, _VX)
    with pytest.raises(TypeError, match=r"^vmap: argument 'in_axes' must be an int, None, or"):
        ad.vmap(lambda x: x, in_axes=({"w": "0"},))
    with pytest.raises(ArgumentError, match=r"^vmap: argument 'out_axes': an output at"):
        ad.vmap(lambda p, x: _vf(ad, p, x), in_axes=(None, 0), out_axes={"y": 0, "z": None})(
            _VP, _VX
        )
