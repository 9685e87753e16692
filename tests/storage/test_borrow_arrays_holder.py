"""``borrow_arrays`` lets go of its holder name with its borrows.

While a scope is entered, a conflicting borrow's error names ``borrow_arrays``; once the
scope has ended (left, refused, or dropped), an error about some *other* borrow must not
name it any more.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage.errors import BorrowError


def _error_of(attempt: object) -> str:
    with pytest.raises(BorrowError) as info:
        attempt()  # type: ignore[operator]
    return str(info.value)


def test_a_left_scope_is_not_named_as_a_holder_later() -> None:
    """After the block, a conflict with an unrelated view names no borrow_arrays holder."""
    a, b = ts.ones(2), ts.ones(3)
    with ts.borrow_arrays([a, (b, None)]) as arrays:
        assert "held by borrow_arrays" in _error_of(a.as_view_mut)
        assert arrays[0].tolist() == [1.0, 1.0]
    view = a.as_view()
    message = _error_of(a.as_view_mut)
    assert "held by borrow_arrays" not in message
    view.release()
    a.fill(2.0)
    b.fill(2.0)


def test_a_refused_scope_leaves_no_holder_name_behind() -> None:
    """A refusal on a later leaf takes back the earlier leaves' borrows and their names."""
    a, b = ts.ones(2), ts.ones(2)
    m = b.as_view_mut()
    with pytest.raises(BorrowError), ts.borrow_arrays((a, b)):
        pass
    m.release()
    view = a.as_view()
    assert "held by borrow_arrays" not in _error_of(a.as_view_mut)
    view.release()


def test_a_dropped_scope_leaves_no_holder_name_behind() -> None:
    """A scope entered and then dropped without ``__exit__`` unnames itself too."""
    a = ts.ones(1)
    scope = ts.borrow_arrays({"a": a})
    scope.__enter__()
    del scope
    view = a.as_view()
    assert "held by borrow_arrays" not in _error_of(a.as_view_mut)
    view.release()


def test_refusal_paths_name_the_nested_position() -> None:
    """A refused leaf deep in the tree is named by its position (dict keys by repr)."""
    a = ts.ones(1)
    pair = collections.namedtuple("pair", "x y")
    tree = {"w": [a, pair(a, np.ones(1))]}
    with pytest.raises(TypeError, match=r"tree\['w'\]\[1\]\[1\] is a ndarray"):
        ts.borrow_arrays(tree).__enter__()
    a.fill(0.0)  # nothing stays borrowed
