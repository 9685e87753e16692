#!/usr/bin/env python3
"""Trusted runner for the storage-ownership obligation ledger (manifest schema v2).

Validates the manifest exactly as the checker does, requires the tracked tree to match HEAD,
then executes every active row's typed argv exactly once (never a deferred one, never through a
shell) and writes the candidate-bound receipt ``tenferro.storage-ownership-receipt.v1``.  The
receipt is the only execution evidence the checker accepts.  It is an execution log for a
trusted CI runner, not a security attestation.

Standard library only.  Child output goes to this process's stderr so that ``--diagnostics-json``
keeps stdout a single JSON document.

Interpreter resolution: a manifest argv whose first entry is ``python3`` is executed with the
interpreter running this runner (``sys.executable``), never with whatever ``python3`` comes
first on PATH.  So ``.venv/bin/python scripts/run-storage-ownership-contracts.py ...`` runs every
Python obligation in that virtual environment, exactly as CI runs them in its own.  The receipt
still records the canonical manifest argv (``python3`` ...); the resolved interpreter is printed
on stderr.  When the running interpreter cannot report its own path (an empty
``sys.executable``, e.g. an embedded interpreter), nothing is executed and the runner reports
``E_INTERPRETER_UNRESOLVED``.  Any other argv[0] is looked up on PATH as usual.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The manifest rules have one implementation, the private package beside this file (shared with
# the checker); put this directory first so it is never picked up from the working directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _contracts as checker

RUNNER_CONTRACT: dict[str, Any] = {
    "schema": checker.CLI_CONTRACT_SCHEMA,
    "tool": "run-storage-ownership-contracts",
    "role": "runner",
    "manifest_schema": checker.MANIFEST_SCHEMA,
    "probe": "--contract-schema",
    "options": [
        "--root",
        "--manifest",
        "--base-commit",
        "--receipt-out",
        "--diagnostics-json",
    ],
}

# A command whose executable cannot be started is recorded like a shell would report it.
NOT_STARTED = 127


def resolve_argv(argv: Sequence[str]) -> list[str]:
    """The argv actually started: ``python3`` becomes ``sys.executable`` (see the module doc).

    O(len(argv)); allocates one list.  The caller has already checked that ``sys.executable``
    is non-empty when any argv needs it (``unresolved_interpreter``).
    """
    if argv and argv[0] == checker.INTERPRETER:
        return [sys.executable, *argv[1:]]
    return list(argv)


def unresolved_interpreter(manifest: Any, sink: Any) -> bool:
    """Reports E_INTERPRETER_UNRESOLVED when an active argv needs an interpreter path that the
    running interpreter cannot give; True when nothing may run."""
    needs = any(
        o.active and o.command.argv and o.command.argv[0] == checker.INTERPRETER
        for o in manifest.obligations
    )
    if needs and not sys.executable:
        sink.add(
            "E_INTERPRETER_UNRESOLVED",
            "manifest argv start with 'python3', which the runner executes with its own "
            "interpreter, but sys.executable is empty; run the runner with a Python that "
            "knows its own path",
            argv0=checker.INTERPRETER,
        )
        return True
    return False


def execute(root: Path, argv: Sequence[str], cwd: str) -> int:
    try:
        done = subprocess.run(
            resolve_argv(argv),
            cwd=root / cwd,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(),
            stderr=sys.stderr.fileno(),
            check=False,
        )
    except OSError as exc:
        sys.stderr.write(f"run-storage-ownership-contracts: cannot start {argv[0]!r}: {exc}\n")
        return NOT_STARTED
    return done.returncode


def run(args: argparse.Namespace) -> tuple[Any, dict[str, Any] | None]:
    sink = checker.Diagnostics()
    loaded = checker.load(args.root, args.manifest, sink)
    if loaded is None:
        return sink, None
    candidate = checker.require_candidate(loaded.root, sink)
    if candidate is None:
        return sink, None
    base: str | None = None
    if args.base_commit is not None:
        base = checker.compare_base_revision(loaded, args.base_commit, candidate, sink)
    checker.check_tree_clean(loaded.root, sink)
    checker.check_tracked(loaded.root, loaded.manifest, loaded.manifest_rel, sink)
    unresolved_interpreter(loaded.manifest, sink)
    if sink:
        return sink, None  # nothing is executed for an invalid or unprovenanced candidate

    # Every active argv runs exactly once: rows that share a command (identical typed value and
    # artifact binding, enforced by the checker) share its single execution.
    by_command: dict[str, int] = {}
    executions: list[dict[str, Any]] = []
    rows = loaded.manifest.by_id()
    for skeleton in checker.receipt_executions(loaded.manifest):
        command = rows[skeleton["obligation_id"]].command
        if command.id not in by_command:
            started = resolve_argv(command.argv)
            via = f" (argv[0] -> {started[0]})" if started[0] != command.argv[0] else ""
            sys.stderr.write(f"run-storage-ownership-contracts: {' '.join(command.argv)}{via}\n")
            sys.stderr.flush()
            by_command[command.id] = execute(loaded.root, command.argv, command.cwd)
        executions.append({**skeleton, "exit_code": by_command[command.id]})
        if by_command[command.id] != 0:
            sink.add(
                "E_COMMAND_FAILED",
                f"{skeleton['obligation_id']}: {' '.join(command.argv)} exited with status "
                f"{by_command[command.id]}",
                obligation_id=skeleton["obligation_id"],
                exit_code=by_command[command.id],
            )
    receipt = {
        "schema": checker.RECEIPT_SCHEMA,
        "candidate_commit": candidate,
        "base_commit": base,
        "executions": executions,
    }
    return sink, receipt


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if checker.probe_requested(args_list):
        return int(checker.write_probe(RUNNER_CONTRACT))
    parser = checker.UsageParser(
        wants_json="--diagnostics-json" in args_list,
        prog="run-storage-ownership-contracts",
        description="Execute every active storage-ownership obligation once and write the "
        "candidate-bound receipt.",
    )
    parser.add_argument("--root", required=True, help="repository top-level directory")
    parser.add_argument("--manifest", required=True, help="repository-relative manifest path")
    parser.add_argument("--base-commit", help="base revision recorded in the receipt")
    parser.add_argument("--receipt-out", required=True, help="where to write the receipt")
    parser.add_argument(
        "--diagnostics-json", action="store_true", help="print the diagnostics envelope on stdout"
    )
    parser.add_argument("--contract-schema", action="store_true", help="print the CLI contract")
    args = parser.parse_args(args_list)

    sink, receipt = run(args)
    if receipt is not None:
        out = Path(args.receipt_out)
        try:
            out.write_text(json.dumps(receipt, indent=2) + "\n", encoding="utf-8")
        except OSError:
            sink.add(
                "E_RECEIPT_WRITE",
                f"cannot write the receipt to {args.receipt_out}",
                path=args.receipt_out,
            )
    ok = "ok"
    if receipt is not None:
        count = len(receipt["executions"])
        ok = f"ok: {count} active obligations executed; receipt {args.receipt_out}"
    return int(checker.emit(sink, args.diagnostics_json, "run-storage-ownership-contracts", ok))


if __name__ == "__main__":
    sys.exit(main())
