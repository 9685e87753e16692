"""Storage guards the mutation list found without a test that makes them act (issue 16)."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage.errors import BorrowError

pytestmark = pytest.mark.both_borrow_modes  # debug mode and the default mode


def test_a_refused_borrow_arrays_leaves_no_owner_borrowed() -> None:
    """``borrow_arrays((a, b))`` with ``b`` mutably borrowed raises ``BorrowError`` on
    entry; ``a``, borrowed first, is released again (it can be written), and the same
    scope works once ``b`` is free.

    Fails when ``BorrowedArrays.__enter__`` stops releasing the accesses it took before
    the refusal (checked).  The exception is kept while ``a`` is written: dropping it
    would free the leaked access and hide the leak."""
    a = ts.from_numpy(np.array([1.0, 2.0]))
    b = ts.from_numpy(np.array([3.0]))
    m = b.as_view_mut()
    scope = ts.borrow_arrays({"a": a, "b": b})
    with pytest.raises(BorrowError) as err:
        scope.__enter__()
    a.fill(5.0)  # not left borrowed, even while the traceback (kept in err) lives
    del err
    m.release()
    with scope as arrays:
        np.testing.assert_array_equal(arrays["a"], [5.0, 5.0])
        np.testing.assert_array_equal(arrays["b"], [3.0])
    b.fill(0.0)
