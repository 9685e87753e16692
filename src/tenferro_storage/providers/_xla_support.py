"""Helpers of the XLA provider (``_xla.py``): the optional jax import, the namespace
lowering rules see, buffer hooks, counters and the per-execution state."""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Sequence
from operator import methodcaller
from typing import Any

import numpy as np

from ..runtime._submission import OutcomeCell
from ._retirement import RetirementRecord


def jax_module() -> Any:
    """``jax`` if it can be imported, else ``None`` (the engine is then not listed). Imports
    jax on first call (seconds); later calls are a dict lookup.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) after the first call (which imports
    jax).
    Raises: nothing."""
    try:
        return importlib.import_module("jax")
    except ImportError:
        return None


def call_x64(jax: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with JAX's 64-bit types on for this call in this thread only.

    tenferro programs keep numpy's types (float64 stays float64), so the engine compiles,
    imports and executes with ``jax_enable_x64`` on, whatever the user configured: the
    switch is JAX's thread-local ``enable_x64`` context, entered only around our own
    compile/put/execute calls and left before returning, so the user's own JAX code
    (other calls, other threads) keeps its setting.  O(1): a flag read when x64 is
    already on, else a context enter/exit (~2 us)."""
    if jax.config.jax_enable_x64:
        return fn(*args)
    with jax.enable_x64(True):
        return fn(*args)


def array_waiter(jax: Any) -> tuple[type, Callable[[Sequence[Any]], Any]]:
    """The type of a jax array and the wait for a sequence of them: jaxlib's batched
    ``block_until_ready`` (one call for all results, what ``jax.block_until_ready`` does
    after walking the tree and testing each leaf in Python), or ``jax.block_until_ready``
    where this jaxlib has no batched wait (then no value is of the returned type, so the
    caller always takes ``jax.block_until_ready``). O(1)."""
    try:
        xc = importlib.import_module("jax._src.lib").xla_client
        batched = xc.batched_block_until_ready
        array_type = importlib.import_module("jax._src.array").ArrayImpl
    except (ImportError, AttributeError):
        return _NoArray, jax.block_until_ready
    return array_type, batched


class _NoArray:
    """No value is of this type (``array_waiter`` without a batched wait)."""


def settle(jax: Any, results: Any) -> None:
    """Wait until the enqueued ``results`` are done (their failure ignored: the caller is
    already failing): XLA then no longer reads the inputs it was given. O(results)."""
    try:
        jax.block_until_ready(results)
    except Exception:  # the execution's own failure: reported by the caller
        pass


class _Namespace:
    """What lowering rules see: ``np`` (``jax.numpy``), ``lax``, ``scipy`` (``jax.scipy``)
    and ``nn`` (``jax.nn``)."""

    __slots__ = ("lax", "nn", "np", "scipy")

    def __init__(self, jax: Any) -> None:
        self.np = importlib.import_module("jax.numpy")
        self.lax = importlib.import_module("jax.lax")
        self.scipy = importlib.import_module("jax.scipy")
        importlib.import_module("jax.scipy.special")
        importlib.import_module("jax.scipy.linalg")
        self.nn = importlib.import_module("jax.nn")


_free: Callable[[Any], None] = methodcaller("delete")
"""Delete an XLA buffer now (``handle.delete()``: idempotent on an already deleted or
donated one); a C-level call, no Python frame per released result."""

_host_view: Callable[[Any], np.ndarray[Any, Any]] = np.asarray
"""The zero-copy host view of a CPU buffer (XLA's read-only view; ``np.asarray`` called
directly, no Python frame per read)."""


class XlaCounters:
    """Per-engine counters: submissions, executions, retirements, zero-copy imports, input
    transfers (copies) and donations that reused their buffer.  Read when idle.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = (
        "donations_reused", "executions", "imports_transferred", "imports_zero_copy",
        "inputs_resident", "rejections", "retirements", "submissions",
    )

    donations_reused: int
    executions: int
    imports_transferred: int
    imports_zero_copy: int
    inputs_resident: int
    rejections: int
    retirements: int
    submissions: int

    def __init__(self) -> None:
        for k in self.__slots__:
            setattr(self, k, 0)

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters as a dict.

        Cost: allocates one dict; no copy of tensor bytes; no sync (unlocked: read it when the
        engine is idle); no dispatch; O(counters).
        Raises: nothing."""
        return {k: getattr(self, k) for k in self.__slots__}


class _Work:
    """One admitted execution until retirement (provider-private)."""

    __slots__ = (
        "cell", "donated_ptrs", "inputs", "lock", "package", "program", "record", "results",
        "scratch", "thread", "where",
    )

    cell: OutcomeCell | None
    donated_ptrs: dict[int, int]
    inputs: list[Any] | None
    package: Any
    program: Any
    record: RetirementRecord | None
    results: Any
    scratch: int
    thread: int
    where: str
    """The provider step under way after admission (``"input preparation"``,
    ``"enqueue"``; ``""``: the executable itself), naming a failure's stage."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


def _ready(work: _Work) -> bool:
    """Whether ``work`` can be retired without blocking: it failed before running, or every
    result buffer is ready (``is_ready()``: a non-blocking readiness query). O(results)."""
    results = work.results
    if results is None or isinstance(results, BaseException):
        return True
    return all(r.is_ready() for r in results if hasattr(r, "is_ready"))


class _ReadyEvent:
    """The handle's completion event: set when the outcome is published.  A waiter that
    finds it unset drives completion itself (retirement, publication) instead of waiting
    for the reaper thread -- at once without a timeout; with one, only once the results
    are ready (polled without blocking), so the wait never outlasts its timeout."""

    __slots__ = ("_done", "_drive", "_ready")

    def __init__(self, drive: Callable[[], None], ready: Callable[[], bool]) -> None:
        self._done = threading.Event()
        self._drive: Callable[[], None] | None = drive
        self._ready = ready

    def is_set(self) -> bool:
        return self._done.is_set()

    def set(self) -> None:
        self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        done, drive = self._done, self._drive
        if done.is_set() or drive is None:
            return done.wait(timeout)
        if timeout is None:
            drive()
            return done.wait()
        deadline = time.monotonic() + timeout
        pause = 1e-5
        while True:
            if self._ready():
                drive()  # ready: retiring does not block (or the reaper is retiring it)
            left = deadline - time.monotonic()
            if done.wait(max(0.0, min(left, pause))) or left <= 0:
                return done.is_set()
            pause = min(pause * 2, 2e-3)
