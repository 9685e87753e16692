"""Roots and claims: the one module that creates physical roots.

A :class:`RootResource` is one physical allocation.  Claims (:class:`OwnedSpanClaim`)
own a byte range of a root and keep it alive through a plain reference; the root is
released by its provider exactly once, when the last claim or record that refers to
it is gone (CPython reference counting runs ``__del__`` once).  Safe code may narrow
or split a claim but never widen it.  ``allocate`` and ``adopt`` (host memory) and
``adopt_device`` (memory of a :class:`DeviceDomain`) below are the audited import
boundary: nothing else in the package constructs a root.

Every root carries its allocation domain (``root.domain``: ``"host"`` or a device
domain's name).  A device root's allocation is a :class:`DeviceMemory` handle with no
buffer protocol, and its provider (the domain) refuses host mapping, so no public path
hands out a host array over device bytes.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

import attrs
import numpy as np

from ._dtypes import _BY_NUMPY
from ._frozen import is_frozen, readonly_over
from ._ledger import LEDGER, AllocationReason
from ._linear import Borrow, Lender, NoCopy
from ._provider import HOST, HostProvider, ProviderCounters
from .errors import (
    AliasedOutputError,
    DeviceResidentError,
    DTypeError,
    LayoutError,
    OwnershipError,
    shown,
)

_HOST_COUNTERS: Final = HOST.counters  # every RootResource's provider is the host's
_BUFFERS: Final[dict[int, int]] = {}
"""``id(buffer) -> allocation id`` for the buffer of every live root.

Lets :func:`adopt` (and the per-op ``adopt_output``) refuse, in O(1), an array that is
already some root's memory: a kernel that returned one of its inputs.  An entry lives
exactly as long as its root (added at birth, removed by ``RootResource.__del__``), so an
id here always names a live buffer.
"""


def owning_allocation(array: object) -> int | None:
    """The allocation id of the live root whose buffer is ``array`` or lies in its base chain.

    The chain follows numpy's ``base`` and a memoryview's exporter (``obj``: the read-only
    arrays handed out under shared borrows lie over a read-only memoryview of the root's
    buffer).  ``None`` when ``array`` is not memory of any live root.  O(length of the
    base chain).
    """
    a: object = array
    while a is not None:
        hit = _BUFFERS.get(id(a))
        if hit is not None:
            return hit
        a = a.obj if type(a) is memoryview else getattr(a, "base", None)
    return None


def _repeats(array: np.ndarray[Any, Any]) -> bool:
    """Whether ``array`` repeats an element (a broadcast: stride 0 on an axis longer than
    1). O(rank)."""
    return any(s == 0 and n > 1 for n, s in zip(array.shape, array.strides, strict=True))


def refuse_existing_memory(array: np.ndarray[Any, Any], operation: str) -> None:
    """Raise :class:`AliasedOutputError` if ``array`` is memory some value already holds.

    Two signs, both O(1) on the per-op path: the array (or its base chain) is a live
    root's buffer (what ``kernel.read_array`` hands out is a read-only view of one), or
    it owns its memory but is read-only, or lies over a read-only buffer (nothing fresh
    from a kernel does: what a shared borrow, a program constant or a traced literal hands
    a kernel is such memory, held by someone else).  Any other view is left to
    :func:`adopt`'s plain ``LayoutError``.
    """
    alloc = owning_allocation(array)
    if alloc is not None:
        what = "is" if id(array) in _BUFFERS else "is a view of"
        raise AliasedOutputError(
            operation,
            f"the array {what} the buffer of alloc#{alloc}, which an existing value owns: "
            "the kernel returned one of its inputs (or another value's memory). Adopting it "
            "would make a second owner of those bytes. Return a fresh array, or call "
            "tenferro_storage.kernel.materialize_output() for a recorded MATERIALIZE copy",
            shape=tuple(array.shape),
            dtype=str(array.dtype),
        )
    if not array.flags.writeable and (
        array.base is None
        or (is_frozen(array) and not _repeats(array))  # (a broadcast is new data)
    ):
        raise AliasedOutputError(
            operation,
            "the array is read-only, so it is not a fresh kernel result: the kernel "
            "returned an input, a constant (or a view of one, or another value's memory). "
            "Adopting it would make a second "
            "owner of those bytes. Return a fresh array, or call "
            "tenferro_storage.kernel.materialize_output() for a recorded MATERIALIZE copy",
            shape=tuple(array.shape),
            dtype=str(array.dtype),
        )


@attrs.frozen
class AllocationDiagnostics:
    """Observation-only facts about an allocation (never an authority).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    allocation_id: int
    reason: AllocationReason
    operation: str
    capacity_bytes: int


_STORAGE_DIR: Final = os.path.dirname(os.path.abspath(__file__))
_KERNEL_FILE: Final = os.path.join(_STORAGE_DIR, "kernel.py")
# where a host-array request for device memory passes on its way to the refusal
_REFUSAL_PATH: Final = frozenset(
    os.path.join(_STORAGE_DIR, f) for f in ("_root.py", "_descriptor.py", "providers/_device.py")
)


def _host_operation() -> str:
    """The public operation that asked for a host array of device memory (for messages):
    the first frame outside the refusal path; a ``kernel.read_array`` call is named with
    its caller (``"read_array in <caller>"``).  Walks frames: only on the refusal path."""
    frame: Any = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in _REFUSAL_PATH:
        frame = frame.f_back
    if frame is None:
        return "host read"
    name = str(frame.f_code.co_qualname)
    if frame.f_code.co_filename == _KERNEL_FILE and frame.f_back is not None:
        name = f"{name} in {frame.f_back.f_code.co_qualname}"
    return name


class DeviceMemory(NoCopy):
    """The provider allocation of a device-domain root: an opaque handle, not a buffer.

    It exposes no buffer protocol and no array, so nothing on the host can build a numpy
    array over device bytes (numpy refuses it as a buffer).  Only the device provider
    reaches the bytes (``_backing``, provider-internal).  For the simulated device the
    backing store is a numpy array the host process could address: "device memory" is an
    ownership and visibility boundary, not a different allocator.
    """

    __slots__ = ("_backing", "domain")

    _backing: np.ndarray[Any, Any]
    domain: DeviceDomain

    def __init__(self) -> None:
        raise OwnershipError(
            "DeviceMemory cannot be constructed directly: device roots are created only by "
            "the audited root module (runtime.upload, or a device engine's outputs)"
        )

    @property
    def nbytes(self) -> int:
        """The allocation's capacity in bytes. O(1)."""
        return int(self._backing.nbytes)

    def refuse_host(self, operation: str | None = None, what: str = "read") -> NoReturn:
        """Raise the :class:`~tenferro_storage.errors.DeviceResidentError` of a host access.

        ``operation`` is the public call that asked (``"to_numpy"``, ``"item"``, ...; ``None``:
        found by walking out of the storage package's own frames, only on this refusal
        path), ``what`` the access (``"read"``/``"write"``).  The one place the message is
        written."""
        if operation is None:
            operation = _host_operation()
        raise DeviceResidentError(
            f"{operation}: the value is device-resident (domain {self.domain.name!r}); the "
            f"host cannot {what} device memory. Copy it to the host first with "
            "runtime.download(value) (one recorded TRANSFER), then read the host owner"
        )

    def host_readonly(self) -> np.ndarray[Any, Any]:
        """Refused: the host cannot read this memory (an :class:`ExternalMemory` of a
        host-readable domain gives its zero-copy read-only view instead)."""
        self.refuse_host()

    def __repr__(self) -> str:
        return f"DeviceMemory({self.domain.name}, {self.nbytes} bytes)"


class DeviceDomain(NoCopy):
    """A device allocation domain: the storage-side provider of device-resident roots.

    ``placement`` (= ``name``) is the domain a root reports (``root.domain``) and the one
    an engine lists in its ``domains``; ``counters`` count allocations, releases and the
    descriptor validations of its roots (the same :class:`ProviderCounters` as the host
    provider's).  ``live_bytes``/``live_allocations`` are the device allocations alive now,
    recorded under this domain (their ledger allocation events name it too:
    ``"<operation> @<domain>"``).  Host access is refused: :meth:`map_host` raises
    :class:`~tenferro_storage.errors.DeviceResidentError`.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct.
    Raises: nothing."""

    __slots__ = ("_live", "counters", "lock", "name", "placement")

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name or name == HOST.placement:
            raise ValueError(f"DeviceDomain: a device domain needs a non-host name, got {name!r}")
        self.name = name
        self.placement = name
        self.counters = ProviderCounters()
        # Reentrant: a device root finalized by the cyclic collector while this thread holds
        # the lock (inside adopt_device) leaves the live set through it again.
        self.lock = threading.RLock()
        self._live: dict[int, int] = {}

    @property
    def live_bytes(self) -> int:
        """Bytes of this domain's allocations alive now. O(live allocations)."""
        with self.lock:
            return sum(self._live.values())

    @property
    def live_allocations(self) -> int:
        """How many of this domain's allocations are alive now. O(1)."""
        with self.lock:
            return len(self._live)

    def map_host(self) -> NoReturn:
        """Refused: device memory is not host-visible (counts one resolution first).

        Cost: no allocation; no copy; no sync; no dispatch; O(1): counts one ``resolutions``,
        then refuses.
        Raises: DeviceResidentError (always)."""
        self.counters.resolutions += 1
        raise DeviceResidentError(
            f"the value is device-resident in domain {self.name!r}, which the host cannot "
            "read or write; copy it to the host first with runtime.download(value) (one "
            "recorded TRANSFER)"
        )

    def __repr__(self) -> str:
        return f"DeviceDomain({self.name!r})"


class RootResource(NoCopy):
    """One physical allocation: provider, provider allocation, capacity, diagnostics.

    Held by plain references from claims and descriptor records; released by its
    provider exactly once when the last reference goes.  Holding a reference grants
    neither ownership nor write authority.  ``domain`` names where the bytes live
    (``"host"``, or a device domain such as ``"sim-device:1"``).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    # Five slots, four of them written on the per-op path (``adopt_output_deferred``): the
    # provider of a host root is the class's, the capacity is the allocation's own size.
    __slots__ = ("_allocation", "_claimed", "_operation", "alloc_id", "reason")

    provider: HostProvider | DeviceDomain = HOST  # a device root's is its own slot
    # the whole buffer (host) or the DeviceMemory handle (device): private, never handed out
    _allocation: Any
    alloc_id: int
    reason: AllocationReason
    _operation: str
    # set (True) once the root's one whole-range claim exists: at birth for every root but
    # a deferred adoption's, whose claim ``claim_unclaimed`` mints later, once
    _claimed: bool

    @property
    def capacity_bytes(self) -> int:
        """The allocation's size in bytes. O(1)."""
        return int(self._allocation.nbytes)

    @property
    def diagnostics(self) -> AllocationDiagnostics:
        """Allocation id, reason, creating operation and capacity (for messages and tests)."""
        return AllocationDiagnostics(
            self.alloc_id, self.reason, self._operation, self.capacity_bytes
        )

    @property
    def allocation(self) -> NoReturn:
        """Refused: the root's buffer is private (it spans every claim of the root).

        Holding a root grants no access.  Read values through a borrow
        (``prepare_host()``), write them through an exclusive one (``prepare_host_mut()``).
        """
        raise AttributeError(
            f"RootResource.allocation: the buffer of alloc#{self.alloc_id} is private: it spans "
            "every claim of the root, so handing it out would let one owner write another's "
            "bytes. Read values with prepare_host(), write them with prepare_host_mut() on an "
            "owner or view"
        )

    @property
    def domain(self) -> str:
        """The allocation domain the bytes live in (``"host"`` or a device domain). O(1)."""
        return self.provider.placement

    def span(self, start: int, stop: int) -> str:
        """A printable span identity such as ``alloc#12[0:96)``.

        Cost: no allocation (a short string); no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        return f"alloc#{self.alloc_id}[{start}:{stop})"

    def __init__(self) -> None:
        raise OwnershipError(
            "RootResource cannot be constructed directly: roots are created only by the "
            "audited root module (tenferro_storage.allocate_storage, zeros, from_numpy, ...)"
        )

    def __del__(self) -> None:
        try:
            alloc_id = self.alloc_id
        except AttributeError:  # a refused direct construction: nothing was allocated
            return
        # LEDGER.release, with its common case (no capture active) inlined: a root dies
        # once per op on the AD path.
        _BUFFERS.pop(id(self._allocation), None)
        led = LEDGER
        if led.captures or led.watching:
            led.release(self.reason, self.capacity_bytes, alloc_id)
        else:
            try:
                del led.live[alloc_id]
            except KeyError:  # not live: LEDGER.release records the double release
                led.release(self.reason, self.capacity_bytes, alloc_id)
        _HOST_COUNTERS.releases += 1  # (a device root has its own __del__)

    def __repr__(self) -> str:
        return (
            f"RootResource(alloc#{self.alloc_id}, {self.capacity_bytes} bytes, {self.reason.name})"
        )


class AlignedRootResource(RootResource):
    """A host root over an :func:`aligned_empty` array: its buffer is a view of a private
    over-allocated block, so the block is registered as live memory too (numpy's views of
    the buffer name the block as their base) and leaves the registry with the root."""

    __slots__ = ()

    def __del__(self) -> None:
        try:
            block = self._allocation.base
        except AttributeError:
            return
        _BUFFERS.pop(id(block), None)
        RootResource.__del__(self)


class DeviceRootResource(RootResource):
    """A root whose allocation lives in a :class:`DeviceDomain` (not host-visible).

    Its provider is the domain; its allocation is a :class:`DeviceMemory` handle.  Released
    exactly once like every root, and then also leaves the domain's live set.
    """

    __slots__ = ("provider",)

    def __del__(self) -> None:
        try:
            alloc_id = self.alloc_id
        except AttributeError:  # a refused direct construction: nothing was allocated
            return
        memory: DeviceMemory = self._allocation
        _BUFFERS.pop(id(memory._backing), None)
        domain = memory.domain
        with domain.lock:
            domain._live.pop(alloc_id, None)
        LEDGER.release(self.reason, self.capacity_bytes, alloc_id)
        domain.counters.releases += 1

    def __repr__(self) -> str:
        return (
            f"RootResource(alloc#{self.alloc_id}, {self.capacity_bytes} bytes, "
            f"{self.reason.name}, domain {self.domain})"
        )


def adopt_device(
    domain: DeviceDomain, array: np.ndarray[Any, Any], reason: AllocationReason, operation: str
) -> OwnedStorage:
    """Make a fresh array the device memory of a new root in ``domain``; return its claim.

    For device providers whose memory is a numpy array (the simulated device): the
    array is what the device wrote, and from here on only the provider reaches it.
    Checked like :func:`adopt` (a fresh C-contiguous array that owns its memory and is
    no live root's buffer).  Records one allocation event with ``reason`` and the
    operation ``"<operation> @<domain>"``; the domain's live set records it too. O(1).
    """
    if type(domain) is not DeviceDomain:
        raise TypeError(f"{operation}: expected a DeviceDomain, got {type(domain).__name__}")
    # One flags read and one dict lookup in the common (fresh) case; the checked general
    # path raises the precise error.
    if array.base is not None or not array.flags.carray or id(array) in _BUFFERS:
        refuse_existing_memory(array, operation)
        raise LayoutError(
            operation,
            "device memory must be a fresh C-contiguous array that owns its memory",
            shape=tuple(array.shape),
            dtype=str(array.dtype),
        )
    memory = DeviceMemory.__new__(DeviceMemory)
    memory._backing = array
    memory.domain = domain
    root = DeviceRootResource.__new__(DeviceRootResource)
    nbytes = array.nbytes
    root.provider = domain
    root._allocation = memory
    root._claimed = True
    root.reason = reason
    root._operation = operation
    root.alloc_id = alloc_id = LEDGER.allocate(reason, nbytes, f"{operation} @{domain.name}")
    _BUFFERS[id(array)] = alloc_id
    with domain.lock:
        domain._live[alloc_id] = nbytes
    domain.counters.allocations += 1
    return OwnedStorage._make(root, 0, nbytes)  # type: ignore[return-value]


class ExternalDomain(DeviceDomain):
    """A device domain whose bytes are buffers of an external runtime (an XLA device).

    The runtime's provider supplies the three things the storage kernel cannot know:
    ``host_readable`` (the buffers are host memory, e.g. XLA's CPU device: the host reads
    them in place, never writes them), ``host_view(handle)`` (a zero-copy read-only numpy
    view of one buffer) and ``free(handle)`` (release the buffer now).  Roots of this
    domain are made only by :func:`adopt_external`; releasing one frees its buffer at
    once (deterministically, not when the runtime's garbage collector runs).
    """

    __slots__ = ("free", "host_readable", "host_view")

    def __init__(
        self,
        name: str,
        *,
        host_readable: bool,
        host_view: Callable[[Any], np.ndarray[Any, Any]],
        free: Callable[[Any], None],
    ) -> None:
        super().__init__(name)
        self.host_readable = host_readable
        self.host_view = host_view
        self.free = free

    def map_host(self) -> None:  # type: ignore[override]
        """Host access to a buffer of this domain: read in place when ``host_readable``
        (one counted resolution, map and sync), else refused like any device memory."""
        if not self.host_readable:
            DeviceDomain.map_host(self)
        c = self.counters
        c.resolutions += 1
        c.maps += 1
        c.syncs += 1

    def __repr__(self) -> str:
        return f"ExternalDomain({self.name!r})"


class ExternalMemory(DeviceMemory):
    """The allocation of an :class:`ExternalDomain` root: the external buffer (``_handle``,
    provider-private) and, once the host first reads it, its zero-copy read-only view.

    Host reads get that view (``host_readonly``); every host write is refused
    (``DeviceResidentError``): the buffer belongs to the external runtime, which may
    reuse it (donation) -- a write goes through a recorded ``TRANSFER`` to a host owner."""

    __slots__ = ("_handle", "_host", "_nbytes")

    _handle: Any
    _host: np.ndarray[Any, Any] | None
    _nbytes: int

    @property
    def nbytes(self) -> int:
        """The buffer's size in bytes. O(1)."""
        return self._nbytes

    @property
    def _backing(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        """The host view (provider-internal readers of device memory). O(1) after the first."""
        return self.host_readonly()

    def host_readonly(self) -> np.ndarray[Any, Any]:
        """The zero-copy read-only host view of the buffer (made once, on first read), or
        the ``DeviceResidentError`` of a domain the host cannot read. O(1)."""
        host = self._host
        if host is None:
            domain: ExternalDomain = self.domain  # type: ignore[assignment]
            if not domain.host_readable:
                self.refuse_host()
            host = domain.host_view(self._handle)
            base: Any = host.base  # is_frozen's common case (XLA's view: over a read-only
            if host.flags.writeable or type(base) is not memoryview or not base.readonly:
                if not is_frozen(host):  # memoryview) inline; else a write flag someone
                    host = readonly_over(host, host.shape, host.dtype, 0, host.strides)
            self._host = host  # could set again: frozen here
        return host

    @property
    def host_viewed(self) -> bool:
        """Whether a host view of the buffer was ever made (it may still be alive). O(1)."""
        return self._host is not None

    def refuse_host(self, operation: str | None = None, what: str = "read") -> NoReturn:
        if what == "read":
            DeviceMemory.refuse_host(self, operation, what)
        if operation is None:
            operation = _host_operation()
        raise DeviceResidentError(
            f"{operation}: the value lives in an external buffer of domain "
            f"{self.domain.name!r}; the host reads it in place but never writes it. Copy it "
            "to a host owner with runtime.download(value) (one recorded TRANSFER) to write"
        )

    def __repr__(self) -> str:
        return f"ExternalMemory({self.domain.name}, {self.nbytes} bytes)"


class ExternalRootResource(DeviceRootResource):
    """A root over an external buffer: released once like every root, and its buffer freed
    by its domain right then."""

    __slots__ = ()

    def __del__(self) -> None:
        try:
            alloc_id = self.alloc_id
        except AttributeError:  # a refused direct construction: nothing was allocated
            return
        memory: ExternalMemory = self._allocation
        _BUFFERS.pop(id(memory), None)
        domain: ExternalDomain = memory.domain  # type: ignore[assignment]
        with domain.lock:
            domain._live.pop(alloc_id, None)
        led = LEDGER  # LEDGER.release, its common case (no capture active) inlined
        if led.captures or led.watching:
            led.release(self.reason, memory._nbytes, alloc_id)
        else:
            try:
                del led.live[alloc_id]
            except KeyError:  # not live: LEDGER.release records the double release
                led.release(self.reason, memory._nbytes, alloc_id)
        domain.counters.releases += 1
        handle, memory._handle = memory._handle, None
        if handle is not None:
            domain.free(handle)


def adopt_external(
    domain: ExternalDomain,
    handle: Any,
    nbytes: int,
    reason: AllocationReason,
    operation: str,
    label: str = "",
) -> OwnedStorage:
    """Own a fresh external buffer ``handle`` (``nbytes``) as a new root of ``domain``;
    return its claim.  One allocation event (``label``, by default
    ``"<operation> @<domain>"``: a caller adopting many results formats it once); the
    domain's live set records it.  The caller (the domain's provider) guarantees nothing else owns
    the buffer. O(1)."""
    if type(domain) is not ExternalDomain:
        raise TypeError(f"{operation}: expected an ExternalDomain, got {type(domain).__name__}")
    memory = ExternalMemory.__new__(ExternalMemory)
    memory._handle = handle
    memory._host = None
    memory._nbytes = int(nbytes)
    memory.domain = domain
    root = ExternalRootResource.__new__(ExternalRootResource)
    root.provider = domain
    root._allocation = memory
    root._claimed = True
    root.reason = reason
    root._operation = operation
    root.alloc_id = alloc_id = LEDGER.allocate(
        reason, int(nbytes), label or f"{operation} @{domain.name}"
    )
    _BUFFERS[id(memory)] = alloc_id
    with domain.lock:
        domain._live[alloc_id] = int(nbytes)
    domain.counters.allocations += 1
    return OwnedStorage._make(root, 0, int(nbytes))  # type: ignore[return-value]


def adopt_external_many(
    domain: ExternalDomain,
    handles: Sequence[Any],
    sizes: Sequence[int],
    reason: AllocationReason,
    label: str,
) -> list[OwnedStorage]:
    """:func:`adopt_external` for the fresh results of one execution: the same events (one
    allocation ``label`` per buffer), the domain's lock taken once. O(len(handles))."""
    claims = external_claims(domain, handles, sizes, reason, label)
    record_external(domain, claims)
    return claims


def external_claims(
    domain: ExternalDomain,
    handles: Sequence[Any],
    sizes: Sequence[int],
    reason: AllocationReason,
    label: str,
) -> list[OwnedStorage]:
    """The claims :func:`adopt_external_many` returns, built but not yet recorded: no
    allocation id, no ledger event, not in the domain's live set.  A provider builds them
    while its execution runs and records them (:func:`record_external`) once the buffers
    are proven; an unrecorded claim that is dropped (a failed execution) records nothing
    and frees nothing (its runtime still owns the buffer). O(len(handles))."""
    out: list[OwnedStorage] = []
    put = out.append
    new_memory = ExternalMemory.__new__
    new_root = ExternalRootResource.__new__
    new_claim = OwnedStorage.__new__
    for handle, nbytes in zip(handles, sizes, strict=True):
        memory = new_memory(ExternalMemory)
        memory._handle = handle
        memory._host = None
        memory._nbytes = nbytes
        memory.domain = domain
        root = new_root(ExternalRootResource)
        root.provider = domain
        root._allocation = memory
        root._claimed = True
        root.reason = reason
        root._operation = label
        claim = new_claim(OwnedStorage)  # OwnedStorage._make(root, 0, nbytes), inlined
        claim._moved_by = None
        claim._shared = 0
        claim._exclusive = None
        claim._named = None
        claim._root = root
        claim.start = 0
        claim.stop = nbytes
        put(claim)
    return out


def record_external(domain: ExternalDomain, claims: Sequence[OwnedStorage]) -> None:
    """Record the claims of :func:`external_claims`, in order: one allocation id and one
    allocation event (the root's reason and label) each, the buffer registered, the
    domain's live set updated under its lock taken once.  From here on releasing a claim's
    root records its release and frees its buffer. O(len(claims))."""
    led = LEDGER
    ids = led.alloc_ids
    live = led.live
    buffers = _BUFFERS
    booked: list[tuple[int, int]] = []
    book = booked.append
    if led.captures:
        for claim in claims:
            root: Any = claim._root
            memory = root._allocation
            root.alloc_id = alloc_id = next(ids)
            led.allocate(root.reason, memory._nbytes, root._operation, alloc_id)
            buffers[id(memory)] = alloc_id
            book((alloc_id, memory._nbytes))
    else:  # LEDGER.allocate's common case (no capture), inlined
        for claim in claims:
            root = claim._root
            memory = root._allocation
            root.alloc_id = alloc_id = next(ids)
            live[alloc_id] = nbytes = memory._nbytes
            buffers[id(memory)] = alloc_id
            book((alloc_id, nbytes))
    with domain.lock:
        domain._live.update(booked)
    domain.counters.allocations += len(booked)


def replace_external(root: RootResource, handle: Any) -> Any:
    """Provider-internal (donation): the external buffer of ``root`` becomes ``handle`` (the
    runtime wrote the result into the same bytes); returns the old handle, which no longer
    owns them.  No event: the allocation is the same. O(1)."""
    memory: ExternalMemory = root._allocation
    old, memory._handle = memory._handle, handle
    memory._host = None
    return old


def adopt_fresh_root(
    array: Any,
    reason: AllocationReason = AllocationReason.OPERATION_OUTPUT,
    operation: str = "kernel",
) -> RootResource | None:
    """A new, unclaimed host root over a fresh kernel output, or ``None``.

    ``array`` is adopted when it is a supported numpy array that owns its memory, is
    C-contiguous, aligned and writeable, and is no live root's buffer: one allocation event
    with ``reason``, the buffer registered as live, no copy.  Its one whole-range claim is
    minted later, once (:func:`claim_unclaimed`).  Anything else returns ``None`` with
    nothing recorded: the caller takes ``adopt_output``'s general path, which owns it
    another way or raises the precise refusal.  Every host root is made here; it runs once
    per op. O(1).

    Cost: allocates nothing new (adopts ``array``: one allocation event); no copy; no sync; no
    dispatch; O(1).
    Raises: nothing."""
    if (
        type(array) is not np.ndarray
        or _BY_NUMPY.get(array.dtype) is None
        or array.base is not None
        or not array.flags.carray  # C-contiguous, aligned and writeable: one flags read
    ):
        return None
    led = LEDGER
    alloc_id = next(led.alloc_ids)
    # the live-buffer check and the registration in one dict operation (a refusal leaves an
    # unused id behind: ids are never reused, gaps are harmless)
    if _BUFFERS.setdefault(id(array), alloc_id) != alloc_id:
        return None
    root = RootResource.__new__(RootResource)
    root._allocation = array
    root.reason = reason
    root._operation = operation
    root.alloc_id = alloc_id
    if led.captures:
        led.allocate(reason, array.nbytes, operation, alloc_id)
    else:  # LEDGER.allocate's common case, inlined
        led.live[alloc_id] = array.nbytes
    _HOST_COUNTERS.allocations += 1
    return root


def _new_root(
    provider: HostProvider, buffer: np.ndarray[Any, Any], reason: AllocationReason, operation: str
) -> RootResource:
    """A claimed host root over a fresh buffer of any dtype (``allocate``'s raw bytes too),
    whose caller refused a live root's buffer first (the per-op path uses
    :func:`adopt_fresh_root`). O(1)."""
    assert provider is RootResource.provider  # a host root's provider is the class's
    block = buffer.base
    if block is None:
        root = RootResource.__new__(RootResource)
    else:  # an aligned_empty() array (adopt refused any other view): its block is live too
        _FRESH_ALIGNED.pop(id(buffer), None)
        root = AlignedRootResource.__new__(AlignedRootResource)
    root._allocation = buffer
    root._claimed = True
    root.reason = reason
    root._operation = operation
    root.alloc_id = alloc_id = LEDGER.allocate(reason, buffer.nbytes, operation)
    _BUFFERS[id(buffer)] = alloc_id
    if block is not None:
        _BUFFERS[id(block)] = alloc_id
    _HOST_COUNTERS.allocations += 1
    return root


def allocate(nbytes: int, reason: AllocationReason, operation: str) -> OwnedStorage:
    """Allocate ``nbytes`` of uninitialized host memory; return the full-range claim.

    Records one allocation event with ``reason``.
    """
    root = _new_root(HOST, aligned_empty((nbytes,), np.uint8), reason, operation)
    return OwnedStorage._make(root, 0, nbytes)  # type: ignore[return-value]


ALIGNMENT: Final = 64
"""Bytes: tenferro's own host allocations (``allocate_storage``, ``from_numpy``, the
constructors, ``duplicate``, ``download``) start at this alignment, so an owner crosses
to an engine that imports host memory zero-copy (XLA needs 64) without a copy."""

# id -> array: the aligned arrays made by ``aligned_empty`` and not yet adopted (a weak
# map, so an array that is dropped instead of adopted leaves no stale entry)
_FRESH_ALIGNED: Final[weakref.WeakValueDictionary[int, np.ndarray[Any, Any]]] = (
    weakref.WeakValueDictionary()
)


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    """A new uninitialized C-contiguous array whose data starts at :data:`ALIGNMENT` bytes:
    a view of a private over-allocated block, which :func:`adopt` accepts as fresh (once).
    O(1) plus the allocation."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(n + ALIGNMENT, dtype=np.uint8)
    off = -raw.ctypes.data % ALIGNMENT
    arr: np.ndarray[Any, Any] = raw[off : off + n].view(dt).reshape(shape)
    _FRESH_ALIGNED[id(arr)] = arr
    return arr


def aligned_copy(src: Any, dtype: Any) -> np.ndarray[Any, Any]:
    """A C-contiguous, :data:`ALIGNMENT`-aligned copy of ``src`` in ``dtype`` (numpy's unsafe
    cast, as ``np.array(src, dtype)``) that :func:`adopt` accepts as fresh. O(size)."""
    src = np.asarray(src)
    out = aligned_empty(tuple(src.shape), dtype)
    np.copyto(out, src, casting="unsafe")
    return out


def adopt(array: np.ndarray[Any, Any], reason: AllocationReason, operation: str) -> OwnedStorage:
    """Adopt a *fresh* numpy array that owns its memory as a new root.

    The caller guarantees that nothing else refers to ``array``.  Checked: it is not
    (a view of) a live root's buffer and not read-only (``AliasedOutputError``: a
    kernel that returned one of its inputs is refused rather than aliased), it owns
    its memory and is C-contiguous (``LayoutError``).
    """
    refuse_existing_memory(array, operation)
    if array.base is not None and _FRESH_ALIGNED.get(id(array)) is array:
        pass  # a fresh aligned array (aligned_empty): its base is a private block
    elif array.base is not None or not array.flags.c_contiguous:  # one flags read
        raise LayoutError(
            operation,
            "a kernel output must be a fresh C-contiguous array that owns its memory "
            "(got a view or a non-contiguous array); adopting it would alias another owner",
            shape=tuple(array.shape),
            dtype=str(array.dtype),
        )
    root = _new_root(HOST, array, reason, operation)
    return OwnedStorage._make(root, 0, root.capacity_bytes)  # type: ignore[return-value]


def adopt_fresh_claim(
    array: Any, reason: AllocationReason, operation: str
) -> OwnedStorage | None:
    """:func:`adopt_fresh_root` with its whole-range claim made at once (``adopt_output``'s
    fast path), or ``None`` -- nothing recorded -- when that declines ``array``. O(1)."""
    root = adopt_fresh_root(array, reason, operation)
    if root is None:
        return None
    root._claimed = True
    return _whole_claim(root)


# The checked general path for what the per-op path below declines (a view, a
# non-contiguous or unsupported array, a live root's buffer): ``_tensor.adopt_output``,
# which raises the precise refusal or builds an owner (this module knows no owners).
_general_adopt: Callable[[Any, AllocationReason, str], Any] | None = None


def set_general_adopt(fn: Callable[[Any, AllocationReason, str], Any]) -> None:
    """Register the checked general adoption path (``_tensor`` does, at import)."""
    global _general_adopt
    _general_adopt = fn


def adopt_output_deferred(
    array: Any,
    reason: AllocationReason = AllocationReason.OPERATION_OUTPUT,
    operation: str = "kernel",
) -> Any:
    """``kernel.adopt_output`` with the owner object deferred: the new root of
    :func:`adopt_fresh_root` (whose one claim :func:`claim_unclaimed` mints later, once),
    or -- for what that declines -- ``adopt_output``'s owner or refusal.  The same checks,
    refusals and allocation event as ``adopt_output``. O(1).

    Cost: allocates no new memory (adopts ``array``: one allocation event); no copy; no sync;
    no dispatch; O(1).
    Raises: LayoutError, AliasedOutputError, DTypeError."""
    root = adopt_fresh_root(array, reason, operation)
    if root is None:
        return _general_adopt(array, reason, operation)  # type: ignore[misc]
    return root


def claim_unclaimed(root: RootResource, operation: str) -> OwnedStorage:
    """The whole-range claim of a root made by :func:`adopt_output_deferred`; a second
    call (or a root that was claimed when it was made) raises ``OwnershipError``: one
    root, one owner. O(1)."""
    if getattr(root, "_claimed", False):
        raise OwnershipError(
            f"{operation}: alloc#{root.alloc_id} already has its owner; a root is claimed once"
        )
    root._claimed = True
    return _whole_claim(root)


def _whole_claim(root: RootResource) -> OwnedStorage:
    """The claim over all of ``root`` (OwnedStorage._make, inlined). O(1)."""
    storage = OwnedStorage.__new__(OwnedStorage)
    storage._moved_by = None
    storage._shared = 0
    storage._exclusive = None
    storage._named = None
    storage._root = root
    storage.start = 0
    storage.stop = root.capacity_bytes
    return storage


def _byte_offset(value: Any, operation: str, name: str) -> int:
    """``value`` as a byte offset: a Python or numpy integer, never a bool. O(1)."""
    if type(value) is not int:
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
            raise DTypeError(f"{operation}: argument {name!r} must be an integer byte offset, "
                             f"got {type(value).__name__}")
        return int(value)
    return value


class OwnedSpanClaim(Lender):
    """Unique ownership of ``byte_range`` of one root.  Move-only; never widened.

    ``split(at)`` consumes the claim into two checked disjoint children.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ("_root", "start", "stop")

    _root: RootResource | None
    start: int
    stop: int

    def __init__(self) -> None:
        raise OwnershipError(
            "OwnedSpanClaim cannot be constructed directly: claims come only from a root "
            "(allocate_storage) and are narrowed or split from there, never minted"
        )

    @classmethod
    def _make(cls, root: RootResource, start: int, stop: int) -> OwnedSpanClaim:
        claim = cls.__new__(cls)
        claim._init_lender()
        claim._root = root
        claim.start = start
        claim.stop = stop
        return claim

    @property
    def byte_range(self) -> range:
        """The owned bytes of the root, ``range(start, stop)``."""
        if self._moved_by is not None:
            self._live(f"{type(self).__name__}.byte_range")
        return range(self.start, self.stop)

    @property
    def nbytes(self) -> int:
        return self.stop - self.start

    @property
    def root(self) -> RootResource:
        """The root this claim keeps alive (a reference: no ownership, no write authority)."""
        if self._moved_by is not None:
            self._live(f"{type(self).__name__}.root")
        assert self._root is not None
        return self._root

    @property
    def span(self) -> str:
        """The span identity, e.g. ``alloc#4[0:64)``."""
        return self.root.span(self.start, self.stop)

    def split(self, at: int) -> tuple[OwnedSpanClaim, OwnedSpanClaim]:
        """Consume this claim into ``[start, start+at)`` and ``[start+at, stop)``. O(1).

        ``at`` is a byte count relative to the claim's start, ``0 <= at <= nbytes``: a Python
        or numpy integer (``DTypeError`` for anything else, ``bool`` included), and
        ``LayoutError`` outside the claim; a refusal leaves the claim unchanged.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: DTypeError, LayoutError, BorrowError, UseAfterMoveError.
        """
        return self._split(at, "OwnedSpanClaim.split")

    def narrow(self, start: int, stop: int) -> OwnedSpanClaim:
        """Consume this claim into the sub-range ``[start, stop)`` (relative bytes). O(1).

        ``start``/``stop`` are Python or numpy integers (``DTypeError`` for anything else,
        ``bool`` included) with ``0 <= start <= stop <= nbytes`` (``LayoutError``: claims
        never widen); a refusal leaves the claim unchanged.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: DTypeError, LayoutError, BorrowError, UseAfterMoveError."""
        return self._narrow(start, stop, "OwnedSpanClaim.narrow")

    def _split(self, at: Any, operation: str) -> tuple[OwnedSpanClaim, OwnedSpanClaim]:
        self._live(operation)
        at = _byte_offset(at, operation, "at")
        if not 0 <= at <= self.stop - self.start:
            raise LayoutError(
                operation,
                f"split point {shown(at)} is outside the claim's {self.stop - self.start} bytes",
                span=self.span,
            )
        root = self._root
        assert root is not None
        self._consume(operation)
        self._root = None
        mid = self.start + at
        return (
            OwnedSpanClaim._make(root, self.start, mid),
            OwnedSpanClaim._make(root, mid, self.stop),
        )

    def _narrow(self, start: Any, stop: Any, operation: str) -> OwnedSpanClaim:
        self._live(operation)
        n = self.stop - self.start
        start, stop = _byte_offset(start, operation, "start"), _byte_offset(stop, operation, "stop")
        if not 0 <= start <= stop <= n:
            raise LayoutError(
                operation,
                f"range [{shown(start)}:{shown(stop)}) is not inside the claim's {n} bytes (claims "
                "never widen)",
                span=self.span,
            )
        root = self._root
        assert root is not None
        self._consume(operation)
        self._root = None
        return OwnedSpanClaim._make(root, self.start + start, self.start + stop)

    def __repr__(self) -> str:
        if self._moved_by is not None:
            return f"OwnedSpanClaim(<consumed by {self._moved_by}>)"
        return f"OwnedSpanClaim({self.span})"


class OwnedStorage(OwnedSpanClaim):
    """The owner of one claim: what a tensor or group entry holds.  Move-only.

    An ``OwnedStorage`` *is* its claim, owned as storage (one object on the per-op
    path instead of two): ``claim`` returns itself, ``into_claim()`` consumes it into
    a plain :class:`OwnedSpanClaim`.  ``as_ref()``/``as_mut()`` borrow it
    shared/exclusively (O(1), no reference to the root is taken).

    Cost: no allocation; no copy; no sync; no dispatch; O(1): takes over ``claim``.
    Raises: UseAfterMoveError."""

    __slots__ = ()

    def __init__(self, claim: OwnedSpanClaim) -> None:
        """Consume ``claim`` and own its bytes. O(1)."""
        if type(claim) is not OwnedSpanClaim:
            raise OwnershipError(
                f"OwnedStorage: expected an OwnedSpanClaim to consume, got {type(claim).__name__}"
            )
        root = claim.root
        claim._consume("OwnedStorage")
        claim._root = None
        self._init_lender()
        self._root = root
        self.start = claim.start
        self.stop = claim.stop

    @classmethod
    def _wrap(cls, claim: OwnedSpanClaim) -> OwnedStorage:
        """Own a claim nobody else can reach (fresh from ``allocate``/``adopt``/``split``)."""
        if type(claim) is OwnedStorage:
            return claim
        storage = cls.__new__(cls)
        storage._init_lender()
        storage._root = claim._root
        storage.start = claim.start
        storage.stop = claim.stop
        return storage

    @property
    def claim(self) -> OwnedSpanClaim:
        """This storage's claim (itself). O(1)."""
        self._live("OwnedStorage.claim")
        return self

    def as_ref(self) -> StorageRef:
        """A shared borrow of the owned bytes (O(1)).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, UseAfterMoveError."""
        ref = StorageRef.__new__(StorageRef)
        self._borrow_shared("OwnedStorage.as_ref", "StorageRef")
        ref._lender = self
        ref._exclusive_borrow = False
        ref._ended = None
        return ref

    def as_mut(self) -> StorageMut:
        """An exclusive borrow of the owned bytes (O(1)): the write capability.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, UseAfterMoveError."""
        ref = StorageMut.__new__(StorageMut)
        self._borrow_exclusive("OwnedStorage.as_mut", "StorageMut")
        ref._lender = self
        ref._exclusive_borrow = True
        ref._ended = None
        return ref

    def split(self, at: int) -> tuple[OwnedStorage, OwnedStorage]:
        """Consume into two owners of disjoint sub-ranges ``[0, at)`` and ``[at, nbytes)``.

        ``OwnedSpanClaim.split``'s checks (its errors name ``OwnedStorage.split``).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: DTypeError, LayoutError, BorrowError, UseAfterMoveError."""
        a, b = self._split(at, "OwnedStorage.split")
        return OwnedStorage._wrap(a), OwnedStorage._wrap(b)

    def narrow(self, start: int, stop: int) -> OwnedStorage:
        """Consume into the owner of the sub-range ``[start, stop)`` (never wider).

        ``OwnedSpanClaim.narrow``'s checks (its errors name ``OwnedStorage.narrow``).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: DTypeError, LayoutError, BorrowError, UseAfterMoveError."""
        return OwnedStorage._wrap(self._narrow(start, stop, "OwnedStorage.narrow"))

    def into_claim(self) -> OwnedSpanClaim:
        """Consume the storage and return its claim. O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: BorrowError, UseAfterMoveError."""
        self._live("OwnedStorage.into_claim")
        root = self._root
        assert root is not None
        self._consume("OwnedStorage.into_claim")
        self._root = None
        return OwnedSpanClaim._make(root, self.start, self.stop)

    def __repr__(self) -> str:
        if self._moved_by is not None:
            return f"OwnedStorage(<consumed by {self._moved_by}>)"
        return f"OwnedStorage({self.span})"


class _StorageBorrow(Borrow):
    __slots__ = ("_ended", "_exclusive_borrow", "_lender")

    _lender: OwnedStorage | None

    def _storage(self, operation: str) -> OwnedStorage:
        lender = self._lender
        if lender is None:
            self._dead(operation)
        return lender

    @property
    def byte_range(self) -> range:
        """The borrowed bytes of the root."""
        c = self._storage("byte_range").claim
        return range(c.start, c.stop)

    @property
    def span(self) -> str:
        return self._storage("span").span

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class StorageRef(_StorageBorrow):
    """A shared borrow of an :class:`OwnedStorage` (read capability).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()

    def __enter__(self) -> StorageRef:
        return self


class StorageMut(_StorageBorrow):
    """An exclusive borrow of an :class:`OwnedStorage` (the write capability).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) (made by the API that returns it, never
    constructed directly).
    Raises: nothing."""

    __slots__ = ()

    def __enter__(self) -> StorageMut:
        return self
