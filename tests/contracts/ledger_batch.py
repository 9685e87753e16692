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

The hooks below act only in a run that names this module with ``-p`` (:func:`run_batch`
does) and only observe reports; :func:`batch_status` is what the stand-in asks.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.contracts.ledger_support import CHECKER, load_script

_ENV = "LEDGER_BATCH_OUT"

PLUGIN = __name__  # tests.contracts.ledger_batch


def _selectors() -> ModuleType:
    load_script("check_storage_ownership_contracts", CHECKER)  # puts _contracts on the path
    return importlib.import_module("_contracts.selectors")


def batch_targets(targets: Sequence[str]) -> list[str]:
    """``targets`` without those another target already runs (a test inside a file or
    directory that is itself a target), in their first order: the batch runs each test
    once, as pytest would not deduplicate a node id given beside its file."""
    matches = _selectors()._matches
    unique = list(dict.fromkeys(targets))
    return [t for t in unique if not any(o != t and matches(o, t) for o in unique)]


def run_batch(
    root: Path, targets: Sequence[str], out: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """One ``python -m pytest`` over ``batch_targets(targets)`` in ``root`` (serial unless
    ``env`` says otherwise, no cache written, collection errors do not stop the run) that
    records every node's outcome in ``out`` through this plugin."""
    return subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN,
            "--continue-on-collection-errors", *batch_targets(targets),
        ],
        cwd=root,
        env={**env, "LEDGER_BATCH_OUT": str(out)},
        capture_output=True,
        text=True,
        check=False,
    )


def batch_status(run: Mapping[str, Any], target: str) -> int:
    """The exit status ``python -m pytest TARGET`` alone would give, from a batch ``run``
    (this plugin's record) that included ``target``: 2 when the
    collection of its file (or of a directory above it) failed, 4 when it is a node id that
    names no collected test (pytest's "not found"), 5 when it is a file or directory with
    no test, 1 when any of its tests failed in any phase, else 0.  A batch that
    ended without a per-test account (interrupted, internal or usage error: status other
    than 0, 1 and 5) or failed with no failed test (a session-level failure) gives its own
    status to every target: nothing is attributed that the run did not show."""
    status = int(run["status"])
    if status not in (0, 1, 5):
        return status
    matches = _selectors()._matches
    path = target.split("::", 1)[0]
    for error in run["collect_errors"]:
        if error in ("", ".") or matches(error, path) or matches(path, error):
            return 2
    nodes: Mapping[str, str] = run["nodes"]
    mine = [outcome for node, outcome in nodes.items() if matches(target, node)]
    if not mine:
        return 4 if "::" in target else 5  # a node id that names nothing: "not found"
    if "failed" in mine:
        return 1
    if status == 1 and "failed" not in nodes.values() and not run["collect_errors"]:
        return 1
    return 0


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
