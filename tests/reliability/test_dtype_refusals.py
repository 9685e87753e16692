"""A value whose dtype tenferro does not support (a string, bytes, object or datetime
array, a list of strings, ``float16``, ``uint8``) is refused one way by every op:
:class:`~tenferro_ad.errors.UnsupportedDTypeError` (both a ``DTypeError`` and an
``ArgumentTypeError``), ``"<op>: argument '<name>' has dtype <dt>, which tenferro does not
support (supported: ...)"``, before anything is allocated or recorded.  The same under
``jit``/``grad``/``vmap`` (an argument, or a constant the function closes over)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentTypeError, UnsupportedDTypeError
from tenferro_storage import ledger
from tenferro_storage.errors import DTypeError
from tenferro_storage.ledger import EventKind

SUPPORTED = "(supported: bool, int32, int64, float32, float64, complex64, complex128)"

BAD: dict[str, Callable[[], Any]] = {
    "str": lambda: np.array(["a", "b"]),
    "bytes": lambda: np.array([b"a", b"b"]),
    "object": lambda: np.array([1.0, 2.0], dtype=object),
    "datetime64": lambda: np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]"),
    "float16": lambda: np.ones(2, np.float16),
    "uint8": lambda: np.ones(2, np.uint8),
    "list of str": lambda: ["a", "b"],
}

# op -> (call with the bad value, public op name, argument as the message names it)
OPS: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    "sin": (lambda s: ad.sin(s), "sin", "argument 'x'"),
    "exp": (lambda s: ad.exp(s), "exp", "argument 'x'"),
    "add x": (lambda s: ad.add(s, np.ones(2)), "add", "argument 'x'"),
    "add y": (lambda s: ad.add(1.0, s), "add", "argument 'y'"),
    "where": (lambda s: ad.where(s, s, s), "where", "argument 'cond'"),
    "where y": (lambda s: ad.where(np.ones(2) > 0, np.ones(2), s), "where", "argument 'y'"),
    "sum": (lambda s: ad.sum(s), "sum", "argument 'x'"),
    "mean": (lambda s: ad.mean(s), "mean", "argument 'x'"),
    "reshape": (lambda s: ad.reshape(s, (2,)), "reshape", "argument 'x'"),
    "transpose": (lambda s: ad.transpose(s), "transpose", "argument 'x'"),
    "matmul": (lambda s: ad.matmul(s, s), "matmul", "argument 'x'"),
    "concatenate": (lambda s: ad.concatenate([np.ones(2), s]), "concatenate",
                    "argument 'xs'[1]"),
    "asarray": (lambda s: ad.asarray(s), "asarray", "argument 'x'"),
    "jit argument": (lambda s: ad.jit(ad.sin)(s), "jit", "argument leaf 0"),
    "grad argument": (lambda s: ad.grad(lambda x: ad.sum(ad.sin(x)))(s), "grad", "argument 0"),
    "vmap argument": (lambda s: ad.vmap(ad.sin)(s), "vmap", "argument 0"),
    "jit closure": (lambda s: ad.jit(lambda x: ad.add(ad.sin(x), s))(np.ones(2)), "add",
                    "argument 'y'"),
    "vmap closure": (lambda s: ad.vmap(lambda x: ad.mul(x, s))(np.ones((3, 2))), "mul",
                     "argument 'y'"),
    "grad closure": (lambda s: ad.grad(lambda x: ad.sum(ad.mul(x, s)))(np.ones(2)), "mul",
                     "argument 'y'"),
    # an operator names the position (the receiver is argument 0), as other errors do
    "operator": (lambda s: s, "mul", "argument 1"),  # (the call is made in the test)
}
#: the ops whose bad value is their first array argument: refused before any import
FIRST = {"sin", "exp", "add x", "add y", "where", "sum", "mean", "reshape", "transpose",
         "matmul", "asarray", "jit argument", "grad argument", "vmap argument", "operator"}


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("op", list(OPS))
def test_every_op_refuses_an_unsupported_dtype_one_way(op: str, bad: str) -> None:
    if bad == "list of str" and op.endswith("argument"):
        pytest.skip("a transform reads a list argument as a pytree: each str is a leaf")
    call, name, argument = OPS[op]
    if op == "operator":  # the receiver is made before the capture
        h = ad.stop_gradient(np.ones(2))
        call = lambda s: h * s  # noqa: E731
    value = BAD[bad]()
    dt = np.asarray(value).dtype
    with ledger.capture() as rec:
        try:
            call(value)
        except UnsupportedDTypeError as e:  # kept as text: the traceback would keep records
            msg, kinds = str(e), (isinstance(e, DTypeError), isinstance(e, ArgumentTypeError),
                                  isinstance(e, TypeError))
            parts = (e.operation, e.argument, e.dtype)
        else:
            pytest.fail(f"{op} accepted a {bad} value")
        gc.collect()
    assert msg == f"{name}: {argument} has dtype {dt}, which tenferro does not support {SUPPORTED}"
    assert "from_numpy" not in msg
    assert kinds == (True, True, True)
    assert parts == (name, argument, dt)
    if op in FIRST:  # refused before anything: nothing allocated, copied or recorded
        assert rec.events == []
    else:  # a good argument imported before the bad one was reached is released again
        seen = [e.kind for e in rec.events]
        assert seen.count(EventKind.ALLOCATE) == seen.count(EventKind.RELEASE), rec.events


@pytest.mark.parametrize("bad", list(BAD))
def test_from_numpy_names_itself(bad: str) -> None:
    """The storage import raises the storage class, named for ``from_numpy``."""
    value = BAD[bad]()
    with ledger.capture() as rec, pytest.raises(DTypeError) as info:
        ts.from_numpy(value)
    assert str(info.value) == (
        f"from_numpy: argument 'array' has dtype {np.asarray(value).dtype}, which tenferro "
        f"does not support {SUPPORTED}"
    )
    assert rec.events == []
