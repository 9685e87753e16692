"""What users get by default (borrow debug mode off) when a prepared array escapes its
borrow -- pinned, beside what debug mode does (README: "Debugging escaped arrays").

* An escaped *read* array can never write: it lies over a read-only buffer in both modes.
  In the default mode a late read through it is unchecked (it sees the storage's current
  values); debug mode shows poison.
* An escaped *write* array is unchecked in the default mode: a late write lands in the
  storage, even under a tape that borrowed the value since (backward then differentiates
  the changed value).  Debug mode refuses the late write (``ValueError``) and the tape's
  value is intact.  Detecting it in the default mode would cost every access; that is
  what debug mode is for.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import _access


@pytest.fixture(params=["default", "debug"])
def mode(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = _access._set_debug_borrows(request.param == "debug")
    try:
        yield str(request.param)
    finally:
        _access._set_debug_borrows(previous)


def test_an_escaped_read_array_never_writes_and_reads_late_values_unchecked(mode: str) -> None:
    t = ts.from_numpy(np.array([2.0, 3.0]))
    with t.as_view().prepare_host() as p:
        escaped = p.as_array()
    with pytest.raises(ValueError):
        escaped.flags.writeable = True
    t.fill(4.0)
    if mode == "default":  # unchecked: the late read sees the storage as it is now
        np.testing.assert_array_equal(escaped, [4.0, 4.0])
    else:  # poisoned when the access ended
        assert np.isnan(escaped).all()
    np.testing.assert_array_equal(t.to_numpy(), [4.0, 4.0])


def test_an_escaped_write_array_changes_a_value_a_tape_holds_only_in_default_mode(
    mode: str,
) -> None:
    x = ts.from_numpy(np.array([2.0, 3.0]))
    with x.as_view_mut() as m, m.prepare_host_mut() as p:
        escaped = p.as_array()  # kept past the access: outside the contract
    with ad.Tape() as tape:
        w = tape.watch(ts.from_numpy(np.ones(2)))
        loss = ad.sum(w * x)  # the tape borrows x as mul's residual
    if mode == "default":
        escaped[...] = 0.0  # unchecked: lands in x under the tape's borrow
        expected = [0.0, 0.0]
    else:
        with pytest.raises(ValueError):
            escaped[...] = 0.0
        expected = [2.0, 3.0]
    np.testing.assert_array_equal(tape.backward(loss).grad(w).to_numpy(), expected)
