"""Every tutorial runs (a tutorial that does not run is a bug)."""

from __future__ import annotations

import multiprocessing  # noqa: F401  (see below)
import re
import runpy
from pathlib import Path

import pytest

# The first import of ``multiprocessing`` aliases ``sys.modules["__mp_main__"]`` to the
# ``__main__`` of that moment for good; were that a tutorial run by ``runpy`` (quimb's stack
# imports it), the tutorial's globals -- its tenferro values -- would stay alive after the
# test.  Importing it here first keeps the alias on the test process's own ``__main__``.
TUTORIALS = sorted((Path(__file__).resolve().parent.parent / "tutorials").glob("*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.name for p in TUTORIALS])
def test_tutorial_runs(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out  # every tutorial prints what it shows


def test_readme_snippets_run_and_print_plain_tables(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's Python snippets run in order; the ledger counters they print are plain
    tables (no enum reprs, no ``Counter(...)``)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)```", readme, re.S))
    assert code
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "transfer_destination" in out
    assert "Counter(" not in out and "AllocationReason." not in out and "<" not in out
