"""The storage-ownership contract ledger tooling, as a private package of ``scripts/``.

``scripts/check-storage-ownership-contracts.py`` is the command-line entry point; the runner
and the history replay import what they share from here.  The modules, in dependency order:

* ``diagnostics``: the code catalogue, the collecting sink and the output format;
* ``model``: the typed manifest (frozen dataclasses);
* ``schema``: TOML to model, with one diagnostic per shape problem;
* ``registry``: graph, cohort, unit, gate and activation rules;
* ``evidence``: path confinement and the command allow-list for each row;
* ``provenance``: git calls, the candidate commit, tree cleanliness, tracked evidence;
* ``history``: base resolution and the promotion / revision rules against it;
* ``loading``: the front half the three tools share (root, manifest, structural pass);
* ``receipt``: receipt validation and the derived unit summary;
* ``cli``: the strict argument parser, the probe and the checker's ``main``.

Standard library only; nothing runs through a shell.  Scripts put their own directory on
``sys.path`` and import ``_contracts``; it is not an installed package.
"""

from __future__ import annotations

from .cli import (
    CHECKER_CONTRACT,
    CLI_CONTRACT_SCHEMA,
    USAGE_EXIT,
    UsageParser,
    main,
    probe_requested,
    usage_options,
    write_probe,
)
from .diagnostics import (
    DIAGNOSTIC_FIELDS,
    DIAGNOSTICS_SCHEMA,
    Diagnostic,
    Diagnostics,
    diagnostic_key,
    emit,
)
from .evidence import (
    ARTIFACT_KINDS,
    CHECK_SCRIPT,
    CHECK_SCRIPT_PATTERN,
    COMMAND_KINDS,
    INTERPRETER,
    SELECTOR_ARTIFACT_KINDS,
    TreeFiles,
    check_commands,
    check_paths,
    confine,
    pytest_argv,
)
from .history import compare_with_base, load_base_manifest, resolve_base
from .loading import Loaded, check_structure, compare_base_revision, load, resolve_root
from .model import (
    Acknowledgement,
    Artifact,
    Cohort,
    Command,
    Edge,
    Manifest,
    Obligation,
    Registry,
    State,
    Unit,
)
from .provenance import (
    candidate_commit,
    check_tracked,
    check_tree_clean,
    git,
    require_candidate,
    tree_dirty_paths,
)
from .receipt import (
    RECEIPT_SCHEMA,
    SUMMARY_SCHEMA,
    TERMINALITY_KEYS,
    build_summary,
    check_receipt_file,
    receipt_executions,
    validate_receipt,
)
from .registry import (
    COHORT_MEMBERS,
    COHORT_PREREQUISITES,
    PROMOTION_MODE,
    ROOT_UNITS,
    SINGLE_INCOMING,
    check_lifecycle,
    check_registry,
    expand_node,
    incoming_sources,
)
from .schema import MANIFEST_SCHEMA, load_manifest_text, parse_manifest

__all__ = [
    "ARTIFACT_KINDS",
    "CHECKER_CONTRACT",
    "CHECK_SCRIPT",
    "CHECK_SCRIPT_PATTERN",
    "CLI_CONTRACT_SCHEMA",
    "COHORT_MEMBERS",
    "COHORT_PREREQUISITES",
    "COMMAND_KINDS",
    "DIAGNOSTICS_SCHEMA",
    "DIAGNOSTIC_FIELDS",
    "INTERPRETER",
    "MANIFEST_SCHEMA",
    "PROMOTION_MODE",
    "RECEIPT_SCHEMA",
    "ROOT_UNITS",
    "SELECTOR_ARTIFACT_KINDS",
    "SINGLE_INCOMING",
    "SUMMARY_SCHEMA",
    "TERMINALITY_KEYS",
    "USAGE_EXIT",
    "Acknowledgement",
    "Artifact",
    "Cohort",
    "Command",
    "Diagnostic",
    "Diagnostics",
    "Edge",
    "Loaded",
    "Manifest",
    "Obligation",
    "Registry",
    "State",
    "TreeFiles",
    "Unit",
    "UsageParser",
    "build_summary",
    "candidate_commit",
    "check_commands",
    "check_lifecycle",
    "check_paths",
    "check_receipt_file",
    "check_registry",
    "check_structure",
    "check_tracked",
    "check_tree_clean",
    "compare_base_revision",
    "compare_with_base",
    "confine",
    "diagnostic_key",
    "emit",
    "expand_node",
    "git",
    "incoming_sources",
    "load",
    "load_base_manifest",
    "load_manifest_text",
    "main",
    "parse_manifest",
    "probe_requested",
    "pytest_argv",
    "receipt_executions",
    "require_candidate",
    "resolve_base",
    "resolve_root",
    "tree_dirty_paths",
    "usage_options",
    "validate_receipt",
    "write_probe",
]
