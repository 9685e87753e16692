"""Prepared host access: the state a view becomes once provider work is done.

``view.prepare_host()`` consumes the view and returns exactly one of
:class:`PreparedContiguousRead` / :class:`PreparedStridedRead` (the class is the
state: there are no ``is_contiguous``/``is_mapped`` flags); ``prepare_host_mut()``
returns one of the write variants.  Each carries the view's borrow until
``release()``, the end of its ``with`` block, or its death.  The hot loop is
numpy's: ``as_slice()``/``as_array()`` hand out arrays built once from the
retained plan.  The per-element iterators exist for completeness and small data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

import numpy as np

from ._descriptor import CheckedDescriptor
from ._layout import CheckedInjectiveStrided, CheckedStrided, Contiguous, Strided
from ._linear import Borrow, Lender

DT = TypeVar("DT")
R = TypeVar("R")


class _Prepared(Borrow, Generic[DT, R]):
    __slots__ = ("_desc", "_ended", "_exclusive_borrow", "_lender")

    _desc: CheckedDescriptor

    @classmethod
    def _make(cls, lender: Lender, desc: CheckedDescriptor, exclusive: bool) -> Any:
        p = cls.__new__(cls)
        p._lender = lender
        p._exclusive_borrow = exclusive
        p._ended = None
        p._desc = desc
        return p

    def _check(self, operation: str) -> CheckedDescriptor:
        if self._lender is None:
            self._dead(operation)
        return self._desc

    @property
    def shape(self) -> tuple[int, ...]:
        return self._check("shape").shape

    @property
    def dtype(self) -> Any:
        return self._check("dtype").dtype

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._lender is None else "live"
        return f"{type(self).__name__}({self._desc.dtype.name}, shape={self._desc.shape}, {state})"


class _ReadMixin(_Prepared[DT, R]):
    __slots__ = ()

    def as_array(self) -> np.ndarray[Any, Any]:
        """The checked n-dimensional array, read-only (cached; O(1) after the first call)."""
        return self._check("as_array").readonly()


class PreparedContiguousRead(_ReadMixin[DT, R]):
    """Shared host access to a row-major contiguous layout."""

    __slots__ = ()

    @property
    def element_range(self) -> range:
        """The checked element range of the span."""
        layout = self._check("element_range").layout
        assert isinstance(layout, Contiguous)
        return layout.element_range

    def as_slice(self) -> np.ndarray[Any, Any]:
        """A read-only 1-D array over the checked element range (O(1), no copy)."""
        return self._check("as_slice").flat(writable=False)

    def iter_contiguous(self) -> Iterator[Any]:
        """Iterate the elements in order (a plain iterator over :meth:`as_slice`)."""
        return iter(self.as_slice())


class PreparedStridedRead(_ReadMixin[DT, R]):
    """Shared host access to a strided layout, with its retained traversal plan."""

    __slots__ = ()

    @property
    def plan(self) -> CheckedStrided:
        """The checked strided plan (start, extents, strides, carry)."""
        layout = self._check("plan").layout
        assert isinstance(layout, Strided)
        return layout.plan

    def iter_strided(self) -> Iterator[Any]:
        """Iterate elements in logical row-major order with an incremental carry cursor."""
        return _iter_plan(self._check("iter_strided"), self.plan)


class _WriteMixin(_Prepared[DT, R]):
    __slots__ = ()

    def as_array(self) -> np.ndarray[Any, Any]:
        """The checked n-dimensional array, writable (O(1), no copy)."""
        return self._check("as_array").array()


class PreparedContiguousWrite(_WriteMixin[DT, R]):
    """Exclusive host access to a row-major contiguous layout."""

    __slots__ = ()

    @property
    def element_range(self) -> range:
        layout = self._check("element_range").layout
        assert isinstance(layout, Contiguous)
        return layout.element_range

    def as_slice(self) -> np.ndarray[Any, Any]:
        """A read-only 1-D array over the checked element range."""
        return self._check("as_slice").flat(writable=False)

    def as_slice_mut(self) -> np.ndarray[Any, Any]:
        """A writable 1-D array over the checked element range (O(1), no copy)."""
        return self._check("as_slice_mut").flat(writable=True)

    def iter_contiguous(self) -> Iterator[Any]:
        return iter(self.as_slice())


class PreparedStridedWrite(_WriteMixin[DT, R]):
    """Exclusive host access to a strided layout proven write-injective."""

    __slots__ = ("_plan",)

    _plan: CheckedInjectiveStrided  # lazily set by ``plan`` (preparing stays O(1))

    @property
    def plan(self) -> CheckedInjectiveStrided:
        """The injective traversal plan: each element offset is yielded at most once.

        Built on first request from the descriptor's retained plan and retained proof
        (nothing is re-proven)."""
        desc = self._check("plan")
        try:
            return self._plan
        except AttributeError:
            plan = self._plan = desc.injective_plan()
            return plan

    def iter_strided(self) -> Iterator[Any]:
        """Iterate element values in logical order (incremental carry cursor)."""
        return _iter_plan(self._check("iter_strided"), self.plan)


def _iter_plan(desc: CheckedDescriptor, plan: CheckedStrided) -> Iterator[Any]:
    # One typed 1-D array over the whole span is built outside the loop; inside, each
    # step is an index into it plus the cursor's incremental update.
    base = np.ndarray(
        ((desc.stop - desc.start) // desc.dtype.itemsize,),
        dtype=desc.dtype.numpy,
        buffer=desc.buffer,
        offset=desc.start,
    )
    for off in plan.offsets():
        yield base[off]


PreparedHostRead = PreparedContiguousRead[Any, Any] | PreparedStridedRead[Any, Any]
PreparedHostWrite = PreparedContiguousWrite[Any, Any] | PreparedStridedWrite[Any, Any]
