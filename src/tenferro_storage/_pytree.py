"""Pytrees: the one flatten / unflatten / map of tenferro, with ``jax.tree_util``'s semantics.

A pytree is a nest of containers with arbitrary objects (its *leaves*) at the bottom.  The
containers (*nodes*) are:

* ``tuple`` and ``list``: children in order;
* ``dict``: children in **sorted key order** (a dict's treedef stores the sorted keys, so
  two dicts with the same keys have the same structure whatever their insertion order,
  and :func:`tree_unflatten` builds the dict with its keys in sorted order, as JAX does);
  keys that cannot be sorted are refused (``ValueError``);
* namedtuples (a ``tuple`` subclass with ``_fields``): children in field order, rebuilt as
  the same namedtuple type; a namedtuple's treedef differs from a plain tuple's;
* ``None``: a node with no children, so it holds **no leaf** (``tree_leaves((x, None))``
  is ``[x]``) and is rebuilt as ``None``;
* ``collections.OrderedDict`` (keys in insertion order, and that order is part of the
  structure) and ``collections.defaultdict`` (sorted keys; the ``default_factory`` is part
  of the structure);
* classes registered with :func:`register_pytree_node` or :func:`register_dataclass`.

Everything else is a leaf: owners and views, numpy arrays, scalars, strings, unregistered
dataclasses, and subclasses of ``tuple``/``list``/``dict`` that are not namedtuples (node
types are matched exactly, as in JAX).  The registry is tenferro's own: registering a
class here does not register it with JAX or optree, nor the other way round.

A :class:`PyTreeDef` (the structure) is immutable, hashable and compared by value: it is
the compile-cache key of ``jit`` and ``vmap``, and prints as JAX does,
``PyTreeDef((*, {'a': *, 'b': None}))``.

Costs: flattening and unflattening are O(number of nodes), allocate the leaf list (and one
small tuple per node), and never copy or borrow a leaf (an owner stays an owner).  A single
leaf and a flat tuple or list of leaves (call arguments, a params list) take a fast path
with an interned structure; a node whose children are all leaves costs one set lookup per
child.  Flatten + unflatten, in bytecode instructions (pinned by ``tests/storage/
test_pytree.py``): a leaf ~63, a 2-tuple ~130, a list of 6 ~180, a dict of 6 ~250, a tuple
of two 2-key dicts ~550.  Pure Python on purpose: optree (C++) was measured slower on these
small trees (about 1 us of per-call overhead), and as fast only on nested dicts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

import attrs

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

T = TypeVar("T")
IsLeaf = Callable[[Any], bool] | None
_NoneType = type(None)


class _Star:
    """The leaf marker inside a structure (prints ``*``); one instance, :data:`_STAR`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "*"

    def __reduce__(self) -> str:
        return "_STAR"  # unpickles as the module's singleton


_STAR = _Star()
# A structure node is ``_STAR`` (a leaf) or the plain tuple ``(type, aux, kids, n)``: ``aux``
# is ``None`` for tuple/list/namedtuple/None, the sorted key tuple for a dict, the registered
# class's aux data otherwise; ``kids`` the tuple of child nodes, or their number when all are
# leaves (the common node; canonical: see ``_node``); ``n`` the number of leaves below.
# Plain tuples make equality and hashing C-speed (a treedef is a compile-cache key).
_Node = Any
_NONE_NODE: _Node = (_NoneType, None, 0, 0)
# Types seen to be leaves: one set-membership test per leaf on the hot path.  Never holds a
# node type (registration removes it); bounded (it keeps the types it holds alive).
_LEAF_TYPES: set[type] = {int, float, complex, bool, str, bytes}
_LEAF_TYPES_MAX = 4096


# -- key paths (where a leaf sits; built only when asked for) -------------------------------------
@attrs.frozen
class SequenceKey:
    """The child at position ``idx`` of a tuple or list; prints ``[idx]``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@attrs.frozen
class DictKey:
    """The child under ``key`` of a dict (or OrderedDict/defaultdict); prints ``[key!r]``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@attrs.frozen
class GetAttrKey:
    """The field ``name`` of a namedtuple or registered dataclass; prints ``.name``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@attrs.frozen
class FlattenedIndexKey:
    """Child number ``key`` of a node registered with :func:`register_pytree_node`.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


KeyEntry = SequenceKey | DictKey | GetAttrKey | FlattenedIndexKey
KeyPath = tuple[KeyEntry, ...]


def keystr(path: KeyPath) -> str:
    """A key path spelled as Python would index it, e.g. ``[1]['a'].x``. O(len(path)).

    Cost: no allocation; no copy; no sync; no dispatch; O(nodes of the tree).
    Raises: nothing."""
    return "".join(str(k) for k in path)


# -- the registry ---------------------------------------------------------------------------------
@attrs.frozen
class _Entry:
    """How to open and rebuild one node type.  ``flatten(x) -> (children, aux)``;
    ``unflatten(aux, children)``; ``keys(aux, n)``: the key of each of ``n`` children."""

    flatten: Callable[[Any], tuple[Iterable[Any], Any]]
    unflatten: Callable[[Any, Any], Any]
    keys: Callable[[Any, int], Sequence[KeyEntry]]
    name: str  # as the structure prints it: CustomNode(name[aux], [...])


def _sequence_keys(aux: Any, n: int) -> list[KeyEntry]:
    return [SequenceKey(i) for i in range(n)]


def _dict_keys(aux: Any, n: int) -> list[KeyEntry]:
    return [DictKey(k) for k in aux]


def _flat_index_keys(aux: Any, n: int) -> list[KeyEntry]:
    return [FlattenedIndexKey(i) for i in range(n)]


def _sorted_keys(d: dict[Any, Any]) -> tuple[Any, ...]:
    try:
        return tuple(sorted(d))
    except TypeError as e:
        raise ValueError(
            f"tree_flatten: the dict keys {list(d)!r} cannot be sorted ({e}); a pytree "
            "flattens a dict in sorted key order, so its keys must be comparable"
        ) from None


def _flatten_dict(d: dict[Any, Any]) -> tuple[list[Any], Any]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _flatten_defaultdict(d: defaultdict[Any, Any]) -> tuple[list[Any], Any]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


def _flatten_ordereddict(d: OrderedDict[Any, Any]) -> tuple[list[Any], Any]:
    return list(d.values()), tuple(d)


# Builtin node types (tuple, list, dict and None are also handled inline on the hot path;
# their entries serve the general walkers: is_leaf, key paths, flatten_up_to).
_REGISTRY: dict[type, _Entry] = {
    tuple: _Entry(lambda t: (t, None), lambda a, c: tuple(c), _sequence_keys, "tuple"),
    list: _Entry(lambda t: (t, None), lambda a, c: list(c), _sequence_keys, "list"),
    dict: _Entry(
        _flatten_dict,
        lambda a, c: dict(zip(a, c, strict=True)),
        _dict_keys,
        "dict",
    ),
    _NoneType: _Entry(lambda t: ((), None), lambda a, c: None, _sequence_keys, "None"),
    OrderedDict: _Entry(
        _flatten_ordereddict,
        lambda a, c: OrderedDict(zip(a, c, strict=True)),
        _dict_keys,
        "OrderedDict",
    ),
    defaultdict: _Entry(
        _flatten_defaultdict,
        lambda a, c: defaultdict(a[0], zip(a[1], c, strict=True)),
        lambda a, n: [DictKey(k) for k in a[1]],
        "defaultdict",
    ),
}


def _register(nodetype: type, entry: _Entry) -> None:
    if nodetype in _REGISTRY:
        raise ValueError(
            f"register_pytree_node: {nodetype.__qualname__} is registered already "
            "(a node type can be registered once)"
        )
    _REGISTRY[nodetype] = entry
    _LEAF_TYPES.discard(nodetype)


def register_pytree_node(
    nodetype: type[T],
    flatten_fn: Callable[[T], tuple[Iterable[Any], Hashable]],
    unflatten_fn: Callable[[Any, tuple[Any, ...]], T],
) -> None:
    """Make instances of exactly ``nodetype`` (not its subclasses) pytree nodes.

    ``flatten_fn(x)`` returns ``(children, aux_data)``: the children are flattened further,
    ``aux_data`` (hashable, compared with ``==``) becomes part of the structure.
    ``unflatten_fn(aux_data, children)`` rebuilds an instance from a tuple of children.
    As ``jax.tree_util.register_pytree_node``, in tenferro's own registry; a type can be
    registered once (``ValueError`` after that).  Their leaves' key paths are
    :class:`FlattenedIndexKey`.  O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1): registers the type.
    Raises: ValueError."""
    _register(
        nodetype,
        _Entry(
            flatten_fn, lambda a, c: unflatten_fn(a, tuple(c)), _flat_index_keys, nodetype.__name__
        ),
    )


def register_dataclass(
    nodetype: type[T],
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
    drop_fields: Sequence[str] = (),
) -> type[T]:
    """Make ``nodetype`` (a dataclass, or any class whose constructor takes its fields as
    keywords) a pytree node: ``data_fields`` are its children, ``meta_fields`` (hashable)
    part of its structure; rebuilt as ``nodetype(**fields)``.  With neither given (a
    dataclass only) the fields with ``metadata={"static": True}`` are meta fields and the
    others data fields.  For a dataclass, the two must name every ``init`` field except
    ``drop_fields``.  Returns ``nodetype`` (usable as a decorator).  As
    ``jax.tree_util.register_dataclass``; leaves' key paths are :class:`GetAttrKey`.
    O(fields).

    Cost: no allocation; no copy; no sync; no dispatch; O(1): registers the type.
    Raises: TypeError, ValueError."""
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError(
                "register_dataclass: give both data_fields and meta_fields, or neither, got "
                f"data_fields={data_fields!r}, meta_fields={meta_fields!r}"
            )
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                f"register_dataclass: {nodetype.__qualname__} is not a dataclass; name its "
                "data_fields and meta_fields"
            )
        fields = dataclasses.fields(nodetype)
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data, meta = tuple(data_fields), tuple(meta_fields)
    if overlap := set(data) & set(meta):
        raise ValueError(
            f"register_dataclass: data_fields and meta_fields overlap: {sorted(overlap)}"
        )
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if {*data, *meta} != init:
            missing, extra = init - {*data, *meta}, {*data, *meta} - init
            raise ValueError(
                f"register_dataclass: data_fields and meta_fields of {nodetype.__qualname__} "
                f"must name every init field and only those; missing {sorted(missing)} (add "
                f"them to drop_fields to leave them out), unexpected {sorted(extra)}"
            )

    def flatten(x: Any) -> tuple[list[Any], tuple[Any, ...]]:
        return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten(aux: tuple[Any, ...], children: Iterable[Any]) -> Any:
        return nodetype(
            **dict(zip(meta, aux, strict=True)), **dict(zip(data, children, strict=True))
        )

    def keys(aux: Any, n: int) -> list[KeyEntry]:
        return [GetAttrKey(name) for name in data]

    _register(nodetype, _Entry(flatten, unflatten, keys, nodetype.__name__))
    return nodetype


@functools.lru_cache(maxsize=256)
def _namedtuple_entry(t: type) -> _Entry:
    def keys(aux: Any, n: int) -> list[KeyEntry]:
        return [GetAttrKey(name) for name in t._fields]  # type: ignore[attr-defined]

    return _Entry(lambda x: (x, None), lambda a, c: t(*c), keys, f"namedtuple[{t.__name__}]")


def _entry(t: type) -> _Entry | None:
    """The entry of node type ``t``, or ``None`` for a leaf type. O(1)."""
    e = _REGISTRY.get(t)
    if e is None and issubclass(t, tuple) and hasattr(t, "_fields"):
        return _namedtuple_entry(t)
    return e


# -- the structure --------------------------------------------------------------------------------
def _kids(node: _Node) -> tuple[_Node, ...]:
    """The child nodes of a (non-leaf) node, a flat node's leaves spelled out."""
    kids = node[2]
    return (_STAR,) * kids if type(kids) is int else kids


def _node(t: type, aux: Any, kids: list[_Node]) -> _Node:
    """The canonical node: all-leaf children are stored as their count."""
    n = 0
    flat = True
    for k in kids:
        if k is _STAR:
            n += 1
        else:
            n += k[3]
            flat = False
    return (t, aux, n if flat else tuple(kids), n)


class PyTreeDef:
    """The structure of a pytree: immutable, hashable, equal when the structures are
    (node types, dict keys, aux data and arities; leaves do not matter).  ``num_leaves``
    is O(1); ``str`` prints as JAX, e.g. ``PyTreeDef((*, {'a': *}))``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("_hash", "_node")

    _node: _Node
    _hash: int

    def __init__(self, node: _Node) -> None:
        self._node = node

    @property
    def num_leaves(self) -> int:
        """How many leaves a tree of this structure has. O(1)."""
        node = self._node
        return 1 if node is _STAR else node[3]

    @property
    def num_nodes(self) -> int:
        """Nodes and leaves in the structure (a leaf and ``None`` count one). O(nodes)."""
        return _count_nodes(self._node)

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """:func:`tree_unflatten` of this structure. O(nodes).

        Cost: no allocation (builds Python containers; a leaf is placed, never copied); no
        copy; no sync; no dispatch; O(nodes).

        Raises:
            ValueError: ``leaves`` has another number of leaves than the structure.
            TypeError: ``leaves`` is not iterable."""
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """The subtrees of ``tree`` at this structure's leaf positions: ``tree`` must have
        this structure down to them (``ValueError`` naming the key path and both
        structures otherwise). O(nodes of this structure).

        Cost: no allocation (a list of the subtrees, never copied); no copy; no sync; no
        dispatch; O(nodes of this structure).
        Raises: ValueError (``tree`` lacks this structure down to its leaf positions)."""
        return _flatten_up_to(self, tree, "flatten_up_to: the tree")

    def children(self) -> list[PyTreeDef]:
        """The structures of the root's children (``[]`` for a leaf). O(nodes).

        Cost: no allocation (small Python structure records sharing this one's nodes); no
        copy; no sync; no dispatch; O(children).
        Raises: nothing."""
        if self._node is _STAR:
            return []
        return [PyTreeDef(k) for k in _kids(self._node)]

    def __eq__(self, other: object) -> bool:
        if type(other) is not PyTreeDef:
            return NotImplemented
        return self is other or bool(self._node == other._node)

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = h = hash(self._node)
            return h

    def __repr__(self) -> str:
        return f"PyTreeDef({_spell(self._node)})"


def _count_nodes(node: _Node) -> int:
    return 1 if node is _STAR else 1 + sum(_count_nodes(k) for k in _kids(node))


def _spell(node: _Node) -> str:
    if node is _STAR:
        return "*"
    t, aux = node[0], node[1]
    parts = [_spell(k) for k in _kids(node)]
    if t is tuple:
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"
    if t is list:
        return f"[{', '.join(parts)}]"
    if t is dict:
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(aux, parts, strict=True)) + "}"
    if t is _NoneType:
        return "None"
    e = _REGISTRY.get(t)
    head = f"namedtuple[{t.__name__}]" if e is None else f"{e.name}[{aux}]"
    return f"CustomNode({head}, [{', '.join(parts)}])"


_LEAF_DEF = PyTreeDef(_STAR)
# the structures of flat tuples and lists (call arguments, params lists), interned
_FLAT_MAX = 64
_FLAT_TUPLE = [PyTreeDef((tuple, None, n, n)) for n in range(_FLAT_MAX + 1)]
_FLAT_LIST = [PyTreeDef((list, None, n, n)) for n in range(_FLAT_MAX + 1)]


# -- flatten --------------------------------------------------------------------------------------
def _walk(tree: Any, leaves: list[Any]) -> _Node:
    """The structure node of ``tree``; its leaves are appended to ``leaves``."""
    t = type(tree)
    if t is tuple or t is list:
        ch: Any = tree
        aux: Any = None
    elif t is dict:
        try:
            aux = tuple(sorted(tree))
        except TypeError:
            aux = _sorted_keys(tree)  # raises the explanation
        ch = list(map(tree.__getitem__, aux))
    elif t is _NoneType:
        return _NONE_NODE
    else:
        e = _entry(t)
        if e is None:  # a leaf: remember its type (the membership test of the hot path)
            if len(_LEAF_TYPES) < _LEAF_TYPES_MAX:
                _LEAF_TYPES.add(t)
            leaves.append(tree)
            return _STAR
        ch, aux = e.flatten(tree)
        if type(ch) is not list and type(ch) is not tuple:
            ch = list(ch)
    known = _LEAF_TYPES
    for c in ch:
        if type(c) not in known:
            break
    else:  # only leaves below (the common node: a params list, a dict of arrays)
        leaves.extend(ch)
        n = len(ch)
        return (t, aux, n, n)
    start = len(leaves)
    kids: list[_Node] = []
    flat = True
    for c in ch:
        if type(c) in known:
            leaves.append(c)
            kids.append(_STAR)
        else:
            k = _walk(c, leaves)
            kids.append(k)
            flat = flat and k is _STAR
    n = len(leaves) - start
    return (t, aux, n if flat else tuple(kids), n)


def _walk_general(
    tree: Any, leaves: list[Any], is_leaf: IsLeaf, paths: list[KeyPath] | None, path: KeyPath
) -> _Node:
    """:func:`_walk` with an ``is_leaf`` predicate and/or the key path of every leaf."""
    e = None if is_leaf is not None and is_leaf(tree) else _entry(type(tree))
    if e is None:
        leaves.append(tree)
        if paths is not None:
            paths.append(path)
        return _STAR
    ch, aux = e.flatten(tree)
    ch = list(ch)
    if paths is None:
        kids = [_walk_general(c, leaves, is_leaf, None, path) for c in ch]
    else:
        keys = e.keys(aux, len(ch))
        kids = [
            _walk_general(c, leaves, is_leaf, paths, (*path, k))
            for c, k in zip(ch, keys, strict=True)
        ]
    return _node(type(tree), aux, kids)


def tree_flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list[Any], PyTreeDef]:
    """The leaves of ``tree`` in order (depth first; dicts in sorted key order; ``None``
    has none) and its structure.  ``is_leaf(subtree)``, when given, is asked first at
    every subtree (the root included): true makes that subtree a leaf.

    A single leaf, or a tuple/list of leaves, takes a fast path (about as fast as
    ``jax.tree_util``'s C++ one).

    Cost: allocates the leaf list and one small tuple per node only (no tensor
    allocation); never copies or borrows a leaf; no sync; no dispatch; O(nodes of the
    tree).
    Raises: nothing."""
    if is_leaf is not None:
        leaves: list[Any] = []
        return leaves, PyTreeDef(_walk_general(tree, leaves, is_leaf, None, ()))
    t = type(tree)
    if t in _LEAF_TYPES:
        return [tree], _LEAF_DEF
    if t is tuple or t is list:
        known = _LEAF_TYPES
        for c in tree:
            if type(c) not in known:
                break
        else:  # a flat tuple or list of leaves (call arguments, a params list)
            n = len(tree)
            if n <= _FLAT_MAX:
                return list(tree), (_FLAT_TUPLE if t is tuple else _FLAT_LIST)[n]
            return list(tree), PyTreeDef((t, None, n, n))
    leaves = []
    node = _walk(tree, leaves)
    return leaves, _LEAF_DEF if node is _STAR else PyTreeDef(node)


def tree_flatten_with_path(
    tree: Any, is_leaf: IsLeaf = None
) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """``[(key_path, leaf), ...]`` and the structure, in :func:`tree_flatten`'s order;
    :func:`keystr` spells a path.

    Cost: allocates the pair list, one key-path tuple per leaf and one small tuple per node
    only (no tensor allocation); never copies or borrows a leaf; no sync; no dispatch;
    O(nodes x depth) (each path is its own tuple).
    Raises: nothing."""
    leaves: list[Any] = []
    paths: list[KeyPath] = []
    node = _walk_general(tree, leaves, is_leaf, paths, ())
    return list(zip(paths, leaves, strict=True)), PyTreeDef(node)


def tree_leaves(tree: Any, is_leaf: IsLeaf = None) -> list[Any]:
    """The leaves of ``tree`` in flattening order (see :func:`tree_flatten`). O(nodes).

    Cost: no allocation; no copy; no sync; no dispatch; O(nodes of the tree).
    Raises: nothing."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: IsLeaf = None) -> PyTreeDef:
    """The structure of ``tree`` (see :func:`tree_flatten`). O(nodes).

    Cost: no allocation; no copy; no sync; no dispatch; O(nodes of the tree).
    Raises: nothing."""
    return tree_flatten(tree, is_leaf)[1]


# -- unflatten ------------------------------------------------------------------------------------
def _build(node: _Node, leaves: list[Any], i: int) -> Any:
    """The subtree of ``node`` over ``leaves[i:]``."""
    t, aux, kids, n = node
    if type(kids) is int:
        ch = leaves[i : i + n]
    else:
        ch = []
        for k in kids:
            if k is _STAR:
                ch.append(leaves[i])
                i += 1
            else:
                ch.append(_build(k, leaves, i))
                i += k[3]
    if t is tuple:
        return tuple(ch)
    if t is list:
        return ch
    if t is dict:
        return dict(zip(aux, ch, strict=True))
    if t is _NoneType:
        return None
    return _entry(t).unflatten(aux, ch)  # type: ignore[union-attr]  # (a node type)


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """The tree of structure ``treedef`` with ``leaves`` in flattening order: tuples, lists,
    namedtuples, ``None``, registered nodes as flattened, and dicts with their keys **in
    sorted order** (as JAX).  ``ValueError`` if the number of leaves differs.

    Cost: allocates new containers only (never returns ``leaves`` itself; no tensor
    allocation); never copies a leaf; no sync; no dispatch; O(nodes of the tree).
    Raises: ValueError."""
    node = treedef._node
    if type(leaves) is not list:
        leaves = list(leaves)
    if node is _STAR:
        if len(leaves) == 1:
            return leaves[0]
    elif len(leaves) == node[3]:
        if type(node[2]) is int:  # a flat node: no recursion
            t = node[0]
            if t is tuple:
                return tuple(leaves)
            if t is list:
                return leaves[:]
            if t is dict:
                return dict(zip(node[1], leaves, strict=True))
        return _build(node, leaves, 0)
    raise ValueError(
        f"tree_unflatten: {treedef} has {treedef.num_leaves} leaves, got {len(leaves)} leaves"
    )


# -- map ------------------------------------------------------------------------------------------
def _head(t: type, aux: Any, n: int) -> str:
    """A node's head in words, for a mismatch message."""
    if t is _NoneType:
        return "None"
    if t is dict or t is OrderedDict:
        return f"a {t.__name__} with keys {list(aux)!r}"
    if t is defaultdict:
        return f"a defaultdict with keys {list(aux[1])!r}"
    meta = "" if aux is None else f" (aux data {aux!r})"
    return f"a {t.__name__} of {n} children{meta}"


class _Mismatch(Exception):
    """Where ``_up_to`` found a structure mismatch: ``(key path, expected, got)``."""


def _up_to(node: _Node, tree: Any, append: Callable[[Any], None], path: KeyPath) -> None:
    """Append the subtrees of ``tree`` at ``node``'s leaf positions; ``_Mismatch`` if
    ``tree`` does not have ``node``'s structure down to them."""
    if node is _STAR:
        append(tree)
        return
    t, aux, kids = node[0], node[1], _kids(node)
    tt = type(tree)
    e = _entry(tt)
    if e is None:
        got = f"a leaf ({tt.__name__})"
    else:
        ch, other = e.flatten(tree)
        ch = list(ch)
        if tt is t and other == aux and len(ch) == len(kids):
            for k, c, key in zip(kids, ch, e.keys(aux, len(ch)), strict=True):
                _up_to(k, c, append, (*path, key))
            return
        got = _head(tt, other, len(ch))
    raise _Mismatch(path, _head(t, aux, len(kids)), got)


def _flatten_up_to(treedef: PyTreeDef, tree: Any, what: str) -> list[Any]:
    """:meth:`PyTreeDef.flatten_up_to`, its refusal naming ``what`` (the tree), the key
    path and both whole structures. O(nodes of ``treedef``)."""
    out: list[Any] = []
    try:
        _up_to(treedef._node, tree, out.append, ())
    except _Mismatch as m:
        path, expected, got = m.args
        try:
            theirs = str(tree_structure(tree))
        except ValueError as exc:
            theirs = f"(none: {exc})"
        raise ValueError(
            f"{what} does not have the expected structure at "
            f"{'key path ' + keystr(path) if path else 'the root'}: expected {expected}, "
            f"got {got}.\n"
            f"  expected structure: {treedef}\n  got structure:      {theirs}"
        ) from None
    return out


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """``f`` applied leaf by leaf: a tree of ``tree``'s structure whose leaves are
    ``f(leaf, *same_position_in_rest)``.  Each of ``rest`` must have ``tree``'s structure
    (whole subtrees where ``tree`` has leaves are passed to ``f`` as they are); otherwise
    ``ValueError`` naming the argument, the key path and both structures.
    O(nodes) plus the calls of ``f``; dicts come out in sorted key order.

    Cost: no allocation of its own (``f``'s results are what it returns); no copy; no sync; no
    dispatch; O(nodes) plus ``f`` per leaf.
    Raises: ValueError."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return tree_unflatten(treedef, [f(x) for x in leaves])
    columns = [leaves]
    for i, r in enumerate(rest, 1):
        columns.append(_flatten_up_to(treedef, r, f"tree_map: rest argument {i}"))
    return tree_unflatten(treedef, [f(*xs) for xs in zip(*columns, strict=True)])


# -- structures of structures ---------------------------------------------------------------------
def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of the root's children (``treedef.children()``). O(nodes).

    Cost: no allocation; no copy; no sync; no dispatch; O(nodes of the tree).
    Raises: nothing."""
    return treedef.children()


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple whose children have the structures ``treedefs``. O(n).

    Cost: no allocation; no copy; no sync; no dispatch; O(nodes of the tree).
    Raises: nothing."""
    return PyTreeDef(_node(tuple, None, [d._node for d in treedefs]))


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether the structure has a single node (a leaf, ``None``, ``()``, ``{}``...), as
    JAX's ``treedef_is_leaf``; :func:`treedef_is_strict_leaf` is true for a leaf only. O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: nothing."""
    node = treedef._node
    return node is _STAR or node[2] == 0


def treedef_is_strict_leaf(treedef: PyTreeDef) -> bool:
    """Whether the structure is a single leaf (``PyTreeDef(*)``). O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: nothing."""
    return treedef._node is _STAR
