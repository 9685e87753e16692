"""Shape/stride/offset arithmetic, checked layouts, strided plans and the write-injectivity proof.

Everything here is pure arithmetic on Python ints (strides and offsets in elements);
nothing touches memory.  A layout is checked once when a descriptor is built and
the result is retained; derived views check only their new arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, TypeAlias

import numpy as np

from .errors import LayoutError, shown

INTP_MAX: Final = int(np.iinfo(np.intp).max)


class WriteInjectivityProof:
    """Proof token: no two in-bounds coordinates of a layout share an element address.

    Computed at most once per descriptor and retained; it can only be obtained from
    :func:`prove_injective`.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WriteInjectivityProof()"


_PROOF: Final = WriteInjectivityProof()


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class CheckedStrided:
    """A validated strided traversal plan: start offset, extents, strides, count.

    ``carry`` holds, per axis, how far to step back when that axis wraps, so the
    cursor advances incrementally and never decodes a flat index.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("carry", "count", "shape", "start", "strides")

    start: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    count: int
    carry: tuple[int, ...]

    def __init__(self, start: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
        if not _is_int(start):
            why = f"argument 'start' must be an int, got {shown(start)}"
        elif not isinstance(shape, tuple) or not all(_is_int(n) and n >= 0 for n in shape):
            why = f"argument 'shape' must be a tuple of non-negative ints, got {shown(shape)}"
        elif not isinstance(strides, tuple) or not all(_is_int(x) for x in strides):
            why = f"argument 'strides' must be a tuple of ints, got {shown(strides)}"
        elif len(shape) != len(strides):
            why = (
                f"arguments 'shape' and 'strides' differ in length: shape {shape} has "
                f"{len(shape)} axes but strides {strides} has {len(strides)}"
            )
        else:
            why = ""
        if why:
            raise LayoutError(type(self).__name__, why)
        self.start = start
        self.shape = shape
        self.strides = strides
        count = 1
        for n in shape:
            count *= n
        self.count = count
        self.carry = tuple(s * (n - 1) for s, n in zip(strides, shape, strict=True))

    def offsets(self) -> Iterator[int]:
        """Element offsets in row-major logical order (an incremental carry cursor).

        Per element: one yield, one add and, on wrap, one subtract per wrapped axis.

        Cost: no allocation (one rank-length cursor); no copy; no sync; no dispatch; O(size)
        to exhaust (O(1) amortized per element).
        Raises: nothing.
        """
        remaining = self.count
        if remaining == 0:
            return
        shape, strides, carry = self.shape, self.strides, self.carry
        rank = len(shape)
        coord = [0] * rank
        off = self.start
        last = rank - 1
        while True:
            yield off
            remaining -= 1
            if remaining == 0:
                return
            axis = last
            while coord[axis] == shape[axis] - 1:
                coord[axis] = 0
                off -= carry[axis]
                axis -= 1
            coord[axis] += 1
            off += strides[axis]

    def __repr__(self) -> str:
        return f"CheckedStrided(start={self.start}, shape={self.shape}, strides={self.strides})"


class CheckedInjectiveStrided(CheckedStrided):
    """A :class:`CheckedStrided` plan that also carries the write-injectivity proof.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("proof",)

    proof: WriteInjectivityProof

    @classmethod
    def from_plan(
        cls, plan: CheckedStrided, proof: WriteInjectivityProof
    ) -> CheckedInjectiveStrided:
        """``plan`` with ``proof`` attached, its arithmetic (count, carry) reused.  The
        proof is the caller's (``CheckedDescriptor.injective_plan``): it is not re-proven.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).
        Raises: nothing."""
        out = cls.__new__(cls)
        out.start = plan.start
        out.shape = plan.shape
        out.strides = plan.strides
        out.count = plan.count
        out.carry = plan.carry
        out.proof = proof
        return out


class Contiguous:
    """Row-major contiguous in logical order over ``element_range`` of the span.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("element_range",)

    def __init__(self, element_range: range) -> None:
        self.element_range = element_range

    def __repr__(self) -> str:
        r = self.element_range
        return f"Contiguous(element_range=range({r.start}, {r.stop}))"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Contiguous) and other.element_range == self.element_range

    __hash__ = None  # type: ignore[assignment]


class Strided:
    """Anything not row-major contiguous (e.g. a transposed or stepped view).

    The traversal plan (per-axis carry arithmetic) is built on first use of
    :attr:`plan` and retained: deriving and preparing a strided view never needs it,
    only plan inspection and per-element iteration do.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("_args", "_plan")

    _plan: CheckedStrided  # lazily set by ``plan``
    _args: tuple[int, tuple[int, ...], tuple[int, ...]] | None

    def __init__(self, plan: CheckedStrided) -> None:
        self._plan = plan
        self._args = None

    @classmethod
    def _deferred(cls, start: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> Strided:
        """A strided layout whose plan is built on first request. O(1)."""
        out = cls.__new__(cls)
        out._args = (start, shape, strides)
        return out

    @property
    def plan(self) -> CheckedStrided:
        """The checked traversal plan (built once, retained)."""
        try:
            return self._plan
        except AttributeError:
            assert self._args is not None
            plan = self._plan = CheckedStrided(*self._args)
            return plan

    def __repr__(self) -> str:
        return f"Strided({self.plan!r})"


CheckedLayout: TypeAlias = Contiguous | Strided


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides in elements (memoized: shapes repeat on the per-op path)."""
    hit = _C_STRIDES.get(shape)
    if hit is None:
        out = []
        acc = 1
        for n in reversed(shape):
            out.append(acc)
            acc *= n
        hit = tuple(reversed(out))
        if len(_C_STRIDES) > 4096:
            _C_STRIDES.clear()
        _C_STRIDES[shape] = hit
    return hit


_C_STRIDES: dict[tuple[int, ...], tuple[int, ...]] = {}


def whole(size: int) -> Contiguous:
    """The shared immutable ``Contiguous`` layout over elements ``[0, size)`` (memoized)."""
    hit = _WHOLE.get(size)
    if hit is None:
        if len(_WHOLE) > 4096:
            _WHOLE.clear()
        hit = _WHOLE[size] = Contiguous(range(0, size))
    return hit


_WHOLE: dict[int, Contiguous] = {}


def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major contiguous in logical order (extent-1 axes ignored; empty layouts qualify)."""
    if 0 in shape:  # before the loop: an empty layout is contiguous whatever its strides
        return True
    if strides == c_strides(shape):  # the common case, one memoized lookup
        return True
    if 1 not in shape:  # without extent-1 axes the row-major strides are the only answer
        return False
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True


def classify(
    shape: tuple[int, ...], strides: tuple[int, ...], offset: int, size: int
) -> CheckedLayout:
    """Pick the layout variant once (the variant is the state; no booleans)."""
    if is_c_contiguous(shape, strides):
        return Contiguous(range(offset, offset + size))
    return Strided._deferred(offset, shape, strides)


def prove_injective(
    shape: tuple[int, ...], strides: tuple[int, ...]
) -> WriteInjectivityProof | None:
    """Return the proof if distinct coordinates always reach distinct elements, else ``None``.

    Sufficient test: sorting the axes of extent > 1 by ``|stride|``, each stride must
    exceed the farthest reach of all smaller axes.  Empty layouts are injective.
    Conservative: a layout it cannot prove is treated as non-injective.
    """
    if 0 in shape:
        return _PROOF
    reach = 0
    for s, n in sorted((abs(s), n) for s, n in zip(strides, shape, strict=True) if n > 1):
        if s <= reach:
            return None
        reach += s * (n - 1)
    return _PROOF


def check_arithmetic(
    operation: str,
    shape: object,
    strides: object,
    offset: object,
    *,
    dtype: str,
    span: str,
) -> tuple[tuple[int, ...], tuple[int, ...], int, int, int, int]:
    """Check 1 of 6: the shape/stride/offset arithmetic.

    Returns ``(shape, strides, offset, size, lo, hi)`` where ``lo``/``hi`` are the
    lowest and highest reachable element offsets (``hi < lo`` for empty layouts).
    """

    def fail(reason: str) -> LayoutError:
        return LayoutError(
            operation,
            reason,
            shape=shape if isinstance(shape, tuple) else None,
            strides=strides if isinstance(strides, tuple) else None,
            offset=offset if isinstance(offset, int) else None,
            dtype=dtype,
            span=span,
        )

    if not isinstance(shape, tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in shape
    ):
        raise fail(f"argument 'shape': shape must be a tuple of ints, got {shown(shape)}")
    if not isinstance(strides, tuple) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in strides
    ):
        raise fail(
            "argument 'strides': strides must be a tuple of ints (in elements), got "
            f"{shown(strides)}"
        )
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise fail(f"argument 'offset': offset must be an int (in elements), got {shown(offset)}")
    if len(shape) != len(strides):
        raise fail(
            f"arguments 'shape' and 'strides' differ: shape has {len(shape)} axes but strides "
            f"has {len(strides)}"
        )
    if len(shape) > 32:
        raise fail(f"argument 'shape': rank {len(shape)} exceeds the supported maximum of 32")
    if any(n < 0 for n in shape):
        raise fail("argument 'shape': negative extent in shape")
    size = 1
    for n in shape:
        size *= n
    if size > INTP_MAX:
        raise fail("argument 'shape': the element count overflows the platform index range")
    lo = hi = offset
    for n, s in zip(shape, strides, strict=True):
        if n == 0:
            continue
        reach = s * (n - 1)
        if abs(reach) > INTP_MAX:
            raise fail(
                "arguments 'shape' and 'strides': the stride arithmetic overflows the platform "
                "index range"
            )
        if reach < 0:
            lo += reach
        else:
            hi += reach
    if size == 0:
        return shape, strides, offset, 0, offset, offset - 1
    if abs(lo) > INTP_MAX or abs(hi) > INTP_MAX:
        raise fail(
            "arguments 'shape', 'strides' and 'offset': the offset arithmetic overflows the "
            "platform index range"
        )
    return shape, strides, offset, size, lo, hi
