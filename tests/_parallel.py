"""Early pytest plugin (``-p tests._parallel`` in ``pyproject.toml``'s ``addopts``): under
``CI=true`` the plain ``python -m pytest`` runs the suite on two pytest-xdist workers.

* Only when ``CI`` is truthy, pytest-xdist is installed and enabled, and the command line
  names no worker count itself (``-n``/``--numprocesses``/``--dist``/``-p no:xdist``):
  then ``-n N --dist loadfile`` is prepended, ``N`` from ``TENFERRO_TEST_WORKERS``
  (default 2, the CI machine's core count; ``0`` turns it off).  Local runs are untouched.
* ``--dist loadfile`` keeps every test file in one worker, so module-level state, module
  fixtures and the order of tests inside a file are exactly as in a serial run.  Each
  worker is its own process with its own ledger, so the autouse leak check (a per-process
  before/after comparison) judges each test as in a serial run.
* Cost: each worker collects the whole suite (imports jax and every test module: a few
  seconds of CPU per worker); nothing is shared between workers.  ``-n 0`` (or
  ``TENFERRO_TEST_WORKERS=0``) runs serially, e.g. to debug with ``--pdb``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

_OWN_FLAGS = ("-n", "--numprocesses", "--dist", "-d", "--tx")


def _names_workers(args: Sequence[str]) -> bool:
    for i, a in enumerate(args):
        if a.startswith(_OWN_FLAGS):
            return True
        if a == "-p" and i + 1 < len(args) and args[i + 1] == "no:xdist":
            return True
        if a == "-pno:xdist":
            return True
    return False


def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """Prepend ``-n N --dist loadfile`` for CI runs that did not choose a worker count."""
    del parser
    if os.environ.get("CI", "").lower() not in {"1", "true", "yes"}:
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a worker runs what the controller sends it
    if not early_config.pluginmanager.has_plugin("xdist"):
        return
    if _names_workers(args) or _names_workers(early_config.invocation_params.args):
        return
    workers = int(os.environ.get("TENFERRO_TEST_WORKERS", "2"))
    if workers > 0:
        args[:] = ["-n", str(workers), "--dist", "loadfile", *args]
