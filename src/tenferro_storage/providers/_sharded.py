"""Sharded values: one logical value split over a mesh of XLA engines, with one owner.

A :class:`Mesh` names axes over JAX devices exactly as ``jax.sharding.Mesh`` does (it
wraps one); every device this process addresses is an XLA engine of its own
(:class:`~tenferro_storage.providers.XlaProvider`, domain ``xla-<platform>:<id>``).
Sharding specs are JAX's own ``jax.sharding.PartitionSpec`` (a tuple or ``None`` is
accepted as shorthand): one entry per leading dimension, each ``None`` (not split), a
mesh axis name, or a tuple of axis names; axes a spec does not name replicate.

:class:`ShardedTensor` is the one owner of such a value: it owns one ``Tensor`` per
shard this process addresses, each an allocation of its own device's domain (a
replicated dimension gives every device its own replica, so one allocation per device).
Nothing reads the value on the host implicitly: :meth:`ShardedTensor.gather` is the
explicit host read (one recorded ``TRANSFER`` per distinct shard into one host owner);
:meth:`ShardedTensor.reshard` is the explicit, recorded copy to another layout.  The
XLA partitioner inserts every collective of a sharded program; nothing here moves bytes
between devices itself.

Several processes (``_distributed.py``): a mesh spans every process's devices, and each
process owns (and its ledger records) only the shards it addresses.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from .._dtypes import _BY_NUMPY
from .._ledger import LEDGER, AllocationReason, CopyReason
from .._root import aligned_empty
from .._tensor import Tensor, TensorView, TensorViewMut
from ..errors import DeviceResidentError, ShardingError, shown
from ..runtime._engine import EngineId, engines, lookup
from ._xla import XlaProvider
from ._xla_support import jax_module

_LOCK: Final = threading.Lock()
_COPIERS: dict[Any, Any] = {}  # (shape, dtype, from, to) -> compiled copy program


def _jax(operation: str) -> Any:
    jax = jax_module()
    if jax is None:
        raise ShardingError(f"{operation}: sharded values need jax (pip install 'tenferro[xla]')")
    return jax


def _providers() -> dict[Any, tuple[EngineId, XlaProvider]]:
    """Every registered XLA engine by its JAX device. O(engines)."""
    out: dict[Any, tuple[EngineId, XlaProvider]] = {}
    for info in engines():
        p = lookup(info.id)
        if isinstance(p, XlaProvider):
            out[p.device] = (info.id, p)
    return out


class Mesh:
    """Named axes over JAX devices, built as a ``jax.sharding.Mesh`` is:
    ``Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "model"))``.  Each device
    this process addresses is one XLA engine (``engines``); the engines are discovered
    (jax starts) on first use.

    Cost: construction makes no allocation; no copy; no sync; no dispatch; O(devices).
    Raises: ShardingError (jax is missing; bad ``devices`` or ``axis_names``)."""

    __slots__ = ("_domains", "_hash", "_local_devices", "_providers", "axis_names", "jax_mesh")

    def __init__(self, devices: Any, axis_names: str | Sequence[str]) -> None:
        jax = _jax("Mesh")
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ShardingError(
                f"Mesh: argument 'axis_names' must be non-empty strings, got {shown(axis_names)}"
            )
        if len(set(names)) != len(names):
            raise ShardingError(f"Mesh: argument 'axis_names' repeats a name: {names!r}")
        grid = np.empty(np.shape(np.asarray(devices, dtype=object)), dtype=object)
        grid[...] = np.asarray(devices, dtype=object)
        if grid.ndim != len(names):
            raise ShardingError(
                f"Mesh: argument 'devices' has {grid.ndim} dimension(s) but {len(names)} axis "
                f"name(s) {names!r} were given; one name per dimension"
            )
        flat = list(grid.flat)
        if not flat or not all(isinstance(d, jax.Device) for d in flat):
            raise ShardingError("Mesh: argument 'devices' must hold jax devices (jax.devices())")
        if len({id(d) for d in flat}) != len(flat):
            raise ShardingError("Mesh: argument 'devices' names a device twice")
        self.jax_mesh = jax.sharding.Mesh(grid, names)
        self.axis_names: tuple[str, ...] = names
        self._providers: dict[Any, tuple[EngineId, XlaProvider]] | None = None
        self._local_devices: tuple[Any, ...] | None = None
        self._domains: tuple[str, ...] | None = None
        self._hash = hash(self.jax_mesh)

    @classmethod
    def from_jax(cls, mesh: Any) -> Mesh:
        """The mesh of a ``jax.sharding.Mesh`` (same devices, same axis names). O(devices).

        Cost: no allocation; no copy; no sync; no dispatch; O(devices).
        Raises: ShardingError (as the constructor)."""
        return cls(mesh.devices, tuple(mesh.axis_names))

    @property
    def shape(self) -> dict[str, int]:
        """Axis name -> number of devices along it. O(axes)."""
        return dict(zip(self.axis_names, self.jax_mesh.devices.shape, strict=True))

    @property
    def size(self) -> int:
        """The number of devices of the mesh (every process's). O(1)."""
        return int(self.jax_mesh.devices.size)

    @property
    def engines(self) -> tuple[EngineId, ...]:
        """The XLA engines of the devices this process addresses, in mesh order. O(devices)."""
        local = self._local()
        return tuple(local[d][0] for d in self.local_devices)

    @property
    def local_devices(self) -> tuple[Any, ...]:
        """The mesh's devices this process addresses, in mesh order. O(devices)."""
        if self._local_devices is None:
            local = self._local()
            self._local_devices = tuple(d for d in self.jax_mesh.devices.flat if d in local)
        return self._local_devices

    @property
    def domains(self) -> tuple[str, ...]:
        """The allocation domains of :attr:`local_devices`, in mesh order. O(devices)."""
        if self._domains is None:
            local = self._local()
            self._domains = tuple(local[d][1].domain.name for d in self.local_devices)
        return self._domains

    def _local(self) -> dict[Any, tuple[EngineId, XlaProvider]]:
        if self._providers is None:
            self._providers = _providers()
        return self._providers

    def _provider(self, device: Any, operation: str) -> tuple[EngineId, XlaProvider]:
        got = self._local().get(device)
        if got is None:
            raise ShardingError(
                f"{operation}: device {device} of the mesh is not an engine of this process "
                "(another process addresses it)"
            )
        return got

    def spec(self, spec: Any, ndim: int, operation: str) -> Any:
        """``spec`` as a ``PartitionSpec`` checked against this mesh for a value of ``ndim``
        dimensions: ``None`` replicates; a tuple becomes the spec of its entries. O(ndim).

        Cost: allocates the ``PartitionSpec`` when ``spec`` is ``None`` or a tuple; no copy; no
        sync; no dispatch; O(ndim).
        Raises: ShardingError (jax is missing; a spec that is not one or does not fit)."""
        jax = _jax(operation)
        ps = jax.sharding.PartitionSpec
        if spec is None:
            spec = ps()
        elif isinstance(spec, tuple | list) and not isinstance(spec, ps):
            spec = ps(*spec)
        if not isinstance(spec, ps):
            raise ShardingError(
                f"{operation}: a sharding spec must be a jax.sharding.PartitionSpec, a tuple of "
                f"axis names or None, got {shown(spec)}"
            )
        if len(spec) > ndim:
            raise ShardingError(
                f"{operation}: the spec {spec} has {len(spec)} entries for a value of "
                f"{ndim} dimension(s)"
            )
        used: list[str] = []
        for entry in spec:
            for axis in (() if entry is None else (entry,) if isinstance(entry, str)
                         else tuple(entry)):
                if axis not in self.axis_names:
                    raise ShardingError(
                        f"{operation}: the spec {spec} names axis {axis!r}; the mesh has "
                        f"{self.axis_names!r}"
                    )
                if axis in used:
                    raise ShardingError(f"{operation}: the spec {spec} uses axis {axis!r} twice")
                used.append(axis)
        return spec

    def sharding(self, spec: Any, shape: tuple[int, ...], operation: str) -> Any:
        """The ``NamedSharding`` of ``spec`` on this mesh for a value of ``shape``, after
        checking every split dimension divides evenly. O(ndim).

        Cost: allocates the ``NamedSharding`` (no device memory); no copy; no sync; no dispatch;
        O(ndim).
        Raises: ShardingError (as :meth:`spec`; a split dimension that does not divide evenly)."""
        jax = _jax(operation)
        spec = self.spec(spec, len(shape), operation)
        sizes = self.shape
        for dim, entry in enumerate(spec):
            if entry is None:
                continue
            axes = (entry,) if isinstance(entry, str) else tuple(entry)
            parts = int(np.prod([sizes[a] for a in axes]))
            if shape[dim] % parts:
                raise ShardingError(
                    f"{operation}: dimension {dim} of shape {shape} (size {shape[dim]}) does "
                    f"not split evenly over mesh axes {axes!r} ({parts} devices)"
                )
        return jax.sharding.NamedSharding(self.jax_mesh, spec)

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Mesh) and bool(self.jax_mesh == other.jax_mesh))

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        axes = ", ".join(f"{k}={v}" for k, v in self.shape.items())
        return f"Mesh({axes}; {self.size} devices)"


class ShardedTensor:
    """The one owner of a value split over a :class:`Mesh` (see the module docstring).

    Owns one ``Tensor`` per addressable shard, each one allocation in its device's domain;
    ``del``/:meth:`release` frees them all.  No implicit host read: ``np.asarray`` and
    ``to_numpy`` are refused; :meth:`gather` is the explicit one.  Made by :func:`shard`
    (from the host), by a sharded ``tenferro_ad.jit`` (results) and by :meth:`reshard`.

    Cost: it holds one allocation per addressable shard, made by whoever creates it (the
    constructor itself is refused); its metadata properties make no allocation, no copy,
    no sync and no dispatch, O(1) or O(shards); :meth:`gather` transfers to the host and
    :meth:`reshard` copies (one XLA program, which dispatches and synchronizes).

    Raises:
        TypeError: ``ShardedTensor(...)`` called directly (use :func:`shard`).
        ShardingError: a method or shard property used after :meth:`release`.
        DeviceResidentError: ``np.asarray``/``to_numpy`` (an implicit host read).
    """

    __slots__ = ("__weakref__", "_array", "_devices", "_dtype", "_indices", "_shape", "_shards",
                 "mesh", "sharding", "spec")

    mesh: Mesh
    sharding: Any
    spec: Any
    _shape: tuple[int, ...]
    _dtype: np.dtype[Any]
    _shards: list[Tensor[Any, Any]] | None
    _indices: list[Any]
    _devices: list[Any]
    _array: Any

    def __init__(self) -> None:
        raise TypeError("ShardedTensor: make one with sharding.shard(value, mesh, spec)")

    @classmethod
    def _make(cls, mesh: Mesh, sharding: Any, shape: tuple[int, ...], dtype: np.dtype[Any],
              shards: list[Tensor[Any, Any]], indices: list[Any],
              devices: list[Any]) -> ShardedTensor:
        self = object.__new__(cls)
        self.mesh = mesh
        self.sharding = sharding
        self.spec = sharding.spec
        self._shape = shape
        self._dtype = dtype
        self._shards = shards
        self._indices = indices
        self._devices = devices
        self._array = None
        return self

    # -- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The logical (global) shape. O(1)."""
        return self._shape

    @property
    def ndim(self) -> int:
        """The number of dimensions. O(1)."""
        return len(self._shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of every shard. O(1)."""
        return self._dtype

    @property
    def nbytes(self) -> int:
        """The logical value's bytes (one replica). O(ndim)."""
        return int(np.prod(self._shape, dtype=np.int64)) * self._dtype.itemsize

    @property
    def is_live(self) -> bool:
        """Whether the shards are still owned (not released or moved). O(1)."""
        return self._shards is not None

    def _live(self, operation: str) -> list[Tensor[Any, Any]]:
        if self._shards is None:
            raise ShardingError(f"{operation}: this ShardedTensor was released")
        return self._shards

    @property
    def shard_domains(self) -> tuple[str, ...]:
        """The allocation domain of every addressable shard, in shard order. O(shards)."""
        return tuple(_root(t).domain for t in self._live("shard_domains"))

    @property
    def shard_indices(self) -> tuple[tuple[slice, ...], ...]:
        """Where each addressable shard sits in the logical value. O(shards)."""
        self._live("shard_indices")
        return tuple(self._indices)

    @property
    def shard_devices(self) -> tuple[Any, ...]:
        """The JAX device of every addressable shard, in shard order. O(shards)."""
        self._live("shard_devices")
        return tuple(self._devices)

    def replace_shard(self, i: int, owner: Tensor[Any, Any]) -> None:
        """Move ``owner`` -- an owning ``Tensor`` of one whole buffer with shard ``i``'s
        shape and dtype, in the same domain -- in as shard ``i``; the old shard is released.
        For updates computed elsewhere (an optimizer step).  ``owner`` is consumed (later use
        raises ``UseAfterMoveError``); a refusal consumes and changes nothing.

        Cost: no allocation; no copy; no sync; no dispatch; O(1): the old shard is released
        (its buffer freed) when this held its last reference.

        Raises:
            ShardingError: the value was released; ``i`` is not an integer; ``owner`` is not
                a Tensor, or differs in domain, shape or dtype, or is not a whole buffer.
            IndexError: ``i`` is not a shard index.
            BorrowError: ``owner`` is borrowed.
            UseAfterMoveError: ``owner`` was consumed.
        """
        shards = self._live("replace_shard")
        if type(i) is bool or not isinstance(i, int | np.integer):
            raise ShardingError("ShardedTensor.replace_shard: argument 'i' must be an int, "
                                f"got {type(i).__name__}")
        if not -len(shards) <= i < len(shards):
            raise IndexError(f"ShardedTensor.replace_shard: argument 'i' = {i} is not one of "
                             f"the {len(shards)} shard indices")
        if type(owner) is not Tensor:
            raise ShardingError("ShardedTensor.replace_shard: argument 'owner' must be an "
                                f"owning Tensor (it is moved in), got {type(owner).__name__}")
        old = shards[i]
        root = _root(old)
        desc = owner._meta("ShardedTensor.replace_shard")  # UseAfterMoveError when consumed
        new_root = owner._storage._root if owner._storage is not None else None
        handle = getattr(getattr(new_root, "_allocation", None), "_handle", None)
        if new_root is None or new_root.domain != root.domain or tuple(desc.shape) != \
                tuple(old.shape) or owner.dtype != old.dtype or handle is None or \
                tuple(handle.shape) != tuple(desc.shape):
            raise ShardingError(
                f"ShardedTensor.replace_shard: argument 'owner' must be a whole buffer of "
                f"shard {i}'s {old.dtype.name}{list(old.shape)} in {root.domain}"
            )
        shards[i] = owner.take("ShardedTensor.replace_shard")  # BorrowError before any change
        self._array = None

    def shard_view(self, i: int) -> TensorView[Any, Any]:
        """A shared borrow of shard ``i`` (release it before the value goes). O(1).

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: ShardingError, IndexError, BorrowError."""
        return self._live("shard_view")[i].as_view()

    # -- the explicit reads and copies -----------------------------------------------------
    def gather(self) -> Tensor[Any, Any]:
        """The value as one new host owner: one ``TRANSFER_DESTINATION`` allocation and one
        recorded ``TRANSFER`` per distinct shard (a replica is read once).  Refused
        (``ShardingError``) when this process does not address every part of the value,
        and inside ``ledger.forbid_copies()``. O(size).

        Cost: allocates one host owner; transfers each distinct shard once (a recorded
        ``TRANSFER``; a shard the host cannot read in place also records a ``MATERIALIZE`` copy
        for its host staging array); synchronizes: reading a shard waits for its buffer; no
        dispatch (no program runs); O(size).  On the CPU each shard keeps a host view of its
        buffer, so XLA no longer reuses that buffer for a donation.
        Raises: ShardingError, CopyForbiddenError."""
        shards = self._live("gather")
        distinct = {_key(i): i for i in self._indices}
        cells = sum(int(np.prod([len(range(*s.indices(n))) for s, n in zip(i, self._shape,
                                                                           strict=True)]))
                    for i in distinct.values())
        if cells != int(np.prod(self._shape, dtype=np.int64)):
            raise ShardingError(
                f"gather: this process addresses {len(distinct)} distinct shard(s) of a value "
                f"sharded {self.spec} over {self.mesh!r}; the others live in other processes "
                "(reshard it to be replicated first)"
            )
        LEDGER.check_copy_allowed("gather (devices -> host)")
        out = aligned_empty(self._shape, self._dtype)
        done: set[Any] = set()
        for t, index in zip(shards, self._indices, strict=True):
            if _key(index) in done:
                continue
            done.add(_key(index))
            root = _root(t)
            try:
                src = t._desc.readonly()  # a CPU buffer is read in place
                out[index] = src
            except DeviceResidentError:
                src = np.asarray(root._allocation._handle)
                out[index] = src
                LEDGER.copy(CopyReason.MATERIALIZE, src.nbytes, f"gather place {root.domain}")
            LEDGER.copy(CopyReason.TRANSFER, src.nbytes, f"gather {root.domain} -> host")
        host: Tensor[Any, Any] = Tensor._adopt(
            out, _BY_NUMPY[self._dtype], AllocationReason.TRANSFER_DESTINATION, "gather")
        return host

    def reshard(self, spec: Any) -> ShardedTensor:
        """A new owner of the same value laid out by ``spec`` on the same mesh: one XLA copy
        program; one ``EXPLICIT_DUPLICATE_DESTINATION`` allocation and one
        ``EXPLICIT_DUPLICATE`` copy per new shard.  ``self`` is unchanged.  First call per
        (shape, dtype, layouts): one compilation. O(size).

        Cost: allocates one buffer per new shard; copies each new shard once (recorded
        ``EXPLICIT_DUPLICATE``); synchronizes: waits for the copy (``block_until_ready``);
        dispatches one XLA copy program over the mesh itself (not through ``runtime.submit``;
        compiled once per key and cached for the process); O(size).
        Raises: ShardingError, CopyForbiddenError."""
        self._live("reshard")
        target = self.mesh.sharding(spec, self._shape, "reshard")
        LEDGER.check_copy_allowed("reshard")
        key = (self._shape, self._dtype.str, self.sharding, target)
        with _LOCK:
            program = _COPIERS.get(key)
        if program is None:
            jax = _jax("reshard")
            with jax.enable_x64(True):
                spec_in = jax.ShapeDtypeStruct(self._shape, self._dtype, sharding=self.sharding)
                program = jax.jit(jax.numpy.copy, out_shardings=target).lower(spec_in).compile()
            with _LOCK:
                _COPIERS[key] = program
        out = program(self._global("reshard"))
        out.block_until_ready()
        made = adopt_array(self.mesh, out, AllocationReason.EXPLICIT_DUPLICATE_DESTINATION,
                           "reshard")
        for t in made._live("reshard"):
            root = _root(t)
            LEDGER.copy(CopyReason.EXPLICIT_DUPLICATE, t.nbytes,
                        f"reshard {self.spec} -> {made.spec} @{root.domain}")
        return made

    def release(self) -> None:
        """Free every shard now (one release event each); idempotent. O(shards).

        Cost: no allocation; no copy; no sync (a shard's XLA buffer is deleted when its owner
        goes); no dispatch; O(shards).
        Raises: nothing."""
        self._array = None
        shards, self._shards = self._shards, None
        if shards is not None:
            shards.clear()

    # -- engine side -----------------------------------------------------------------------
    def _global(self, operation: str) -> Any:
        """The shards as one ``jax.Array`` over the mesh (no copy: the same buffers). Kept
        until release. O(shards) once."""
        shards = self._live(operation)
        if self._array is None:
            jax = _jax(operation)
            handles = [_root(t)._allocation._handle for t in shards]
            self._array = jax.make_array_from_single_device_arrays(
                self._shape, self.sharding, handles)
        return self._array

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise DeviceResidentError(
            "ShardedTensor.__array__: a sharded value is never read on the host implicitly; "
            "call .gather() (one recorded TRANSFER per shard) for a host owner"
        )

    def to_numpy(self) -> Any:
        """Refused: use :meth:`gather` (explicit) then ``to_numpy()`` on its result.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: DeviceResidentError (always)."""
        return self.__array__()

    def __repr__(self) -> str:
        if self._shards is None:
            return "ShardedTensor(<released>)"
        return (f"ShardedTensor({self._dtype.name}{list(self._shape)}, spec={self.spec}, "
                f"{len(self._shards)} addressable shard(s) over {self.mesh!r})")


def _root(t: Tensor[Any, Any]) -> Any:
    """The root of a shard owner (an ``ExternalRootResource`` of its device). O(1)."""
    storage = t._storage
    assert storage is not None and storage._root is not None
    return storage._root


def _key(index: tuple[slice, ...]) -> tuple[tuple[Any, Any, Any], ...]:
    return tuple((s.start, s.stop, s.step) for s in index)


def adopt_array(mesh: Mesh, array: Any, reason: AllocationReason,
                operation: str) -> ShardedTensor:
    """Provider-internal: own the addressable shards of a fresh ``jax.Array`` that nothing
    else owns (a program's result) -- one allocation per shard in its device's domain, no
    copy.  Its sharding must be a ``NamedSharding`` on ``mesh``. O(shards)."""
    sharding = array.sharding
    got = getattr(sharding, "mesh", None)
    if got is not mesh.jax_mesh and got != mesh.jax_mesh:
        raise ShardingError(f"{operation}: the result is not laid out on {mesh!r}")
    shards: list[Tensor[Any, Any]] = []
    indices: list[Any] = []
    devices: list[Any] = []
    for s in array.addressable_shards:
        _, provider = mesh._provider(s.device, operation)
        shards.append(provider._own(s.data, reason, operation))
        indices.append(tuple(s.index))
        devices.append(s.device)
    st = ShardedTensor._make(mesh, sharding, tuple(array.shape), np.dtype(array.dtype), shards,
                             indices, devices)
    st._array = array
    return st


def shard(value: Any, mesh: Mesh, spec: Any = None) -> ShardedTensor:
    """Upload a host value (a numpy array, a host ``Tensor`` or a view) split by ``spec``
    over ``mesh``: one ``TRANSFER_DESTINATION`` allocation and one recorded ``TRANSFER``
    per addressable shard (every device of a replicated axis gets its own copy).  The
    value is only read.  Refused inside ``ledger.forbid_copies()``.

    Cost: allocates one device buffer per addressable shard; transfers each shard from the
    host (one recorded ``TRANSFER`` each); no sync (``jax.device_put`` is asynchronous);
    no dispatch (no engine program runs; each shard's engine only owns its buffer);
    O(size) per replica.

    Raises:
        ShardingError: jax is missing; ``value`` is already sharded or not a tensor dtype;
            ``mesh`` is not a :class:`Mesh`; ``spec`` does not fit the mesh or the shape;
            a device of the mesh is another process's.
        CopyForbiddenError: inside ``ledger.forbid_copies()`` (nothing is uploaded).
        BorrowError: ``value`` is an owner mutably borrowed elsewhere.
        UseAfterMoveError: ``value`` is a consumed owner.
    """
    jax = _jax("shard")
    if isinstance(value, ShardedTensor):
        raise ShardingError("shard: argument 'value' is already sharded; use value.reshard(spec)")
    if not isinstance(mesh, Mesh):
        raise ShardingError(f"shard: argument 'mesh' must be a Mesh, got {shown(mesh)}")
    view = None
    if isinstance(value, Tensor | TensorView | TensorViewMut):
        view = value.as_view()
        arr = view._desc.readonly()
    else:
        arr = np.asarray(value)
        arr = arr.view()
        arr.flags.writeable = False  # XLA copies a read-only array (never aliases it)
    try:
        if arr.dtype not in _BY_NUMPY:
            raise ShardingError(
                f"shard: argument 'value' has dtype {arr.dtype}, not a tensor dtype")
        shape = tuple(arr.shape)
        sharding = mesh.sharding(spec, shape, "shard")
        LEDGER.check_copy_allowed("shard (host -> devices)")
        shards: list[Tensor[Any, Any]] = []
        indices: list[Any] = []
        devices: list[Any] = []
        with jax.enable_x64(True):
            for device, index in sharding.addressable_devices_indices_map(shape).items():
                _, provider = mesh._provider(device, "shard")
                part = arr[index]
                handle = jax.device_put(part, device)
                t = provider._own(handle, AllocationReason.TRANSFER_DESTINATION, "shard")
                LEDGER.copy(CopyReason.TRANSFER, part.nbytes,
                            f"shard host -> {provider.domain.name}")
                shards.append(t)
                indices.append(tuple(index))
                devices.append(device)
        return ShardedTensor._make(mesh, sharding, shape, arr.dtype, shards, indices, devices)
    finally:
        if view is not None:
            view.release()


__all__ = ["Mesh", "ShardedTensor", "adopt_array", "shard"]
