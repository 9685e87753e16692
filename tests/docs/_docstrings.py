"""The docstring convention every public callable follows, and its checker.

A public callable's docstring carries two compact statements (the full rule, with examples,
is in ``docs/contributing.md``):

``Cost:`` a paragraph starting ``Cost:`` that names one fact for each facet, with a fixed
keyword:

=============  =========================================  =================================
facet          says                                       keywords (one of)
=============  =========================================  =================================
allocation     does it allocate                           ``allocates`` / ``no allocation``
copy           does it copy or transfer bytes             ``copies`` / ``transfers`` / ``no copy``
sync           does it wait for a device                  ``synchronizes`` / ``no sync``
dispatch       does it go through a provider (engine)     ``dispatches`` / ``no dispatch``
work           how its work grows                         ``O(...)`` (``O(1)``, ``O(n)``,
                                                          ``O(n) per-element``...)
=============  =========================================  =================================

The cost is stated once: one ``Cost:`` paragraph, and no other cost sentence
(``... Cost: one pass.``, ``Forward cost: ...``) in the prose, where it could repeat or
contradict the canonical one.

``Raises:`` either a Google-style section (``Raises:`` alone on its line, then one indented
``ErrorName: when`` line per error), or one line listing the classes
(``Raises: ArgumentError, ArgumentTypeError.``), or the line ``Raises: nothing.``  Every error
named must be an exception class of Python or of the project.

``Args:`` when present (Google style, ``name: text`` or ``name (type): text``), every name
documented there must be a parameter of the callable's signature (``*args``/``**kwargs``
are written with their stars).

Exception classes themselves are not checked (constructing an error has no cost to state;
their docstrings say when they are raised).
"""

from __future__ import annotations

import builtins
import inspect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

FACETS: dict[str, tuple[str, ...]] = {
    "allocation": ("allocates", "no allocation"),
    "copy": ("copies", "transfers", "no copy"),
    "sync": ("synchronizes", "no sync"),
    "dispatch": ("dispatches", "no dispatch"),
    "work": ("O(",),
}

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Cost|Examples?|Notes?|Attributes):\s*$"
)


@dataclass(frozen=True)
class Problem:
    """One missing or wrong part of one callable's docstring."""

    name: str
    what: str

    def __str__(self) -> str:
        return f"{self.name}: {self.what}"


_INLINE = re.compile(r"^(Args|Returns|Raises|Cost|Examples?|Notes?):")
#: a statement of cost: the canonical ``Cost:`` paragraph, or a cost sentence in the prose
#: (``... Cost: one pass.``, ``Forward cost: ...``) that would repeat or contradict it
_COST_STATEMENT = re.compile(r"\b(?:[A-Za-z]+\s+)?cost:", re.IGNORECASE)


def _paragraph(lines: list[str], start: int) -> str:
    """The text from ``lines[start]`` up to the next blank line or section line."""
    out = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.strip() or _SECTION.match(line.strip()) or _INLINE.match(line.strip()):
            break
        out.append(line)
    return " ".join(s.strip() for s in out)


def _section(lines: list[str], header: str) -> list[str] | None:
    """The indented entry lines of a Google section ``header:`` (``None`` when absent)."""
    for i, line in enumerate(lines):
        if line.strip() == f"{header}:":
            indent = len(line) - len(line.lstrip())
            body: list[str] = []
            for nxt in lines[i + 1 :]:
                if not nxt.strip():
                    if body:
                        break
                    continue
                if len(nxt) - len(nxt.lstrip()) <= indent:
                    break
                body.append(nxt)
            return body
    return None


def _entries(body: list[str]) -> list[str]:
    """The entry names of a section body: the least-indented lines' text before ``:``/``(``."""
    if not body:
        return []
    indent = min(len(b) - len(b.lstrip()) for b in body)
    names = []
    for b in body:
        if len(b) - len(b.lstrip()) == indent:
            head = b.strip().split(":", 1)[0]
            names.append(head.split("(", 1)[0].strip())
    return names


def _known_exception(name: str, exceptions: dict[str, type[BaseException]]) -> bool:
    value = getattr(builtins, name, None)
    if isinstance(value, type) and issubclass(value, BaseException):
        return True
    return name.rsplit(".", 1)[-1] in exceptions


def check_docstring(
    name: str, obj: Any, exceptions: dict[str, type[BaseException]]
) -> list[Problem]:
    """Every way ``obj``'s docstring misses the convention (empty: it follows it)."""
    doc = inspect.getdoc(obj) or ""
    if not doc.strip():
        return [Problem(name, "no docstring (needs a summary, a 'Cost:' line and 'Raises:')")]
    lines = doc.splitlines()
    problems: list[Problem] = []
    cost_at = [i for i, line in enumerate(lines) if line.strip().startswith("Cost:")]
    if not cost_at:
        problems.append(
            Problem(name, "no 'Cost:' line (state: " + "; ".join(
                "/".join(k).replace("O(", "O(...)") for k in FACETS.values()) + ")")
        )
    else:
        stated = _COST_STATEMENT.findall(doc)
        if len(stated) > 1:
            problems.append(
                Problem(name, f"states its cost {len(stated)} times ("
                        + ", ".join(repr(" ".join(s.split())) for s in stated)
                        + "): one canonical 'Cost:' paragraph, no cost sentence in the prose")
            )
        text = " ".join(_paragraph(lines, i) for i in cost_at)
        for facet, keys in FACETS.items():
            if not any(k in text for k in keys):
                problems.append(
                    Problem(name, f"'Cost:' states no {facet} fact (one of: "
                            f"{', '.join('O(...)' if k == 'O(' else k for k in keys)})")
                )
    raises = _section(lines, "Raises")
    inline = [m.group(1) for line in lines if (m := re.match(r"^Raises:\s*(\S.*)$", line.strip()))]
    if raises is None and not inline:
        problems.append(Problem(name, "no 'Raises:' section (or the line 'Raises: nothing.')"))
    else:
        listed = _entries(raises) if raises is not None else []
        for text in inline:
            if text.rstrip(".").strip() != "nothing":
                listed += [n.split("(", 1)[0].strip().rstrip(".") for n in text.split(",")]
        says_nothing = any(t.rstrip(".").strip() == "nothing" for t in inline)
        if not listed and not says_nothing:
            problems.append(Problem(name, "'Raises:' section lists no error"))
        for err in listed:
            if not _known_exception(err, exceptions):
                problems.append(Problem(name, f"'Raises:' names {err!r}, not an exception class"))
    params = _signature_params(obj)
    for header in ("Args", "Arguments", "Parameters"):
        body = _section(lines, header)
        if body is None or params is None:
            continue
        for arg in _entries(body):
            if arg not in params:
                problems.append(
                    Problem(name, f"'{header}:' documents {arg!r}, not a parameter "
                            f"(the signature has: {', '.join(sorted(params)) or 'none'})")
                )
    return problems


def _signature_params(obj: Any) -> set[str] | None:
    """The parameter names of ``obj`` (``*args``/``**kwargs`` with their stars); ``None``
    when it has no inspectable signature."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    names = set()
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            names.add(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            names.add(f"**{p.name}")
        else:
            names.add(p.name)
    return names


def checked(obj: Any) -> bool:
    """Whether the convention applies: functions and classes, not exception classes, not
    typing aliases or other non-function values."""
    if isinstance(obj, type):
        return not issubclass(obj, BaseException)
    return inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethod(obj) or (
        callable(obj) and hasattr(obj, "__wrapped__")
    )


def check_all(names: Iterable[tuple[str, Any]], exceptions: dict[str, type[BaseException]]
              ) -> list[Problem]:
    """The problems of every checked callable among ``names``."""
    out: list[Problem] = []
    for name, obj in names:
        if checked(obj):
            out.extend(check_docstring(name, obj, exceptions))
    return out
