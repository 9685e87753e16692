"""Explicit transfers between the host and an engine's device memory.

Device memory is not host-visible: the only way a device-resident value reaches the host
is :func:`download`, and the only way a host value reaches device memory is
:func:`upload`.  Each is one recorded ``CopyReason.TRANSFER`` copy plus one
``TRANSFER_DESTINATION`` allocation, and ``ledger.forbid_copies()`` refuses both before
anything happens.  The mechanics are the providers' (``providers.download``/``upload``),
which ``tenferro_storage.providers`` installs with :func:`register_transfers` at import:
the runtime imports no provider.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .._root import DeviceDomain, ExternalDomain
from .._tensor import Tensor, TensorView, TensorViewMut
from ..errors import EngineError, TransferError
from ._engine import EngineId, lookup

_Value = Tensor[Any, Any] | TensorView[Any, Any] | TensorViewMut[Any, Any]
_Download = Callable[[_Value], Tensor[Any, Any]]
_Upload = Callable[[DeviceDomain, _Value], Tensor[Any, Any]]

# The installed mechanics: (download, upload), or empty before the providers are imported.
_TRANSFERS: Final[list[tuple[_Download, _Upload]]] = []


def register_transfers(download: _Download, upload: _Upload) -> None:
    """Install the mechanics behind :func:`download` and :func:`upload` (the providers
    package installs its own at import); a later call replaces an earlier one. O(1)."""
    _TRANSFERS[:] = [(download, upload)]


def _mechanics(operation: str) -> tuple[_Download, _Upload]:
    if not _TRANSFERS:
        raise TransferError(
            f"{operation}: no provider has installed transfer mechanics; import "
            "tenferro_storage (its providers package installs them)"
        )
    return _TRANSFERS[0]


def download(value: _Value) -> Tensor[Any, Any]:
    """Copy a device-resident owner or view to a new host owner (one ``TRANSFER``).

    ``value`` is borrowed for the call, never consumed; the result is C-contiguous host
    memory.  ``TransferError`` for a value already on the host, ``CopyForbiddenError``
    inside ``ledger.forbid_copies()``; nothing changes on refusal. O(size).

    Cost: allocates one host owner; transfers the bytes once (a recorded TRANSFER); synchronizes
    with the device; dispatches through the value's provider; O(size).
    Raises: TransferError, CopyForbiddenError."""
    copy_to_host, _ = _mechanics("download")
    return copy_to_host(value)


def upload(engine: EngineId, value: _Value) -> Tensor[Any, Any]:
    """Copy a host owner or view into ``engine``'s device memory (one ``TRANSFER``).

    The result is a device-resident owner in the engine's device domain: submit it to
    that engine, and :func:`download` it to read it on the host.  ``value`` is borrowed
    for the call, never consumed.  ``EngineError`` for an unregistered engine,
    ``TransferError`` for an engine without device memory or a value that is not on the
    host, ``CopyForbiddenError`` inside ``ledger.forbid_copies()``; nothing changes on
    refusal. O(size).

    Cost: allocates one device owner; transfers the bytes once (a recorded TRANSFER); no sync;
    dispatches through the engine's provider; O(size).
    Raises: EngineError, TransferError, CopyForbiddenError."""
    provider = lookup(engine)
    if provider is None:
        raise EngineError(f"upload: no engine {engine} is registered; see runtime.engines()")
    domain = provider.device_domain
    if domain is None:
        raise TransferError(
            f"upload: {engine} has no device memory (its domains: "
            f"{sorted(provider.domain_names())}); submit host values to it directly"
        )
    if type(domain) is ExternalDomain:  # an external runtime's buffers: its own upload
        return provider.upload(value)  # type: ignore[attr-defined,no-any-return]
    _, copy_to_device = _mechanics("upload")
    return copy_to_device(domain, value)
