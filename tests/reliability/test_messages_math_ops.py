"""The products, contractions, reductions, softmaxes, norms and scans name the argument a
refusal is about (``"dot: arguments 'a' and 'b' are not aligned ..."``), in one of the forms
``_fuzz.names_the_argument`` accepts, and a refused call changes nothing: the input owners
keep their values and a recording tape gets no node.

Each row changes one argument of a valid call: a value of the wrong type, a wrong shape, an
unstored dtype, an empty value, an out-of-range parameter.  The composites (``clip`` made of
``maximum``/``minimum``, ``cross`` of slices and products, ``dot`` of ``einsum``...) must name
the caller's argument, not the ``argument i`` of the op they failed in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage.errors import TenferroError

from ._fuzz import Blame, names_the_argument


def _m(*shape: int) -> Any:
    return ts.from_numpy(np.arange(float(np.prod(shape))).reshape(shape) - 2.5)


def _any(v: Any) -> Any:
    """``v`` typed as ``Any``: a deliberately wrong argument the annotations refuse."""
    return v


def _consumed() -> Any:
    t = ts.from_numpy(np.ones(3))
    t.into_storage()
    return t


A23 = np.arange(6.0).reshape(2, 3)
B33 = np.ones((3, 3))
U8 = np.ones(2, np.uint8)

# name -> (call, the changed argument as Blame(name, position), the error class, a fragment)
Row = tuple[Callable[[], Any], Blame, type[BaseException], str]
ROWS: dict[str, Row] = {
    # products: operands named 'a'/'b', shapes checked before einsum runs
    "dot b not aligned": (lambda: ad.dot(_m(2, 3), []), Blame("b", 1), ValueError, "aligned"),
    "dot a not aligned": (lambda: ad.dot(U8.astype(float), _m(3, 3)), Blame("a", 0), ValueError,
                          "aligned"),
    "dot b None": (lambda: ad.dot(_m(2, 3), None), Blame("b", 1), TypeError, "NoneType"),
    "dot a uint8": (lambda: ad.dot(U8, _m(2, 3)), Blame("a", 0), TypeError, "uint8"),
    "method dot b": (lambda: _any(ad.stop_gradient(A23)).dot([]), Blame("b", 0, True), ValueError,
                     "aligned"),
    "vdot sizes": (lambda: ad.vdot(_m(2, 3), -1), Blame("b", 1), ValueError, "6 and 1"),
    "inner last axes": (lambda: ad.inner((), _m(2, 3)), Blame("a", 0), ValueError, "last axes"),
    "outer uint8": (lambda: ad.outer(_m(2, 3), U8), Blame("b", 1), TypeError, "uint8"),
    "kron ragged list": (lambda: ad.kron([A23, np.ones(3)], _m(2, 3)), Blame("a", 0),
                         ValueError, "list"),
    "cross axis keyword": (lambda: ad.cross(_m(2, 3), _m(2, 3), axis=_any("")), Blame("axis", 5),
                           TypeError, "int"),
    "cross axisb breaks broadcasting": (lambda: ad.cross(_m(2, 3), _m(2, 3), axisb=0),
                                        Blame("axisb", 3), ValueError, "broadcast"),
    "cross axisc out of range": (lambda: ad.cross(np.ones(3), np.ones(3), axisc=1),
                                 Blame("axisc", 4), np.exceptions.AxisError, "axisc"),
    # einsum: 'subscripts' and 'operands'[i] (by position in the interleaved form)
    "einsum subscripts None": (lambda: ad.einsum(None, _m(2, 3), _m(3, 3)),
                               Blame("subscripts", 0), TypeError, "str"),
    "einsum operand rank": (lambda: ad.einsum("ij,jk->ik", _m(2, 3), 2),
                            Blame("operands", 2), ValueError, "rank 0"),
    "einsum operand size": (lambda: ad.einsum("ij,jk->ik", _m(2, 5), _m(3, 3)),
                            Blame("operands", 1), ValueError, "label 'j'"),
    "einsum subscripts size": (lambda: ad.einsum("ij,ik->ik", _m(2, 3), _m(3, 3)),
                               Blame("subscripts", 0), ValueError, "label 'i'"),
    "einsum operand count": (lambda: ad.einsum("i->", _m(2, 3), _m(3, 3)),
                             Blame("subscripts", 0), ValueError, "operand(s)"),
    "einsum operand None": (lambda: ad.einsum("ij,jk->ik", _m(2, 3), None),
                            Blame("operands", 2), TypeError, "NoneType"),
    "einsum interleaved sublist": (lambda: ad.einsum(A23, [0, 1], B33, [1.0, 2]),
                                   Blame("operands", 3), ValueError, "sublist"),
    "tensordot a 0-d": (lambda: ad.tensordot(3, _m(2, 3)), Blame("a", 0), ValueError, "ranks"),
    "tensordot axes view": (
        lambda: ad.tensordot(_m(2, 3), _m(2, 3), ts.from_numpy(A23.copy()).as_view_mut()),
        Blame("axes", 2), TypeError, "pair"),
    "tensordot axes extents": (lambda: ad.tensordot(_m(2, 3), _m(3, 3), ([0], [0])),
                               Blame("axes", 2), ValueError, "entries"),
    # matmul: numpy blames one operand; the message names both
    "matmul core x": (lambda: ad.matmul((-5,), _m(3, 3)), Blame("x", 0), ValueError,
                      "do not fit"),
    "matmul 0-d y": (lambda: ad.matmul(_m(2, 3), 2.0), Blame("y", 1), ValueError, "0-d"),
    "matmul batch y": (lambda: ad.matmul(np.ones((2, 2, 3)), np.ones((3, 3, 3))),
                       Blame("y", 1), ValueError, "batch"),
    # reductions and their composites
    "max empty": (lambda: ad.max(()), Blame("x", 0), ValueError, "empty"),
    "min empty along axis": (lambda: ad.min(np.zeros((0, 3)), axis=0), Blame("x", 0),
                             ValueError, "no identity"),
    "sum of a type": (lambda: ad.sum(np.float32), Blame("x", 0), TypeError, "type float32"),
    "softmax consumed": (lambda: ad.softmax(_consumed()), Blame("x", 0), RuntimeError,
                         "consumed"),
    "softmax empty": (lambda: ad.softmax(()), Blame("x", 0), ValueError, "empty"),
    "log_softmax list of owners": (lambda: ad.log_softmax([_m(2, 3), _m(2, 3)]), Blame("x", 0),
                                   TypeError, "Tensor"),
    "logsumexp b str": (lambda: ad.logsumexp(_m(2, 3), b="int64"), Blame("b", 2), TypeError,
                        "str"),
    "logsumexp b broadcast": (lambda: ad.logsumexp(_m(2, 3), b=np.ones(2)), Blame("b", 2),
                              ValueError, "broadcast"),
    "clip hi None-like type": (lambda: ad.clip(_m(2, 3), -1.5, "x"), Blame("hi", 2), TypeError,
                               "str"),
    "clip lo broadcast": (lambda: ad.clip(_m(2, 3), np.ones(2), 1.0), Blame("lo", 1),
                          ValueError, "broadcast"),
    "astype x str": (lambda: ad.astype("ij,jk->ik", "float64"), Blame("x", 0), TypeError,
                     "str"),
    # norms, scans, statistics
    "norm ord view": (lambda: ad.norm(_m(2, 3), ord=ts.from_numpy(np.array(1.0)).as_view()),
                      Blame("ord", 1), TypeError, "TensorView"),
    "norm ord for a matrix": (lambda: ad.norm(_m(2, 3), 3), Blame("ord", 1), ValueError,
                              "matrix norm"),
    "norm fro over one axis": (lambda: ad.norm(_m(2, 3), "fro", axis=0), Blame("axis", 2),
                               ValueError, "one axis"),
    "linalg.norm ord": (lambda: ad.linalg.norm(_m(2, 3), Ellipsis), Blame("ord", 1), TypeError,
                        "ellipsis"),
    "average weights length": (lambda: ad.average(_m(2, 3), axis=0, weights=np.ones(3)),
                               Blame("weights", 2), ValueError, "length 3"),
    "argpartition x a type": (lambda: ad.argpartition(np.float32, 1), Blame("x", 0), TypeError,
                              "type float32"),
    "argpartition kth": (lambda: ad.argpartition(_m(2, 3), 9), Blame("kth", 1), ValueError,
                         "out of bounds"),
    "argpartition x too small for kth": (lambda: ad.argpartition((-1,), 1), Blame("x", 0),
                                         ValueError, "out of bounds"),
    "diff prepend shape": (lambda: ad.diff(_m(2, 3), prepend=[]), Blame("prepend", 3),
                           ValueError, "do not fit"),
    "diff n": (lambda: ad.diff(_m(2, 3), n=_any(0.5)), Blame("n", 1), TypeError, "int"),
    "take_along_axis axis None": (
        lambda: ad.take_along_axis(_m(2, 3), np.zeros((2, 3), np.int64), None),
        Blame("axis", 2), ValueError, "1-D"),
    "take_along_axis x rank": (
        lambda: ad.take_along_axis((), np.zeros((2, 3), np.int64), 0),
        Blame("x", 0), ValueError, "dims"),
    "take_along_axis x empty": (
        lambda: ad.take_along_axis(np.zeros((0, 3)), np.zeros((2, 3), np.int64), 0),
        Blame("x", 0), IndexError, "out of range"),
    "take_along_axis float indices": (
        lambda: ad.take_along_axis(_m(2, 3), np.zeros((2, 3)), 0),
        Blame("indices", 1), TypeError, "integers"),
}


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_refused_call_names_the_changed_argument(name: str) -> None:
    """The error is the project's, of numpy's builtin class, names the op and the argument
    that was changed, and never shows a memory address."""
    call, blame, cls, fragment = ROWS[name]
    with pytest.raises(cls) as info:
        call()
    msg = str(info.value)
    assert isinstance(info.value, TenferroError), msg
    assert names_the_argument(blame, msg), f"{name}: {msg}"
    assert fragment in msg, msg
    assert " at 0x" not in msg, msg


@pytest.mark.parametrize(
    "call",
    [
        lambda w, a: ad.dot(w, a),
        lambda w, a: ad.cross(w, a, axisb=0),
        lambda w, a: ad.tensordot(w, a, ([1], [0])),
        lambda w, a: ad.clip(w, np.ones(2), a),
        lambda w, a: ad.clip(w, 0.0, np.ones((4, 3))),
        lambda w, a: ad.diff(w, prepend=a[:, :1], append=[]),
        lambda w, a: ad.logsumexp(w, b=np.ones(2)),
        lambda w, a: ad.average(w, axis=0, weights=np.ones(3)),
        lambda w, a: ad.take_along_axis(w, np.full((2, 3), 9), 0),
        lambda w, a: ad.norm(w, 3),
        lambda w, a: ad.matmul(w, a),
    ],
    ids=["dot", "cross", "tensordot", "clip lo", "clip hi", "diff append", "logsumexp",
         "average", "take_along_axis", "norm", "matmul"],
)
def test_a_refused_composite_records_nothing_and_changes_no_owner(
    call: Callable[[Any, Any], Any],
) -> None:
    """A composite that refuses checks its arguments before its first step: a recording
    tape gets no node (not even for the steps that would have fitted) and the owners keep
    their values."""
    owner = ts.from_numpy(np.arange(6.0).reshape(2, 3))
    with ad.Tape(name="refusals") as tape:
        w = tape.watch(ts.from_numpy(np.arange(6.0).reshape(2, 3) + 1.0))
        before = len(tape.nodes)
        with pytest.raises(TenferroError):
            call(w, owner)
        assert len(tape.nodes) == before
    np.testing.assert_array_equal(owner.to_numpy(), np.arange(6.0).reshape(2, 3))


def test_valid_calls_still_match_numpy() -> None:
    """The up-front checks accept what numpy accepts (the forms the checks could refuse by
    mistake: a None clip bound, an owner as weights/indices/prepend, an array of axes, a
    broadcasting logsumexp weight, the interleaved einsum form)."""
    a = np.arange(6.0).reshape(2, 3) - 2.0
    view = ts.from_numpy(a.copy()).as_view()
    got: dict[str, tuple[Any, Any]] = {
        "clip None": (ad.clip(a, None, 1.0), np.clip(a, None, 1.0)),
        "average owner weights": (ad.average(a, weights=view), np.average(a, weights=a)),
        "take owner indices": (
            ad.take_along_axis(a, ts.from_numpy(np.array([[2], [1]])), 1),
            np.take_along_axis(a, np.array([[2], [1]]), 1),
        ),
        "diff owner prepend": (ad.diff(a, prepend=ts.from_numpy(np.array(1.0))),
                               np.diff(a, prepend=1.0)),
        "tensordot array axes": (ad.tensordot(a, B33, np.array([[1], [0]])),
                                 np.tensordot(a, B33, _any(np.array([[1], [0]])))),
        "einsum interleaved": (ad.einsum(a, [0, 1], B33, [1, 2], [0, 2]), a @ B33),
        "cross axis": (ad.cross(np.ones((2, 3)), a, axis=1), np.cross(np.ones((2, 3)), a)),
        "argpartition kth list": (ad.argpartition(a, [0, 2], axis=None),
                                  np.argpartition(a, [0, 2], axis=None)),
        "norm 0-d array ord": (ad.norm(a, np.array(2)), np.linalg.norm(a, 2)),
    }
    for name, (mine, ref) in got.items():
        np.testing.assert_allclose(mine.to_numpy(), ref, rtol=1e-12, err_msg=name)
    view.release()
    import scipy.special

    np.testing.assert_allclose(
        ad.logsumexp(np.ones(3), b=np.ones((2, 3)), axis=1).to_numpy(),
        scipy.special.logsumexp(np.ones(3), b=np.ones((2, 3)), axis=1),
    )
