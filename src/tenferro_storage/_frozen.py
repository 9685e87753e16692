"""Read-only arrays that no public numpy API can make writable.

numpy lets anyone turn a read-only *view of a writable array* writable again
(``arr.flags.writeable = True``, ``arr.setflags(write=True)``): its write flag is only
advice while some array in its base chain is writable.  Every array this package hands to
user or kernel code under a shared borrow is therefore built over a *read-only buffer*
instead: a ``memoryview(...).toreadonly()`` export of the memory, wrapped once by
``np.frombuffer`` (which keeps the memoryview as the base; ``np.ndarray(buffer=...)``
would unwrap it to the writable array behind it).  numpy refuses to set the write flag
of such an array and of every view derived from it (``ValueError: cannot set WRITEABLE
flag to True of this array``), so ``np.copyto``, ufunc ``out=`` and item assignment all
raise too.  No byte is copied: the result aliases the original memory.

What remains outside the contract is reaching *past* numpy (``arr.base.obj`` is the
memoryview's exporter, as ``ctypes`` can write any address): this is scientific
software, not a security boundary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_U8 = np.dtype(np.uint8)


def readonly_over(
    buffer: np.ndarray[Any, Any],
    shape: tuple[int, ...],
    dtype: Any,
    offset: int = 0,
    strides: tuple[int, ...] | None = None,
) -> np.ndarray[Any, Any]:
    """A read-only array of ``dtype`` and ``shape`` over the contiguous array ``buffer``,
    starting ``offset`` bytes in, with byte ``strides`` (``None``: C order).

    The array cannot be made writable through numpy (see the module docstring).  The
    layout must lie inside ``buffer`` (numpy checks it; callers pass checked layouts).
    O(rank): three small objects (memoryview, byte array, result), no copy.
    """
    flat = np.frombuffer(memoryview(buffer).toreadonly(), _U8)  # type: ignore[arg-type]
    return np.ndarray(shape, dtype=dtype, buffer=flat, offset=offset, strides=strides)


def is_frozen(array: np.ndarray[Any, Any]) -> bool:
    """Whether ``array`` already lies over a read-only buffer (its write flag cannot be
    set). O(length of the base chain).

    Cost: no allocation; no copy; no sync; no dispatch; O(length of the base chain).
    Raises: nothing."""
    if array.flags.writeable:
        return False
    b: Any = array.base
    while type(b) is np.ndarray:
        b = b.base
    return type(b) is memoryview and b.readonly


def _address(array: np.ndarray[Any, Any]) -> int:
    return int(array.__array_interface__["data"][0])


def frozen(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A read-only view of exactly ``array`` (same memory, shape and strides) that cannot
    be made writable through numpy; ``array`` itself when it already is one.

    For arrays that do not come from a checked descriptor (program constants, traced
    literals, a donated buffer the runtime reads back).  No copy. O(length of the base
    chain).

    Cost: no allocation; no copy; no sync; no dispatch (a view of the same memory); O(1).
    Raises: nothing."""
    if is_frozen(array):
        return array
    base = array
    while type(base.base) is np.ndarray:
        base = base.base
    if not base.flags.c_contiguous:  # an F-ordered owner: its memory is still one block
        base = base.reshape(-1, order="A")
    return readonly_over(
        base, array.shape, array.dtype, _address(array) - _address(base), array.strides
    )


__all__ = ["frozen", "is_frozen", "readonly_over"]
