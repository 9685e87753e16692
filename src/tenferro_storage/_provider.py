"""Providers: who allocates, maps and synchronizes the bytes behind a root.

The host provider is numpy memory, synchronous.  Its counters let tests prove that
validation, provider resolution, mapping, synchronization and dispatch happen a
fixed number of times per operation, independent of element count.  Fault
injection lets tests drive every failure path without monkeypatching.
"""

from __future__ import annotations

from typing import Final

import attrs

FaultError = type[BaseException] | BaseException
"""What an injected fault raises: an exception type (called with a message) or instance."""


def raise_fault(error: FaultError | None, default: type[BaseException], message: str) -> None:
    """Raise the injected fault: ``error`` when given (any ``BaseException``, so tests can
    drive the interrupt paths too), else ``default(message)``."""
    if error is None:
        raise default(message)
    if isinstance(error, BaseException):
        raise error
    raise error(message)


@attrs.define
class ProviderCounters:
    """Work counters of one provider (plain integers; reset with :meth:`reset`).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    validations: int = 0
    resolutions: int = 0
    maps: int = 0
    syncs: int = 0
    dispatches: int = 0
    allocations: int = 0
    releases: int = 0

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters as a dict.

        Cost: allocates the dict (no ledger event); no copy of tensor bytes; no sync; no
        dispatch; O(1) (seven counters).
        Raises: nothing."""
        return attrs.asdict(self)

    def reset(self) -> None:
        """Set every counter to zero.

        Cost: no allocation; no copy; no sync; no dispatch; O(1) (seven counters).
        Raises: nothing."""
        for field in attrs.fields(ProviderCounters):
            setattr(self, field.name, 0)


class FaultInjected(RuntimeError):
    """The provider failure raised by :meth:`HostProvider.fail_next` (tests only)."""


class HostProvider:
    """Synchronous numpy host memory.

    ``placement`` is ``"host"``; ``counters`` are the work counters; the set of live
    allocation ids lets tests prove every root is released exactly once.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct.
    Raises: nothing."""

    placement: Final = "host"

    def __init__(self, name: str = "host") -> None:
        self.name = name
        self.counters = ProviderCounters()
        self._faults: dict[str, int] = {}
        self._errors: dict[str, FaultError | None] = {}

    # -- fault injection (tests) -----------------------------------------------------
    def fail_next(
        self, operation: str, times: int = 1, error: FaultError | None = None
    ) -> None:
        """Make the next ``times`` calls of provider ``operation`` fail: ``"map"`` (host
        access to an input) or ``"map-write"`` (write access to a donated input).  They
        raise ``FaultInjected``, or ``error`` (an exception type or instance, any
        ``BaseException``) when given.

        Cost: no allocation; no copy; no sync; no dispatch; O(1): arms a counter (tests).
        Raises: ValueError (an unknown ``operation``)."""
        if operation not in ("map", "map-write"):
            raise ValueError(f"fail_next: unknown operation {operation!r} (map, map-write)")
        self._faults[operation] = self._faults.get(operation, 0) + times
        self._errors[operation] = error

    def _maybe_fail(self, operation: str) -> None:
        n = self._faults.get(operation)
        if n:
            self._faults[operation] = n - 1
            raise_fault(
                self._errors.get(operation),
                FaultInjected,
                f"injected {self.name} provider fault in {operation}",
            )

    # -- access-time work ------------------------------------------------------------
    def map_host(self) -> None:
        """Resolve, map and synchronize for host access (O(1); may be fault-injected).

        Cost: no allocation; no copy; no sync to wait for (numpy memory is synchronous: it
        counts one ``resolutions``, ``maps`` and ``syncs`` step); no dispatch; O(1).
        Raises:
            RuntimeError: ``FaultInjected`` (or the error :meth:`fail_next` armed for
                ``"map"``; tests only).
        """
        c = self.counters
        c.resolutions += 1
        if self._faults:  # (armed only by tests: the common read pays one truth test)
            self._maybe_fail("map")
        c.maps += 1
        c.syncs += 1

    def map_host_write(self) -> None:
        """Map for host *writes* into an input the caller handed over (a donated input of
        a detached submission). O(1); may be fault-injected (``"map-write"``).

        Cost: no allocation; no copy; no sync to wait for (numpy memory is synchronous: it
        counts one ``resolutions``, ``maps`` and ``syncs`` step); no dispatch; O(1).
        Raises:
            RuntimeError: ``FaultInjected`` (or the error :meth:`fail_next` armed for
                ``"map-write"``; tests only).
        """
        c = self.counters
        c.resolutions += 1
        if self._faults:
            self._maybe_fail("map-write")
        c.maps += 1
        c.syncs += 1

    def __repr__(self) -> str:
        return f"HostProvider({self.name!r})"


HOST: Final = HostProvider()
