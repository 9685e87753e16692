"""Every error a public callable of ``tenferro_ad`` raises -- for an axis out of range or of
a wrong type (each callable that takes an axis), a value of a wrong type, a consumed value,
a non-numeric value (each one the API fuzzer has a valid call of) -- is named in its
docstring's ``Raises:`` list (``_raised``: it *calls* each one); the checker fails on bad
examples."""

from __future__ import annotations

from typing import Any

import numpy as np

import tenferro_ad as ad
from tenferro_ad.errors import ArgumentError, AxisError
from tenferro_storage.errors import TenferroError
from tests.docs import _raised
from tests.docs._surface import public_methods, public_names

#: gaps this branch may not close, each (callable, missing class) -> why.  A gap that
#: closes fails :func:`test_every_known_gap_is_still_open`, so the entry goes with it.
KNOWN_GAPS: dict[tuple[str, str], str] = {}


def _gap(problem: str) -> tuple[str, str] | None:
    name, _, rest = problem.partition(": ")
    for (gap_name, cls), _why in KNOWN_GAPS.items():
        if name == gap_name and f" raised {cls}," in rest:
            return gap_name, cls
    return None


def _all_problems() -> list[str]:
    callees = [*_raised.axis_callees(), *_raised.value_callees()]
    return [p for c in callees for p in _raised.problems(c)]


def test_every_axis_callable_lists_the_errors_it_raises() -> None:
    problems = [p for c in _raised.axis_callees() for p in _raised.problems(c)
                if _gap(p) is None]
    assert not problems, (
        f"{len(problems)} raised error(s) missing from 'Raises:' (convention: "
        "docs/contributing.md#docstrings; the cases: tests/docs/_raised.py):\n"
        + "\n".join(problems)
    )


def test_every_public_function_lists_what_a_bad_value_raises() -> None:
    callees = _raised.value_callees()
    assert {"tenferro_ad.add", "tenferro_ad.linalg.qr", "tenferro_ad.EagerTensor.reshape"} <= {
        c.name for c in callees}
    problems = [p for c in callees for p in _raised.problems(c) if _gap(p) is None]
    assert not problems, (
        f"{len(problems)} raised error(s) missing from 'Raises:' (convention: "
        "docs/contributing.md#docstrings; the cases: tests/docs/_raised.py):\n"
        + "\n".join(problems)
    )


def test_every_known_gap_is_still_open() -> None:
    open_gaps = {g for p in _all_problems() if (g := _gap(p)) is not None}
    closed = sorted(set(KNOWN_GAPS) - open_gaps)
    assert not closed, f"these gaps are closed; remove them from KNOWN_GAPS: {closed}"


def test_the_checked_callables_are_the_axis_taking_public_ones() -> None:
    """Functions of several public modules, ``EagerTensor`` methods and ``Tracer`` methods
    (called on a tracer) are all found; each has a valid call (else a problem names it)."""
    names = {c.name for c in _raised.axis_callees()}
    assert {
        "tenferro_ad.sum", "tenferro_ad.moveaxis", "tenferro_ad.swapaxes",
        "tenferro_ad.fft.fft2", "tenferro_ad.linalg.trace", "tenferro_ad.EagerTensor.sum",
        "tenferro_ad.EagerTensor.transpose", "tenferro_ad.traced.Tracer.sum",
    } <= names
    assert not any(n.startswith("tenferro_storage") or n.endswith("AxisError") for n in names)
    tracer = next(c for c in _raised.axis_callees() if c.name == "tenferro_ad.traced.Tracer.sum")
    assert tracer.target.receiver == _raised.TRACER
    # a public method taking an axis on a class without a receiver here would be missed
    classes = dict(public_names())
    unreached = [n for n, f in public_methods() if n.startswith("tenferro_ad.")
                 and _raised.axis_params(f) and classes[n.rsplit(".", 1)[0]]
                 not in _raised.receivers()]
    assert not unreached, f"add a receiver to _raised.receivers() for: {unreached}"


def _sum_missing_axis_error(x: Any, axis: Any = None) -> Any:
    """Sum.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: ArgumentError, ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return ad.sum(x, axis=axis)


def _sum_documented(x: Any, axis: Any = None) -> Any:
    """Sum.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).

    Raises:
        AxisError: ``axis`` is out of range.
        ArgumentTypeError: ``x`` or ``axis`` has a wrong type.
        UseAfterMoveError: ``x`` was consumed."""
    return ad.sum(x, axis=axis)


def _sum_documented_by_bases(x: Any, axis: Any = None) -> Any:
    """Sum.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: IndexError, TypeError, RuntimeError."""
    return ad.sum(x, axis=axis)


def _sum_documented_too_broadly(x: Any, axis: Any = None) -> Any:
    """Sum.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: TenferroError, Exception."""
    return ad.sum(x, axis=axis)


def _ignores_axis(x: Any, axis: Any = None) -> Any:
    """Sum of everything, whatever ``axis`` says.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n).
    Raises: ArgumentTypeError, DTypeError, UseAfterMoveError."""
    return ad.sum(x)


def _problems(func: Any) -> list[str]:
    return _raised.problems(_raised.callee(f"tenferro_ad.{func.__name__}", func))


def test_checker_names_the_callable_the_case_and_the_missing_class() -> None:
    assert _problems(_sum_missing_axis_error) == [
        "tenferro_ad._sum_missing_axis_error: axis=5 (axis out of range) raised AxisError, "
        "which its 'Raises:' does not list (it lists: ArgumentError, ArgumentTypeError, "
        "DTypeError, UseAfterMoveError)"
    ]


def test_checker_accepts_the_raised_class_or_a_base_it_names() -> None:
    assert _problems(_sum_documented) == []
    assert _problems(_sum_documented_by_bases) == []


def test_checker_refuses_a_base_that_tells_nothing() -> None:
    missing = {p.split(" raised ")[1].split(",")[0] for p in
               _problems(_sum_documented_too_broadly)}
    assert missing == {"AxisError", "ArgumentTypeError", "UnsupportedDTypeError",
                       "UseAfterMoveError"}


def test_checker_reports_an_out_of_range_axis_that_raises_nothing() -> None:
    assert _problems(_ignores_axis) == [
        "tenferro_ad._ignores_axis: axis=5 (axis out of range) raised nothing",
        "tenferro_ad._ignores_axis: axis='s' (axis of a wrong type) raised nothing",
    ]


def test_documented_reads_the_class_hierarchy() -> None:
    assert _raised.documented(AxisError, ["AxisError"])
    assert _raised.documented(AxisError, ["tenferro_ad.errors.AxisError"])
    assert _raised.documented(AxisError, ["IndexError"])  # numpy's AxisError is one
    assert _raised.documented(AxisError, [np.exceptions.AxisError.__name__])
    assert not _raised.documented(AxisError, ["ArgumentError"])
    assert not _raised.documented(ArgumentError, ["TenferroError", "Exception"])
    assert issubclass(ArgumentError, TenferroError)
