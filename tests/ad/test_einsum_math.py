"""The einsum planner and its pairwise kernels (numpy level) against numpy and JAX.

Values against ``numpy.einsum``; the step-by-step VJP and JVP (reverse / forward through
the cached pairwise plan) against ``jax.vjp`` / ``jax.jvp`` of ``jnp.einsum``, in float64
and complex128.  Sizes come from a small bucket so JAX's compile cache hits.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenferro_ad as ad
from tenferro_ad.ops import _einsum_path as E

jax.config.update("jax_enable_x64", True)

# subscripts covering: matmul chains, batch labels, traces, diagonals, private sums,
# outer products, implicit output, ellipsis, full contraction, permuted outputs.
SPECS: tuple[str, ...] = (
    "ij,jk->ik",
    "ij,jk,kl->il",
    "abc,cde,efa->bdf",
    "bij,bjk->bik",
    "bij,bjk->kib",
    "ii->",
    "ii->i",
    "iij,jk,k->",
    "ijk,kj->i",
    "ij,ij->ij",
    "i,j->ij",
    "ij,jk",
    "...ij,...jk->...ik",
    "ab,ab->",
    "ij->ji",
    "ijj,kj->ik",
    "aij,ajk,akl->ail",
    "pqr,rs,sq->p",
)


def _shapes(sub: str, size: dict[str, int], ell: tuple[int, ...]) -> list[tuple[int, ...]]:
    lhs = sub.split("->")[0]
    out = []
    for t in lhs.split(","):
        shp: list[int] = []
        rest = t
        if "..." in t:
            pre, rest = t.split("...")
            shp += [size[c] for c in pre] + list(ell)
        shp += [size[c] for c in rest]
        out.append(tuple(shp))
    return out


def _rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    x = rng.standard_normal(shape)
    if dtype == np.complex128:
        x = x + 1j * rng.standard_normal(shape)
    return x


cases = st.tuples(
    st.sampled_from(SPECS),
    st.fixed_dictionaries({c: st.sampled_from([1, 2, 3]) for c in "abcdefijklpqrs"}),
    st.sampled_from([np.float64, np.complex128]),
    st.integers(0, 2**31 - 1),
)


@settings(max_examples=40, deadline=None)
@given(cases)
def test_contract_value_vjp_jvp_match_numpy_and_jax(case: Any) -> None:
    """Value = numpy.einsum; VJP = jax.vjp; JVP = jax.jvp (JAX's no-conjugation convention)."""
    sub, size, dtype, seed = case
    rng = np.random.default_rng(seed)
    shapes = _shapes(sub, size, (2,))
    ops = [_rand(rng, s, dtype) for s in shapes]
    got = E.contract(sub, *ops)
    want = np.einsum(sub, *ops)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert got.flags.c_contiguous and got.flags.owndata
    ct = _rand(rng, want.shape, dtype)
    _, f = jax.vjp(lambda *xs: jnp.einsum(sub, *xs), *ops)
    for g, w in zip(E.contract_vjp(sub, ops, ct), f(ct), strict=True):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-12)
    tans = [_rand(rng, s, dtype) for s in shapes]
    _, jt = jax.jvp(lambda *xs: jnp.einsum(sub, *xs), tuple(ops), tuple(tans))
    _, t = E.contract_jvp(sub, ops, tans)
    np.testing.assert_allclose(t, np.asarray(jt), rtol=1e-10, atol=1e-12)


def test_plan_is_cached_per_subscripts_and_shapes() -> None:
    """Same subscripts and shapes: the same plan object (one dict lookup)."""
    a = E.plan("ij,jk,kl->il", ((2, 3), (3, 4), (4, 5)))
    assert E.plan("ij,jk,kl->il", ((2, 3), (3, 4), (4, 5))) is a
    assert E.plan("ij,jk,kl->il", ((2, 3), (3, 4), (4, 6))) is not a


def test_plan_allows_intermediates_larger_than_inputs() -> None:
    """abc,cde,efa->bdf goes pairwise (numpy's optimize=True keeps it as one 6-loop einsum)."""
    p = E.plan("abc,cde,efa->bdf", ((20, 20, 20),) * 3)
    assert [type(s).__name__ for s in p.steps] == ["BinaryStep", "BinaryStep"]
    path = np.einsum_path("abc,cde,efa->bdf", *[np.empty((20, 20, 20))] * 3, optimize=True)[0]
    assert path == ["einsum_path", (0, 1, 2)]


def test_gemm_writes_the_final_layout_without_a_transpose() -> None:
    """Intermediates are ordered (batch, free a, free b): each GEMM writes its result directly."""
    sub, shapes = "aij,ajk,akl->ail", ((2, 3, 4), (2, 4, 5), (2, 5, 6))
    p = E.plan(sub, shapes)
    inputs, _, sizes = E.parse_subscripts(sub, shapes)
    work = list(inputs)
    for s in p.steps:
        assert isinstance(s, E.BinaryStep)
        ta, tb = work[s.i], work[s.j]
        out = s.subscripts.split("->")[1]
        plan = E._binary_plan(
            s.subscripts, tuple(sizes[c] for c in ta), tuple(sizes[c] for c in tb)
        )
        assert plan[10] is None  # no final transposing copy
        work = [t for k, t in enumerate(work) if k not in (s.i, s.j)] + [out]


@pytest.mark.parametrize(
    ("sub", "shapes", "fragment"),
    [
        ("ij,jk->ik", [(2, 3), (4, 5)], "label 'j' has size 3"),
        ("ij,jk->ik", [(2, 3)], "name 2 operand(s) but 1"),
        ("ij->ik", [(2, 3)], "output label 'k'"),
        ("ij->ii", [(2, 2)], "repeats"),
        ("ijk->i", [(2, 3)], "rank 2"),
        ("i1->i", [(2, 3)], "labels must be letters"),
    ],
)
def test_bad_subscripts_name_the_op_and_the_operand(
    sub: str, shapes: list[tuple[int, ...]], fragment: str
) -> None:
    with pytest.raises(E.EinsumError, match="einsum") as info:
        E.plan(sub, tuple(shapes))
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("sa", "sb", "axes"),
    [
        ((2, 3), (3, 4), 1),
        ((2, 3, 4), (3, 4, 5), 2),
        ((4, 3, 2), (2, 4), ([0, 2], [1, 0])),
        ((2, 3), (4,), 0),
        ((2, 3, 4), (4, 5), ([-1], [0])),
    ],
)
def test_tensordot_subscripts_match_numpy(
    sa: tuple[int, ...], sb: tuple[int, ...], axes: Any
) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    sub = E.tensordot_subscripts(len(sa), len(sb), axes)
    np.testing.assert_allclose(E.contract(sub, a, b), np.tensordot(a, b, axes), rtol=1e-12)


@pytest.mark.parametrize(
    ("sub", "shape", "out_shape"),
    [("i->ii", (3,), (3, 3)), ("i->ij", (3,), (3, 2)), ("ij->jii", (3, 2), (2, 3, 3))],
)
def test_unary_expand_is_the_transpose_of_unary_extract(
    sub: str, shape: tuple[int, ...], out_shape: tuple[int, ...]
) -> None:
    """<expand(x), y> == <x, extract(y)>: the unary family is closed under transposition."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    y = rng.standard_normal(out_shape)
    lhs = np.vdot(E.unary_einsum(x, sub, out_shape), y)
    rhs = np.vdot(x, E.unary_einsum(y, E.unary_transpose_subscripts(sub), shape))
    assert lhs == pytest.approx(rhs, rel=1e-12)


@pytest.mark.parametrize(
    "sub, shapes",
    [
        ("...ij,...jk->...ik", [(2, 3), (5, 3, 4)]),  # '...' is no axis here, one there
        ("...ij,...jk->...ik", [(6, 5, 2, 3), (5, 3, 4)]),  # two axes here, one there
        ("...ij,jk->...ik", [(6, 5, 2, 3), (3, 4)]),
        ("i...,i...->...", [(3,), (3, 2, 2)]),
    ],
)
def test_an_ellipsis_covers_each_operand_s_own_number_of_axes(
    sub: str, shapes: list[tuple[int, ...]]
) -> None:
    """``...`` stands for as many leading broadcast axes as each operand has beyond its
    named labels -- none, one or two, differing between operands -- aligned from the
    right as numpy does.  Mutant: the per-operand ellipsis rank ``len(shp) - (len(t) -
    3)`` turned into ``&``."""
    rng = np.random.default_rng(11)
    ops = [rng.normal(size=s) for s in shapes]
    np.testing.assert_allclose(E.contract(sub, *ops), np.einsum(sub, *ops), rtol=1e-12)


def test_a_misfit_interleaved_operand_names_its_own_argument_positions() -> None:
    """In the interleaved form ``einsum(a, [0, 1], b, [1, 2, 3], [0, 3])`` operand 1 and
    its labels are arguments 2 and 3, and the refusal names them.  Mutant: ``2 * i + 1``
    turned into ``3 * i + 1`` (arguments 2 and 4)."""
    with pytest.raises(E.EinsumError, match=r"^einsum: arguments 2 and 3 do not fit: .* "
                                            r"argument 2 has rank 2"):
        ad.einsum(np.ones((2, 3)), [0, 1], np.ones((3, 4)), [1, 2, 3], [0, 3])


@pytest.mark.parametrize(
    "sub, sa, sb",
    [("ij,jk->k", (2, 3), (3, 4)), ("iij,jk->ik", (3, 3, 2), (2, 4)),
     ("ij,kjl->k", (2, 3), (4, 3, 5))],
    ids=["private-sum-in-a", "diagonal-in-a", "private-sums-in-both"],
)
def test_the_pairwise_kernel_reduces_private_and_repeated_labels_first(
    sub: str, sa: tuple[int, ...], sb: tuple[int, ...]
) -> None:
    """``binary_einsum`` (the ``einsum_binary`` primitive's kernel) takes subscripts whose
    operands have labels only they use, or repeated ones: each operand is first reduced
    to its core labels by a unary step.  Mutant: the left operand's preparation
    ``ta + "->" + ua`` turned into ``- ua`` (TypeError)."""
    rng = np.random.default_rng(12)
    a, b = rng.normal(size=sa), rng.normal(size=sb)
    np.testing.assert_allclose(E.binary_einsum(a, b, sub), np.einsum(sub, a, b), rtol=1e-12)
