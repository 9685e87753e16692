"""Checks on what each obligation points at: its artifact and the command that inspects it.

Paths first: every artifact path, command cwd and path argument must be an exact
repository-relative path that stays inside the repository (symlinks included) and, for an
active row, exists.  Rows that fail there are skipped by the second half, the command
allow-list: which command kinds exist, which artifact kinds each may inspect, and the one argv
shape each kind may have.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from .diagnostics import Diagnostics
from .model import Artifact, Command, Manifest

INTERPRETER = "python3"
CHECK_SCRIPT = re.compile(r"scripts/[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")
CHECK_SCRIPT_PATTERN = "scripts/*.py"

ARTIFACT_KINDS = frozenset(
    {
        "obligation-manifest",
        "design-document",
        "guide",
        "pytest-file",
        "pytest-suite",
        "benchmark-report",
        "evidence-report",
        "source-tree",
    }
)
# Exact allow-list: each command kind, the artifact kinds it may inspect.
COMMAND_KINDS: dict[str, frozenset[str]] = {
    "pytest": frozenset({"pytest-file", "pytest-suite"}),
    "python-check": frozenset({"obligation-manifest", "source-tree", "evidence-report"}),
    "doc-check": frozenset({"design-document", "guide"}),
    "benchmark-check": frozenset({"benchmark-report"}),
}
SELECTOR_ARTIFACT_KINDS = frozenset({"pytest-file"})


# --------------------------------------------------------------------------------------------
# Path confinement (reported before any command identity comparison)


def confine(root: Path, base: Path, path: str) -> tuple[str, Path | None]:
    """Classifies a manifest path: ("ok", resolved) | ("escape", None) | ("noncanonical", None).

    Resolution follows ordinary filesystem rules, so a symlink that points outside the
    repository is an escape even though the string looks repository-relative.
    """
    if "\\" in path or "\x00" in path:
        return "noncanonical", None
    pure = PurePosixPath(path)
    if pure.is_absolute() or re.match(r"^[A-Za-z]:", path):
        return "escape", None
    if ".." in pure.parts:
        normal = os.path.normpath(path)
        if normal == ".." or normal.startswith("../"):
            return "escape", None
        return "noncanonical", None
    if pure.as_posix() != path:
        return "noncanonical", None
    resolved = (base / path).resolve()
    try:
        resolved.relative_to(root.resolve())
    except ValueError:
        return "escape", None
    return "ok", resolved


def _argv_index(argv: Sequence[str], path: str) -> int | None:
    for i, value in enumerate(argv):
        if value == path or value.startswith(path + "::"):
            return i
    return None


class TreeFiles:
    """The files of one commit's tree (``git ls-tree -r``): existence without a checkout.

    The history replay checks old candidates against the files they committed, not against
    today's working tree.  Construction is O(files x depth); lookups are O(1).
    """

    def __init__(self, files: Iterable[str]) -> None:
        self.files = frozenset(files)
        dirs = {"."}
        for f in self.files:
            parts = f.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        self.dirs = frozenset(dirs)

    def exists(self, rel: str) -> bool:
        return rel in self.files or rel in self.dirs

    def is_dir(self, rel: str) -> bool:
        return rel in self.dirs


def check_paths(
    root: Path, manifest: Manifest, sink: Diagnostics, tree: TreeFiles | None = None
) -> set[str]:
    """Confines every artifact, cwd and path argument; returns obligation ids with failures.

    Existence is read from the filesystem, or from ``tree`` (a commit's files) when given.
    """
    failed: set[str] = set()
    real_root = root.resolve()

    def rel(resolved: Path) -> str:
        return resolved.relative_to(real_root).as_posix() or "."

    def exists(resolved: Path) -> bool:
        return resolved.exists() if tree is None else tree.exists(rel(resolved))

    def is_dir(resolved: Path) -> bool:
        return resolved.is_dir() if tree is None else tree.is_dir(rel(resolved))

    for o in manifest.obligations:
        before = len(sink)
        a, c = o.artifact, o.command
        status, resolved = confine(root, root, a.path)
        if status == "noncanonical":
            sink.add(
                "E_PATH_NOT_CANONICAL",
                f"{o.id}: artifact path {a.path!r} is not an exact repository-relative path",
                obligation_id=o.id,
                field="artifact.path",
                path=a.path,
            )
        elif status == "escape":
            sink.add(
                "E_ARTIFACT_PATH_ESCAPE",
                f"{o.id}: artifact path {a.path!r} resolves outside the repository",
                obligation_id=o.id,
                artifact_id=a.id,
                path=a.path,
            )
        elif o.active and resolved is not None and not exists(resolved):
            # Only active rows need evidence on disk; a deferred path is a future
            # specification and is never fabricated.
            sink.add(
                "E_ARTIFACT_MISSING",
                f"{o.id}: active artifact {a.path!r} does not exist",
                obligation_id=o.id,
                artifact_id=a.id,
                path=a.path,
            )
        cwd_status, cwd_resolved = confine(root, root, c.cwd)
        if cwd_status == "noncanonical":
            sink.add(
                "E_PATH_NOT_CANONICAL",
                f"{o.id}: command cwd {c.cwd!r} is not an exact repository-relative path",
                obligation_id=o.id,
                field="command.cwd",
                path=c.cwd,
            )
        elif cwd_status == "escape":
            sink.add(
                "E_CWD_ESCAPE",
                f"{o.id}: command cwd {c.cwd!r} resolves outside the repository",
                obligation_id=o.id,
                command_id=c.id,
                cwd=c.cwd,
            )
        elif o.active and cwd_resolved is not None and not is_dir(cwd_resolved):
            sink.add(
                "E_CWD_MISSING",
                f"{o.id}: command cwd {c.cwd!r} is not a directory",
                obligation_id=o.id,
                command_id=c.id,
                cwd=c.cwd,
            )
        if cwd_resolved is not None and is_dir(cwd_resolved):
            for p in dict.fromkeys(c.path_args):
                index = _argv_index(c.argv, p)
                if index is None or p == a.path:
                    continue  # unbound: reported with command identity; artifact: above
                status, resolved = confine(root, cwd_resolved, p)
                if status == "noncanonical":
                    sink.add(
                        "E_PATH_NOT_CANONICAL",
                        f"{o.id}: path argument {p!r} is not an exact repository-relative path",
                        obligation_id=o.id,
                        field="command.path_args",
                        path=p,
                    )
                elif status == "escape":
                    sink.add(
                        "E_ARGV_PATH_ESCAPE",
                        f"{o.id}: argv[{index}] {p!r} resolves outside the repository",
                        obligation_id=o.id,
                        command_id=c.id,
                        index=index,
                        path=p,
                    )
                elif o.active and resolved is not None and not exists(resolved):
                    sink.add(
                        "E_ARGV_PATH_MISSING",
                        f"{o.id}: argv[{index}] {p!r} does not exist",
                        obligation_id=o.id,
                        command_id=c.id,
                        index=index,
                        path=p,
                    )
        if len(sink) != before:
            failed.add(o.id)
    return failed


# --------------------------------------------------------------------------------------------
# Exact command allow-list and identity


def pytest_argv(artifact: Artifact) -> list[str]:
    """The one allowed pytest argv: the interpreter runs pytest on the artifact (node id)."""
    target = artifact.path + (f"::{artifact.selector}" if artifact.selector else "")
    return [INTERPRETER, "-m", "pytest", target]


def _argv_mismatch(command: Command, artifact: Artifact) -> tuple[int, Any, Any] | None:
    argv = command.argv
    if command.kind == "pytest":
        want = pytest_argv(artifact)
        for i in range(max(len(want), len(argv))):
            exp = want[i] if i < len(want) else None
            act = argv[i] if i < len(argv) else None
            if exp != act:
                return i, exp, act
        return None
    # python-check / doc-check / benchmark-check: python3 scripts/<verifier>.py [...] <artifact>
    if not argv or argv[0] != INTERPRETER:
        return 0, INTERPRETER, argv[0] if argv else None
    if len(argv) < 2 or not CHECK_SCRIPT.fullmatch(argv[1]):
        return 1, CHECK_SCRIPT_PATTERN, argv[1] if len(argv) > 1 else None
    last = len(argv) - 1
    if last < 2 or argv[last] != artifact.path:
        index = max(last, 2)
        return index, artifact.path, argv[index] if index < len(argv) else None
    return None


def _path_positions(command: Command) -> list[int]:
    if command.kind == "pytest":
        return [3]
    return [1, len(command.argv) - 1]


def check_commands(manifest: Manifest, skip: set[str], sink: Diagnostics) -> None:
    artifacts: dict[str, Artifact] = {}
    commands: dict[str, tuple[Command, str]] = {}
    checked_commands: set[str] = set()
    checked_artifacts: set[str] = set()
    for o in manifest.obligations:
        a, c = o.artifact, o.command
        if a.id in artifacts and artifacts[a.id] != a:
            sink.add(
                "E_ARTIFACT_CONFLICT",
                f"artifact id {a.id!r} is reused with a different typed value",
                artifact_id=a.id,
            )
        artifacts.setdefault(a.id, a)
        if c.id in commands and commands[c.id] != (c, a.id):
            sink.add(
                "E_COMMAND_CONFLICT",
                f"command id {c.id!r} is shared by rows whose command value or artifact "
                "binding differ",
                command_id=c.id,
            )
        commands.setdefault(c.id, (c, a.id))
        if o.id in skip:
            continue  # a path failure already explains this row
        if a.id not in checked_artifacts:
            checked_artifacts.add(a.id)
            if a.kind not in ARTIFACT_KINDS:
                sink.add(
                    "E_ARTIFACT_KIND",
                    f"artifact {a.id}: kind {a.kind!r} is not one of {sorted(ARTIFACT_KINDS)}",
                    artifact_id=a.id,
                    kind=a.kind,
                )
            elif a.selector is not None and a.kind not in SELECTOR_ARTIFACT_KINDS:
                sink.add(
                    "E_ARTIFACT_SELECTOR",
                    f"artifact {a.id}: a selector is only meaningful for "
                    f"{sorted(SELECTOR_ARTIFACT_KINDS)}",
                    artifact_id=a.id,
                    kind=a.kind,
                )
        if c.artifact_id != a.id:
            sink.add(
                "E_COMMAND_ARTIFACT_BINDING",
                f"{o.id}: command {c.id} may inspect only artifact {c.artifact_id!r}, but the "
                f"row's artifact is {a.id!r}",
                obligation_id=o.id,
                command_id=c.id,
                expected=a.id,
                actual=c.artifact_id,
            )
            continue
        if c.id in checked_commands:
            continue
        checked_commands.add(c.id)
        if c.kind not in COMMAND_KINDS:
            sink.add(
                "E_COMMAND_KIND",
                f"command {c.id}: kind {c.kind!r} is not allow-listed ({sorted(COMMAND_KINDS)})",
                command_id=c.id,
                kind=c.kind,
            )
            continue
        if a.kind in ARTIFACT_KINDS and a.kind not in COMMAND_KINDS[c.kind]:
            sink.add(
                "E_COMMAND_ARTIFACT_KIND",
                f"command {c.id}: a {c.kind} command cannot inspect a {a.kind} artifact",
                command_id=c.id,
                kind=c.kind,
                artifact_kind=a.kind,
            )
            continue  # its argv template would not fit the artifact either
        if c.cwd != ".":
            sink.add(
                "E_COMMAND_CWD",
                f"command {c.id}: cwd must be the repository root '.', found {c.cwd!r}",
                command_id=c.id,
                expected=".",
                actual=c.cwd,
            )
        mismatch = _argv_mismatch(c, a)
        if mismatch is not None:
            index, exp, act = mismatch
            sink.add(
                "E_COMMAND_ARGV",
                f"command {c.id}: argv[{index}] must be {exp!r}, found {act!r}",
                command_id=c.id,
                index=index,
                expected=exp,
                actual=act,
            )
            continue
        for p in c.path_args:
            if _argv_index(c.argv, p) is None:
                sink.add(
                    "E_PATH_ARG_UNBOUND",
                    f"command {c.id}: path argument {p!r} does not occur in argv",
                    command_id=c.id,
                    path=p,
                )
        for index in _path_positions(c):
            value = c.argv[index].split("::", 1)[0]
            if value not in c.path_args:
                sink.add(
                    "E_PATH_ARG_UNDECLARED",
                    f"command {c.id}: argv[{index}] {value!r} is a path and must be listed in "
                    "path_args so it is confined",
                    command_id=c.id,
                    index=index,
                    path=value,
                )
