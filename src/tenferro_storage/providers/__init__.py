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
* Transfers: :func:`download` (device -> host) and :func:`upload` (host -> device), each
  one recorded ``TRANSFER`` copy; :func:`domain_of` says where a value lives.
"""

from .._access import AccessTarget, PreparedDeviceRead, PreparedDeviceWrite
from .._root import DeviceDomain
from ._device import (
    DeviceCounters,
    DeviceRead,
    DeviceWrite,
    ProviderContext,
    ProviderEvent,
    ProviderRetirementBinding,
    RetirementRecord,
    bind_read,
    bind_write,
    domain_of,
    download,
    prepare_access,
    prepare_read,
    prepare_write,
    upload,
)
from ._host import HostExecutionProvider, HostRuntimeCounters
from ._simulated import Fault, SimulatedAsyncProvider, SimulatedDeviceError, SimulatedPanic

__all__ = [
    "AccessTarget",
    "DeviceCounters",
    "DeviceDomain",
    "DeviceRead",
    "DeviceWrite",
    "Fault",
    "HostExecutionProvider",
    "HostRuntimeCounters",
    "PreparedDeviceRead",
    "PreparedDeviceWrite",
    "ProviderContext",
    "ProviderEvent",
    "ProviderRetirementBinding",
    "RetirementRecord",
    "SimulatedAsyncProvider",
    "SimulatedDeviceError",
    "SimulatedPanic",
    "bind_read",
    "bind_write",
    "domain_of",
    "download",
    "prepare_access",
    "prepare_read",
    "prepare_write",
    "upload",
]
