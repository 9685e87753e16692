"""Type-check contract tests: mypy (strict) runs ONCE over every snippet in this folder.

* ``fail/*.py`` must be rejected, and only with the codes on their first line
  (``# expect: attr-defined`` or ``# expect: attr-defined, union-attr``);
* ``pass/*.py`` must type-check cleanly (they hold ``assert_type`` checks);
* ``src/`` itself must type-check cleanly under strict mypy (same run), and ruff must
  pass on the whole repository.

See ``README.md`` here for the convention; drop a file in and it is collected.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from mypy import api

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FAIL = sorted((HERE / "fail").glob("*.py"))
PASS = sorted((HERE / "pass").glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*([a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*)\s*$")
ERROR = re.compile(
    r"^(?P<path>.+?):(?P<line>\d+):(?:\d+:)? error: (?P<msg>.*?)\s+\[(?P<code>[a-z0-9-]+)\]$"
)


def expected_codes(path: Path) -> set[str]:
    """The codes named by a fail snippet's first line (``# expect: code[, code...]``)."""
    first = path.read_text().splitlines()[0] if path.read_text() else ""
    match = EXPECT.match(first)
    if match is None:
        raise AssertionError(f"{path.name}: first line must be '# expect: <mypy-error-code>'")
    return {c.strip() for c in match.group(1).split(",")}


def parse(report: str) -> dict[Path, list[tuple[int, str, str]]]:
    """mypy's report as ``{file: [(line, code, message)]}`` (errors only)."""
    out: dict[Path, list[tuple[int, str, str]]] = defaultdict(list)
    for line in report.splitlines():
        match = ERROR.match(line)
        if match:
            path = Path(match["path"])
            path = (path if path.is_absolute() else ROOT / path).resolve()
            out[path].append((int(match["line"]), match["code"], match["msg"]))
    return out


@pytest.fixture(scope="session")
def mypy_report() -> dict[Path, list[tuple[int, str, str]]]:
    """One strict mypy run over all snippets (warm cache under .mypy_cache/)."""
    stems = [p.stem for p in FAIL + PASS]
    duplicates = sorted({s for s in stems if stems.count(s) > 1})
    assert not duplicates, f"snippet file names must be unique across fail/ and pass/: {duplicates}"
    stdout, stderr, status = api.run(
        [
            "--strict",
            "--config-file", str(ROOT / "pyproject.toml"),
            "--cache-dir", str(ROOT / ".mypy_cache" / "typecheck-snippets"),
            "--show-error-codes",
            "--no-error-summary",
            "--hide-error-context",
            "--no-pretty",
            *(str(p) for p in FAIL + PASS),
            # the library itself, in the same run: strict mypy must pass on src/
            str(ROOT / "src" / "tenferro_storage"),
            str(ROOT / "src" / "tenferro_ad"),
        ]
    )
    assert status in (0, 1), f"mypy did not run (status {status}):\n{stderr}\n{stdout}"
    return parse(stdout)


def test_snippets_exist() -> None:
    """The required snippets are present (the harness cannot pass vacuously)."""
    assert {"view_as_view_mut", "view_into_real", "prepared_read_as_slice_mut"} <= {
        p.stem for p in FAIL
    }
    assert PASS


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_fail_snippet_is_rejected_with_its_code(
    path: Path, mypy_report: dict[Path, list[tuple[int, str, str]]]
) -> None:
    """mypy rejects the snippet, with exactly the expected error code(s)."""
    expected = expected_codes(path)
    errors = mypy_report.get(path.resolve(), [])
    assert errors, f"{path.name}: mypy accepted code that must be rejected ({sorted(expected)})"
    got = {code for _, code, _ in errors}
    assert got == expected, f"{path.name}: expected {sorted(expected)}, mypy said {errors}"


@pytest.mark.parametrize("path", PASS, ids=lambda p: p.stem)
def test_pass_snippet_type_checks_cleanly(
    path: Path, mypy_report: dict[Path, list[tuple[int, str, str]]]
) -> None:
    """mypy accepts the snippet (every assert_type holds)."""
    assert mypy_report.get(path.resolve(), []) == []


def test_parser_reads_mypy_lines() -> None:
    """The report parser keeps errors with their codes and ignores notes."""
    sample = (
        "tests/typecheck/fail/x.py:3: error: \"A\" has no attribute \"b\"  [attr-defined]\n"
        "tests/typecheck/fail/x.py:3: note: See docs\n"
        "tests/typecheck/pass/y.py:9:5: error: Expression is of type \"int\"  [assert-type]\n"
    )
    report = parse(sample)
    assert report[(ROOT / "tests/typecheck/fail/x.py").resolve()] == [
        (3, "attr-defined", "\"A\" has no attribute \"b\"")
    ]
    assert report[(ROOT / "tests/typecheck/pass/y.py").resolve()][0][1] == "assert-type"


def test_library_sources_pass_strict_mypy(
    mypy_report: dict[Path, list[tuple[int, str, str]]],
) -> None:
    """Strict mypy reports no error anywhere under src/."""
    src = (ROOT / "src").resolve()
    errors = {
        str(path.relative_to(ROOT)): found
        for path, found in mypy_report.items()
        if src in path.parents
    }
    assert not errors, errors


def test_repository_passes_ruff() -> None:
    """ruff (configured in pyproject.toml) reports nothing on the repository."""
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    done = subprocess.run(
        [*cmd, "check", "--quiet", str(ROOT)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
