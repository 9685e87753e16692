"""Device memory, device-prepared access, bindings, events and retirement records (G1
retirement, G5).

Device memory is not host-visible.  A device-resident owner (an output of a device
engine, or :func:`upload`'s result) lives in a :class:`~tenferro_storage._root.DeviceDomain`;
its descriptor refuses every host array (``DeviceResidentError``) and its provider refuses
host mapping, so ``to_numpy``, ``item``, ``prepare_host``, ``borrow_arrays``,
``kernel.read_array`` and the operators all refuse it.  :func:`download` is the way to
the host and :func:`upload` the way back: each one recorded ``TRANSFER`` copy.

The device half of the prepared hierarchy (the payload classes themselves are in
``tenferro_storage._access``, next to the host variants):

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
  unproven completion moves it into the process-wide permanent list (never freed).

Raw handles here (events, contexts, root references) are lifetime-only: none of them can
produce a ``StorageMut``, an owner or a write binding.
"""

from __future__ import annotations

import threading
from typing import Any, Final, NoReturn

import attrs
import numpy as np

from .. import _descriptor
from .._access import (
    AccessTarget,
    PreparedDeviceRead,
    PreparedDeviceWrite,
    PreparedRead,
    PreparedWrite,
    _DevicePayload,
)
from .._descriptor import CheckedDescriptor
from .._dtypes import _BY_NUMPY, from_numpy_dtype
from .._frozen import readonly_over
from .._ledger import AllocationReason
from .._provider import FaultError, raise_fault
from .._root import (
    DeviceDomain,
    DeviceMemory,
    adopt_device,
)
from .._tensor import Tensor, TensorView, TensorViewMut
from ..errors import AccessError, BindError
from ._retirement import _PERMANENT, _PERMANENT_LOCK, RetirementRecord


@attrs.define
class DeviceCounters:
    """Work and lifetime counters of one device provider context.

    Per submission the work counters grow by a fixed amount per binding (never per
    element): ``prepares``/``maps`` (preparation), ``binds``, ``enqueues``,
    ``dispatches``.  ``validations`` counts static re-validation and stays 0: device
    preparation, binding and enqueue reuse the descriptor's retained proofs.  Lifetime
    counters prove exactly-once retirement: ``records_created == records_released +
    records_retained`` once the provider is idle.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

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
        """A copy of the counters as a dict.

        Cost: allocates one dict; no copy of tensor bytes; no sync (unlocked: read it when the
        provider is idle); no dispatch; O(counters).
        Raises: nothing."""
        return attrs.asdict(self)


_COUNTER_NAMES: Final = frozenset(a.name for a in attrs.fields(DeviceCounters))


def _refuse_count(deltas: dict[str, Any]) -> NoReturn:
    for k, v in deltas.items():
        if k not in _COUNTER_NAMES:
            raise TypeError(f"ProviderContext.count: keyword {k!r} is not a counter (the "
                            f"counters: {', '.join(sorted(_COUNTER_NAMES))})")
        if type(v) is not int:
            raise TypeError(f"ProviderContext.count: keyword {k!r} must be an int delta, got "
                            f"{type(v).__name__}")
    raise AssertionError("unreachable")


class ProviderContext:
    """The provider context a root/record keeps alive ("Arc<ProviderContext>").

    ``domain`` is the device memory the provider owns (``None``: it has none and works
    on host memory only).  Its endpoint reaches roots of that domain and host roots
    (read in place through its host mapping); roots of any other device domain are
    refused at preparation.  Holds the counters, their lock, the fault switches of
    preparation/binding and the provider-private permanent list of records whose
    completion could not be proven.  Nothing public takes anything out of that list.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct.
    Raises: nothing."""

    __slots__ = (
        "_errors", "_faults", "_owned", "_permanent", "counters", "domain", "lock", "name"
    )

    def __init__(self, name: str, domain: DeviceDomain | None = None) -> None:
        self.name = name
        self.domain = domain
        self.counters = DeviceCounters()
        self.lock = threading.Lock()
        self._permanent: list[RetirementRecord] = []
        self._owned: dict[int, RetirementRecord] = {}  # admitted, not yet retired
        self._faults: dict[str, int] = {}
        self._errors: dict[str, FaultError | None] = {}

    def fail_next(
        self, operation: str, times: int = 1, error: FaultError | None = None
    ) -> None:
        """Make the next ``times`` calls of ``"prepare"``, ``"bind"`` or ``"enqueue"`` fail
        (tests).  Preparation and binding raise their typed error (``AccessError``,
        ``BindError``) and enqueue a ``ProviderEnqueueError``, or each raises ``error`` (an
        exception type or instance, any ``BaseException``) when given.

        Cost: no allocation; no copy; no sync (takes the context lock); no dispatch; O(1): arms
        a counter (tests).
        Raises: ValueError (an unknown ``operation``)."""
        if operation not in ("prepare", "bind", "enqueue"):
            raise ValueError(
                f"fail_next: unknown operation {operation!r} (prepare, bind, enqueue)"
            )
        with self.lock:
            self._faults[operation] = self._faults.get(operation, 0) + times
            self._errors[operation] = error

    def _fault(self, operation: str) -> bool:
        """Whether the next call of ``operation`` fails; raises the injected ``error``
        itself when one was given."""
        with self.lock:
            n = self._faults.get(operation, 0)
            if not n:
                return False
            self._faults[operation] = n - 1
            error = self._errors.get(operation)
        if error is not None:
            raise_fault(error, RuntimeError, f"injected {self.name} fault in {operation}")
        return True

    def count(self, **deltas: int) -> None:
        """Add to counters under the lock.

        Cost: no allocation; no copy; no sync (takes the context lock; waits for no work); no
        dispatch; O(len(deltas)).
        Raises:
            TypeError: a keyword that is not a counter, or a delta that is not an int
                (nothing is added)."""
        if not deltas.keys() <= _COUNTER_NAMES or not all(type(v) is int for v in deltas.values()):
            _refuse_count(deltas)
        c = self.counters
        with self.lock:
            for k, v in deltas.items():
                setattr(c, k, getattr(c, k) + v)

    def held_bindings(self) -> int:
        """Retirement bindings whose borrow is live, in records admitted but not yet
        retired or retained: what the worker/reaper holds while work may be in flight.
        Reads each binding's own state (not a counter). O(records x bindings);
        diagnostics and tests.

        Cost: allocates a list of the admitted records; no copy; no sync (takes the context lock
        once; waits for no work); no dispatch; O(records x bindings).
        Raises: nothing."""
        with self.lock:
            records = list(self._owned.values())
        return sum(1 for rec in records for b in rec.bindings if b._lender is not None)

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
        with _PERMANENT_LOCK:
            # The process keeps it, not this context: closing and dropping the provider
            # object must not free memory the device may still be reading or writing.
            _PERMANENT.append(record)

    def __repr__(self) -> str:
        return f"ProviderContext({self.name!r})"


class DeviceRead(_DevicePayload):
    """A bound device read: consumed by enqueue into a retirement binding.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()


class DeviceWrite(_DevicePayload):
    """A bound device write: consumed by enqueue into a retirement binding.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()


class ProviderRetirementBinding(_DevicePayload):
    """A binding after enqueue, owned by a retirement record until retirement.

    The provider (only) reads or writes through it while the work runs.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()

    def _kernel_array(self) -> np.ndarray[Any, Any]:
        """The provider-side array the device kernel works on (provider-internal).

        Device memory is reached through its backing store (the device's own view);
        a host-domain input is read in place through the device's host mapping."""
        d = self._check("kernel")
        if type(d.buffer) is DeviceMemory:  # type: ignore[comparison-overlap]
            return _device_array(d, self._exclusive_borrow)
        return d.array() if self._exclusive_borrow else d.readonly()


_PREPARE: Final = "prepare_read"


def _reachable(
    context: ProviderContext, view: TensorView[Any, Any] | TensorViewMut[Any, Any], operation: str
) -> None:
    """Access-time provider resolution: can ``context``'s endpoint reach ``view``'s root?

    Host roots and roots of the context's own device domain: yes; another device domain:
    ``AccessError`` carrying ``view`` unchanged.  O(1); no layout re-check."""
    root = view._storage._root
    assert root is not None
    provider = root.provider
    if type(provider) is DeviceDomain and provider is not context.domain:
        raise AccessError(
            f"{operation}: {view._storage.span} lives in device domain {provider.name!r}, "
            f"which {context.name} cannot reach; download it to the host (runtime.download) "
            "and upload it to this engine",
            view,
        )


def prepare_read(context: ProviderContext, view: TensorView[Any, Any]) -> PreparedDeviceRead:
    """Consume a shared ``view`` into a :class:`PreparedDeviceRead` for ``context``.

    Access-time provider work only (one map); the descriptor's retained proofs are not
    re-checked.  On failure raises ``AccessError`` whose ``.value`` is ``view``,
    unchanged and still live.  O(1) in element count.

    Cost: no allocation; no copy; no sync; dispatches through ``context`` (one map); O(1) in element
    count.
    Raises: AccessError."""
    if type(view) is not TensorView:
        raise TypeError(
            f"prepare_read: expected a TensorView, got {type(view).__name__} (use as_view())"
        )
    desc = view._d(_PREPARE)
    _reachable(context, view, _PREPARE)
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

    Cost: no allocation; no copy; no sync; dispatches through ``context`` (one map); O(1) in element
    count.
    Raises: AccessError, TypeError."""
    if type(view) is not TensorViewMut:
        raise TypeError(
            f"prepare_write: expected an exclusive TensorViewMut, got {type(view).__name__}; "
            "write access starts only from an exclusive borrow (as_view_mut())"
        )
    desc = view._writable("prepare_write")
    _reachable(context, view, "prepare_write")
    if context._fault("prepare"):
        raise AccessError(
            f"prepare_write: {context.name} could not map {view._storage.span} (injected fault)",
            view,
        )
    context.count(prepares=1, maps=1)
    lender = view._transfer("prepare_write")
    return PreparedDeviceWrite._make(lender, True, desc, view._storage, context)  # type: ignore[no-any-return]


def prepare_access(
    view: TensorView[Any, Any] | TensorViewMut[Any, Any],
    target: AccessTarget,
    context: ProviderContext | None = None,
) -> PreparedRead | PreparedWrite:
    """Consume a checked view into the prepared access for ``target`` (G1's one entry).

    A shared ``TensorView`` yields a ``PreparedRead``, an exclusive ``TensorViewMut`` a
    ``PreparedWrite``.  ``AccessTarget.HOST``: ``prepare_host()``/``prepare_host_mut()`` (a
    host traversal variant; refused for device-resident values).  ``AccessTarget.DEVICE``:
    :func:`prepare_read`/:func:`prepare_write` for ``context`` (required).  Either way only
    access-time provider work happens, and a failure raises ``AccessError`` carrying the
    view unchanged. O(1) in element count.

    Cost: no allocation; no copy; synchronizes at most once (the provider maps the memory);
    dispatches through the view's provider; O(1) in element count.
    Raises: AccessError, TypeError."""
    if type(target) is not AccessTarget:
        raise TypeError(f"prepare_access: expected an AccessTarget, got {type(target).__name__}")
    if target is AccessTarget.HOST:
        if type(view) is TensorViewMut:
            return view.prepare_host_mut()
        if type(view) is TensorView:
            return view.prepare_host()
    else:
        if context is None:
            raise TypeError("prepare_access: a DEVICE target needs the provider context")
        if type(view) is TensorViewMut:
            return prepare_write(context, view)
        if type(view) is TensorView:
            return prepare_read(context, view)
    raise TypeError(
        f"prepare_access: expected a TensorView or TensorViewMut, got {type(view).__name__}"
    )


def _bind(
    prepared: _DevicePayload,
    expected: type[_DevicePayload],
    out: type[_DevicePayload],
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

    Cost: no allocation; no copy; no sync; no dispatch; O(1): nothing is re-validated.
    Raises: BindError."""
    return _bind(prepared, PreparedDeviceRead, DeviceRead)  # type: ignore[no-any-return]


def bind_write(prepared: PreparedDeviceWrite) -> DeviceWrite:
    """Consume a prepared device write into a bound :class:`DeviceWrite` (see bind_read).

    Cost: no allocation; no copy; no sync; no dispatch; O(1): nothing is re-validated.
    Raises: BindError."""
    return _bind(prepared, PreparedDeviceWrite, DeviceWrite)  # type: ignore[no-any-return]


# -- device-resident values ---------------------------------------------------------------------

def device_tensor(
    domain: DeviceDomain, array: Any, reason: AllocationReason, operation: str
) -> Tensor[Any, Any]:
    """Own ``array`` (fresh, written by the device) as a device-resident tensor in ``domain``.

    One allocation event (``"<operation> @<domain>"``), no copy; the whole-array
    descriptor is trivially valid (one validation counted on the domain). O(1).
    Provider-internal: the simulated device's kernels write numpy arrays.
    """
    if type(array) is not np.ndarray:
        array = np.asarray(array)  # a numpy scalar from a rank-0 kernel: a fresh 0-d array
    dt = _BY_NUMPY.get(array.dtype) or from_numpy_dtype(array.dtype, operation)
    storage = adopt_device(domain, array, reason, operation)
    root = storage._root
    assert root is not None
    # the whole-root descriptor, with no host array cached: every host array it or a view
    # derived from it would build is refused (its buffer is the root's DeviceMemory)
    d = _descriptor.fresh(dt, array, root, count=False)
    d._array = None
    domain.counters.validations += 1
    t: Tensor[Any, Any] = Tensor.__new__(Tensor)
    t._init_lender()
    t._storage = storage
    t._desc = d
    return t


class DeviceAdopter:
    """For ``runtime.run_program``: own each kernel result as device memory of ``domain``
    and hand the interpreter the device's own arrays (provider-internal)."""

    __slots__ = ("domain",)

    def __init__(self, domain: DeviceDomain) -> None:
        self.domain = domain

    def adopt(
        self, array: Any, reason: AllocationReason, operation: str
    ) -> tuple[Tensor[Any, Any], np.ndarray[Any, Any]]:
        """A device-resident owner of ``array`` and its read-only device view. O(1)."""
        t = device_tensor(self.domain, array, reason, operation)
        storage = t._storage
        assert storage is not None and storage._root is not None
        backing = storage._root._allocation._backing  # the whole fresh C-contiguous result
        return t, readonly_over(backing, backing.shape, backing.dtype)

    def writable(self, owner: Tensor[Any, Any]) -> np.ndarray[Any, Any]:
        """The writable device array of an owner this engine made. O(rank)."""
        return _device_array(owner._meta("run_program"), True)

    def readable(self, owner: Tensor[Any, Any]) -> np.ndarray[Any, Any]:
        """The read-only device array of an owner this engine made. O(rank)."""
        return _device_array(owner._meta("run_program"), False)


def _device_array(desc: CheckedDescriptor, writable: bool) -> np.ndarray[Any, Any]:
    """Provider-internal: the array over exactly ``desc``'s layout in device memory.

    The same arithmetic as ``CheckedDescriptor.array`` (already checked at construction),
    over the backing store of the root's :class:`DeviceMemory`. O(rank)."""
    memory: DeviceMemory = desc.buffer  # type: ignore[assignment]
    offset, strides = desc._geometry()
    if not writable:  # over a read-only buffer: a kernel cannot make it writable
        return readonly_over(memory._backing, desc.shape, desc.dtype.numpy, offset, strides)
    return np.ndarray(
        desc.shape, dtype=desc.dtype.numpy, buffer=memory._backing, offset=offset,
        strides=strides,
    )
