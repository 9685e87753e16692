"""Execution providers behind the runtime's engines.

* :class:`HostExecutionProvider`: numpy kernels on the host, synchronous through
  retirement (the only provider that accepts scoped read-only execution).
* :class:`SimulatedAsyncProvider`: an asynchronous device simulation with its own device
  memory (a :class:`DeviceDomain` the host cannot read) — a worker thread as its queue,
  :class:`ProviderEvent` completion, provider-private :class:`RetirementRecord` objects
  and :class:`Fault` injection at every boundary.
* The device half of the prepared hierarchy (G5): :func:`prepare_access` (a view and an
  :class:`AccessTarget`, host or device), :func:`prepare_read`/
  :func:`prepare_write` -> :class:`PreparedDeviceRead`/:class:`PreparedDeviceWrite`,
  :func:`bind_read`/:func:`bind_write` -> :class:`DeviceRead`/:class:`DeviceWrite`.
* :class:`XlaProvider`: one engine per JAX device (``xla:<n>``, only when ``jax`` is
  installed) running XLA executables (``ExecutableProgram``) over XLA buffers that the
  host reads in place on the CPU; see ``_xla.py``.
* Transfers: :func:`download` (device -> host) and :func:`upload` (host -> device), each
  one recorded ``TRANSFER`` copy; :func:`domain_of` says where a value lives.
* :func:`permanently_retained`: what unproven completions keep for the rest of the
  process (records, roots, bytes); never freed, not even when the provider is dropped.
"""

from .._access import AccessTarget, PreparedDeviceRead, PreparedDeviceWrite
from .._root import DeviceDomain
from ..runtime import _engine, _transfer
from ._device import (
    DeviceCounters,
    DeviceRead,
    DeviceWrite,
    ProviderContext,
    ProviderRetirementBinding,
    bind_read,
    bind_write,
    prepare_access,
    prepare_read,
    prepare_write,
)
from ._host import HostExecutionProvider, HostRuntimeCounters
from ._retirement import (
    PermanentRetention,
    ProviderEvent,
    RetirementRecord,
    permanently_retained,
)
from ._simulated import Fault, SimulatedAsyncProvider, SimulatedDeviceError, SimulatedPanic
from ._transfers import domain_of, download, upload
from ._xla import ALIGNMENT, XlaCounters, XlaProvider, jax_module, xla_providers

# The one place the built-in providers plug into the runtime (which imports no provider):
# discovery registers the host engine, then one simulated asynchronous engine with device
# memory (its outputs stay there until runtime.download; ad.jit downloads its results,
# one recorded TRANSFER each); runtime.download/upload run this package's transfers.
_engine.register_default_engine(HostExecutionProvider)
_engine.register_default_engine(SimulatedAsyncProvider)
_engine.register_default_engine(xla_providers)  # one per JAX device; none without jax
_transfer.register_transfers(download, upload)

__all__ = [
    "ALIGNMENT",
    "AccessTarget",
    "DeviceCounters",
    "DeviceDomain",
    "DeviceRead",
    "DeviceWrite",
    "Fault",
    "HostExecutionProvider",
    "HostRuntimeCounters",
    "PermanentRetention",
    "PreparedDeviceRead",
    "PreparedDeviceWrite",
    "ProviderContext",
    "ProviderEvent",
    "ProviderRetirementBinding",
    "RetirementRecord",
    "SimulatedAsyncProvider",
    "SimulatedDeviceError",
    "SimulatedPanic",
    "XlaCounters",
    "XlaProvider",
    "bind_read",
    "bind_write",
    "domain_of",
    "download",
    "permanently_retained",
    "prepare_access",
    "prepare_read",
    "prepare_write",
    "jax_module",
    "upload",
    "xla_providers",
]
