"""numpy's manipulation functions (``ops/manip.py``) and products (``ops/products.py``)
against JAX: value, VJP, JVP (float32/float64, complex where useful), reverse-over-reverse,
plus the constructors and the methods installed on handles."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tests.ad._opcheck import (
    Op,
    cases,
    check_first_order,
    check_forward_over_reverse,
    check_second_order,
    second_cases,
)

F = ("float32", "float64")
FC = ("float32", "float64", "complex128")
S3 = (((2, 3, 4),),)
S2 = (((3, 4),),)


TABLE = [
    Op("ravel", ad.ravel, jnp.ravel, S3, "any", FC),
    Op("ravel_T", lambda x: ad.ravel(x.T), lambda x: jnp.ravel(x.T), S2, "any", F),
    Op("flatten_method", lambda x: x.flatten(), lambda x: x.flatten(), S3, "any", F),
    Op("squeeze", ad.squeeze, jnp.squeeze, (((1, 3, 1, 2),),), "any", F),
    Op("squeeze_axis", lambda x: ad.squeeze(x, axis=2), lambda x: jnp.squeeze(x, axis=2),
       (((1, 3, 1, 2),),), "any", F),
    Op("moveaxis", lambda x: ad.moveaxis(x, 0, -1), lambda x: jnp.moveaxis(x, 0, -1), S3),
    Op("moveaxis_multi", lambda x: ad.moveaxis(x, (0, 1), (2, 0)),
       lambda x: jnp.moveaxis(x, (0, 1), (2, 0)), S3),
    Op("rollaxis", lambda x: ad.rollaxis(x, 2, 0), lambda x: jnp.rollaxis(x, 2, 0), S3),
    Op("repeat", lambda x: ad.repeat(x, 2, axis=1), lambda x: jnp.repeat(x, 2, axis=1), S2,
       "any", FC),
    Op("repeat_list", lambda x: ad.repeat(x, [1, 0, 3], axis=0),
       lambda x: jnp.repeat(x, jnp.array([1, 0, 3]), axis=0, total_repeat_length=4), S2),
    Op("repeat_flat", lambda x: ad.repeat(x, 2), lambda x: jnp.repeat(x, 2), S2),
    Op("tile", lambda x: ad.tile(x, (2, 1, 3)), lambda x: jnp.tile(x, (2, 1, 3)), S2, "any", FC),
    Op("tile_int", lambda x: ad.tile(x, 2), lambda x: jnp.tile(x, 2), S2),
    Op("roll", lambda x: ad.roll(x, 2, axis=1), lambda x: jnp.roll(x, 2, axis=1), S2),
    Op("roll_flat", lambda x: ad.roll(x, -5), lambda x: jnp.roll(x, -5), S2),
    Op("roll_multi", lambda x: ad.roll(x, (1, -2), axis=(0, 2)),
       lambda x: jnp.roll(x, (1, -2), axis=(0, 2)), S3),
    Op("flip", ad.flip, jnp.flip, S3, "any", FC),
    Op("flip_axis", lambda x: ad.flip(x, 1), lambda x: jnp.flip(x, 1), S3),
    Op("fliplr", ad.fliplr, jnp.fliplr, S2),
    Op("flipud", ad.flipud, jnp.flipud, S2),
    Op("rot90", ad.rot90, jnp.rot90, S2),
    Op("rot90_k2", lambda x: ad.rot90(x, 2), lambda x: jnp.rot90(x, 2), S2),
    Op("rot90_k3_axes", lambda x: ad.rot90(x, 3, axes=(1, 2)),
       lambda x: jnp.rot90(x, 3, axes=(1, 2)), S3),
    Op("pad_constant", lambda x: ad.pad(x, ((1, 2), (0, 1))),
       lambda x: jnp.pad(x, ((1, 2), (0, 1))), S2, "any", FC),
    Op("pad_constant_value", lambda x: ad.pad(x, 1, constant_values=2.5),
       lambda x: jnp.pad(x, 1, constant_values=2.5), S2),
    Op("pad_edge", lambda x: ad.pad(x, ((2, 1), (1, 3)), mode="edge"),
       lambda x: jnp.pad(x, ((2, 1), (1, 3)), mode="edge"), S2),
    Op("pad_reflect", lambda x: ad.pad(x, 2, mode="reflect"),
       lambda x: jnp.pad(x, 2, mode="reflect"), S2),
    Op("pad_symmetric", lambda x: ad.pad(x, (1, 2), mode="symmetric"),
       lambda x: jnp.pad(x, (1, 2), mode="symmetric"), S2),
    Op("pad_wrap", lambda x: ad.pad(x, ((1, 1), (2, 0)), mode="wrap"),
       lambda x: jnp.pad(x, ((1, 1), (2, 0)), mode="wrap"), S2),
    Op("split", lambda x: ad.stack(ad.split(x, 2, axis=1)),
       lambda x: jnp.stack(jnp.split(x, 2, axis=1)), S2),
    Op("split_indices", lambda x: ad.concatenate(ad.split(x, [1, 3], axis=1)[::-1], axis=1),
       lambda x: jnp.concatenate(jnp.split(x, [1, 3], axis=1)[::-1], axis=1), S2),
    Op("array_split", lambda x: ad.concatenate(ad.array_split(x, 3, axis=1)[1:], axis=1),
       lambda x: jnp.concatenate(jnp.array_split(x, 3, axis=1)[1:], axis=1), S2),
    Op("vsplit", lambda x: ad.vsplit(x, 3)[1], lambda x: jnp.vsplit(x, 3)[1], S2),
    Op("hsplit", lambda x: ad.hsplit(x, 2)[1], lambda x: jnp.hsplit(x, 2)[1], S2),
    Op("dsplit", lambda x: ad.dsplit(x, 2)[0], lambda x: jnp.dsplit(x, 2)[0], S3),
    Op("vstack", lambda x, y: ad.vstack([x, y, x]), lambda x, y: jnp.vstack([x, y, x]),
       (((3,), (3,)), ((2, 3), (1, 3)))),
    Op("hstack", lambda x, y: ad.hstack([x, y]), lambda x, y: jnp.hstack([x, y]),
       (((3,), (2,)), ((2, 3), (2, 1)))),
    Op("dstack", lambda x, y: ad.dstack([x, y]), lambda x, y: jnp.dstack([x, y]),
       (((3,), (3,)), ((2, 3), (2, 3)))),
    Op("column_stack", lambda x, y: ad.column_stack([x, y]),
       lambda x, y: jnp.column_stack([x, y]), (((3,), (3, 2)),)),
    Op("atleast_3d", lambda x: ad.atleast_3d(x), lambda x: jnp.atleast_3d(x),
       (((),), ((3,),), ((2, 3),))),
    Op("atleast_2d", lambda x: ad.atleast_2d(x), lambda x: jnp.atleast_2d(x),
       (((),), ((3,),))),
    Op("append", lambda x, y: ad.append(x, y), lambda x, y: jnp.append(x, y),
       (((2, 3), (4,)),)),
    Op("append_axis", lambda x, y: ad.append(x, y, axis=0),
       lambda x, y: jnp.append(x, y, axis=0), (((2, 3), (1, 3)),)),
    Op("diag_embed", lambda x: ad.diag(x), lambda x: jnp.diag(x), (((4,),),), "any", FC),
    Op("diag_embed_k", lambda x: ad.diag(x, -2), lambda x: jnp.diag(x, -2), (((3,),),)),
    Op("diag_extract", lambda x: ad.diag(x, 1), lambda x: jnp.diag(x, 1), S2),
    Op("diagflat", lambda x: ad.diagflat(x, 1), lambda x: jnp.diagflat(x, 1), (((2, 2),),)),
    Op("diagonal", lambda x: ad.diagonal(x, -1, 0, 2), lambda x: jnp.diagonal(x, -1, 0, 2),
       S3),
    Op("trace", lambda x: ad.trace(x), lambda x: jnp.trace(x), S2, "any", FC),
    Op("tril", lambda x: ad.tril(x, -1), lambda x: jnp.tril(x, -1), S3),
    Op("triu", lambda x: ad.triu(x, 1), lambda x: jnp.triu(x, 1), S2),
    Op("linspace", lambda a, b: ad.linspace(a, b, 5), lambda a, b: jnp.linspace(a, b, 5),
       (((), ()), ((3,), (3,)))),
    Op("linspace_no_endpoint", lambda a, b: ad.linspace(a, b, 4, endpoint=False),
       lambda a, b: jnp.linspace(a, b, 4, endpoint=False), (((2,), ()),)),
    Op("select", lambda x, y: ad.select([x > 0.5, y < 0.0], [x, y * x], 0.25),
       lambda x, y: jnp.select([x > 0.5, y < 0.0], [x, y * x], 0.25), (((2, 3), (2, 3)),),
       "away"),
    Op("zeros_ones_full_like",
       lambda x: x * ad.ones_like(x) + ad.zeros_like(x) + ad.full_like(x, 2.0),
       lambda x: x * jnp.ones_like(x) + jnp.zeros_like(x) + jnp.full_like(x, 2.0), S2),
    Op("eye", lambda x: x @ ad.eye(4, dtype=x.dtype.numpy) * 2.0,
       lambda x: x @ jnp.eye(4, dtype=x.dtype) * 2.0, S2),
    Op("r_", lambda x, y: ad.r_[x, 0:2, y, 1.5], lambda x, y: jnp.r_[x, 0:2, y, 1.5],
       (((3,), (2,)),)),
    Op("r_linspace", lambda x: ad.r_[x, -1:1:4j], lambda x: jnp.r_[x, -1:1:4j], (((3,),),),
       "any", ("float64",)),
    Op("c_", lambda x, y: ad.c_[x, y], lambda x, y: jnp.c_[x, y], (((3,), (3, 2)),)),
    # products
    Op("dot_vv", ad.dot, jnp.dot, (((4,), (4,)),), "any", FC),
    Op("dot_mv", ad.dot, jnp.dot, (((3, 4), (4,)),), "any", F),
    Op("dot_nd", ad.dot, jnp.dot, (((2, 3, 4), (5, 4, 2)),), "any", F),
    Op("dot_scalar", ad.dot, jnp.dot, (((), (3,)),), "any", F),
    Op("vdot", ad.vdot, jnp.vdot, (((2, 3), (3, 2)),), "any", FC),
    Op("inner", ad.inner, jnp.inner, (((2, 4), (3, 4)), ((4,), (4,))), "any", FC),
    Op("outer", ad.outer, jnp.outer, (((3,), (2, 2)),), "any", FC),
    Op("kron", ad.kron, jnp.kron, (((2, 3), (2, 2)), ((3,), (2, 2))), "any", FC),
    Op("cross", ad.cross, jnp.cross, (((3,), (3,)), ((4, 3), (3,))), "any", F),
    Op("cross_axis", lambda a, b: ad.cross(a, b, axisa=0, axisb=0),
       lambda a, b: jnp.cross(a, b, axisa=0, axisb=0), (((3, 2), (3, 2)),)),
    Op("cross_2d", ad.cross, jnp.cross, (((4, 2), (4, 2)),)),
    Op("tensordot_list_axes", lambda a, b: ad.tensordot(a, b, axes=[-1, 0]),
       lambda a, b: jnp.tensordot(a, b, axes=[-1, 0]), (((2, 3), (3, 4)),), "any", F),
    Op("tensordot_pair_lists", lambda a, b: ad.tensordot(a, b, axes=([0, 2], [1, 0])),
       lambda a, b: jnp.tensordot(a, b, axes=([0, 2], [1, 0])), (((2, 3, 4), (4, 2, 5)),)),
    Op("einsum_interleaved", lambda a, b: ad.einsum(a, [0, 1], b, [1, 2], [2, 0]),
       lambda a, b: jnp.einsum(a, [0, 1], b, [1, 2], [2, 0]), (((2, 3), (3, 4)),), "any", FC),
    Op("einsum_interleaved_implicit", lambda a, b: ad.einsum(a, [Ellipsis, 5], b, [5, 7]),
       lambda a, b: jnp.einsum(a, [Ellipsis, 5], b, [5, 7]), (((2, 3, 4), (4, 2)),)),
]


@pytest.mark.parametrize(("op", "bucket", "dtype"), cases(TABLE))
def test_value_vjp_jvp_match_jax(op: Op, bucket: int, dtype: str) -> None:
    """Value, VJP and JVP agree with JAX and keep the input dtype."""
    check_first_order(op, bucket, dtype)


@pytest.mark.parametrize("op", second_cases(TABLE))
def test_reverse_over_reverse_matches_jax(op: Op) -> None:
    """The gradient of a directional gradient (second order) agrees with JAX."""
    check_second_order(op, 0)


@pytest.mark.parametrize("op", second_cases(TABLE))
def test_forward_over_reverse_matches_jax(op: Op) -> None:
    """jvp of a directional gradient (u^T H v) agrees with JAX."""
    check_forward_over_reverse(op, 0)


def test_constructors_are_constants() -> None:
    """eye/zeros_like/ones_like/full_like never track, even from a tracked value."""

    def f(x: ad.EagerTensor) -> ad.EagerTensor:
        for c in (ad.zeros_like(x), ad.ones_like(x), ad.full_like(x, 3.0), ad.eye(2)):
            assert not c.is_tracked
        np.testing.assert_array_equal(ad.full_like(x, 3.0).to_numpy(), np.full((2,), 3.0))
        assert ad.ones_like(x, dtype="float32").to_numpy().dtype == np.float32
        return ad.sum(x)

    ad.grad(f)(ts.from_numpy(np.array([1.0, 2.0])))


def test_squeeze_of_a_non_unit_axis_is_refused() -> None:
    """squeeze names the axis that is not of extent 1."""
    with pytest.raises(ValueError, match="squeeze: argument 'axis'"):
        ad.squeeze(ts.from_numpy(np.ones((2, 1))), axis=0)


def test_split_into_unequal_sections_is_refused() -> None:
    """split (unlike array_split) requires an equal division."""
    with pytest.raises(ValueError, match="split: array split does not result"):
        ad.split(ts.from_numpy(np.ones((5,))), 2)


def test_tensordot_axes_out_of_range_names_the_argument() -> None:
    """A tensordot axis outside the rank is refused (numpy would raise too)."""
    with pytest.raises(ValueError, match="tensordot: axis 3"):
        ad.tensordot(ts.from_numpy(np.ones((2, 3))), ts.from_numpy(np.ones((3, 2))), axes=[3, 0])
