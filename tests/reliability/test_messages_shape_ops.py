"""The shape, manipulation, complex and rounding ops (``ops/manip.py``, ``ops/shape.py``,
``ops/complex.py``, ``round``) check their arguments before any work: a refusal names the
op and the argument(s) it is about, is one of the project's error classes, and changes
nothing; the argument forms numpy accepts still give numpy's values."""

from __future__ import annotations

import gc
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentError, ArgumentTypeError, IndexOutOfBoundsError
from tenferro_storage import ledger
from tenferro_storage.errors import ConversionError, DTypeError, TenferroError

# deliberately ill-typed calls (a float count, a list of axes) go through these
untyped_ad: Any = ad
untyped_np: Any = np


def _x(shape: tuple[int, ...] = (2, 3)) -> np.ndarray[Any, Any]:
    return np.arange(float(np.prod(shape))).reshape(shape)


def _np(h: Any) -> np.ndarray[Any, Any]:
    with h.value() as v:
        out: np.ndarray[Any, Any] = v.to_numpy()
    return out


# (call, error class, the words the message must hold: the op first, then the argument(s))
REFUSALS: dict[str, tuple[Callable[[], Any], type[BaseException], list[str]]] = {
    "split-unequal": (lambda: ad.split(_x(), 2, axis=1), ArgumentError,
                      ["split:", "arguments 'x', 'indices_or_sections' and 'axis'"]),
    "split-axis-none": (lambda: untyped_ad.split(_x(), 2, axis=None), ArgumentTypeError,
                        ["split:", "argument 'axis'"]),
    "split-float-sections": (lambda: ad.split(_x(), 1.5), ArgumentTypeError,
                             ["split:", "argument 'indices_or_sections'"]),
    "vsplit-1d": (lambda: ad.vsplit(np.ones(4), 2), ArgumentError,
                  ["vsplit:", "argument 'x' has 1 dimension(s); vsplit needs 2"]),
    "hsplit-0d": (lambda: ad.hsplit(np.array(1.0), 1), ArgumentError,
                  ["hsplit:", "argument 'x'"]),
    "dsplit-2d": (lambda: ad.dsplit(_x(), 1), ArgumentError, ["dsplit:", "argument 'x'"]),
    "hsplit-unequal": (lambda: ad.hsplit(_x(), 2), ArgumentError,
                       ["hsplit:", "arguments 'x' and 's'"]),
    "append-misfit": (lambda: ad.append(_x(), np.ones((3, 3)), axis=1), ArgumentError,
                      ["append:", "arguments 'x' and 'values'"]),
    "append-uint8": (lambda: ad.append(_x(), np.ones(2, np.uint8)), DTypeError,
                     ["append:", "argument 'values'", "uint8"]),
    "broadcast_to-misfit": (lambda: ad.broadcast_to(np.ones(2), (2, 3)), ArgumentError,
                            ["broadcast_to:", "argument 'x'", "argument 'shape'"]),
    "broadcast_to-negative": (lambda: ad.broadcast_to(np.ones(3), (-1, 3)), ArgumentError,
                              ["broadcast_to:", "argument 'shape'"]),
    "conj-function": (lambda: ad.conj(len), ArgumentTypeError, ["conj:", "argument 'x'"]),
    "real-ellipsis": (lambda: ad.real(Ellipsis), ArgumentTypeError, ["real:", "argument 'x'"]),
    "imag-none": (lambda: ad.imag(None), ArgumentTypeError, ["imag:", "argument 'x'"]),
    "getitem-out-of-bounds": (lambda: ad.getitem(np.array(1.5), 0), IndexOutOfBoundsError,
                              ["getitem:", "arguments 'x' and 'key'"]),
    "getitem-bad-key": (lambda: ad.getitem(_x(), "i->"), ArgumentTypeError,
                        ["getitem:", "argument 'key'"]),
    "getitem-float-list": (lambda: ad.getitem(_x(), [0.5]), ArgumentTypeError,
                           ["getitem:", "argument 'key'"]),
    "getitem-ragged-list": (lambda: ad.getitem(_x(), [[0], [0, 1]]), ArgumentTypeError,
                            ["getitem:", "argument 'key'"]),
    "gather-function": (lambda: ad.gather(len, 0), ArgumentTypeError,
                        ["gather:", "argument 'x'"]),
    "moveaxis-repeated": (lambda: ad.moveaxis(_x(), (0, 0), (0, 1)), ArgumentError,
                          ["moveaxis:", "argument 'source'"]),
    "moveaxis-ragged": (lambda: ad.moveaxis([ad.stop_gradient(np.ones(3)), np.ones(3)], 0, 1),
                        ArgumentTypeError, ["moveaxis:", "argument 'x'"]),
    "repeat-inf": (lambda: ad.repeat(_x(), float("inf")), ArgumentTypeError,
                   ["repeat:", "argument 'repeats'"]),
    "repeat-negative": (lambda: ad.repeat(_x(), -1), ArgumentError,
                        ["repeat:", "argument 'repeats'"]),
    "repeat-count-misfit": (lambda: ad.repeat(_x(), [1, 2], axis=1), ArgumentError,
                            ["repeat:", "arguments 'x' and 'repeats'"]),
    "repeat-ragged": (lambda: ad.repeat(_x(), [np.ones((2, 3)), np.ones(3)]),
                      ArgumentTypeError, ["repeat:", "argument 'repeats'"]),
    "repeat-huge": (lambda: ad.repeat(_x(), 2**62), ArgumentError,
                    ["repeat:", "argument 'repeats'"]),
    "roll-str-shift": (lambda: ad.roll(_x(), "float64"), ArgumentTypeError,
                       ["roll:", "argument 'shift'"]),
    "roll-misfit": (lambda: ad.roll(_x(), (1, 2, 3), axis=(0, 1)), ArgumentError,
                    ["roll:", "arguments 'shift' and 'axis'"]),
    "rot90-empty-axes": (lambda: untyped_ad.rot90(_x(), axes=[]), ArgumentError,
                         ["rot90:", "argument 'axes'"]),
    "rot90-float-k": (lambda: untyped_ad.rot90(_x(), 1.5), ArgumentTypeError,
                      ["rot90:", "argument 'k'"]),
    "round-huge-decimals": (lambda: ad.round(_x(), decimals=2**62), ArgumentError,
                            ["round:", "argument 'decimals'"]),
    "round-float-decimals": (lambda: untyped_ad.round(_x(), decimals=0.5), ArgumentTypeError,
                             ["round:", "argument 'decimals'"]),
    "tile-negative": (lambda: ad.tile(_x(), -1), ArgumentError, ["tile:", "argument 'reps'"]),
    "tile-huge": (lambda: ad.tile(_x(), 2**62), ArgumentError, ["tile:", "argument 'reps'"]),
    "tile-rank-33": (lambda: ad.tile(_x(), (1,) * 33), ArgumentError,
                     ["tile:", "argument 'reps'", "32"]),
    "pad-negative": (lambda: ad.pad(_x(), -2), ArgumentError, ["pad:", "argument 'pad_width'"]),
    "pad-float-width": (lambda: ad.pad(_x(), 1.5), ArgumentTypeError,
                        ["pad:", "argument 'pad_width'", "integral"]),
    "pad-complex-width": (lambda: ad.pad(_x(), np.ones((2, 2), complex)), ArgumentTypeError,
                          ["pad:", "argument 'pad_width'"]),
    "pad-width-misfit": (lambda: ad.pad(_x(), [1, 2, 3]), ArgumentError,
                         ["pad:", "arguments 'x' and 'pad_width'"]),
    "pad-none-constant": (lambda: ad.pad(_x(), 1, constant_values=None), ArgumentTypeError,
                          ["pad:", "argument 'constant_values'"]),
    "pad-complex-constant": (lambda: ad.pad(_x(), 1, constant_values=1 + 2j), ConversionError,
                             ["pad:", "arguments 'x' and 'constant_values'", "imaginary"]),
    "pad-nan-into-int": (lambda: ad.pad(np.arange(3), 1, constant_values=np.nan),
                         ConversionError, ["pad:", "arguments 'x' and 'constant_values'"]),
    "pad-mode": (lambda: ad.pad(_x(), 1, mode="mean"), ArgumentError, ["pad:", "argument 'mode'"]),
    "pad-empty-edge": (lambda: ad.pad(np.zeros((0, 3)), 1, mode="edge"), ArgumentError,
                       ["pad:", "arguments 'x', 'pad_width' and 'mode'"]),
    "eye-huge": (lambda: ad.eye(2**62), ArgumentError, ["eye:", "argument 'n'"]),
    "eye-float": (lambda: untyped_ad.eye(2.0), ArgumentTypeError, ["eye:", "argument 'n'"]),
    "eye-dtype": (lambda: ad.eye(2, dtype="float16"), DTypeError, ["eye:", "argument 'dtype'"]),
    "diagflat-huge-k": (lambda: ad.diagflat(np.ones(2), k=2**62), ArgumentError,
                        ["diagflat:", "arguments 'v' and 'k'"]),
    "diag-3d": (lambda: ad.diag(np.ones((1, 1, 1))), ArgumentError, ["diag:", "argument 'v'"]),
    "full_like-none-x": (lambda: ad.full_like(None, 0.5), ArgumentTypeError,
                         ["full_like:", "argument 'x'"]),
    "full_like-uint8-x": (lambda: ad.full_like(np.ones(2, np.uint8), 0.5), DTypeError,
                          ["full_like:", "argument 'x'", "dtype="]),
    "full_like-nan-into-int": (lambda: ad.full_like(np.arange(3), np.nan), ConversionError,
                               ["full_like:", "arguments 'fill_value' and 'x'"]),
    "full_like-complex-into-float": (
        lambda: ad.full_like(_x(), 1 + 2j, dtype="float32"), ConversionError,
        ["full_like:", "arguments 'fill_value' and 'dtype'"],
    ),
    "ones_like-negative-shape": (lambda: ad.ones_like(_x(), shape=(3, -1)), ArgumentError,
                                 ["ones_like:", "argument 'shape'"]),
    "zeros_like-huge-shape": (lambda: ad.zeros_like(_x(), shape=(2, 2**62)), ArgumentError,
                              ["zeros_like:", "argument 'shape'"]),
    "linspace-none": (lambda: ad.linspace(None, 3), ArgumentTypeError,
                      ["linspace:", "argument 'start'"]),
    "linspace-object": (lambda: ad.linspace(0.0, object()), ArgumentTypeError,
                        ["linspace:", "argument 'stop'"]),
    "linspace-float-num": (lambda: untyped_ad.linspace(0.0, 1.0, 2.5), ArgumentTypeError,
                           ["linspace:", "argument 'num'"]),
    "linspace-misfit": (lambda: ad.linspace(np.ones(2), np.ones(3)), ArgumentError,
                        ["linspace:", "arguments 'start' and 'stop'"]),
    "trace-offset": (lambda: ad.trace(_x(), None), ArgumentTypeError,
                     ["trace:", "argument 1 ('offset')"]),
    "trace-axis": (lambda: ad.trace(_x(), 0, 0.5), ArgumentTypeError,
                   ["trace:", "argument 2 ('axis1')"]),
    "trace-same-axes": (lambda: ad.trace(_x(), 0, 1, 1), ArgumentError,
                        ["trace:", "arguments 2 and 3"]),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_call_names_the_op_and_the_argument(case: str) -> None:
    """The error is the project's, of the documented builtin kind, starts with the op and
    names the argument(s); nothing is allocated or recorded."""
    call, kind, words = REFUSALS[case]
    live = ledger.live_bytes()
    msg = _refusal(call, kind)
    gc.collect()  # the traceback held the call's frames (and the values built in them)
    assert ledger.live_bytes() == live
    assert msg.startswith(words[0]), msg
    for w in words[1:]:
        assert w in msg, msg
    assert not re.search(r" at 0x[0-9a-f]+", msg), msg


def _refusal(call: Callable[[], Any], kind: type[BaseException]) -> str:
    with pytest.raises(kind) as info:
        call()
    assert isinstance(info.value, TenferroError)
    return str(info.value)


def test_a_refused_call_leaves_an_input_owner_unchanged() -> None:
    """A refusal reads the owner's metadata only: it is not consumed, borrowed or written."""
    t = ts.from_numpy(_x())
    with pytest.raises(ArgumentError):
        ad.split(t, 2, axis=1)
    with pytest.raises(ConversionError):
        ad.pad(t, 1, constant_values=1j)
    assert np.array_equal(t.to_numpy(), _x())


def test_a_key_that_cannot_be_shown_is_described_by_its_type() -> None:
    """A long or address-bearing index is described, not printed."""
    with pytest.raises(ArgumentTypeError) as info:
        ad.getitem(_x(), object())
    assert "argument 'key' (a value of type object) is not a valid index" in str(info.value)
    assert "0x" not in str(info.value)


# -- numpy's accepted forms still give numpy's values -----------------------------------------
VALUES: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "split-indices": (lambda: ad.split(_x((6, 2)), [1, 4]), lambda: np.split(_x((6, 2)), [1, 4])),
    "split-integral-float": (lambda: untyped_ad.split(_x(), 2.0),
                             lambda: untyped_np.split(_x(), 2.0)),
    "split-numpy-int": (lambda: ad.split(_x(), np.int64(2)), lambda: np.split(_x(), 2)),
    "array_split": (lambda: ad.array_split(_x(), 3, axis=0),
                    lambda: np.array_split(_x(), 3, axis=0)),
    "hsplit-1d": (lambda: ad.hsplit(np.arange(4.0), 2), lambda: np.hsplit(np.arange(4.0), 2)),
    "vsplit": (lambda: ad.vsplit(_x((4, 2)), 2), lambda: np.vsplit(_x((4, 2)), 2)),
    "dsplit": (lambda: ad.dsplit(_x((1, 2, 4)), [1]), lambda: np.dsplit(_x((1, 2, 4)), [1])),
}
SINGLE: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "pad-pair": (lambda: ad.pad(_x(), (1, 2)), lambda: np.pad(_x(), (1, 2))),
    "pad-column": (lambda: ad.pad(_x(), [[1], [2]]), lambda: np.pad(_x(), [[1], [2]])),
    "pad-per-axis": (lambda: ad.pad(_x(), ((1, 0), (0, 2)), constant_values=((1, 2), (3, 4))),
                     lambda: np.pad(_x(), ((1, 0), (0, 2)), constant_values=((1, 2), (3, 4)))),
    "pad-numpy-width": (lambda: ad.pad(_x(), np.array(1)), lambda: np.pad(_x(), np.array(1))),
    "pad-int-truncates": (lambda: ad.pad(np.arange(3), 1, constant_values=2.5),
                          lambda: np.pad(np.arange(3), 1, constant_values=2.5)),
    "pad-reflect": (lambda: ad.pad(_x(), 1, mode="reflect"),
                    lambda: np.pad(_x(), 1, mode="reflect")),
    "pad-zero-width-edge": (lambda: ad.pad(np.zeros((0, 3)), ((0, 0), (1, 1)), mode="edge"),
                            lambda: np.pad(np.zeros((0, 3)), ((0, 0), (1, 1)), mode="edge")),
    "roll-tuple-shift-flat": (lambda: ad.roll(_x(), (1, 2)), lambda: np.roll(_x(), (1, 2))),
    "roll-shifts-on-one-axis": (lambda: ad.roll(_x(), (1, 1), axis=1),
                                lambda: np.roll(_x(), (1, 1), axis=1)),
    "roll-one-shift-two-axes": (lambda: ad.roll(_x(), 1, axis=(0, 1)),
                                lambda: np.roll(_x(), 1, axis=(0, 1))),
    "roll-zero": (lambda: ad.roll(_x(), 0, axis=0), lambda: np.roll(_x(), 0, axis=0)),
    "roll-huge": (lambda: ad.roll(_x(), 2**62, axis=1), lambda: np.roll(_x(), 2**62, axis=1)),
    "repeat-counts": (lambda: ad.repeat(_x(), [1, 0, 2], axis=1),
                      lambda: np.repeat(_x(), [1, 0, 2], axis=1)),
    "repeat-one-count-list": (lambda: ad.repeat(_x(), [2]), lambda: np.repeat(_x(), [2])),
    "repeat-integral-float": (lambda: untyped_ad.repeat(_x(), 2.0),
                              lambda: untyped_np.repeat(_x(), 2.0)),
    "repeat-bool": (lambda: ad.repeat(_x(), True, axis=0),
                    lambda: np.repeat(_x(), True, axis=0)),
    "tile-many-axes": (lambda: ad.tile(_x(), (2,) * 16 + (1,) * 14),
                       lambda: np.tile(_x(), (2,) * 16 + (1,) * 14)),
    "tile-zero": (lambda: ad.tile(_x(), (0, 2)), lambda: np.tile(_x(), (0, 2))),
    "rot90-list-axes": (lambda: untyped_ad.rot90(_x((2, 3, 4)), 3, [2, 0]),
                        lambda: untyped_np.rot90(_x((2, 3, 4)), 3, [2, 0])),
    "trace-offset": (lambda: ad.trace(_x((3, 4)), 1), lambda: np.trace(_x((3, 4)), 1)),
    "trace-offset-past-the-end": (lambda: ad.trace(_x((3, 4)), 9),
                                  lambda: np.trace(_x((3, 4)), 9)),
    "trace-axes": (lambda: ad.trace(_x((2, 3, 4)), 0, 2, 0),
                   lambda: np.trace(_x((2, 3, 4)), 0, 2, 0)),
    "diagflat-k": (lambda: ad.diagflat(_x(), -2), lambda: np.diagflat(_x(), -2)),
    "diag-2d": (lambda: ad.diag(_x(), 1), lambda: np.diag(_x(), 1)),
    "eye-m-k": (lambda: ad.eye(3, 4, -1), lambda: np.eye(3, 4, -1)),
    "eye-huge-k": (lambda: ad.eye(3, k=-(2**62)), lambda: np.eye(3, k=-(2**62))),
    "eye-dtype": (lambda: ad.eye(2, dtype=np.int32), lambda: np.eye(2, dtype=np.int32)),
    "full_like-int64-exact": (lambda: ad.full_like(np.arange(2), 2**62 + 1),
                              lambda: np.full_like(np.arange(2), 2**62 + 1)),
    "full_like-complex": (lambda: ad.full_like(_x(), 1 + 2j, dtype=complex),
                          lambda: np.full_like(_x(), 1 + 2j, dtype=complex)),
    "full_like-complex-real-part": (lambda: ad.full_like(_x(), 3 + 0j),
                                    lambda: np.full_like(_x(), 3.0)),
    "full_like-shape-int": (lambda: ad.full_like(_x(), 2.0, shape=4),
                            lambda: np.full_like(_x(), 2.0, shape=4)),
    "ones_like-bool": (lambda: ad.ones_like(np.array([True])), lambda: np.ones_like([True])),
    "linspace": (lambda: ad.linspace(0.0, 1.0, 5), lambda: np.linspace(0.0, 1.0, 5)),
    "linspace-bool-num": (lambda: ad.linspace(0.0, 1.0, True), lambda: np.linspace(0.0, 1, 1)),
    "round-negative-decimals": (lambda: ad.round(_x() * 11, -1),
                                lambda: np.round(_x() * 11, -1)),
    "broadcast_to-int": (lambda: untyped_ad.broadcast_to(np.ones(1), 3),
                         lambda: np.broadcast_to(np.ones(1), 3)),
    "moveaxis-list": (lambda: ad.moveaxis(_x((2, 3, 4)), [0, 1], [2, 0]),
                      lambda: np.moveaxis(_x((2, 3, 4)), [0, 1], [2, 0])),
    "append-axis": (lambda: ad.append(_x(), _x(), axis=0),
                    lambda: np.append(_x(), _x(), axis=0)),
    "real-of-list": (lambda: ad.real([1.0, 2.0]), lambda: np.real([1.0, 2.0])),
}


@pytest.mark.parametrize("case", sorted(VALUES))
def test_numpys_split_forms_still_split_as_numpy(case: str) -> None:
    ours, theirs = VALUES[case]
    got, want = ours(), theirs()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(_np(g), w)


@pytest.mark.parametrize("case", sorted(SINGLE))
def test_numpys_argument_forms_still_give_numpys_values(case: str) -> None:
    ours, theirs = SINGLE[case]
    got, want = _np(ours()), np.asarray(theirs())
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.array_equal(got, want)
