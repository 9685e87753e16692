#!/usr/bin/env python3
"""Checker for the storage-ownership obligation ledger (manifest schema v2): the command line.

Validates ``scripts/storage-ownership-contracts.toml`` (or the ``--manifest`` given), optionally
compares it with a base commit (``--base-commit``) and validates a receipt written by
``run-storage-ownership-contracts.py`` (``--receipt``).  See
docs/design/storage-ownership-contracts.md.

The rules live in the private package ``scripts/_contracts`` (see its ``__init__`` for the
module map); this file only makes that package importable from beside itself and calls its
``main``.  Loading this file as a module (as the test suite does) still gives the package's
public names.  Standard library only.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The package sits next to this file; never pick it up from the current working directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _contracts import *  # noqa: F403  (re-exported for callers that load this file)
from _contracts.cli import main

if __name__ == "__main__":
    sys.exit(main())
