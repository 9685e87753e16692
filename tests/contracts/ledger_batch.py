"""A pytest plugin for the production receipt test: one run records each test's outcome.

``python -m pytest -p tests.contracts.ledger_batch ...`` with ``LEDGER_BATCH_OUT=<file>``
writes, when the session ends, a JSON object: ``nodes`` (every collected node id ->
``"passed"``, ``"skipped"`` or ``"failed"``, failed when any phase of it failed),
``collect_errors`` (the node ids -- files or directories -- whose collection failed) and
``status`` (the session's exit status).  The stand-in interpreter of
``tests/contracts/ledger_support.py`` (mode ``"batch"``) answers each of the ledger runner's
``python3 -m pytest TARGET`` commands from that file with the status pytest would give for
``TARGET`` alone, so the runner's ~20 pytest commands share one process and one collection
instead of each starting its own (see ``test_ledger_production.py``).

Nothing here runs unless the plugin is named with ``-p``; it only observes reports.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_ENV = "LEDGER_BATCH_OUT"
_nodes: dict[str, str] = {}
_collect_errors: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        _nodes.setdefault(item.nodeid, "passed")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _collect_errors.append(report.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _nodes[report.nodeid] = "failed"
    elif report.skipped and _nodes.get(report.nodeid) != "failed":
        _nodes[report.nodeid] = "skipped"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    out = os.environ.get(_ENV)
    if out:
        data = {
            "status": int(exitstatus),
            "nodes": _nodes,
            "collect_errors": _collect_errors,
        }
        Path(out).write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
