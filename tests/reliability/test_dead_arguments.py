"""A consumed owner or handle, or a released view, passed to an op or a transform is
refused with its own error (``UseAfterMoveError`` / ``ExpiredBorrowError``) named for the
op the user called and the argument -- by parameter name where the op has one, by position
for operators and transforms -- never for the internal read that found it
(``read_array:``, ``shape:``), leaving nothing allocated."""

from __future__ import annotations

import gc
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import ExpiredBorrowError, UseAfterMoveError
from tenferro_storage.ledger import EventKind


def _consumed_owner() -> Any:
    o = ts.from_numpy(np.ones(3))
    o.into_storage()
    return o


def _consumed_handle() -> Any:
    h = ad.exp(ad.stop_gradient(np.ones(3)))
    h.into_value()
    return h


def _released_view() -> Any:
    v = ts.zeros(3).as_view()
    v.release()
    return v


DEAD: dict[str, tuple[Callable[[], Any], type[BaseException]]] = {
    "consumed owner": (_consumed_owner, UseAfterMoveError),
    "consumed handle": (_consumed_handle, UseAfterMoveError),
    "released view": (_released_view, ExpiredBorrowError),
}

CALLS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "sin": (ad.sin, r"sin: argument 'x'"),
    "add, second": (lambda d: ad.add(1.0, d), r"add: argument 'y'"),
    "matmul": (lambda d: ad.matmul(np.ones((2, 3)), d), r"matmul: argument 'y'"),
    "sum": (ad.sum, r"sum: argument 'x'"),
    "einsum": (lambda d: ad.einsum("i->", d), r"einsum: argument 'operands'\[0\]"),
    "where": (lambda d: ad.where(np.ones(3, bool), d, 0.0), r"where: argument 'x'"),
    "jit": (ad.jit(ad.sin), r"jit: argument leaf 0"),
    "grad": (ad.grad(lambda t: ad.sum(t)), r"grad: argument 0"),
    "vmap": (ad.vmap(ad.sin), r"vmap: argument 0"),
}


@pytest.mark.parametrize("dead", sorted(DEAD))
@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_dead_argument_is_named_for_the_op_and_the_argument(call: str, dead: str) -> None:
    """Mutant: the dispatcher's positional name kept ("sin: argument 0: read_array: ..."),
    jit's leaf check letting the owner's ``shape`` read speak ("shape: this Tensor"), or a
    reference cycle through the renamed error (matmul's imported ``x`` kept until the next
    garbage collection)."""
    make, cls = DEAD[dead]
    fn, prefix = CALLS[call]
    value = make()
    message = ""
    gc.disable()  # released by reference counting when the error goes, not by a collection
    try:
        with ledger.capture() as rec:
            try:
                fn(value)
            except cls as e:  # (its traceback, and what its frames hold, ends here)
                message = str(e)
    finally:
        gc.enable()
    assert message, f"{call} accepted a {dead}"
    # an operand imported before the dead one was found is released again: nothing stays
    made = {e.allocation for e in rec.events if e.kind is EventKind.ALLOCATE}
    assert made == {e.allocation for e in rec.events if e.kind is EventKind.RELEASE}
    assert re.match(prefix + ": this (Tensor|TensorView|EagerTensor)", message), message
    assert "read_array" not in message and not re.search(r": (shape|dtype): ", message)


@pytest.mark.parametrize(
    ("make", "error"),
    [DEAD[k] for k in sorted(DEAD)],
)
@pytest.mark.parametrize("dtype", [None, "float32"])
def test_asarray_refuses_a_dead_value(make: Callable[[], Any], error: type, dtype: Any) -> None:
    """``asarray`` of a dead value raises, naming ``'x'``, and records nothing (it returned
    the dead value before)."""
    dead = make()
    with ledger.capture() as rec, pytest.raises(error, match=r"^asarray: argument 'x': "):
        ad.asarray(dead, dtype)
    assert rec.events == []
