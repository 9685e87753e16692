"""Explicit transfers between the host and an engine's device memory.

Device memory is not host-visible: the only way a device-resident value reaches the host
is :func:`download`, and the only way a host value reaches device memory is
:func:`upload`.  Each is one recorded ``CopyReason.TRANSFER`` copy plus one
``TRANSFER_DESTINATION`` allocation, and ``ledger.forbid_copies()`` refuses both before
anything happens.  The mechanics are the providers' (``providers.download``/``upload``).
"""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor, TensorView, TensorViewMut
from ..errors import EngineError, TransferError
from ._engine import EngineId, lookup

_Value = Tensor[Any, Any] | TensorView[Any, Any] | TensorViewMut[Any, Any]


def download(value: _Value) -> Tensor[Any, Any]:
    """Copy a device-resident owner or view to a new host owner (one ``TRANSFER``).

    ``value`` is borrowed for the call, never consumed; the result is C-contiguous host
    memory.  ``TransferError`` for a value already on the host, ``CopyForbiddenError``
    inside ``ledger.forbid_copies()``; nothing changes on refusal. O(size).
    """
    from ..providers._device import download as _download

    return _download(value)


def upload(engine: EngineId, value: _Value) -> Tensor[Any, Any]:
    """Copy a host owner or view into ``engine``'s device memory (one ``TRANSFER``).

    The result is a device-resident owner in the engine's device domain: submit it to
    that engine, and :func:`download` it to read it on the host.  ``value`` is borrowed
    for the call, never consumed.  ``EngineError`` for an unregistered engine,
    ``TransferError`` for an engine without device memory or a value that is not on the
    host, ``CopyForbiddenError`` inside ``ledger.forbid_copies()``; nothing changes on
    refusal. O(size).
    """
    from ..providers._device import upload as _upload

    provider = lookup(engine)
    if provider is None:
        raise EngineError(f"upload: no engine {engine} is registered; see runtime.engines()")
    domain = provider.device_domain
    if domain is None:
        raise TransferError(
            f"upload: {engine} has no device memory (its domains: "
            f"{sorted(provider.domain_names())}); submit host values to it directly"
        )
    return _upload(domain, value)
