#!/usr/bin/env python3
"""Keeps the runtime engine guide (docs/guides/runtime-engines.md) true to the runtime.

The artifact of the ``p0-engine-discovery-docs`` obligation.  The guide passes only when:

* it explains every P0 name a user needs, each as a backticked token: ``engines()``,
  ``EngineId``, ``EngineInfo``, ``AllocationDomainId``, ``AccessEndpoint``, ``submit``,
  ``execute_scoped_read_only``, ``register_engine``, ``unregister_engine``, ``SubmitRejected``;
* every ``rt.NAME`` it mentions exists in ``tenferro_storage.runtime``;
* its ``EngineInfo`` field table lists exactly the public attributes of a real ``EngineInfo``;
* no example selects an engine by position (``engines()[0]``, ``index=0``, ``EngineId(..., 0)``):
  engines are chosen by the caller, by id or by properties, never assumed;
* its Python blocks run, in order, in one namespace against the real runtime; a block that
  needs a value the guide leaves to the reader (``program``, ``group``, ``slots``, ``inputs``)
  or one that another example binds (a fragment) must at least compile, any other failure is a
  problem, and at least two blocks (discovery and selection) must really run;
* every repository file it points at (``tutorials/...``) exists.

Usage: python3 scripts/check-runtime-engine-docs.py GUIDE
Problems go to stderr, one per line, each starting with a stable code; exit status 1.
Imports tenferro_storage (the runtime it documents); cost: one import and one run of the
guide's examples (milliseconds).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REQUIRED_TOKENS = (
    "engines()",
    "EngineId",
    "EngineInfo",
    "AllocationDomainId",
    "AccessEndpoint",
    "submit",
    "execute_scoped_read_only",
    "register_engine",
    "unregister_engine",
    "SubmitRejected",
)
PLACEHOLDERS = frozenset({"program", "group", "slots", "inputs"})
POSITIONAL = re.compile(
    r"engines\(\)\s*\[\s*-?\d+\s*\]|\bindex\s*=\s*0\b|EngineId\([^)]*,\s*0\s*\)"
)
MIN_RUNNABLE_BLOCKS = 2
ROOT = Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def bound_names(blocks: Sequence[str]) -> frozenset[str]:
    """Names some example binds (import, assignment, ``with ... as``, ``for``, ``def``)."""
    names: set[str] = set()
    for block in blocks:
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
    return frozenset(names)


def field_table(text: str) -> list[str]:
    """First-column backticked names of the table that follows the first ``EngineInfo``."""
    start = text.find("`EngineInfo`")
    if start < 0:
        return []
    names: list[str] = []
    in_table = False
    for line in text[start:].splitlines():
        if line.startswith("|"):
            in_table = True
            cell = line.strip("|").split("|")[0].strip()
            found = re.fullmatch(r"`([A-Za-z_][A-Za-z0-9_]*)`", cell)
            if found:
                names.append(found.group(1))
        elif in_table:
            break
    return names


def check(guide: Path) -> list[str]:
    problems: list[str] = []
    text = guide.read_text(encoding="utf-8")
    for token in REQUIRED_TOKENS:
        if f"`{token}`" not in text and f"rt.{token}" not in text:
            problems.append(f"E_DOC_MISSING_NAME: the guide never explains `{token}`")

    from tenferro_storage import runtime as rt

    for name in sorted(set(re.findall(r"\brt\.([A-Za-z_][A-Za-z0-9_]*)", text))):
        if not hasattr(rt, name):
            problems.append(f"E_DOC_UNKNOWN_NAME: rt.{name} does not exist in the runtime")

    info = rt.engines()[0] if rt.engines() else None  # introspection only, not a selection
    if info is None:
        problems.append("E_DOC_NO_ENGINE: the runtime discovered no engine")
    else:
        public = sorted(n for n in dir(info) if not n.startswith("_"))
        documented = sorted(field_table(text))
        if documented != public:
            problems.append(
                f"E_DOC_FIELDS: the EngineInfo table lists {documented}, the runtime has {public}"
            )

    for line_no, line in enumerate(text.splitlines(), 1):
        if POSITIONAL.search(line):
            problems.append(f"E_DOC_POSITIONAL: line {line_no} selects an engine by position")

    for rel in sorted(set(re.findall(r"\b(tutorials/[A-Za-z0-9_./-]+\.py)\b", text))):
        if not (ROOT / rel).is_file():
            problems.append(f"E_DOC_DEAD_LINK: {rel} does not exist")

    blocks = python_blocks(text)
    shown = PLACEHOLDERS | bound_names(blocks)
    namespace: dict[str, Any] = {"__name__": "runtime_engines_guide"}
    ran = 0
    for index, block in enumerate(blocks):
        try:
            code = compile(block, f"{guide.name}[block {index}]", "exec")
        except SyntaxError as exc:
            problems.append(f"E_DOC_BLOCK_SYNTAX: block {index}: {exc}")
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, namespace)
            ran += 1
        except NameError as exc:
            if exc.name not in shown:
                problems.append(f"E_DOC_BLOCK_FAILS: block {index}: {exc!r}")
        except Exception as exc:
            problems.append(f"E_DOC_BLOCK_FAILS: block {index}: {exc!r}")
    if ran < MIN_RUNNABLE_BLOCKS:
        problems.append(
            f"E_DOC_BLOCKS: only {ran} example block(s) ran; discovery and selection must run"
        )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write("usage: check-runtime-engine-docs.py GUIDE\n")
        return 2
    guide = Path(args[0])
    if not guide.is_file():
        sys.stderr.write(f"E_DOC_MISSING: {guide} does not exist\n")
        return 1
    problems = check(guide)
    for p in problems:
        sys.stderr.write(p + "\n")
    if not problems:
        sys.stdout.write(f"ok: {guide} matches the runtime\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
