"""A refused call leaves no reference cycle behind: its error's traceback holds the frames
it passed through, so a frame that keeps the error in a local (``again = ...; raise
again``) makes a cycle, and everything those frames hold -- an operand imported before the
refusal, a borrow, the caller's arguments -- lives until the next garbage collection
instead of being released when the error goes."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts


def _dead() -> Any:
    o = ts.from_numpy(np.ones(3))
    o.into_storage()
    return o


X = np.ones((3, 3))
REFUSED: dict[str, Callable[[], Any]] = {
    "tensordot axes": lambda: ad.tensordot(X, X, axes=([0], [7])),
    "fftshift axes": lambda: ad.fft.fftshift(X, axes=5),
    "linalg.diagonal axis": lambda: ad.linalg.diagonal(X, axis1=5),
    "rollaxis start": lambda: ad.rollaxis(X, 0, "a"),
    "matmul consumed": lambda: ad.matmul(np.ones((2, 3)), _dead()),
    "where consumed": lambda: ad.where(np.ones(3, bool), _dead(), 0.0),
    "sum axis": lambda: ad.sum(X, axis=5),
    "sin str": lambda: ad.sin(np.array(["a"])),
    "reshape": lambda: ad.reshape(X, (4, 4)),
    "einsum shapes": lambda: ad.einsum("ij,jk->ik", X, np.ones((4, 2))),
    "grad consumed": lambda: ad.grad(lambda t: ad.sum(t))(_dead()),
}


def _refuse(call: Callable[[], Any]) -> None:
    try:
        call()
    except Exception:  # (the error and its traceback end with this block)
        return
    raise AssertionError("the call was not refused")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refused_call_leaves_no_reference_cycle(name: str) -> None:
    """Mutant: the ``op`` wrapper's ``raise again`` without dropping its local (tensordot's
    and fftshift's errors kept their frames in a cycle)."""
    call = REFUSED[name]
    _refuse(call)  # warm: first-call caches and lazy imports are not garbage
    gc.collect()
    gc.disable()
    try:
        _refuse(call)
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, f"{name}: {found} objects were left in reference cycles"
