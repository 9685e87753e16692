"""Early pytest plugin (``-p tests._parallel`` in ``pyproject.toml``'s ``addopts``): the
plain ``python -m pytest`` runs the suite on pytest-xdist workers, in CI and locally.

* Only when pytest-xdist is installed and enabled and the command line names no worker
  count itself (``-n``/``--numprocesses``/``--dist``/``-p no:xdist``): then ``-n N --dist
  loadfile`` is prepended, ``N`` from :func:`workers_for`: ``TENFERRO_TEST_WORKERS`` when
  set (``0`` turns it off); 2 under ``CI`` (the CI machine's core count); locally every
  core up to 4, except for a run narrowed to one test file or node id (serial).
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


def _one_file(args: Sequence[str]) -> bool:
    """Whether the command line narrows the run to one test file or node id (then workers
    would only add their start-up): a single positional ``x.py`` or ``x.py::test``.  The
    value of an option that takes one (``-p no:cacheprovider``, ``-k expr``) is not a
    positional argument."""
    paths: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in _VALUED:
            skip = True
        elif not a.startswith("-"):
            paths.append(a)
    return len(paths) == 1 and (paths[0].endswith(".py") or "::" in paths[0])


# pytest's options whose value is the next argument (as ``-p NAME``), not a path
_VALUED = frozenset({
    "-p", "-k", "-m", "-o", "-c", "-W", "--pyargs", "--rootdir", "--basetemp",
    "--confcutdir", "--deselect", "--ignore", "--ignore-glob", "--maxfail", "--durations",
    "--override-ini", "--config-file", "--junitxml", "--log-level", "--tb",
})


def workers_for(args: Sequence[str], env: dict[str, str], cpus: int | None) -> int:
    """How many xdist workers a run gets: ``TENFERRO_TEST_WORKERS`` when set; otherwise
    none for a run narrowed to one file or node id (workers would only add their start-up,
    a few seconds of CPU each: the ledger runner starts such runs by the dozen), 2 under
    ``CI`` (the CI machine's cores) and, locally, every core up to 4.  0: serial."""
    if "TENFERRO_TEST_WORKERS" in env:
        return max(0, int(env["TENFERRO_TEST_WORKERS"]))
    if _one_file(args):
        return 0
    if env.get("CI", "").lower() in {"1", "true", "yes"}:
        return 2
    return min(cpus or 1, 4) if (cpus or 1) > 1 else 0


def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """Prepend ``-n N --dist loadfile`` to runs that did not choose a worker count."""
    del parser
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a worker runs what the controller sends it
    if not early_config.pluginmanager.has_plugin("xdist"):
        return
    if _names_workers(args) or _names_workers(early_config.invocation_params.args):
        return
    workers = workers_for(args, dict(os.environ), os.cpu_count())
    if workers > 0:
        args[:] = ["-n", str(workers), "--dist", "loadfile", *args]
