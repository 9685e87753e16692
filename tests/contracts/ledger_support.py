"""Helpers for the storage-ownership ledger suite (tests/contracts); fixtures are in conftest.

Every negative case builds its own temporary git repository holding a small, valid ledger
(a few units, one cohort, two active P1 rows) and then injects exactly one fault.  The suite keeps
its *own* registry of diagnostic codes and field keys (``EXPECTED_FIELDS``) so the checker cannot
pass by changing both sides at once.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = REPO_ROOT / "scripts"
CHECKER = SCRIPTS / "check-storage-ownership-contracts.py"
CHECKER_PACKAGE = SCRIPTS / "_contracts"  # the rules behind the checker, runner and replay
RUNNER = SCRIPTS / "run-storage-ownership-contracts.py"
REPLAY = SCRIPTS / "replay-storage-ownership-history.py"
DOC_CHECKER = SCRIPTS / "check-contract-document.py"
PRODUCTION_MANIFEST = "scripts/storage-ownership-contracts.toml"
V1_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "v1-manifest.toml"

MANIFEST_SCHEMA = "tenferro.storage-ownership-contracts.v2"
DIAGNOSTICS_SCHEMA = "tenferro.storage-ownership-diagnostics.v1"
RECEIPT_SCHEMA = "tenferro.storage-ownership-receipt.v1"

# The suite's registry: code -> exact identifying field keys.
EXPECTED_FIELDS: dict[str, frozenset[str]] = {
    code: frozenset(keys.split())
    for code, keys in {
        "E_USAGE": "options",
        "E_SUMMARY_WRITE": "path",
        "E_ROOT_INVALID": "root",
        "E_MANIFEST_PATH_ESCAPE": "path",
        "E_MANIFEST_MISSING": "path",
        "E_MANIFEST_TOML": "path",
        "E_SCHEMA_MISMATCH": "expected actual",
        "E_SCHEMA_MISSING_KEY": "table key",
        "E_SCHEMA_UNKNOWN_KEY": "table key",
        "E_SCHEMA_TYPE": "table key expected",
        "E_COMMAND_SHELL_STRING": "command_id",
        "E_DUPLICATE_ID": "kind id",
        "E_STATE_KIND": "obligation_id actual",
        "E_DEFERRED_ACTIVATION_UNIT": "obligation_id expected actual",
        "E_PROMOTION_MODE": "obligation_id actual",
        "E_REVISION_INVALID": "actual",
        "E_REVISION_LOG": "expected actual",
        "E_ACKNOWLEDGED_INVALID": "commit diagnostic_code",
        "E_UNKNOWN_UNIT": "obligation_id unit",
        "E_UNKNOWN_GATE": "obligation_id gate",
        "E_GATE_LIST": "obligation_id gates",
        "E_GRAPH_UNKNOWN_NODE": "from to node",
        "E_GRAPH_DUPLICATE_EDGE": "from to",
        "E_GRAPH_COHORT_MEMBER_ENDPOINT": "from to unit cohort_id",
        "E_GRAPH_CYCLE": "nodes",
        "E_GRAPH_ROOT_INCOMING": "unit sources",
        "E_GRAPH_SINGLE_INCOMING": "unit expected actual",
        "E_COHORT_COUNT": "expected actual",
        "E_COHORT_UNKNOWN_UNIT": "cohort_id unit",
        "E_COHORT_DEFINITION": "cohort_id field expected actual",
        "E_UNIT_NO_OBLIGATIONS": "unit",
        "E_COHORT_PARTIAL_ACTIVATION": "cohort_id active deferred",
        "E_PREREQUISITE_INACTIVE": "node prerequisite deferred",
        "E_PATH_NOT_CANONICAL": "obligation_id field path",
        "E_ARTIFACT_PATH_ESCAPE": "obligation_id artifact_id path",
        "E_ARTIFACT_MISSING": "obligation_id artifact_id path",
        "E_CWD_ESCAPE": "obligation_id command_id cwd",
        "E_CWD_MISSING": "obligation_id command_id cwd",
        "E_ARGV_PATH_ESCAPE": "obligation_id command_id index path",
        "E_ARGV_PATH_MISSING": "obligation_id command_id index path",
        "E_SELECTOR_UNRESOLVED": "obligation_id command_id target",
        "E_ARTIFACT_KIND": "artifact_id kind",
        "E_ARTIFACT_SELECTOR": "artifact_id kind",
        "E_COMMAND_KIND": "command_id kind",
        "E_COMMAND_ARTIFACT_BINDING": "obligation_id command_id expected actual",
        "E_COMMAND_ARTIFACT_KIND": "command_id kind artifact_kind",
        "E_COMMAND_CWD": "command_id expected actual",
        "E_COMMAND_ARGV": "command_id index expected actual",
        "E_PATH_ARG_UNBOUND": "command_id path",
        "E_PATH_ARG_UNDECLARED": "command_id index path",
        "E_COMMAND_CONFLICT": "command_id",
        "E_ARTIFACT_CONFLICT": "artifact_id",
        "E_BASE_UNRESOLVED": "revision",
        "E_BASE_NOT_ANCESTOR": "base_commit candidate_commit",
        "E_BASE_MANIFEST": "base_commit path",
        "E_REGISTRY_CHANGED": "field",
        "E_REVISION_STEP": "base_revision candidate_revision",
        "E_REVISION_WITH_PROMOTION": "obligation_id",
        "E_OBLIGATION_CHANGED": "obligation_id field",
        "E_OBLIGATION_REMOVED": "obligation_id",
        "E_OBLIGATION_ADDED": "obligation_id",
        "E_STATE_REGRESSION": "obligation_id",
        "E_PREREQUISITE_NOT_ALREADY_ACTIVE": "node prerequisite",
        "E_REVISION_LOG_CHANGED": "revision",
        "E_ACKNOWLEDGED_CHANGED": "base_count candidate_count",
        "E_HISTORY_UNACKNOWLEDGED": "commit diagnostic_code fields",
        "E_HISTORY_ACK_STALE": "commit diagnostic_code fields",
        "E_INTERPRETER_UNRESOLVED": "argv0",
        "E_GIT_CANDIDATE": "root",
        "E_TREE_DIRTY": "paths",
        "E_PATH_UNTRACKED": "path",
        "E_RECEIPT_MISSING": "path",
        "E_RECEIPT_JSON": "path",
        "E_RECEIPT_WRITE": "path",
        "E_RECEIPT_SHAPE": "pointer",
        "E_RECEIPT_TERMINALITY": "pointer",
        "E_RECEIPT_CANDIDATE": "expected actual",
        "E_RECEIPT_BASE": "expected actual",
        "E_RECEIPT_ORDER": "index obligation_id",
        "E_RECEIPT_DUPLICATE": "obligation_id",
        "E_RECEIPT_UNKNOWN_OBLIGATION": "obligation_id",
        "E_RECEIPT_DEFERRED": "obligation_id",
        "E_RECEIPT_INCOMPLETE": "obligation_id",
        "E_RECEIPT_BINDING": "obligation_id field expected actual",
        "E_COMMAND_FAILED": "obligation_id exit_code",
    }.items()
}


# ------------------------------------------------------------------------------------------
# Loading the scripts as modules (their file names are not importable identifiers)


def load_script(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------
# A tiny TOML writer for the manifest subset (tomllib only reads)

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def toml_dumps(doc: Mapping[str, Any]) -> str:
    lines: list[str] = []
    for k, v in doc.items():
        if not isinstance(v, dict) and not _is_table_array(v):
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in doc.items():
        if isinstance(v, dict):
            lines += ["", f"[{_key(k)}]"]
            lines += [f"{_key(kk)} = {_value(vv)}" for kk, vv in v.items()]
    for k, v in doc.items():
        if _is_table_array(v):
            for row in v:
                lines += ["", f"[[{_key(k)}]]"]
                lines += [f"{_key(kk)} = {_value(vv)}" for kk, vv in row.items()]
    return "\n".join(lines) + "\n"


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


# ------------------------------------------------------------------------------------------
# The fixture ledger: a small, valid manifest and the files its rows point at

FIXTURE_UNITS = ["P0", "P1", "P2", "P3", "P4", "P5", "P9"]
FIXTURE_EDGES = [("P1", "P2"), ("P2", "P4"), ("P4", "P5"), ("P0", "cutover"), ("P5", "cutover")]
VERIFIER = "scripts/verify-ok.py"


def pytest_row(
    oid: str, unit: str, *, active: bool = False, gates: Sequence[str] = ("G1",)
) -> dict[str, Any]:
    path = f"tests/test_{oid.replace('-', '_')}.py"
    return {
        "id": oid,
        "unit": unit,
        "gates": list(gates),
        "artifact": {"id": f"artifact-{oid}", "kind": "pytest-file", "path": path},
        "command": {
            "id": f"cmd-{oid}",
            "kind": "pytest",
            "argv": ["python3", "-m", "pytest", path],
            "cwd": ".",
            "path_args": [path],
            "artifact_id": f"artifact-{oid}",
        },
        "state": state(active, unit),
    }


def check_row(oid: str, unit: str, *, active: bool = False) -> dict[str, Any]:
    path = f"data/{oid}.json"
    return {
        "id": oid,
        "unit": unit,
        "gates": ["G2"],
        "artifact": {"id": f"artifact-{oid}", "kind": "evidence-report", "path": path},
        "command": {
            "id": f"cmd-{oid}",
            "kind": "python-check",
            "argv": ["python3", VERIFIER, path],
            "cwd": ".",
            "path_args": [VERIFIER, path],
            "artifact_id": f"artifact-{oid}",
        },
        "state": state(active, unit),
    }


def state(active: bool, unit: str) -> dict[str, Any]:
    if active:
        return {"kind": "active"}
    return {
        "kind": "deferred",
        "activation_unit": unit,
        "promotion": {"mode": "activate-in-place"},
    }


def fixture_manifest() -> dict[str, Any]:
    """Valid: P1 is active, every other unit deferred; one row per unit, two in P1 and P3."""
    rows = [
        pytest_row("p0-a", "P0"),
        check_row("p1-a", "P1", active=True),
        pytest_row("p1-b", "P1", active=True),
        pytest_row("p2-a", "P2"),
        pytest_row("p3-a", "P3"),
        pytest_row("p3-b", "P3"),
        pytest_row("p4-a", "P4"),
        pytest_row("p5-a", "P5"),
        pytest_row("p9-a", "P9"),
    ]
    return {
        "schema": MANIFEST_SCHEMA,
        "registry": {
            "revision": 1,
            "gates": [{"id": "G1", "title": "gate one"}, {"id": "G2", "title": "gate two"}],
            "units": [
                {"id": u, "name": f"unit-{u.lower()}", "title": f"unit {u}"} for u in FIXTURE_UNITS
            ],
            "edges": [{"from": a, "to": b} for a, b in FIXTURE_EDGES],
            "cohorts": [{"id": "cutover", "members": ["P3", "P9"], "title": "the cohort"}],
        },
        "obligations": rows,
    }


def row(manifest: dict[str, Any], oid: str) -> dict[str, Any]:
    for r in manifest["obligations"]:
        if r["id"] == oid:
            found: dict[str, Any] = r
            return found
    raise KeyError(oid)


def activate(manifest: dict[str, Any], *oids: str) -> None:
    for oid in oids:
        row(manifest, oid)["state"] = {"kind": "active"}


def set_pytest_path(manifest: dict[str, Any], oid: str, path: str) -> None:
    """Moves a pytest row's artifact consistently (artifact, argv, path_args)."""
    r = row(manifest, oid)
    r["artifact"]["path"] = path
    r["command"]["argv"][3] = path
    r["command"]["path_args"] = [path]


FIXTURE_FILES: dict[str, str] = {
    VERIFIER: "import sys\nsys.exit(0)\n",
    "data/p1-a.json": "{}\n",
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
    **{
        f"tests/test_{oid.replace('-', '_')}.py": "def test_ok() -> None:\n    assert True\n"
        for oid in ["p0-a", "p1-b", "p2-a", "p3-a", "p3-b", "p4-a", "p5-a", "p9-a"]
    },
}

MANIFEST_REL = "ledger/contracts.toml"

GIT_COMMIT = [
    "-c",
    "user.name=ledger-tests",
    "-c",
    "user.email=ledger-tests@example.invalid",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "core.hooksPath=/dev/null",
]


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


@dataclass
class Repo:
    root: Path

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def write_manifest(self, manifest: Mapping[str, Any] | str) -> None:
        text = manifest if isinstance(manifest, str) else toml_dumps(manifest)
        self.write(MANIFEST_REL, text)

    def commit(self, message: str = "change", paths: Sequence[str] = (".",)) -> str:
        git(self.root, "add", "-A", "--", *paths)
        git(self.root, *GIT_COMMIT, "commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return git(self.root, "rev-parse", "HEAD")


# ------------------------------------------------------------------------------------------
# Running the tools


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str

    @property
    def envelope(self) -> dict[str, Any]:
        envelope: dict[str, Any] = json.loads(self.stdout)
        return envelope

    @property
    def codes(self) -> list[str]:
        return [d["code"] for d in self.envelope["diagnostics"]]


def run_script(
    script: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    interpreter: Path | str | None = None,
) -> Outcome:
    """Runs a tool with the current interpreter (or ``interpreter``, e.g. a stand-in)."""
    done = subprocess.run(
        [str(interpreter or sys.executable), str(script), *args],
        capture_output=True,
        text=True,
        check=False,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    return Outcome(done.returncode, done.stdout, done.stderr)


def assert_envelope(envelope: Any) -> list[dict[str, Any]]:
    """The exact envelope shape: only known codes, exact field keys, non-empty messages."""
    assert isinstance(envelope, dict)
    assert set(envelope) == {"schema", "diagnostics"}
    assert envelope["schema"] == DIAGNOSTICS_SCHEMA
    items = envelope["diagnostics"]
    assert isinstance(items, list)
    for d in items:
        assert set(d) == {"code", "fields", "message"}, d
        assert d["code"] in EXPECTED_FIELDS, f"unknown code {d['code']}"
        assert set(d["fields"]) == EXPECTED_FIELDS[d["code"]], d
        assert isinstance(d["message"], str) and d["message"].strip(), d
    return items


def assert_one_fault(outcome: Outcome, code: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly one diagnostic, of `code`, whose identifying fields equal `fields`.

    Values given as ``ANY`` only need to be present (e.g. opaque commit ids).
    """
    items = assert_envelope(outcome.envelope)
    assert [d["code"] for d in items] == [code], items
    assert outcome.rc == 1
    got = items[0]["fields"]
    assert set(got) == set(fields), got
    for key, want in fields.items():
        if want is not ANY:
            assert got[key] == want, (key, got[key], want)
    return items[0]


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()


def assert_clean(outcome: Outcome) -> None:
    assert assert_envelope(outcome.envelope) == [], outcome.envelope
    assert outcome.rc == 0


# ------------------------------------------------------------------------------------------
# Receipts and the stand-in interpreter


def valid_receipt(
    manifest: Mapping[str, Any], candidate: str, base: str | None = None
) -> dict[str, Any]:
    executions = [
        {
            "obligation_id": r["id"],
            "argv": list(r["command"]["argv"]),
            "cwd": r["command"]["cwd"],
            "artifact_path": r["artifact"]["path"],
            "exit_code": 0,
        }
        for r in sorted(manifest["obligations"], key=lambda r: r["id"])
        if r["state"]["kind"] == "active"
    ]
    return {
        "schema": RECEIPT_SCHEMA,
        "candidate_commit": candidate,
        "base_commit": base,
        "executions": executions,
    }


STANDIN_SOURCE = """\
#!{python}
# Stand-in interpreter.  Launched with LEDGER_STANDIN_LAUNCH set, it becomes the real interpreter
# under its own name, so the tool it runs (the runner) sees it as sys.executable and starts every
# `python3` argv through it.  Otherwise it records the argv it was given (as `python3 ...`), then
# either exits with a configured status or (mode "exec") becomes the real interpreter.  Mode
# "batch" answers `python3 -m pytest TARGET` with the status pytest gives for TARGET alone, read
# from one earlier pytest run over every target (tests/contracts/ledger_batch.py wrote it to
# LEDGER_STANDIN_BATCH), and execs every other argv as mode "exec" does.  Nested invocations are
# not recorded.
import json, os, sys
if os.environ.pop("LEDGER_STANDIN_LAUNCH", None):
    os.execv({python!r}, [sys.argv[0], *sys.argv[1:]])
argv = ["python3", *sys.argv[1:]]
if not os.environ.get("LEDGER_STANDIN_NESTED"):
    with open(os.environ["LEDGER_STANDIN_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(argv) + "\\n")
os.environ["LEDGER_STANDIN_NESTED"] = "1"
codes = json.loads(os.environ.get("LEDGER_STANDIN_EXIT", "{{}}"))
if " ".join(argv) in codes:
    sys.exit(codes[" ".join(argv)])
mode = os.environ.get("LEDGER_STANDIN_MODE")
if mode == "batch" and len(argv) == 4 and argv[1:3] == ["-m", "pytest"]:
    sys.path.insert(0, {repo!r})
    from tests.contracts.ledger_batch import batch_status
    with open(os.environ["LEDGER_STANDIN_BATCH"], encoding="utf-8") as f:
        sys.exit(batch_status(json.load(f), argv[3]))
if mode in ("exec", "batch"):
    os.execv({python!r}, [{python!r}, *sys.argv[1:]])
sys.exit(0)
"""


@dataclass
class StandIn:
    """A recording interpreter: run a tool with ``interpreter=standin.exe``, ``standin.env()``."""

    bin_dir: Path
    log: Path

    @property
    def exe(self) -> Path:
        return self.bin_dir / "python3"

    def env(
        self, *, mode: str = "record", exit_codes: Mapping[str, int] | None = None
    ) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_STANDIN")}
        env["LEDGER_STANDIN_LOG"] = str(self.log)
        env["LEDGER_STANDIN_MODE"] = mode
        env["LEDGER_STANDIN_EXIT"] = json.dumps(dict(exit_codes or {}))
        env["LEDGER_STANDIN_LAUNCH"] = "1"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text("utf-8").splitlines()]


def make_standin(directory: Path) -> StandIn:
    bin_dir = directory / "standin-bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "python3"
    exe.write_text(
        STANDIN_SOURCE.format(python=sys.executable, repo=str(REPO_ROOT)), encoding="utf-8"
    )
    exe.chmod(0o755)
    return StandIn(bin_dir, directory / "standin-calls.jsonl")


def copy_working_tree(source: Path, dest: Path) -> Path:
    """A committed candidate of `source`'s working tree (tracked plus untracked, not ignored).

    History is kept when `source` has commits (so provenance checks that look at ancestry still
    work); otherwise the candidate is a fresh repository.
    """
    if (
        subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--verify", "-q", "HEAD"],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    ):
        subprocess.run(
            ["git", "clone", "-q", str(source), str(dest)], check=True, capture_output=True
        )
    else:
        dest.mkdir(parents=True)
        git(dest, "init", "-q")
    listed = git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    wanted = {p for p in listed.split("\0") if p and (source / p).exists()}
    for p in git(dest, "ls-files", "-z").split("\0"):
        if p and p not in wanted:
            (dest / p).unlink(missing_ok=True)
    for p in sorted(wanted):
        target = dest / p
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        shutil.copy2(source / p, target, follow_symlinks=False)
    git(dest, "add", "-A")
    git(dest, *GIT_COMMIT, "commit", "-q", "--allow-empty", "-m", "candidate")
    return dest


# ------------------------------------------------------------------------------------------
# The suite's base-commit check (what CI runs through tests/contracts/test_ledger_base_commit.py)

BASE_ENV = "TENFERRO_LEDGER_BASE"
ZERO_OID = re.compile(r"0+")


class NoRepository(Exception):
    """The tree is not a git checkout: there is no history to compare against."""


class BaseUnavailable(Exception):
    """HEAD has a parent, but its commit is not available (a shallow clone that cannot deepen)."""


@dataclass(frozen=True)
class SuiteBase:
    base: str | None  # the revision passed to --base-commit; None: HEAD is a root commit
    how: str  # why this base (shown in failures)


def _git_rc(root: Path, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def resolve_suite_base(
    root: Path, manifest_rel: str = PRODUCTION_MANIFEST, env: Mapping[str, str] | None = None
) -> SuiteBase:
    """The base the suite compares the manifest with.  Policy, in order:

    1. ``TENFERRO_LEDGER_BASE`` (a CI job passes its event base: the pull request's base or the
       push's ``before``; an all-zero id, GitHub's "new branch", is ignored);
    2. the manifest differs from HEAD in the working tree: HEAD (the pending change is checked);
    3. HEAD's first parent, read from the commit object itself, so a shallow clone cannot hide
       it.  When that commit is absent (shallow clone), every remote is asked to deepen by one;
       if it is still absent, ``BaseUnavailable`` -- the check fails rather than pass unchecked;
    4. HEAD has no parent at all (a root commit): ``base=None``; the manifest is only checked
       structurally, which is exactly what an introduction is.

    Raises ``NoRepository`` when ``root`` is not a git checkout (an unpacked archive) or git is
    missing; the test then skips locally and fails under ``CI``.
    """
    env = os.environ if env is None else env
    try:
        head = _git_rc(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    except FileNotFoundError as exc:
        raise NoRepository(f"git is not installed: {exc}") from exc
    if head.returncode != 0:
        raise NoRepository(f"{root} is not a git checkout with a HEAD commit")
    given = env.get(BASE_ENV, "").strip()
    if given and not ZERO_OID.fullmatch(given):
        return SuiteBase(given, f"{BASE_ENV}={given}")
    if _git_rc(root, "diff", "--quiet", "HEAD", "--", manifest_rel).returncode == 1:
        return SuiteBase("HEAD", "the manifest has uncommitted changes: compared with HEAD")
    raw = _git_rc(root, "cat-file", "-p", "HEAD").stdout
    parents = [line.split()[1] for line in raw.splitlines() if line.startswith("parent ")]
    if not parents:
        return SuiteBase(None, "HEAD is a root commit: structural check only")
    parent = parents[0]

    def present() -> bool:
        return _git_rc(root, "cat-file", "-e", f"{parent}^{{commit}}").returncode == 0

    if present():
        return SuiteBase(parent, "HEAD's first parent")
    for remote in _git_rc(root, "remote").stdout.split():
        try:
            _git_rc(root, "fetch", "-q", "--no-tags", "--deepen=1", remote, timeout=120)
        except subprocess.TimeoutExpired:
            continue
        if present():
            return SuiteBase(parent, f"HEAD's first parent (deepened from {remote})")
    raise BaseUnavailable(
        f"HEAD's first parent {parent} is not in this (shallow) clone and no remote could "
        f"deepen it; fetch at least two commits of history or set {BASE_ENV}"
    )


def suite_base_check(
    root: Path, manifest_rel: str = PRODUCTION_MANIFEST
) -> tuple[SuiteBase, Outcome]:
    """Runs the real checker CLI over ``root`` with the suite's base (see resolve_suite_base)."""
    base = resolve_suite_base(root, manifest_rel)
    args = ["--root", str(root), "--manifest", manifest_rel, "--diagnostics-json"]
    if base.base is not None:
        args += ["--base-commit", base.base]
    return base, run_script(root / "scripts" / CHECKER.name, *args)
