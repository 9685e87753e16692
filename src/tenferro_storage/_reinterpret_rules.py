"""The sealed-pair rules of zero-copy complex<->real reinterpretation, on descriptors.

:func:`to_real` and :func:`to_complex` derive the reinterpreted descriptor of a source
descriptor over its storage (the element mapping, the checks and the one validation
against the exact span are described in ``_reinterpret.py``) or raise :class:`Refused`.
They know nothing of owners and views, so ``_tensor.py`` (``Tensor.into_real``/
``into_complex``) and ``_reinterpret.py`` (``view_as_real``/``view_as_complex``) share
them and import them from below.
"""

from __future__ import annotations

from typing import Any

from . import _descriptor as D
from ._descriptor import CheckedDescriptor
from ._root import OwnedStorage
from .errors import LayoutError


class Refused(Exception):
    """A pair rule refused the request (its caller raises ``ReinterpretError``)."""

    def __init__(self, message: str, cause: BaseException | str) -> None:
        super().__init__(message)
        self.cause = cause


def _describe(desc: CheckedDescriptor, storage: OwnedStorage) -> str:
    return (
        f"{desc.dtype.name} shape={desc.shape} strides={desc.strides} offset={desc.offset} "
        f"over {storage.span}"
    )


def _publish(
    operation: str, src: CheckedDescriptor, storage: OwnedStorage, dt: Any,
    shape: tuple[int, ...], strides: tuple[int, ...], offset: int,
) -> CheckedDescriptor:
    root = storage._root
    assert root is not None
    try:
        desc = D.build(operation, root, src.start, src.stop, dt, shape, strides, offset)
    except LayoutError as exc:
        raise Refused(
            f"{operation}: the reinterpreted layout is not valid over the source span: "
            f"{exc.reason}",
            exc,
        ) from exc
    desc._injective = src._injective  # the element mapping is a bijection
    return desc


def to_real(src: CheckedDescriptor, storage: OwnedStorage, operation: str) -> CheckedDescriptor:
    dt = src.dtype
    if not dt.is_complex:
        raise Refused(
            f"{operation}: expected complex64 or complex128, got {_describe(src, storage)}; "
            "view_as_complex/into_complex go the other way",
            "not a complex dtype",
        )
    real = dt.partner
    strides = tuple(2 * s for s in src.strides)
    return _publish(
        operation, src, storage, real, (*src.shape, 2), (*strides, 1), 2 * src.offset
    )


def to_complex(src: CheckedDescriptor, storage: OwnedStorage, operation: str) -> CheckedDescriptor:
    dt = src.dtype
    cplx = dt.partner
    if dt.is_complex or cplx is None:
        raise Refused(
            f"{operation}: expected float32 or float64, got {_describe(src, storage)}; only "
            "the sealed pairs complex64<->float32 and complex128<->float64 reinterpret",
            "not a real dtype with a complex partner",
        )
    shape, strides, offset = src.shape, src.strides, src.offset
    if not shape or shape[-1] != 2 or strides[-1] != 1:
        raise Refused(
            f"{operation}: needs a trailing axis of extent 2 and stride 1 (real and imaginary "
            f"parts side by side), got {_describe(src, storage)}. Duplicate into a "
            "row-major owner of shape (..., 2) first",
            "no unit-stride trailing axis of extent 2",
        )
    if offset % 2:
        raise Refused(
            f"{operation}: offset {offset} does not start on a {cplx.name} element boundary "
            f"({_describe(src, storage)})",
            "misaligned offset",
        )
    for axis, (n, s) in enumerate(zip(shape[:-1], strides[:-1], strict=True)):
        if n > 1 and s % 2:
            raise Refused(
                f"{operation}: stride {s} on axis {axis} is not a whole number of {cplx.name} "
                f"elements ({_describe(src, storage)})",
                "odd stride",
            )
    return _publish(
        operation, src, storage, cplx, shape[:-1], tuple(s // 2 for s in strides[:-1]), offset // 2
    )


__all__ = ["Refused", "to_complex", "to_real"]
