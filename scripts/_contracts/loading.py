"""The steps the checker, the runner and the replay tool share before they diverge.

Resolve and confine ``--root`` and ``--manifest``, read and parse the TOML, run every
structural rule, and optionally resolve a base commit and compare the manifest with it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from .diagnostics import Diagnostics
from .evidence import TreeFiles, check_commands, check_paths, confine
from .history import compare_with_base, load_base_manifest, resolve_base
from .model import Manifest
from .provenance import git
from .registry import check_lifecycle, check_registry
from .schema import load_manifest_text, parse_manifest
from .selectors import check_selectors


def check_structure(
    root: Path,
    manifest: Manifest,
    sink: Diagnostics,
    tree: TreeFiles | None = None,
    *,
    collect: bool = False,
) -> None:
    """The structural rules; with ``collect`` (the checker, on the working tree) also
    resolves every pytest selector with one collect-only run.  The runner does not: it
    executes every active row, which fails on a selector that names nothing, and a commit's
    tree (the replay) cannot be collected."""
    check_registry(manifest, sink)
    check_lifecycle(manifest, sink)
    failed = check_paths(root, manifest, sink, tree)
    before = len(sink)
    check_commands(manifest, failed, sink)
    if collect and tree is None and len(sink) == before:
        check_selectors(root, manifest, failed, sink)


@dataclass
class Loaded:
    root: Path
    manifest_rel: str
    manifest: Manifest


def resolve_root(value: str, sink: Diagnostics) -> Path | None:
    root = Path(value).resolve()
    if not root.is_dir():
        sink.add("E_ROOT_INVALID", f"--root {value!r} is not a directory", root=value)
        return None
    top = git(root, "rev-parse", "--show-toplevel")
    if top.returncode == 0 and top.stdout.strip() and Path(top.stdout.strip()).resolve() != root:
        sink.add(
            "E_ROOT_INVALID",
            f"--root {value!r} must be the repository's top-level directory ({top.stdout.strip()})",
            root=value,
        )
        return None
    return root


def load(
    root_arg: str, manifest_rel: str, sink: Diagnostics, *, collect: bool = False
) -> Loaded | None:
    """Root, manifest confinement, TOML parse, shape and structural checks (``collect``:
    selector resolution too, see :func:`check_structure`)."""
    root = resolve_root(root_arg, sink)
    if root is None:
        return None
    status, path = confine(root, root, manifest_rel)
    if status != "ok" or path is None:
        sink.add(
            "E_MANIFEST_PATH_ESCAPE",
            f"--manifest {manifest_rel!r} must be a repository-relative path inside {root}",
            path=manifest_rel,
        )
        return None
    if not path.is_file():
        sink.add("E_MANIFEST_MISSING", f"manifest {manifest_rel} does not exist", path=manifest_rel)
        return None
    try:
        data = load_manifest_text(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        sink.add(
            "E_MANIFEST_TOML",
            f"manifest {manifest_rel} is not valid TOML: {exc}",
            path=manifest_rel,
        )
        return None
    manifest = parse_manifest(data, sink)
    if manifest is None:
        return None
    check_structure(root, manifest, sink, collect=collect)
    return Loaded(root, manifest_rel, manifest)


def compare_base_revision(
    loaded: Loaded, revision: str, candidate: str, sink: Diagnostics
) -> str | None:
    base = resolve_base(loaded.root, revision, candidate, sink)
    if base is None:
        return None
    base_manifest = load_base_manifest(loaded.root, base, loaded.manifest_rel, sink)
    if base_manifest is not None:
        compare_with_base(base_manifest, loaded.manifest, sink)
    return base
