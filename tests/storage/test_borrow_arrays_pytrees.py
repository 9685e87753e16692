"""``borrow_arrays`` walks its tree with the one pytree module (``tenferro_storage._pytree``):
registered nodes and dataclasses hold owners too, ``None`` holds nothing, dicts come back
with sorted keys, and a refused leaf is named by its JAX key path.  Both borrow modes.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import _access, _pytree


@pytest.fixture(autouse=True, params=["normal", "debug"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = _access._set_debug_borrows(request.param == "debug")
    try:
        yield request.param
    finally:
        _access._set_debug_borrows(previous)


@dataclasses.dataclass
class Linear:
    """Registered below: ``w`` and ``b`` are children, ``name`` is structure."""

    w: Any
    b: Any
    name: str


class Pair2:
    """Registered below with ``register_pytree_node``."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second


_pytree.register_dataclass(Linear, data_fields=["w", "b"], meta_fields=["name"])
_pytree.register_pytree_node(
    Pair2, lambda p: ((p.first, p.second), None), lambda aux, ch: Pair2(*ch)
)


def test_registered_nodes_and_dataclasses_hold_owners(mode: str) -> None:
    """A dataclass and a registered node come back as themselves, arrays inside."""
    w, b = ts.ones((2, 2)), ts.arange(2, dtype="float64")
    tree = {"lin": Linear(w, b, "l1"), "pair": Pair2(b, None)}
    with ts.borrow_arrays(tree) as arrays:
        lin, pair = arrays["lin"], arrays["pair"]
        assert type(lin) is Linear and lin.name == "l1"
        assert lin.w.tolist() == [[1.0, 1.0], [1.0, 1.0]] and lin.b.tolist() == [0.0, 1.0]
        assert type(pair) is Pair2 and pair.first.tolist() == [0.0, 1.0] and pair.second is None
        with pytest.raises(ts.errors.BorrowError, match="borrow_arrays"):
            w.fill(0.0)
    w.fill(0.0)  # released with the block


def test_dicts_come_back_with_sorted_keys(mode: str) -> None:
    """As ``tree_unflatten`` rebuilds them (JAX's order); values stay under their keys."""
    a, b = ts.ones(1), ts.zeros(1)
    with ts.borrow_arrays({"z": a, "a": b}) as arrays:
        assert list(arrays) == ["a", "z"]
        assert arrays["z"].tolist() == [1.0] and arrays["a"].tolist() == [0.0]


def test_a_refused_leaf_in_a_dataclass_is_named_by_its_key_path(mode: str) -> None:
    """Field names, dict keys and positions spell the path; nothing stays borrowed."""
    a = ts.ones(1)
    pair = collections.namedtuple("pair", "x y")
    tree = [pair(a, {"lin": Linear(a, np.ones(1), "l")})]
    with pytest.raises(TypeError, match=r"tree\[0\]\.y\['lin'\]\.b is a ndarray"):
        ts.borrow_arrays(tree).__enter__()
    with pytest.raises(TypeError, match=r"tree\[<flat index 1>\] is a str"):
        ts.borrow_arrays(Pair2(a, "x")).__enter__()
    a.fill(0.0)  # nothing stays borrowed


def test_unsortable_dict_keys_are_refused_before_anything_is_borrowed(mode: str) -> None:
    """A dict whose keys cannot be ordered raises ``ValueError``; no borrow is left."""
    a = ts.ones(1)
    with pytest.raises(ValueError, match="cannot be sorted"):
        ts.borrow_arrays({1: a, "x": a}).__enter__()
    a.fill(0.0)
