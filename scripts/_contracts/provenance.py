"""Git access and the provenance of a candidate.

Git always runs with an argv list and no stdin.  The candidate is ``HEAD``; before execution
evidence is trusted, tracked files must match it and every active path must be tracked.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .diagnostics import Diagnostics
from .model import Manifest


def git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def candidate_commit(root: Path) -> str | None:
    out = git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def require_candidate(root: Path, sink: Diagnostics) -> str | None:
    head = candidate_commit(root)
    if head is None:
        sink.add(
            "E_GIT_CANDIDATE",
            f"{root} has no resolvable HEAD commit; the candidate is always git rev-parse HEAD",
            root=str(root),
        )
    return head


def tree_dirty_paths(root: Path) -> list[str]:
    # The single cleanliness check: tracked files must match HEAD.  Untracked or ignored
    # files (receipts, caches, logs) are deliberately allowed.
    out = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    entries = [e for e in out.stdout.split("\0") if e]
    return sorted(e[3:] for e in entries if len(e) > 3)


def check_tree_clean(root: Path, sink: Diagnostics) -> None:
    dirty = tree_dirty_paths(root)
    if dirty:
        sink.add(
            "E_TREE_DIRTY",
            f"tracked files differ from HEAD ({', '.join(dirty[:5])}"
            f"{', ...' if len(dirty) > 5 else ''}); commit or stash them first",
            paths=dirty,
        )


def check_tracked(root: Path, manifest: Manifest, manifest_rel: str, sink: Diagnostics) -> None:
    """Active evidence (manifest, artifacts, verifiers) must be tracked at the candidate."""
    out = git(root, "ls-files", "-z")
    tracked = {p for p in out.stdout.split("\0") if p}
    wanted: list[str] = [manifest_rel]
    for o in manifest.obligations:
        if o.active:
            wanted.append(o.artifact.path)
            wanted.extend(p for p in o.command.path_args if p != ".")
    for p in dict.fromkeys(wanted):
        if not (root / p).exists():
            continue  # already reported as missing by the structural checks
        if p not in tracked and not any(t.startswith(p.rstrip("/") + "/") for t in tracked):
            sink.add(
                "E_PATH_UNTRACKED",
                f"{p} is not tracked at the candidate commit; evidence must be committed",
                path=p,
            )
