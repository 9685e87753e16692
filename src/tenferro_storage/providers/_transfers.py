"""The explicit transfers between the host and device memory (:func:`download`,
:func:`upload`) and :func:`domain_of`: each transfer is one recorded ``TRANSFER`` copy;
``runtime.download``/``runtime.upload`` dispatch here (or to an external runtime's own
upload).  Device memory itself, device access and retirement are in ``_device.py``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._descriptor import CheckedDescriptor
from .._frozen import readonly_over
from .._ledger import LEDGER, AllocationReason, CopyReason
from .._root import DeviceDomain, DeviceMemory, ExternalDomain, ExternalMemory, aligned_copy
from .._tensor import Tensor, TensorView, TensorViewMut
from ..errors import TransferError
from ._device import _device_array, device_tensor

_Value = Tensor[Any, Any] | TensorView[Any, Any] | TensorViewMut[Any, Any]


def _shared_view(value: _Value, operation: str) -> TensorView[Any, Any]:
    if not isinstance(value, Tensor | TensorView | TensorViewMut):
        raise TypeError(
            f"{operation}: expected a Tensor, TensorView or TensorViewMut, got "
            f"{type(value).__name__}"
        )
    return value.as_view()  # BorrowError / UseAfterMoveError / ExpiredBorrowError


def download(value: _Value) -> Tensor[Any, Any]:
    """Copy a device-resident value to a new host owner: one recorded ``TRANSFER``.

    ``value`` (an owner or view whose bytes live in a device domain) is borrowed shared for
    the call, never consumed.  Records one ``TRANSFER_DESTINATION`` allocation (host) and one
    ``CopyReason.TRANSFER`` copy event of the value's logical bytes
    (``"download <domain> -> host"``); the result is C-contiguous.  Refused before anything
    is copied, allocated or recorded: inside ``ledger.forbid_copies()``
    (``CopyForbiddenError``), for a value already on the host (``TransferError``: read it
    with ``to_numpy()``/``prepare_host()``), for a borrowed or consumed value
    (``BorrowError``/``UseAfterMoveError``). O(size).

    Cost: allocates one host owner; transfers the bytes once (a recorded TRANSFER); synchronizes
    with the device; dispatches through the value's provider; O(size).
    Raises: TransferError, CopyForbiddenError."""
    view = _shared_view(value, "download")
    try:
        desc = view._desc
        root = view._storage._root
        assert root is not None
        if not isinstance(root._allocation, DeviceMemory):
            raise TransferError(
                f"download: {view._storage.span} already lives in the host domain; read it "
                "with to_numpy() or prepare_host(), or duplicate() it for a second owner"
            )
        domain = root.domain
        LEDGER.check_copy_allowed(f"download ({domain} -> host)")
        memory = root._allocation
        staged = 0
        if type(memory) is not ExternalMemory:
            src = _device_array(desc, False)
        elif memory.host_viewed or memory.domain.host_readable:  # type: ignore[attr-defined]
            src = desc.readonly()  # the buffer read in place
        else:  # the host cannot read it in place: the runtime stages it (device -> host)
            src, staged = _staged_window(desc, memory)
        out = aligned_copy(src, desc.dtype.numpy)
        t: Tensor[Any, Any] = Tensor._adopt(
            out, desc.dtype, AllocationReason.TRANSFER_DESTINATION, "download"
        )
        if staged:
            LEDGER.copy(CopyReason.MATERIALIZE, staged, f"download stage {domain}")
        LEDGER.copy(CopyReason.TRANSFER, out.nbytes, f"download {domain} -> host")
        return t
    finally:
        view.release()


def _staged_window(
    desc: CheckedDescriptor, memory: ExternalMemory
) -> tuple[np.ndarray[Any, Any], int]:
    """``desc``'s window over a host staging array of an external buffer the host cannot
    read in place (the runtime's own device-to-host copy, e.g. ``np.asarray`` of a GPU
    ``jax.Array``), and the staging bytes.  Not cached: the buffer keeps no host view, so
    it stays donatable. O(size)."""
    domain: ExternalDomain = memory.domain  # type: ignore[assignment]
    staged = domain.host_view(memory._handle)
    offset, strides = desc._geometry()
    return readonly_over(staged, desc.shape, desc.dtype.numpy, offset, strides), staged.nbytes


def upload(domain: DeviceDomain, value: _Value) -> Tensor[Any, Any]:
    """Copy a host value into a new device-resident owner in ``domain``: one ``TRANSFER``.

    ``value`` is borrowed shared for the call, never consumed.  Records one
    ``TRANSFER_DESTINATION`` allocation in the domain (``"upload @<domain>"``) and one
    ``CopyReason.TRANSFER`` copy event (``"upload host -> <domain>"``); the device copy is
    C-contiguous.  Refused before anything happens inside ``ledger.forbid_copies()``
    (``CopyForbiddenError``) and for a value that is not on the host (``TransferError``:
    download it first). O(size).

    Cost: allocates one device owner; transfers the bytes once (a recorded TRANSFER); no sync;
    no dispatch (copied in the calling thread; the host source is mapped once); O(size).
    Raises: TransferError, CopyForbiddenError, BorrowError, UseAfterMoveError, TypeError."""
    if not isinstance(domain, DeviceDomain):
        raise TransferError(f"upload: expected a DeviceDomain, got {type(domain).__name__}")
    view = _shared_view(value, "upload")
    try:
        desc = view._desc
        root = view._storage._root
        assert root is not None
        if isinstance(root._allocation, DeviceMemory):
            raise TransferError(
                f"upload: {view._storage.span} is device-resident in {root.domain!r}, not on "
                f"the host; download() it first to move it to {domain.name!r}"
            )
        LEDGER.check_copy_allowed(f"upload (host -> {domain.name})")
        root.provider.map_host()
        arr = np.array(desc.readonly(), copy=True, order="C")
        t = device_tensor(domain, arr, AllocationReason.TRANSFER_DESTINATION, "upload")
        LEDGER.copy(CopyReason.TRANSFER, arr.nbytes, f"upload host -> {domain.name}")
        return t
    finally:
        view.release()


def domain_of(value: _Value) -> str:
    """The allocation domain ``value``'s bytes live in (``"host"`` or a device domain). O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: nothing."""
    if not isinstance(value, Tensor | TensorView | TensorViewMut):
        raise TypeError(f"domain_of: expected a Tensor or view, got {type(value).__name__}")
    storage = value._storage
    if storage is None or storage._root is None:
        value._d("domain_of")  # raises UseAfterMoveError / ExpiredBorrowError
    assert storage is not None and storage._root is not None
    return storage._root.domain

