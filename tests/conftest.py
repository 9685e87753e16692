"""Project-wide test configuration: hypothesis profiles, strict numpy, leak checks.

* Hypothesis profile: ``HYPOTHESIS_PROFILE`` selects one explicitly; otherwise
  ``TENFERRO_THOROUGH=1`` selects ``thorough`` (10x the CI examples; the JAX op tables
  also run their dense shape grid, see ``tests/ad/_opcheck.py``; tens of minutes),
  ``CI=true`` selects ``ci`` (fast enough for the whole suite to finish well inside the
  CI budget on two cores) and anything else ``dev`` (quick).
* numpy floating-point errors raise inside every test (a NaN must not hide a bug).
* Borrow debug mode (``TENFERRO_DEBUG_BORROWS``) is on in every test: arrays handed out
  by prepared access are staged and poisoned when the access ends, so a late read or
  write through one is caught instead of silently touching a value a tape holds.  A
  module marked ``pytestmark = pytest.mark.both_borrow_modes`` (the ownership, borrow and
  escape suites) runs every test twice, ``[debug]`` and ``[default]``: the second in the
  mode users get by default (debug mode off).
* Leak check after every test: every root allocated during the test has been released
  (``ledger.live_allocations()`` and ``ledger.live_bytes()`` are back to their values
  before the test, plus exactly the roots an unproven completion retained for the rest
  of the process: ``providers.permanently_retained()``) and no root was released twice.
  It costs two integer reads and one scan of the permanent records when nothing leaked;
  only a mismatch triggers ``gc.collect()`` (views in reference
  cycles, e.g. held by a traceback, are collected before judging).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from tenferro_storage import _access, ledger
from tenferro_storage.providers import permanently_retained

BOTH_MODES = "both_borrow_modes"
"""Marker of a module whose tests run twice: in borrow debug mode and in the default mode
users get (``TENFERRO_DEBUG_BORROWS`` unset): the ownership, borrow and escape suites."""


@pytest.fixture
def borrow_mode(request: pytest.FixtureRequest) -> str:
    """``"debug"`` or ``"default"``: the borrow mode of a test of a marked module."""
    return str(request.param)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker(BOTH_MODES) is not None:
        if "borrow_mode" not in metafunc.fixturenames:
            metafunc.fixturenames.append("borrow_mode")
        metafunc.parametrize("borrow_mode", ["debug", "default"], indirect=True)


@pytest.fixture(autouse=True)
def _debug_borrows_on(request: pytest.FixtureRequest) -> Iterator[None]:
    debug = True
    if "borrow_mode" in request.fixturenames:
        debug = request.getfixturevalue("borrow_mode") == "debug"
    previous = _access._set_debug_borrows(debug)
    try:
        yield
    finally:
        _access._set_debug_borrows(previous)

# CI and the thorough profile differ only in how many examples they draw
_FULL: dict[str, Any] = {
    "deadline": None, "print_blob": True, "suppress_health_check": [HealthCheck.too_slow]
}
settings.register_profile("ci", max_examples=100, **_FULL)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.register_profile("thorough", max_examples=1000, **_FULL)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").lower() in {"1", "true", "yes"}


def _profile() -> str:
    explicit = os.environ.get("HYPOTHESIS_PROFILE")
    if explicit:
        return explicit
    if _truthy("TENFERRO_THOROUGH"):
        return "thorough"
    return "ci" if _truthy("CI") else "dev"


PROFILE = _profile()
settings.load_profile(PROFILE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{BOTH_MODES}: run each test in borrow debug mode and in the default mode"
    )
    # Hypothesis probes mypy_extensions.TypedDict while reporting a failure; with
    # warnings as errors that probe would mask the real failure.
    config.addinivalue_line(
        "filterwarnings", "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
    )


def pytest_report_header() -> str:
    return f"hypothesis profile: {PROFILE}"


@pytest.fixture(autouse=True, scope="module")
def _freeze_heap() -> None:
    """Collect, then move every object alive before a module's tests into the permanent
    generation: a long run's cyclic collections (the leak check's included) then walk only
    what the current module made, not the whole heap of the modules before it."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _numpy_errors_raise() -> Iterator[None]:
    """Floating-point errors (overflow, invalid, divide, underflow) raise in every test."""
    with np.errstate(all="raise"):
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[None] | pytest.TestReport:
    report: pytest.TestReport = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    return report


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def _leak_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test every root is released exactly once and live bytes are back."""
    allocations = ledger.live_allocations()
    live = ledger.live_bytes()
    doubles = len(ledger.double_releases())
    kept = permanently_retained()
    yield
    if request.node.stash.get(_CALL_FAILED, False):
        return  # the failure's traceback keeps the test's objects alive; report it alone
    # Unproven completions keep their roots for the rest of the process by contract; the
    # roots such a test retained (and nothing else) may stay alive.
    now = permanently_retained()
    allocations += now.roots - kept.roots
    live += now.nbytes - kept.nbytes
    if ledger.live_allocations() != allocations:
        gc.collect()
    leaked = ledger.live_allocations() - allocations
    assert leaked <= 0, (
        f"leak check: {leaked} allocation(s) made by this test are still alive "
        f"({ledger.live_bytes() - live} bytes); release every owner and view before the "
        "test ends (no test may keep storage alive across tests)"
    )
    assert ledger.live_bytes() <= live, "leak check: live bytes grew during the test"
    twice = ledger.double_releases()[doubles:]
    assert not twice, f"leak check: allocation(s) {twice} were released more than once"
