"""Every public callable's docstring states its cost and its errors (``_docstrings``), read
from the live public surface; the checker fails on bad examples."""

from __future__ import annotations

from typing import Any

from tests.docs._docstrings import check_all, check_docstring
from tests.docs._surface import public_methods, public_modules, public_names


def _exceptions() -> dict[str, type[BaseException]]:
    out: dict[str, type[BaseException]] = {}
    for mod in public_modules():
        for value in vars(mod).values():
            if isinstance(value, type) and issubclass(value, BaseException):
                out[value.__name__] = value
    return out


def test_every_public_callable_states_cost_and_raises() -> None:
    problems = check_all(public_names(), _exceptions())
    assert not problems, (
        f"{len(problems)} docstring problem(s) (convention: docs/contributing.md#docstrings):\n"
        + "\n".join(map(str, problems))
    )


def test_every_public_method_states_cost_and_raises() -> None:
    """The methods of public classes are public callables too (``Tensor.to_numpy``,
    ``Gradients.take_grad``, ...)."""
    problems = check_all(public_methods(), _exceptions())
    assert not problems, (
        f"{len(problems)} method docstring problem(s) (convention: "
        "docs/contributing.md#docstrings):\n" + "\n".join(map(str, problems))
    )


def _good(x: Any, *, axis: int = 0) -> Any:
    """Sum along ``axis``.

    Cost: allocates the result; no copy; no sync; dispatches through the input's provider;
    O(n) per-element.

    Args:
        x: the input.
        axis: the axis.

    Raises:
        ValueError: ``axis`` is out of range.
    """
    return x


def _bad_missing_everything(x: Any) -> Any:
    """Sum everything."""
    return x


def _bad_cost_and_args(x: Any) -> Any:
    """Sum.

    Cost: allocates the result; no copy.

    Args:
        y: a parameter that does not exist.

    Raises:
        NotAnError: never.
    """
    return x


def _good_compact(x: Any) -> Any:
    """Negate.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, ArgumentTypeError."""
    return x


def _bad_compact(x: Any) -> Any:
    """Negate.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: ArgumentError, Nonsense."""
    return x


def _bad_two_cost_paragraphs(x: Any) -> Any:
    """Negate.

    Cost: O(n); allocates the output.

    Cost: no allocation; no copy; no sync; no dispatch; O(n) per-element.
    Raises: nothing."""
    return x


def _bad_cost_sentence_in_prose(x: Any) -> Any:
    """Negate, elementwise.  Cost: one pass over ``x``.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: nothing."""
    return x


def _bad_forward_cost_in_prose(x: Any) -> Any:
    """Negate.  Forward
    cost: one pass.

    Cost: allocates the result; no copy; no sync; no dispatch; O(n) per-element.
    Raises: nothing."""
    return x


def test_checker_refuses_a_second_statement_of_cost() -> None:
    """One canonical ``Cost:`` paragraph: a second one, or a cost sentence left in the prose
    beside it, may repeat or contradict it, and is named."""
    expected = {
        _bad_two_cost_paragraphs: "('Cost:', 'Cost:')",
        _bad_cost_sentence_in_prose: "('Cost:', 'Cost:')",
        _bad_forward_cost_in_prose: "('Forward cost:', 'Cost:')",
    }
    for bad, stated in expected.items():
        assert [str(p) for p in check_docstring("bad", bad, _exceptions())] == [
            f"bad: states its cost 2 times {stated}: one canonical 'Cost:' paragraph, no "
            "cost sentence in the prose"
        ]
    names = [*public_names(), ("tenferro_ad.twice", _bad_two_cost_paragraphs)]
    assert [p.name for p in check_all(names, _exceptions()) if "times" in p.what] == [
        "tenferro_ad.twice"
    ]


def test_checker_accepts_a_docstring_that_follows_the_convention() -> None:
    assert check_docstring("good", _good, _exceptions()) == []
    assert check_docstring("compact", _good_compact, _exceptions()) == []
    assert [str(p) for p in check_docstring("bad", _bad_compact, _exceptions())] == [
        "bad: 'Raises:' names 'Nonsense', not an exception class"
    ]


def test_checker_names_what_a_bare_docstring_misses() -> None:
    problems = [str(p) for p in check_docstring("bad", _bad_missing_everything, _exceptions())]
    assert any("no 'Cost:' line" in p for p in problems)
    assert any("no 'Raises:' section" in p for p in problems)


def test_checker_names_missing_facets_unknown_errors_and_phantom_parameters() -> None:
    problems = [str(p) for p in check_docstring("bad", _bad_cost_and_args, _exceptions())]
    assert "bad: 'Cost:' states no sync fact (one of: synchronizes, no sync)" in problems
    assert any("states no dispatch fact" in p for p in problems)
    assert any("states no work fact" in p for p in problems)
    assert "bad: 'Raises:' names 'NotAnError', not an exception class" in problems
    assert any("'Args:' documents 'y', not a parameter (the signature has: x)" in p
               for p in problems)


def test_checker_fails_on_a_public_callable_without_the_convention() -> None:
    names = [*public_names(), ("tenferro_ad.bad_example", _bad_missing_everything)]
    problems = check_all(names, _exceptions())
    assert any(p.name == "tenferro_ad.bad_example" for p in problems)
