"""Fixtures for the storage-ownership ledger suite; helpers live in ledger_support.py."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.contracts.ledger_support import (
    CHECKER,
    FIXTURE_FILES,
    MANIFEST_REL,
    Outcome,
    Repo,
    StandIn,
    fixture_manifest,
    git,
    load_script,
    make_standin,
)


@pytest.fixture(scope="session")
def checker_module() -> ModuleType:
    return load_script("check_storage_ownership_contracts", CHECKER)


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[..., Repo]:
    """make_repo(manifest=None, commit=True): a git repository with the fixture ledger."""
    counter = iter(range(1000))

    def make(manifest: dict[str, Any] | str | None = None, *, commit: bool = True) -> Repo:
        root = tmp_path / f"repo{next(counter)}"
        root.mkdir()
        git(root, "init", "-q")
        repo = Repo(root)
        for rel, text in FIXTURE_FILES.items():
            repo.write(rel, text)
        repo.write_manifest(fixture_manifest() if manifest is None else manifest)
        if commit:
            repo.commit("fixture")
        return repo

    return make


@pytest.fixture
def run_checker(checker_module: ModuleType) -> Callable[..., Outcome]:
    """Runs the checker's main() in-process (fast) with --diagnostics-json."""

    def run(
        repo: Repo, *extra: str, manifest: str = MANIFEST_REL, root: str | None = None
    ) -> Outcome:
        out, err = io.StringIO(), io.StringIO()
        argv = ["--root", root or str(repo.root), "--manifest", manifest, "--diagnostics-json"]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = checker_module.main([*argv, *extra])
        return Outcome(rc, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def standin(tmp_path: Path) -> StandIn:
    return make_standin(tmp_path)


@pytest.fixture
def manifest() -> dict[str, Any]:
    """A fresh, valid fixture manifest to mutate."""
    return fixture_manifest()
