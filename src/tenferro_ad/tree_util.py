"""Pytree utilities: ``import tenferro_ad.tree_util as tu`` as you would ``jax.tree_util``.

The one pytree implementation of tenferro (it lives in the storage kernel, which
``borrow_arrays`` needs, and is re-exported here); the transforms (``grad``, ``vjp``,
``jit``, ``vmap``, ``checkpoint``...) and optimizers read argument and result structures
with it.  JAX's semantics: tuples, lists, dicts (flattened in sorted key order; rebuilt
with sorted keys), namedtuples (rebuilt as their type; a different structure from a plain
tuple), ``None`` (a node without leaves), ``OrderedDict``, ``defaultdict``, and classes
registered with :func:`register_pytree_node` or :func:`register_dataclass` (tenferro's own
registry, separate from JAX's) are nodes; everything else, owners and arrays included, is a
leaf.  Flattening and unflattening cost O(nodes), allocate the leaf list and never copy,
borrow or consume a leaf.

:class:`PyTreeDef` structures are hashable and compared by value (compile-cache keys) and
print as JAX's do: ``PyTreeDef((*, {'a': *, 'b': None}))``.
"""

from tenferro_storage._pytree import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    KeyEntry,
    KeyPath,
    PyTreeDef,
    SequenceKey,
    keystr,
    register_dataclass,
    register_pytree_node,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
    treedef_children,
    treedef_is_leaf,
    treedef_is_strict_leaf,
    treedef_tuple,
)

__all__ = [
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
