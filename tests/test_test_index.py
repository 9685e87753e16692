"""The module -> test index in ``tests/README.md`` stays true: it names every module under
``src/`` and only test files that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\|\s*`(src/[^`]+\.py)`\s*\|(.*)\|\s*$")


def _index() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (ROOT / "tests" / "README.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            out[m.group(1)] = re.findall(r"`(tests/[^`]+\.py)`", m.group(2))
    return out


def test_every_module_under_src_is_indexed() -> None:
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "src").rglob("*.py"))
    missing = [m for m in modules if m not in _index()]
    assert not missing, f"tests/README.md: add these modules to the index: {missing}"


def test_the_index_names_only_existing_modules_and_tests() -> None:
    index = _index()
    gone = [m for m in index if not (ROOT / m).is_file()]
    assert not gone, f"tests/README.md indexes modules that no longer exist: {gone}"
    empty = [m for m, tests in index.items() if not tests]
    assert not empty, f"tests/README.md names no test file for: {empty}"
    absent = sorted({t for tests in index.values() for t in tests if not (ROOT / t).is_file()})
    assert not absent, f"tests/README.md names test files that do not exist: {absent}"
