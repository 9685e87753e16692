"""Device-prepared access, bindings, events and retirement records (G1 retirement, G5).

The device half of the prepared hierarchy, for providers whose memory a host cannot
read directly:

* ``provider.prepare_read(view)`` consumes a shared ``TensorView`` into a
  :class:`PreparedDeviceRead`; ``provider.prepare_write(view_mut)`` consumes an
  exclusive ``TensorViewMut`` into a :class:`PreparedDeviceWrite`.  The payload keeps the
  view's borrow and its retained checked descriptor, plus the provider context it was
  prepared for; it exposes shape/dtype/layout but no numpy array, slice or iterator.
* :func:`bind_read`/:func:`bind_write` consume a prepared payload into a
  :class:`DeviceRead`/:class:`DeviceWrite`.  They take no provider, descriptor, range or
  key argument and re-check nothing; a failure hands back the exact payload
  (``BindError.value``).
* Enqueue consumes bound accesses into :class:`ProviderRetirementBinding` objects held
  by a :class:`RetirementRecord` together with the :class:`ProviderEvent`, the roots and
  the :class:`ProviderContext`.  Proven completion releases the record exactly once;
  unproven completion moves it into the context's permanent list.

Raw handles here (events, contexts, root references) are lifetime-only: none of them can
produce a ``StorageMut``, an owner or a write binding.
"""

from __future__ import annotations

import threading
from typing import Any, Final

import attrs
import numpy as np

from .._descriptor import CheckedDescriptor
from .._dtypes import DType
from .._layout import CheckedLayout
from .._linear import Borrow, Lender
from .._root import OwnedStorage, RootResource
from .._tensor import TensorView, TensorViewMut
from ..errors import AccessError, BindError


@attrs.define
class DeviceCounters:
    """Work and lifetime counters of one device provider context.

    Per submission the work counters grow by a fixed amount per binding (never per
    element): ``prepares``/``maps`` (preparation), ``binds``, ``enqueues``,
    ``dispatches``.  ``validations`` counts static re-validation and stays 0: device
    preparation, binding and enqueue reuse the descriptor's retained proofs.  Lifetime
    counters prove exactly-once retirement: ``records_created == records_released +
    records_retained`` once the provider is idle.
    """

    prepares: int = 0
    maps: int = 0
    binds: int = 0
    enqueues: int = 0
    dispatches: int = 0
    validations: int = 0
    events_created: int = 0
    events_completed: int = 0
    events_released: int = 0
    records_created: int = 0
    records_released: int = 0
    records_retained: int = 0
    bindings_released: int = 0
    roots_released: int = 0
    retained_bytes: int = 0
    rejections: int = 0

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters as a dict."""
        return attrs.asdict(self)


class ProviderContext:
    """The provider context a root/record keeps alive ("Arc<ProviderContext>").

    Holds the counters, their lock, the fault switches of preparation/binding and the
    provider-private permanent list of records whose completion could not be proven.
    Nothing public takes anything out of that list.
    """

    __slots__ = ("_faults", "_permanent", "counters", "lock", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.counters = DeviceCounters()
        self.lock = threading.Lock()
        self._permanent: list[RetirementRecord] = []
        self._faults: dict[str, int] = {}

    def fail_next(self, operation: str, times: int = 1) -> None:
        """Make the next ``times`` calls of ``"prepare"`` or ``"bind"`` fail (tests)."""
        if operation not in ("prepare", "bind"):
            raise ValueError(f"fail_next: unknown operation {operation!r} (prepare, bind)")
        with self.lock:
            self._faults[operation] = self._faults.get(operation, 0) + times

    def _fault(self, operation: str) -> bool:
        with self.lock:
            n = self._faults.get(operation, 0)
            if n:
                self._faults[operation] = n - 1
                return True
            return False

    def count(self, **deltas: int) -> None:
        """Add to counters under the lock."""
        c = self.counters
        with self.lock:
            for k, v in deltas.items():
                setattr(c, k, getattr(c, k) + v)

    @property
    def retained_records(self) -> int:
        """How many records are retained permanently (unproven completion)."""
        with self.lock:
            return len(self._permanent)

    def _retain(self, record: RetirementRecord) -> None:
        nbytes = sum(r.capacity_bytes for r in record.roots)
        with self.lock:
            self._permanent.append(record)
            self.counters.records_retained += 1
            self.counters.retained_bytes += nbytes

    def __repr__(self) -> str:
        return f"ProviderContext({self.name!r})"


class _DeviceAccess(Borrow):
    """Common payload: the carried borrow, the checked descriptor, storage and context."""

    __slots__ = ("_context", "_desc", "_ended", "_exclusive_borrow", "_lender", "_storage")

    _desc: CheckedDescriptor
    _storage: OwnedStorage
    _context: ProviderContext

    def __init__(self) -> None:
        raise TypeError(
            f"{type(self).__name__} cannot be constructed directly; it is produced from a "
            "view by provider.prepare_read/prepare_write and bind_read/bind_write"
        )

    @classmethod
    def _make(
        cls,
        lender: Lender,
        exclusive: bool,
        desc: CheckedDescriptor,
        storage: OwnedStorage,
        context: ProviderContext,
    ) -> Any:
        p = cls.__new__(cls)
        p._lender = lender
        p._exclusive_borrow = exclusive
        p._ended = None
        p._desc = desc
        p._storage = storage
        p._context = context
        return p

    def _successor(self, cls: type[_DeviceAccess], operation: str) -> Any:
        """Consume this payload into ``cls`` carrying the same borrow (no re-check)."""
        lender = self._transfer(operation)
        return cls._make(lender, self._exclusive_borrow, self._desc, self._storage, self._context)

    def _check(self, operation: str) -> CheckedDescriptor:
        if self._lender is None:
            self._dead(operation)
        return self._desc

    @property
    def shape(self) -> tuple[int, ...]:
        """Extents per axis (retained metadata). O(1)."""
        return self._check("shape").shape

    @property
    def dtype(self) -> DType:
        """The element type. O(1)."""
        return self._check("dtype").dtype

    @property
    def layout(self) -> CheckedLayout:
        """The retained checked layout used for launch/binding. O(1)."""
        return self._check("layout").layout

    @property
    def context(self) -> ProviderContext:
        """The provider context this payload was prepared for (lifetime only)."""
        self._check("context")
        return self._context

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._lender is None else "live"
        d = self._desc
        return (
            f"{type(self).__name__}({d.dtype.name}, shape={d.shape}, {self._context.name}, {state})"
        )


class PreparedDeviceRead(_DeviceAccess):
    """Device read access prepared from a shared view (no host array is exposed)."""

    __slots__ = ()


class PreparedDeviceWrite(_DeviceAccess):
    """Device write access prepared from an exclusive mutable view (injective layout)."""

    __slots__ = ()


class DeviceRead(_DeviceAccess):
    """A bound device read: consumed by enqueue into a retirement binding."""

    __slots__ = ()


class DeviceWrite(_DeviceAccess):
    """A bound device write: consumed by enqueue into a retirement binding."""

    __slots__ = ()


class ProviderRetirementBinding(_DeviceAccess):
    """A binding after enqueue, owned by a retirement record until retirement.

    The provider (only) reads or writes through it while the work runs.
    """

    __slots__ = ()

    def _kernel_array(self) -> np.ndarray[Any, Any]:
        """The provider-side array the device kernel works on (provider-internal)."""
        d = self._check("kernel")
        return d.array() if self._exclusive_borrow else d.readonly()


_PREPARE: Final = "prepare_read"


def prepare_read(context: ProviderContext, view: TensorView[Any, Any]) -> PreparedDeviceRead:
    """Consume a shared ``view`` into a :class:`PreparedDeviceRead` for ``context``.

    Access-time provider work only (one map); the descriptor's retained proofs are not
    re-checked.  On failure raises ``AccessError`` whose ``.value`` is ``view``,
    unchanged and still live.  O(1) in element count.
    """
    if type(view) is not TensorView:
        raise TypeError(
            f"prepare_read: expected a TensorView, got {type(view).__name__} (use as_view())"
        )
    desc = view._d(_PREPARE)
    if context._fault("prepare"):
        raise AccessError(
            f"{_PREPARE}: {context.name} could not map {view._storage.span} (injected fault)",
            view,
        )
    context.count(prepares=1, maps=1)
    lender = view._transfer(_PREPARE)
    return PreparedDeviceRead._make(lender, False, desc, view._storage, context)  # type: ignore[no-any-return]


def prepare_write(context: ProviderContext, view: TensorViewMut[Any, Any]) -> PreparedDeviceWrite:
    """Consume an exclusive mutable ``view`` into a :class:`PreparedDeviceWrite`.

    Only a ``TensorViewMut`` (an exclusive borrow) can yield write access: a shared view,
    a handle, an event or a root reference is refused with ``TypeError``.  On a provider
    failure raises ``AccessError`` carrying ``view`` unchanged.  O(1) in element count.
    """
    if type(view) is not TensorViewMut:
        raise TypeError(
            f"prepare_write: expected an exclusive TensorViewMut, got {type(view).__name__}; "
            "write access starts only from an exclusive borrow (as_view_mut())"
        )
    desc = view._writable("prepare_write")
    if context._fault("prepare"):
        raise AccessError(
            f"prepare_write: {context.name} could not map {view._storage.span} (injected fault)",
            view,
        )
    context.count(prepares=1, maps=1)
    lender = view._transfer("prepare_write")
    return PreparedDeviceWrite._make(lender, True, desc, view._storage, context)  # type: ignore[no-any-return]


def _bind(
    prepared: _DeviceAccess,
    expected: type[_DeviceAccess],
    out: type[_DeviceAccess],
    forced_failure: bool = False,
) -> Any:
    operation = "bind_read" if out is DeviceRead else "bind_write"
    if type(prepared) is not expected:
        raise TypeError(
            f"{operation}: expected a {expected.__name__}, got {type(prepared).__name__}"
        )
    prepared._check(operation)
    context = prepared._context
    if forced_failure or context._fault("bind"):
        raise BindError(
            f"{operation}: {context.name} could not bind {prepared._storage.span} (injected "
            "fault); the prepared payload is returned unchanged",
            prepared,
        )
    context.count(binds=1)
    return prepared._successor(out, operation)


def bind_read(prepared: PreparedDeviceRead) -> DeviceRead:
    """Consume a prepared device read into a bound :class:`DeviceRead`.

    No provider, descriptor, range or key argument; nothing is re-validated.  On
    failure raises ``BindError`` whose ``.value`` is the exact ``prepared`` payload.
    """
    return _bind(prepared, PreparedDeviceRead, DeviceRead)  # type: ignore[no-any-return]


def bind_write(prepared: PreparedDeviceWrite) -> DeviceWrite:
    """Consume a prepared device write into a bound :class:`DeviceWrite` (see bind_read)."""
    return _bind(prepared, PreparedDeviceWrite, DeviceWrite)  # type: ignore[no-any-return]


class ProviderEvent:
    """A completion event recorded on a provider queue (lifetime-only raw handle)."""

    __slots__ = ("_context", "_done", "_released")

    def __init__(self, context: ProviderContext) -> None:
        self._context = context
        self._done = threading.Event()
        self._released = False
        context.count(events_created=1)

    def complete(self) -> None:
        """Signal completion (the provider's queue does this). Idempotent."""
        if not self._done.is_set():
            self._done.set()
            self._context.count(events_completed=1)

    def is_complete(self) -> bool:
        """Query without blocking."""
        return self._done.is_set()

    def wait(self, timeout: float | None) -> bool:
        """Block up to ``timeout`` seconds; ``True`` iff completion is proven."""
        return self._done.wait(timeout)


class RetirementRecord:
    """Provider-private: owns the retirement bindings, event, roots and provider context of
    one admitted submission until completion is proven.

    :meth:`release` (after proven completion) ends every binding's borrow and drops the
    event, root and context references exactly once; a second call raises.  A record whose
    completion cannot be proven is never released: it moves into the context's permanent
    list.
    """

    __slots__ = ("bindings", "context", "event", "extra", "roots", "state")

    def __init__(
        self,
        context: ProviderContext,
        event: ProviderEvent,
        bindings: tuple[ProviderRetirementBinding, ...],
        roots: tuple[RootResource, ...],
    ) -> None:
        self.context: ProviderContext | None = context
        self.event: ProviderEvent | None = event
        self.bindings = bindings
        self.roots = roots
        self.extra: tuple[Any, ...] = ()  # package/outputs kept alive with the record
        self.state = "owned"
        context.count(records_created=1)

    def release(self) -> None:
        """Release bindings, event, roots and context exactly once (completion proven)."""
        if self.state != "owned":
            raise RuntimeError(f"RetirementRecord.release: the record is already {self.state}")
        context = self.context
        assert context is not None and self.event is not None
        for b in self.bindings:
            b.release()
        n_bindings, n_roots = len(self.bindings), len(self.roots)
        self.event._released = True
        self.bindings = ()
        self.roots = ()
        self.event = None
        self.context = None
        self.state = "released"
        context.count(
            records_released=1,
            bindings_released=n_bindings,
            roots_released=n_roots,
            events_released=1,
        )

    def retain_permanently(self, *extra: Any) -> None:
        """Completion unproven: keep everything (and ``extra``) for the context's lifetime."""
        if self.state != "owned":
            raise RuntimeError(f"RetirementRecord.retain_permanently: already {self.state}")
        self.state = "retained"
        self.extra = extra
        assert self.context is not None
        self.context._retain(self)

    def __repr__(self) -> str:
        n_b, n_r = len(self.bindings), len(self.roots)
        return f"RetirementRecord({self.state}, {n_b} bindings, {n_r} roots)"
