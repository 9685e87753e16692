"""``tenferro_ad.tree_util``: the public pytree module (``jax.tree_util``'s names).

The behaviour is tested against JAX in ``tests/storage/test_pytree.py``; here the public
surface is pinned and used as a user would.
"""

from __future__ import annotations

import collections

import jax.tree_util as jtu
import numpy as np

import tenferro_ad.tree_util as tu
import tenferro_storage as ts
from tenferro_storage import _pytree

PUBLIC = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "PyTreeDef",
    "SequenceKey",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_is_strict_leaf",
    "treedef_tuple",
]


def test_public_names_are_pinned_sorted_and_the_storage_objects() -> None:
    """``__all__`` is sorted, exactly these names, each the kernel module's own object."""
    assert tu.__all__ == sorted(tu.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(tu, name) is getattr(_pytree, name)


def test_every_public_function_but_one_is_a_jax_tree_util_name() -> None:
    """Users can switch from ``jax.tree_util``: only ``treedef_is_strict_leaf`` is ours."""
    assert {n for n in PUBLIC if not hasattr(jtu, n)} == {"treedef_is_strict_leaf"}


def test_owners_are_leaves_and_are_not_copied_or_borrowed() -> None:
    """Owners flatten as leaves (the very objects); flattening borrows nothing."""
    w, b = ts.ones((2, 2)), ts.zeros(2)
    Layer = collections.namedtuple("Layer", "w b")
    leaves, treedef = tu.tree_flatten({"layers": [Layer(w, b)], "step": None})
    assert leaves[0] is w and leaves[1] is b and treedef.num_leaves == 2
    w.fill(3.0)  # not borrowed
    back = treedef.unflatten(leaves)
    assert type(back["layers"][0]) is Layer and back["step"] is None
    sums = tu.tree_map(lambda t: float(t.to_numpy().sum()), back)
    assert sums == {"layers": [Layer(12.0, 0.0)], "step": None}
    assert tu.tree_leaves(np.ones(2))[0].shape == (2,)
