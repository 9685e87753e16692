"""Every ``python`` code block in the docs runs: the blocks of one page run in order in one
namespace, as a reader would paste them (the README's blocks are run by
``tests/test_tutorials.py``).  A fragment that cannot run stands in a ``text`` block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tenferro_ad.scenarios import load_files, run_scenarios
from tests.docs._stale import ROOT, doc_files

PAGES = [p for p in doc_files() if p.name != "README.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(text: str) -> list[str]:
    """The ``python`` fenced blocks of a Markdown text, in order."""
    return _BLOCK.findall(text)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT / "docs")) for p in PAGES])
def test_doc_page_examples_run(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = blocks(page.read_text())
    if not code:
        return  # a page without examples
    namespace: dict[str, object] = {"__name__": f"docs:{page.name}"}
    for i, block in enumerate(code):
        exec(compile(block, f"{page.relative_to(ROOT)} block {i + 1}", "exec"), namespace)
    capsys.readouterr()


def test_examples_check_fails_on_a_block_that_does_not_run() -> None:
    page = "text\n\n```python\nimport tenferro_ad as ad\nad.no_such_function()\n```\n"
    (block,) = blocks(page)
    with pytest.raises(AttributeError, match="no_such_function"):
        exec(compile(block, "bad.md", "exec"), {})


def _scenario_blocks() -> list[tuple[Path, str]]:
    """Every ``toml`` block of the docs that defines a ledger scenario."""
    return [
        (page, block)
        for page in PAGES
        for block in re.findall(r"^```toml\n(.*?)^```", page.read_text(), re.S | re.M)
        if "[[scenario]]" in block
    ]


def test_doc_scenarios_pass(tmp_path: Path) -> None:
    """The scenarios the docs show load and meet their own expectations."""
    blocks_found = _scenario_blocks()
    assert blocks_found  # the ledgers page teaches by one
    for i, (page, block) in enumerate(blocks_found):
        path = tmp_path / f"doc_{i}.toml"
        path.write_text(block)
        for result in run_scenarios(load_files([path])):
            where = f"{page.relative_to(ROOT)}: {result.scenario.name}"
            assert result.passed, f"{where}: {result.mismatches}"
