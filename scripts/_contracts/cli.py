"""Command-line plumbing for the ledger tools, and the checker's ``main``.

The argument parser takes exact option names only and turns a usage error into exit status 2
(plus an ``E_USAGE`` envelope when JSON diagnostics were asked for); ``--contract-schema``
answers the availability probe without touching a repository.  The runner and the replay tool
build their own parsers from the same pieces.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from .diagnostics import Diagnostics, emit
from .loading import compare_base_revision, load
from .provenance import candidate_commit, require_candidate
from .receipt import build_summary, check_receipt_file
from .schema import MANIFEST_SCHEMA

CLI_CONTRACT_SCHEMA = "tenferro.storage-ownership-cli-contract.v1"

CHECKER_CONTRACT: dict[str, Any] = {
    "schema": CLI_CONTRACT_SCHEMA,
    "tool": "check-storage-ownership-contracts",
    "role": "checker",
    "manifest_schema": MANIFEST_SCHEMA,
    "probe": "--contract-schema",
    "options": [
        "--root",
        "--manifest",
        "--base-commit",
        "--receipt",
        "--summary-json",
        "--diagnostics-json",
    ],
}


USAGE_EXIT = 2


def usage_options(message: str) -> list[str]:
    """The option names or tokens an argparse error message is about (best effort, stable)."""
    for prefix in ("unrecognized arguments: ", "the following arguments are required: "):
        if message.startswith(prefix):
            rest = message[len(prefix) :]
            sep = ", " if prefix.startswith("the following") else " "
            return [t for t in rest.split(sep) if t]
    found = re.match(r"argument ([^:]+):", message)
    if found:
        return [o for o in found.group(1).split("/") if o]
    return []


class UsageParser(argparse.ArgumentParser):
    """Exact options only: no prefix abbreviations (``--receipt`` is not ``--receipt-out``).

    A usage error (unknown option, missing required option, missing value) exits with status 2.
    When ``--diagnostics-json`` occurs anywhere in the argument list, the error is reported as
    the diagnostics envelope (code ``E_USAGE``) on stdout, like every other failure, and the
    human usage text still goes to stderr.
    """

    def __init__(self, *, wants_json: bool = False, **kwargs: Any) -> None:
        super().__init__(allow_abbrev=False, **kwargs)
        self.wants_json = wants_json

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        if self.wants_json:
            sink = Diagnostics()
            sink.add("E_USAGE", f"{self.prog}: {message}", options=usage_options(message))
            sys.stdout.write(json.dumps(sink.envelope(), indent=2) + "\n")
        raise SystemExit(USAGE_EXIT)


def probe_requested(argv: Sequence[str]) -> bool:
    return "--contract-schema" in argv


def write_probe(contract: Mapping[str, Any]) -> int:
    sys.stdout.write(json.dumps(contract) + "\n")
    return 0


# --------------------------------------------------------------------------------------------
# The checker's command line


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if probe_requested(args_list):
        # Availability handshake: no manifest is loaded and nothing goes to stderr.
        return write_probe(CHECKER_CONTRACT)
    parser = UsageParser(
        wants_json="--diagnostics-json" in args_list,
        prog="check-storage-ownership-contracts",
        description="Validate the storage-ownership obligation manifest (v2), optionally a "
        "promotion against a base commit and a runner receipt.",
    )
    parser.add_argument("--root", required=True, help="repository top-level directory")
    parser.add_argument("--manifest", required=True, help="repository-relative manifest path")
    parser.add_argument("--base-commit", help="base revision for promotion/revision comparison")
    parser.add_argument("--receipt", help="receipt written by run-storage-ownership-contracts")
    parser.add_argument("--summary-json", metavar="PATH", help="write the unit summary here")
    parser.add_argument(
        "--diagnostics-json", action="store_true", help="print the diagnostics envelope on stdout"
    )
    parser.add_argument("--contract-schema", action="store_true", help="print the CLI contract")
    args = parser.parse_args(args_list)

    sink = Diagnostics()
    loaded = load(args.root, args.manifest, sink, collect=True)
    candidate: str | None = None
    results: dict[str, int] | None = None
    if loaded is not None:
        needs_git = args.base_commit is not None or args.receipt is not None
        candidate = require_candidate(loaded.root, sink) if needs_git else None
        if not needs_git:
            candidate = candidate_commit(loaded.root)
        base: str | None = None
        if candidate is not None and args.base_commit is not None:
            base = compare_base_revision(loaded, args.base_commit, candidate, sink)
        base_ok = args.base_commit is None or base is not None
        if candidate is not None and args.receipt is not None and base_ok:
            # A receipt is only meaningful against the comparison it claims to record.
            results = check_receipt_file(loaded, args.receipt, candidate, base, sink)
        if args.summary_json:
            summary = build_summary(loaded.manifest, candidate, results if not sink else None)
            try:
                Path(args.summary_json).write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
            except OSError:
                sink.add(
                    "E_SUMMARY_WRITE",
                    f"cannot write the summary to {args.summary_json}",
                    path=args.summary_json,
                )
    counts = ""
    if loaded is not None:
        rows = loaded.manifest.obligations
        active = sum(1 for o in rows if o.active)
        counts = f": {len(rows)} obligations, {active} active, {len(rows) - active} deferred"
    return emit(sink, args.diagnostics_json, "check-storage-ownership-contracts", f"ok{counts}")
