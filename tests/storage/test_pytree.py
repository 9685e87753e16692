"""``tenferro_storage._pytree``: the one pytree module, checked against ``jax.tree_util``.

Every behaviour is compared with JAX on the same input: leaves (order and identity), the
structure's printed form, ``num_leaves``/``num_nodes``, the equality relation between
structures, the round trip, ``tree_map``, key paths, and the nodes JAX knows (namedtuples,
``None``, OrderedDict, defaultdict, registered classes and dataclasses).  Hypothesis
draws nested trees of all of them.  The hot cases are pinned in bytecode instructions
(deterministic, as ``bench/per_op_instructions.py`` counts).
"""

from __future__ import annotations

import collections
import dataclasses
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import jax.tree_util as jtu
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenferro_storage import _pytree as pt

Pair = collections.namedtuple("Pair", "x y")
Other = collections.namedtuple("Other", "x y")


class Box:
    """A class registered as a node (children ``x`` and ``y``, aux data ``tag``)."""

    def __init__(self, x: Any, y: Any, tag: str) -> None:
        self.x, self.y, self.tag = x, y, tag

    def __eq__(self, other: object) -> bool:
        return type(other) is Box and (self.x, self.y, self.tag) == (other.x, other.y, other.tag)

    __hash__ = None  # type: ignore[assignment]


def _box_flatten(b: Box) -> tuple[tuple[Any, Any], str]:
    return (b.x, b.y), b.tag


def _box_unflatten(tag: str, children: Any) -> Box:
    return Box(*children, tag)


@dataclasses.dataclass
class Params:
    """A dataclass registered with explicit fields."""

    w: Any
    b: Any
    name: str


@dataclasses.dataclass
class Layer:
    """A dataclass registered with fields inferred (``static`` metadata: a meta field)."""

    kernel: Any
    width: int = dataclasses.field(metadata={"static": True})


@dataclasses.dataclass
class Unregistered:
    """A dataclass nobody registers: a leaf."""

    v: Any


for _register_node, _register_dc in (
    (pt.register_pytree_node, pt.register_dataclass),
    (jtu.register_pytree_node, jtu.register_dataclass),
):
    _register_node(Box, _box_flatten, _box_unflatten)
    _register_dc(Params, data_fields=["w", "b"], meta_fields=["name"])
    _register_dc(Layer)


# -- comparison helpers -----------------------------------------------------------------------
def _same_as_jax(tree: Any) -> tuple[list[Any], pt.PyTreeDef]:
    """Flatten with both; assert the same leaves (identical objects), structure text,
    counts, key paths and round trip; return ours."""
    leaves, td = pt.tree_flatten(tree)
    jleaves, jtd = jtu.tree_flatten(tree)
    assert len(leaves) == len(jleaves) and all(a is b for a, b in zip(leaves, jleaves, strict=True))
    assert str(td) == str(jtd)
    assert td.num_leaves == jtd.num_leaves and td.num_nodes == jtd.num_nodes
    paths = [pt.keystr(p) for p, _ in pt.tree_flatten_with_path(tree)[0]]
    assert paths == [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]]
    rebuilt, jrebuilt = pt.tree_unflatten(td, leaves), jtu.tree_unflatten(jtd, jleaves)
    assert _exact(rebuilt) == _exact(jrebuilt)
    return leaves, td


def _exact(tree: Any) -> Any:
    """A comparable spelling that also tells types and dict key order apart."""
    if isinstance(tree, np.ndarray):
        return ("array", id(tree))
    if isinstance(tree, dict):
        extra = getattr(tree, "default_factory", None)
        return (type(tree), extra, [(k, _exact(v)) for k, v in tree.items()])
    if isinstance(tree, list | tuple):
        return (type(tree), [_exact(v) for v in tree])
    if isinstance(tree, Box):
        return (Box, tree.tag, _exact(tree.x), _exact(tree.y))
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        return (type(tree), [_exact(getattr(tree, f.name)) for f in dataclasses.fields(tree)])
    return tree


# -- hypothesis trees ---------------------------------------------------------------------------
_KEYS = st.sampled_from(["a", "b", "c", "w", "z"])
_LEAVES = st.one_of(st.integers(-3, 3), st.sampled_from(["s", 1.5, Unregistered(0)]))


def _nodes(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.lists(children, max_size=3),
        st.dictionaries(_KEYS, children, max_size=3),
        st.builds(Pair, children, children),
        st.builds(Other, children, children),
        st.dictionaries(_KEYS, children, max_size=3).map(collections.OrderedDict),
        st.dictionaries(_KEYS, children, max_size=2).map(
            lambda d: collections.defaultdict(list, d)
        ),
        st.builds(Box, children, children, st.sampled_from(["p", "q"])),
        st.builds(Params, children, children, st.sampled_from(["n", "m"])),
        st.builds(Layer, children, st.integers(1, 2)),
    )


TREES = st.recursive(st.one_of(_LEAVES, st.none()), _nodes, max_leaves=12)
FAST = settings(max_examples=60, deadline=None)


@FAST
@given(TREES)
def test_random_trees_flatten_print_count_and_round_trip_as_jax(tree: Any) -> None:
    """Leaves, printed structure, counts, key paths and the round trip agree with JAX."""
    _same_as_jax(tree)


@FAST
@given(TREES, TREES)
def test_structure_equality_and_hash_agree_with_jax(a: Any, b: Any) -> None:
    """Two structures are equal exactly when JAX's are; equal ones hash alike."""
    da, db = pt.tree_structure(a), pt.tree_structure(b)
    assert (da == db) == (jtu.tree_structure(a) == jtu.tree_structure(b))
    if da == db:
        assert hash(da) == hash(db)
    assert da == pt.tree_structure(a) and hash(da) == hash(pt.tree_structure(a))


@FAST
@given(TREES)
def test_tree_map_agrees_with_jax(tree: Any) -> None:
    """``tree_map`` with one and with two trees gives JAX's result."""

    def f(x: Any) -> Any:
        return (x, "seen")

    assert _exact(pt.tree_map(f, tree)) == _exact(jtu.tree_map(f, tree))
    twice = pt.tree_map(lambda x, y: (x, y), tree, tree)
    assert _exact(twice) == _exact(jtu.tree_map(lambda x, y: (x, y), tree, tree))


@FAST
@given(TREES)
def test_is_leaf_agrees_with_jax(tree: Any) -> None:
    """``is_leaf`` is asked at every subtree, root included, before it is opened."""

    def is_leaf(x: Any) -> bool:
        return type(x) is tuple or x is None

    leaves, td = pt.tree_flatten(tree, is_leaf=is_leaf)
    jleaves, jtd = jtu.tree_flatten(tree, is_leaf=is_leaf)
    assert _exact(leaves) == _exact(jleaves) and str(td) == str(jtd)
    assert _exact(pt.tree_unflatten(td, leaves)) == _exact(jtu.tree_unflatten(jtd, jleaves))


# -- the nodes, one by one ----------------------------------------------------------------------
def test_dict_leaves_come_in_sorted_key_order() -> None:
    """A dict flattens in sorted key order whatever its insertion order."""
    leaves, td = _same_as_jax({"b": 1, "a": 2, "c": 3})
    assert leaves == [2, 1, 3]
    assert td == pt.tree_structure({"a": 0, "c": 0, "b": 0})


def test_unflatten_rebuilds_a_dict_with_sorted_keys() -> None:
    """``tree_unflatten`` (and so ``tree_map``) builds dicts with sorted keys, as JAX."""
    out = pt.tree_map(lambda x: x * 10, {"b": 1, "a": 2})
    assert list(out) == ["a", "b"] == list(jtu.tree_map(lambda x: x * 10, {"b": 1, "a": 2}))
    assert out == {"a": 20, "b": 10}


def test_unsortable_dict_keys_raise_value_error() -> None:
    """Keys that cannot be compared are refused with ``ValueError`` (JAX too)."""
    for flatten in (pt.tree_flatten, jtu.tree_flatten):
        with pytest.raises(ValueError):
            flatten({1: "a", "x": "b"})
    with pytest.raises(ValueError, match=r"dict keys \[1, 'x'\] cannot be sorted"):
        pt.tree_flatten([{1: "a", "x": "b"}])


def test_namedtuple_is_rebuilt_as_its_type_and_differs_from_a_tuple() -> None:
    """A namedtuple keeps its type; its structure differs from a tuple's and another
    namedtuple type's; its leaves' key paths are field names."""
    _, td = _same_as_jax(Pair(1, (2, 3)))
    assert type(pt.tree_unflatten(td, [4, 5, 6])) is Pair
    assert td != pt.tree_structure((1, (2, 3)))
    assert td != pt.tree_structure(Other(1, (2, 3)))
    assert str(td) == "PyTreeDef(CustomNode(namedtuple[Pair], [*, (*, *)]))"
    assert [pt.keystr(p) for p, _ in pt.tree_flatten_with_path(Pair(1, 2))[0]] == [".x", ".y"]


def test_none_is_an_empty_subtree() -> None:
    """``None`` holds no leaf and is rebuilt as ``None``; it is not a leaf position."""
    leaves, td = _same_as_jax((1, None, {"a": None}))
    assert leaves == [1]
    assert pt.tree_unflatten(td, [7]) == (7, None, {"a": None})
    assert pt.tree_leaves(None) == [] and pt.tree_structure(None).num_leaves == 0
    assert pt.tree_leaves((1, None), is_leaf=lambda x: x is None) == [1, None]


def test_ordered_and_default_dicts_are_nodes() -> None:
    """An OrderedDict keeps its insertion order (part of the structure); a defaultdict
    sorts its keys and keeps its factory (part of the structure)."""
    od = collections.OrderedDict(b=1, a=2)
    leaves, td = _same_as_jax(od)
    assert leaves == [1, 2] and td != pt.tree_structure(collections.OrderedDict(a=1, b=2))
    dd = collections.defaultdict(list, b=1, a=2)
    leaves, td = _same_as_jax(dd)
    back = pt.tree_unflatten(td, leaves)
    assert leaves == [2, 1] and type(back) is collections.defaultdict
    assert back.default_factory is list
    assert td != pt.tree_structure(collections.defaultdict(dict, b=1, a=2))
    assert td != pt.tree_structure({"b": 1, "a": 2})


def test_registered_node_round_trips_with_its_aux_data() -> None:
    """A registered class flattens into its children; aux data is part of the structure."""
    leaves, td = _same_as_jax(Box([1, 2], None, "t"))
    assert leaves == [1, 2]
    assert pt.tree_unflatten(td, [3, 4]) == Box([3, 4], None, "t")
    assert td != pt.tree_structure(Box([1, 2], None, "u"))


def test_a_type_registers_once() -> None:
    """Registering a type twice, or a builtin node type, raises ``ValueError``."""
    for t in (Box, dict, tuple):
        with pytest.raises(ValueError, match="registered already"):
            pt.register_pytree_node(t, _box_flatten, _box_unflatten)  # type: ignore[arg-type]


def test_registered_dataclasses_are_nodes_and_unregistered_ones_leaves() -> None:
    """Data fields are children, meta fields structure (explicit, or inferred from
    ``static`` metadata); a dataclass nobody registered is a leaf."""
    leaves, td = _same_as_jax(Params(w=1, b=(2, 3), name="p"))
    assert leaves == [1, 2, 3] and pt.tree_unflatten(td, [4, 5, 6]) == Params(4, (5, 6), "p")
    assert td != pt.tree_structure(Params(w=1, b=(2, 3), name="q"))
    leaves, td = _same_as_jax(Layer(kernel=[1, 2], width=3))
    assert leaves == [1, 2] and pt.tree_unflatten(td, [0, 0]) == Layer([0, 0], 3)
    u = Unregistered(v=[1, 2])
    assert pt.tree_leaves(u)[0] is u
    _same_as_jax(u)


def test_register_dataclass_refuses_fields_that_do_not_match() -> None:
    """Missing or unexpected fields, or overlap, raise as in JAX."""

    @dataclasses.dataclass
    class D:
        a: int
        b: int

    with pytest.raises(ValueError, match=r"missing \['b'\]"):
        pt.register_dataclass(D, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="overlap"):
        pt.register_dataclass(D, data_fields=["a", "b"], meta_fields=["a"])
    with pytest.raises(TypeError, match="both"):
        pt.register_dataclass(D, data_fields=["a", "b"])
    with pytest.raises(TypeError, match="not a dataclass"):
        pt.register_dataclass(Box)


def test_subclasses_of_containers_are_leaves() -> None:
    """Node types match exactly (as JAX): a dict or tuple subclass that is not a
    namedtuple is a leaf, and so are arrays, strings and unregistered objects."""

    class MyDict(dict[str, int]):
        pass

    class MyTuple(tuple[int, ...]):
        pass

    for leaf in (MyDict(a=1), MyTuple((1, 2)), np.ones(2), "abc", 1.5, object()):
        leaves, td = _same_as_jax(leaf)
        assert leaves[0] is leaf and pt.treedef_is_strict_leaf(td)


def test_a_type_seen_as_a_leaf_becomes_a_node_when_registered() -> None:
    """The leaf-type cache of the hot path forgets a type when it is registered."""

    class Late:
        def __init__(self, v: Any) -> None:
            self.v = v

    late = Late(1)
    assert pt.tree_leaves((late, late)) == [late, late]  # cached as a leaf type
    pt.register_pytree_node(Late, lambda x: ((x.v,), None), lambda a, c: Late(*c))
    assert pt.tree_leaves((late, late)) == [1, 1]
    assert pt.tree_leaves(late) == [1] and pt.tree_leaves([late]) == [1]


def test_leaves_are_never_copied() -> None:
    """Flattening and rebuilding hand back the very leaf objects."""
    a, b = np.ones(3), np.zeros(2)
    leaves, td = pt.tree_flatten({"x": [a, (b,)], "y": a})
    assert leaves[0] is a and leaves[1] is b and leaves[2] is a
    back = pt.tree_unflatten(td, leaves)
    assert back["x"][0] is a and back["x"][1][0] is b


def test_flat_and_general_paths_give_equal_structures() -> None:
    """A flat tuple/list (interned fast path) and one built by the general walk (first
    sight of a leaf type, ``is_leaf``, ``treedef_tuple``) are the same structure."""

    class Fresh:
        pass

    x = Fresh()
    first = pt.tree_structure((x, x))  # general walk (type not yet known)
    again = pt.tree_structure((x, x))  # fast path
    with_pred = pt.tree_structure((x, x), is_leaf=lambda _: False)
    built = pt.treedef_tuple([pt.tree_structure(x), pt.tree_structure(x)])
    assert first == again == with_pred == built
    assert len({hash(first), hash(again), hash(with_pred), hash(built)}) == 1
    assert pt.tree_unflatten(first, [1, 2]) == (1, 2)
    assert pt.tree_structure([1] * 100) == pt.tree_structure([x] * 100)


def test_unflatten_returns_a_new_list_and_takes_any_iterable() -> None:
    """The caller's leaf list is never returned as the tree; a generator is accepted."""
    leaves, td = pt.tree_flatten([1, 2])
    out = pt.tree_unflatten(td, leaves)
    assert out == [1, 2] and out is not leaves
    assert pt.tree_unflatten(pt.tree_structure({"a": (1, 2)}), iter([5, 6])) == {"a": (5, 6)}


def test_unflatten_refuses_the_wrong_number_of_leaves() -> None:
    """Too few or too many leaves raise ``ValueError`` naming the structure."""
    for tree, n in (((1, 2), 1), ((1, 2), 3), (1, 0), ({"a": [1, (2,)]}, 1), (None, 1)):
        td = pt.tree_structure(tree)
        with pytest.raises(ValueError, match=r"tree_unflatten: PyTreeDef.* leaves, got"):
            pt.tree_unflatten(td, [0] * n)
        with pytest.raises(ValueError):
            jtu.tree_unflatten(jtu.tree_structure(tree), [0] * n)


# -- structures -----------------------------------------------------------------------------------
def test_structure_prints_like_jax() -> None:
    """``str``/``repr`` spell the structure as JAX does."""
    tree = (1, {"b": [2, None], "a": Pair(3, 4)}, (5,), [], {})
    assert repr(pt.tree_structure(tree)) == repr(jtu.tree_structure(tree))
    assert str(pt.tree_structure(tree)) == (
        "PyTreeDef((*, {'a': CustomNode(namedtuple[Pair], [*, *]), 'b': [*, None]}, (*,), [], {}))"
    )


def test_structures_work_as_cache_keys() -> None:
    """Equal structures (built separately) find one dict entry; leaves do not matter."""
    cache = {pt.tree_structure(({"w": 1, "b": 2}, 3)): "hit"}
    assert cache[pt.tree_structure(({"b": np.ones(2), "w": 0.0}, "x"))] == "hit"
    assert pt.tree_structure(({"w": 1}, 3)) not in cache
    assert pt.tree_structure((1, 2)) != (1, 2) and pt.tree_structure(1) != 1


def test_children_and_leaf_predicates_agree_with_jax() -> None:
    """``children()``, ``treedef_children``, ``treedef_is_leaf`` and ``treedef_tuple``."""
    for tree in ((1, (2, 3), None), {"a": 1, "b": [2]}, 1, None, (), Pair(1, [2])):
        td, jtd = pt.tree_structure(tree), jtu.tree_structure(tree)
        assert [str(c) for c in td.children()] == [str(c) for c in jtu.treedef_children(jtd)]
        assert pt.treedef_children(td) == td.children()
        assert pt.treedef_is_leaf(td) == jtu.treedef_is_leaf(jtd)
    assert pt.treedef_is_strict_leaf(pt.tree_structure(1))
    assert not pt.treedef_is_strict_leaf(pt.tree_structure(None))
    parts = [pt.tree_structure(1), pt.tree_structure({"a": (1, 2)})]
    jparts = [jtu.tree_structure(1), jtu.tree_structure({"a": (1, 2)})]
    assert str(pt.treedef_tuple(parts)) == str(jtu.treedef_tuple(jparts))
    assert pt.treedef_tuple(parts).num_leaves == 3


# -- tree_map and flatten_up_to -------------------------------------------------------------------
def test_tree_map_passes_whole_subtrees_where_the_first_tree_has_leaves() -> None:
    """The other trees may hold subtrees at the first tree's leaf positions (as JAX)."""
    got = pt.tree_map(lambda a, b: (a, b), (1, {"k": 2}), ([3, 4], {"k": None}))
    assert got == jtu.tree_map(lambda a, b: (a, b), (1, {"k": 2}), ([3, 4], {"k": None}))
    assert pt.tree_structure((1, 2)).flatten_up_to(([3, 4], {"k": 5})) == [[3, 4], {"k": 5}]


@pytest.mark.parametrize(
    ("first", "other", "where", "expected", "got"),
    [
        ((1, 2), [1, 2], "the root", "a tuple of 2 children", "a list of 2 children"),
        ((1, 2), (1, 2, 3), "the root", "a tuple of 2 children", "a tuple of 3 children"),
        ({"a": 1}, {"b": 1}, "the root", "a dict with keys ['a']", "a dict with keys ['b']"),
        ((1, (2, 3)), (1, 5), "key path [1]", "a tuple of 2 children", "a leaf (int)"),
        ((1, None), (1, 2), "key path [1]", "None", "a leaf (int)"),
        (
            {"k": [1, Pair(1, 2)]},
            {"k": [1, (1, 2)]},
            "key path ['k'][1]",
            "a Pair of 2",
            "a tuple of 2",
        ),
        (Box(1, 2, "p"), Box(1, 2, "q"), "the root", "aux data 'p'", "aux data 'q'"),
    ],
)
def test_tree_map_mismatch_raises_value_error_showing_both_structures(
    first: Any, other: Any, where: str, expected: str, got: str
) -> None:
    """A mismatch names the argument, the key path, what differs and both structures
    (JAX raises ``ValueError`` too)."""
    with pytest.raises(ValueError) as info:
        pt.tree_map(lambda *xs: xs[0], first, other)
    message = str(info.value)
    assert message.startswith(
        f"tree_map: rest argument 1 does not have the expected structure at {where}: "
    )
    assert expected in message and got in message
    assert f"expected structure: {pt.tree_structure(first)}" in message
    assert f"got structure:      {pt.tree_structure(other)}" in message
    with pytest.raises(ValueError):
        jtu.tree_map(lambda *xs: xs[0], first, other)


def test_key_paths_spell_like_jax() -> None:
    """``tree_flatten_with_path`` keys and ``keystr`` match JAX for every node kind."""
    tree = (
        1,
        {"a": Pair(2, 3)},
        Box(4, 5, "t"),
        Params(6, 7, "m"),
        [8],
        collections.OrderedDict(z=9),
    )
    ours = pt.tree_flatten_with_path(tree)[0]
    theirs = jtu.tree_flatten_with_path(tree)[0]
    assert [pt.keystr(p) for p, _ in ours] == [jtu.keystr(p) for p, _ in theirs]
    assert [repr(p) for p, _ in ours] == [repr(p) for p, _ in theirs]
    assert [x for _, x in ours] == [x for _, x in theirs]


# -- cost -----------------------------------------------------------------------------------------
def _instructions(fn: Callable[[], Any]) -> int:
    n = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal n
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            n += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return n


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="bytecode counts of CPython 3.11")
@pytest.mark.parametrize(
    ("case", "budget"),
    [("leaf", 70), ("tuple2", 140), ("list6", 190), ("dict6", 270), ("nested", 600)],
)
def test_hot_cases_stay_within_their_bytecode_budget(case: str, budget: int) -> None:
    """Flatten + unflatten of the hot cases (a leaf, call arguments, a params list or
    dict, a tuple of dicts) in Python bytecode instructions: deterministic, so a slower
    path shows up here and not only in noisy timings."""
    a = np.ones(3)
    tree = {
        "leaf": a,
        "tuple2": (a, a),
        "list6": [a] * 6,
        "dict6": {k: a for k in "fedcba"},
        "nested": ({"w": a, "b": a}, {"w": a, "b": a}),
    }[case]

    def round_trip() -> None:
        leaves, td = pt.tree_flatten(tree)
        pt.tree_unflatten(td, leaves)

    round_trip()  # the leaf type is known from now on
    assert _instructions(round_trip) <= budget


def test_the_leaf_type_cache_stays_bounded_however_many_leaf_types_are_seen() -> None:
    """Flattening remembers leaf types for its fast path, but at most ``_LEAF_TYPES_MAX`` of
    them: a program that makes classes on the fly must not grow the cache without bound,
    and its leaves still flatten as leaves past the limit.  Mutant: the bound check
    ``len(...) < _LEAF_TYPES_MAX`` turned into ``is not`` (never identical for 4096)."""
    saved = set(pt._LEAF_TYPES)
    try:
        extra = pt._LEAF_TYPES_MAX - len(pt._LEAF_TYPES) + 50
        for k in range(extra):
            leaf = type(f"Leaf{k}", (), {})()
            leaves, _ = pt.tree_flatten([leaf, (leaf,)])
            assert leaves == [leaf, leaf]
        assert len(pt._LEAF_TYPES) == pt._LEAF_TYPES_MAX
    finally:
        pt._LEAF_TYPES.clear()
        pt._LEAF_TYPES.update(saved)
