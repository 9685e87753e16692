"""Shared hypothesis strategies for shapes, strides, offsets, layouts and dtypes.

Import from here (``from tests.strategies import layouts``) instead of writing local
variants, so that every suite explores the same space.  The names below are stable;
add new strategies rather than changing what an existing one generates.

Units follow the public API: strides and offsets are in *elements* of the dtype.

=========================  ==============================================================
``DTYPE_NAMES``            every supported dtype name (``tenferro_storage._dtypes.SUPPORTED``)
``LABEL_DTYPE_NAMES``      dtypes that hold small integer labels exactly (not bool)
``dtype_names()``          one supported dtype name
``dtypes()``               one :class:`tenferro_storage.DType`
``unsupported_dtype_names()``  names that are *not* supported (``"float16"``, ``"f8"``, ...)
``shapes()``               a shape tuple (rank and side bounds are keyword arguments)
``nonempty_shapes()``      a shape with every extent >= 1
``strides_for(shape)``     arbitrary element strides for ``shape`` (signed, possibly zero)
``permutations_of(ndim)``  an axes permutation for ``transpose``
``index_keys(shape)``      a basic numpy index (ints, slices with +/- steps, ``...``, ``None``)
``layouts()``              a :class:`LayoutCase` that fits its span (any strides, may alias)
``injective_layouts()``    a :class:`LayoutCase` whose addresses are distinct by construction
``float_arrays()``         a small finite float64/float32 numpy array (for ``from_numpy``)
``TIE_VALUES``             the small value pool ``tie_arrays`` draws from (zeros included)
``tie_arrays()``           float64 array full of exact ties, repeated values and zeros
``tie_pairs()``            two same-shape tie arrays, equal at some entries (``maximum``)
``long_tie_vectors()``     a 1-d tie array longer than numpy's insertion-sort cutoff (16)
``non_involutive_permutations(ndim)``  a permutation that is not its own inverse (ndim >= 3)
=========================  ==============================================================
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tenferro_storage as ts
from tenferro_storage._dtypes import SUPPORTED

DTYPE_NAMES: tuple[str, ...] = tuple(SUPPORTED)
LABEL_DTYPE_NAMES: tuple[str, ...] = tuple(n for n in SUPPORTED if n != "bool")

MAX_RANK = 4
MAX_SIDE = 5


def dtype_names() -> st.SearchStrategy[str]:
    """One supported dtype name."""
    return st.sampled_from(DTYPE_NAMES)


def dtypes() -> st.SearchStrategy[ts.DType]:
    """One supported :class:`~tenferro_storage.DType`."""
    return dtype_names().map(ts.dtype)


def unsupported_dtype_names() -> st.SearchStrategy[str]:
    """A dtype name the kernel must refuse (and name in its error)."""
    return st.sampled_from(
        ("float16", "uint8", "int8", "int16", "uint64", "f8", "float", "complex256", "object",
         "str", "datetime64", "")
    )


def shapes(
    *, min_rank: int = 0, max_rank: int = MAX_RANK, min_side: int = 0, max_side: int = MAX_SIDE
) -> st.SearchStrategy[tuple[int, ...]]:
    """A shape with ``min_rank..max_rank`` axes of extent ``min_side..max_side``."""
    return st.lists(
        st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank
    ).map(tuple)


def nonempty_shapes(
    *, min_rank: int = 0, max_rank: int = MAX_RANK, max_side: int = MAX_SIDE
) -> st.SearchStrategy[tuple[int, ...]]:
    """A shape whose every extent is at least 1."""
    return shapes(min_rank=min_rank, max_rank=max_rank, min_side=1, max_side=max_side)


def strides_for(shape: tuple[int, ...], *, max_abs: int = 40) -> st.SearchStrategy[tuple[int, ...]]:
    """Arbitrary element strides for ``shape``: signed, possibly zero, possibly aliasing."""
    return st.lists(
        st.integers(-max_abs, max_abs), min_size=len(shape), max_size=len(shape)
    ).map(tuple)


def permutations_of(ndim: int) -> st.SearchStrategy[tuple[int, ...]]:
    """A permutation of ``range(ndim)``."""
    return st.permutations(list(range(ndim))).map(tuple)


def _slices(n: int) -> st.SearchStrategy[slice]:
    bound = st.none() | st.integers(-n - 2, n + 2)
    step = st.none() | st.integers(-3, 3).filter(lambda s: s != 0)
    return st.builds(slice, bound, bound, step)


@st.composite
def index_keys(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A basic index for ``shape``: per axis an int or a slice, plus optional ``...``/``None``."""
    key: list[Any] = []
    for n in shape:
        if n and draw(st.booleans()):
            key.append(draw(st.integers(-n, n - 1)))
        else:
            key.append(draw(_slices(n)))
        if draw(st.integers(0, 9)) == 0:
            key.append(None)
    # Optionally replace a run of trailing full slices with an ellipsis.
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(key)))
        tail = key[cut:]
        if all(k == slice(None) or k is None for k in tail):
            key = [*key[:cut], Ellipsis, *(k for k in tail if k is None)]
    return tuple(key)


@attrs.frozen
class LayoutCase:
    """A layout request plus the span it must fit.

    ``span_elems`` is the number of ``dtype`` elements of the span; ``shape``,
    ``strides`` and ``offset`` are in elements.  ``lo``/``hi`` are the lowest and
    highest reachable element offsets (``hi < lo`` when the layout is empty).
    """

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    span_elems: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def lo(self) -> int:
        if self.size == 0:
            return self.offset
        reach = zip(self.shape, self.strides, strict=True)
        return self.offset + sum(s * (n - 1) for n, s in reach if s < 0)

    @property
    def hi(self) -> int:
        if self.size == 0:
            return self.offset - 1
        reach = zip(self.shape, self.strides, strict=True)
        return self.offset + sum(s * (n - 1) for n, s in reach if s > 0)

    @property
    def itemsize(self) -> int:
        return ts.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the span."""
        return self.span_elems * self.itemsize


@st.composite
def layouts(
    draw: st.DrawFn,
    *,
    dtype: st.SearchStrategy[str] | None = None,
    shape: st.SearchStrategy[tuple[int, ...]] | None = None,
    max_slack: int = 6,
) -> LayoutCase:
    """A layout that fits its span exactly as the bounds check demands (any strides).

    The span has up to ``max_slack`` spare elements on either side of the reachable
    envelope, so offsets are exercised as well as strides.
    """
    name = draw(dtype if dtype is not None else dtype_names())
    shp = draw(shape if shape is not None else shapes())
    strides = draw(strides_for(shp))
    size = int(np.prod(shp, dtype=np.int64)) if shp else 1
    neg = sum(s * (n - 1) for n, s in zip(shp, strides, strict=True) if s < 0) if size else 0
    pos = sum(s * (n - 1) for n, s in zip(shp, strides, strict=True) if s > 0) if size else 0
    before = draw(st.integers(0, max_slack))
    after = draw(st.integers(0, max_slack))
    offset = before - neg
    extent = (pos - neg + 1) if size else 0
    return LayoutCase(name, shp, strides, offset, before + extent + after)


@st.composite
def injective_layouts(
    draw: st.DrawFn,
    *,
    dtype: st.SearchStrategy[str] | None = None,
    shape: st.SearchStrategy[tuple[int, ...]] | None = None,
    max_slack: int = 6,
) -> LayoutCase:
    """A layout whose element addresses are pairwise distinct by construction.

    Axes are nested in a random order with random padding and random signs (a
    permuted, padded, possibly reversed row-major layout), placed in its span with
    random slack.
    """
    name = draw(dtype if dtype is not None else dtype_names())
    shp = draw(shape if shape is not None else shapes())
    ndim = len(shp)
    order = draw(permutations_of(ndim))  # order[0] is the innermost axis
    strides = [0] * ndim
    acc = 1
    for axis in order:
        strides[axis] = acc * draw(st.sampled_from((1, 1, 2, 3)))
        acc = strides[axis] * max(shp[axis], 1)
    signed = tuple(s * draw(st.sampled_from((1, -1))) for s in strides)
    size = int(np.prod(shp, dtype=np.int64)) if shp else 1
    neg = sum(s * (n - 1) for n, s in zip(shp, signed, strict=True) if s < 0) if size else 0
    pos = sum(s * (n - 1) for n, s in zip(shp, signed, strict=True) if s > 0) if size else 0
    before = draw(st.integers(0, max_slack))
    after = draw(st.integers(0, max_slack))
    extent = (pos - neg + 1) if size else 0
    return LayoutCase(name, shp, signed, before - neg, before + extent + after)


def float_arrays(
    *, shape: st.SearchStrategy[tuple[int, ...]] | None = None
) -> st.SearchStrategy[np.ndarray[Any, Any]]:
    """A small numpy array of finite float64 or float32 values."""
    return st.sampled_from((np.float64, np.float32)).flatmap(
        lambda dt: hnp.arrays(
            dt,
            shape if shape is not None else shapes(max_side=4),
            elements=st.floats(-1e3, 1e3, allow_nan=False, width=32),
        )
    )


# -- oracle inputs with exact ties (issue 16) ------------------------------------------------

#: Values ``tie_arrays`` draws from: few distinct values, so ties are the rule; zeros and
#: negative values included (exact binary fractions: sums and products stay exact).
TIE_VALUES: tuple[float, ...] = (0.0, 0.0, 1.0, 1.0, -1.0, 2.0, 0.5, -0.5, 3.0)


def tie_arrays(
    *, min_rank: int = 1, max_rank: int = 3, min_side: int = 1, max_side: int = 4
) -> st.SearchStrategy[np.ndarray[Any, Any]]:
    """A float64 array whose entries come from :data:`TIE_VALUES` (exact ties, repeated
    values and zeros are the common case, not an accident)."""
    return hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=min_rank, max_dims=max_rank, min_side=min_side,
                         max_side=max_side),
        elements=st.sampled_from(TIE_VALUES),
    )


@st.composite
def tie_pairs(
    draw: st.DrawFn, *, max_rank: int = 2, max_side: int = 4
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Two same-shape arrays of tie values that are *equal* at a drawn subset of entries
    (for ``maximum``/``minimum``: ties between the arguments)."""
    x = draw(tie_arrays(max_rank=max_rank, max_side=max_side))
    y = draw(hnp.arrays(np.float64, x.shape, elements=st.sampled_from(TIE_VALUES)))
    same = draw(hnp.arrays(np.bool_, x.shape))
    return x, np.where(same, x, y)


def long_tie_vectors(
    *, min_size: int = 17, max_size: int = 40
) -> st.SearchStrategy[np.ndarray[Any, Any]]:
    """A 1-d array of tie values longer than 16 entries: numpy's unstable sorts stop
    being insertion sorts there, so a missing ``kind="stable"`` shows."""
    return hnp.arrays(
        np.float64, st.integers(min_size, max_size), elements=st.sampled_from(TIE_VALUES)
    )


def non_involutive_permutations(ndim: int) -> st.SearchStrategy[tuple[int, ...]]:
    """A permutation of ``range(ndim)`` that is not its own inverse (``p[p[i]] != i`` for
    some ``i``): using the permutation where its inverse belongs is then wrong.  Needs
    ``ndim >= 3``."""
    if ndim < 3:
        raise ValueError("every permutation of fewer than 3 axes is its own inverse")
    return st.permutations(range(ndim)).map(tuple).filter(
        lambda p: any(p[p[i]] != i for i in range(ndim))
    )
