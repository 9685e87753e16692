"""Engine identity, discovery and the provider interface.

An *engine* is one execution provider registered under an :class:`EngineId` the
caller selects; nothing in the runtime assumes a default or "engine 0".  Where bytes
live (an :class:`AllocationDomainId`) is kept apart from who can touch them (an
:class:`AccessEndpoint`): a simulated asynchronous engine executes on its own
endpoint over its own device domain (memory the host cannot read) and over the host
domain (which the device reaches through its host mapping), the way one owner can be
reached from several access endpoints.
"""

from __future__ import annotations

import abc
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from .._root import DeviceDomain
from ..errors import EngineError
from ._program import CompiledGraph

if TYPE_CHECKING:
    from ._submission import (
        ExecutionHandle,
        ExecutionInputs,
        ScopedExecutionOutcome,
        ScopedReadInputs,
    )


@attrs.frozen(order=True)
class EngineId:
    """The caller-selected name of one engine: a provider kind and an index, e.g.
    ``host:0`` or ``sim-async:3``.  Indices are assigned at registration, per kind;
    an id means nothing once its engine is unregistered.  O(1) value object.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    kind: str
    index: int

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"


@attrs.frozen
class AllocationDomainId:
    """Where bytes live (a memory domain), e.g. ``host``.  Observation-only.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    name: str

    def __str__(self) -> str:
        return self.name


@attrs.frozen
class AccessEndpoint:
    """Who executes and touches bytes (a queue or device endpoint), e.g. ``host-cpu``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    name: str

    def __str__(self) -> str:
        return self.name


@attrs.frozen
class EngineInfo:
    """What discovery reports about one engine.

    ``synchronous`` engines retire all work before a call returns and are the only
    ones that accept scoped read-only execution; ``domains`` are the allocation
    domains the engine's endpoint can access (submission refuses inputs elsewhere).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    id: EngineId
    endpoint: AccessEndpoint
    domains: frozenset[AllocationDomainId]
    synchronous: bool
    description: str


HOST_DOMAIN: Final = AllocationDomainId("host")


class ExecutionProvider(abc.ABC):
    """The interface an engine implements (host, simulated asynchronous, later JAX).

    The runtime validates what it can without a provider (program arity, bindings,
    borrows, domains) and then calls exactly one of the two entry points.  A provider
    must honour the admission boundary: before its first enqueue-capable step it may
    only raise ``SubmitRejected`` with the exact, unchanged inputs; after it, every
    failure is reported through the handle's terminal outcome.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (an interface).
    Raises: nothing."""

    kind: ClassVar[str]
    synchronous: ClassVar[bool]
    retires_scoped: ClassVar[bool] = False
    """An asynchronous engine that accepts scoped read-only calls by retiring that work
    before the call returns (the XLA engine waits for its buffers); synchronous engines
    always do."""

    @abc.abstractmethod
    def endpoint(self, engine: EngineId) -> AccessEndpoint:
        """The access endpoint of this provider registered as ``engine``.

        Cost: (every built-in provider) allocates the endpoint record; no copy; no sync; no
        dispatch; O(1).
        Raises: nothing."""

    @abc.abstractmethod
    def domains(self) -> frozenset[AllocationDomainId]:
        """The allocation domains this provider's endpoint can access.

        Cost: (every built-in provider) allocates a small frozenset; no copy; no sync; no
        dispatch; O(domains).
        Raises: nothing."""

    @property
    def device_domain(self) -> DeviceDomain | None:
        """The device memory this provider owns (where ``runtime.upload`` puts values and
        its outputs live); ``None`` (the default): it works on host memory only. O(1)."""
        return None

    def domain_names(self) -> frozenset[str]:
        """The names of :meth:`domains` (cached on first use). O(1) afterwards.

        Cost: allocates the name set on the first call only; no copy; no sync; no dispatch;
        O(domains) once, O(1) afterwards.
        Raises: nothing."""
        cached: frozenset[str] | None = getattr(self, "_domain_names", None)
        if cached is None:
            cached = frozenset(d.name for d in self.domains())
            self._domain_names = cached
        return cached

    def accepts(self, program: object) -> bool:
        """Whether this engine runs ``program``'s kind (default: :class:`CompiledGraph`
        only; an engine with its own compiler accepts its ``ExecutableProgram``). O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return type(program) is CompiledGraph

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for discovery output.

        Cost: (every built-in provider) allocates the string; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""

    @abc.abstractmethod
    def submit_detached(
        self, engine: EngineId, program: Any, inputs: ExecutionInputs
    ) -> ExecutionHandle:
        """Admit ``inputs`` (already validated by the runtime, ``program`` a kind this
        engine :meth:`accepts`) and return a handle.

        The contract (each provider's override states its own facts): before the admission
        boundary only ``SubmitRejected`` with the exact, unchanged ``inputs``; after it every
        failure is the handle's terminal outcome.

        Cost: allocates the program's fresh outputs when the work runs; no copy of the package
        (it moves in; an engine may record an input ``TRANSFER``); no sync in the contract
        (``ExecutionHandle.wait`` synchronizes; a synchronous engine retires before it
        returns); dispatches the program on this provider; O(bindings + the program's work).
        Raises: SubmitRejected."""

    @abc.abstractmethod
    def execute_scoped(
        self, engine: EngineId, program: Any, inputs: ScopedReadInputs
    ) -> ScopedExecutionOutcome:
        """Run to retirement before returning (synchronous or ``retires_scoped`` providers).

        The work must retire before the return (no borrow of the caller's views is outlived);
        ``runtime.execute_scoped_read_only`` only calls it on a synchronous or ``retires_scoped``
        provider.

        Cost: allocates the program's fresh outputs; no copy of the views (an engine may record
        an input ``TRANSFER``); synchronizes: the work retires before the return; dispatches the
        program on this provider; O(views + the program's work).
        Raises: ScopedSubmitRejected."""


_LOCK: Final = threading.Lock()
_ENGINES: Final[dict[EngineId, ExecutionProvider]] = {}
_INDICES: Final[dict[str, itertools.count[int]]] = {}
# Factories of the always-present engines, not yet made: the providers add theirs at
# import (``tenferro_storage.providers``; the runtime imports no provider) and the first
# discovery or lookup registers them, in the order they were added.
_PENDING_DEFAULTS: Final[
    list[Callable[[], ExecutionProvider | Sequence[ExecutionProvider]]]
] = []


def register_default_engine(
    factory: Callable[[], ExecutionProvider | Sequence[ExecutionProvider]],
) -> None:
    """Have discovery register ``factory()`` as an always-present engine.

    The providers package calls this at import for its built-in engines; the engine is
    made and registered the first time engines are discovered or looked up (after every
    default added before it), so the runtime never imports a provider.  A factory may
    return several providers (one per device) or none (an optional runtime that is not
    installed). O(1).
    """
    with _LOCK:
        _PENDING_DEFAULTS.append(factory)


def _ensure_defaults() -> None:
    if not _PENDING_DEFAULTS:
        return
    with _LOCK:
        pending = tuple(_PENDING_DEFAULTS)
        _PENDING_DEFAULTS.clear()
    for factory in pending:
        made = factory()
        for provider in (made,) if isinstance(made, ExecutionProvider) else made:
            register_engine(provider)


def register_engine(provider: ExecutionProvider) -> EngineId:
    """Register ``provider`` as a new engine and return its id (the next index of its kind).

    A provider object may be registered once.  O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: TypeError, ValueError."""
    if not isinstance(provider, ExecutionProvider):
        raise TypeError(
            f"register_engine: expected an ExecutionProvider, got {type(provider).__name__}"
        )
    with _LOCK:
        if any(p is provider for p in _ENGINES.values()):
            raise ValueError(f"register_engine: {provider!r} is already registered")
        counter = _INDICES.setdefault(provider.kind, itertools.count())
        engine = EngineId(provider.kind, next(counter))
        _ENGINES[engine] = provider
    return engine


def unregister_engine(engine: EngineId) -> None:
    """Remove ``engine`` from discovery; its id is never reused.  Work already admitted
    keeps running to its terminal outcome.  ``EngineError`` if it is not registered.

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: EngineError."""
    with _LOCK:
        if _ENGINES.pop(engine, None) is None:
            raise EngineError(f"unregister_engine: no engine {engine} is registered")


def engines() -> tuple[EngineInfo, ...]:
    """Discover every registered engine, sorted by id.  O(number of engines).

    The host engine and one simulated asynchronous engine are always registered; a
    program should still select the engine it wants by id (or by ``synchronous``,
    ``endpoint`` and ``domains``) rather than by position.

    Cost: no allocation; no copy; no sync; no dispatch; O(number of engines).
    Raises: nothing."""
    _ensure_defaults()
    with _LOCK:
        items = sorted(_ENGINES.items())
    return tuple(
        EngineInfo(e, p.endpoint(e), p.domains(), p.synchronous, p.describe()) for e, p in items
    )


def engine_info(engine: EngineId) -> EngineInfo:
    """Discovery data of one engine; ``EngineError`` if it is not registered. O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: EngineError."""
    provider = lookup(engine)
    if provider is None:
        raise EngineError(f"engine_info: no engine {engine} is registered; see runtime.engines()")
    return EngineInfo(
        engine,
        provider.endpoint(engine),
        provider.domains(),
        provider.synchronous,
        provider.describe(),
    )


def lookup(engine: Any) -> ExecutionProvider | None:
    """The provider registered as ``engine`` (``None`` if none). O(1)."""
    _ensure_defaults()
    if type(engine) is not EngineId:
        return None
    return _ENGINES.get(engine)
