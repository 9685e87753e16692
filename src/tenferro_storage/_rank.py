"""Static rank markers for the type checker (``Tensor[np.float64, Rank2]``).

Ranks are checked by mypy only; at runtime the rank is the length of ``shape``,
validated once when a descriptor is built.
"""

from __future__ import annotations


class AnyRank:
    """The base of every rank marker: what a mix of ranks joins to (a params dict of
    owners of ranks 1 and 2 is a ``dict[str, Tensor[Any, AnyRank]]``).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""


class Rank0(AnyRank):
    """Rank-0 (scalar) marker.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""


class Rank1(AnyRank):
    """Rank-1 marker.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""


class Rank2(AnyRank):
    """Rank-2 marker.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""


class Rank3(AnyRank):
    """Rank-3 marker.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""


class Rank4(AnyRank):
    """Rank-4 marker.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""


class DynRank(AnyRank):
    """Rank known only at runtime (a first-class rank, not an erasure of a static one).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""
