"""Static rank markers for the type checker (``Tensor[np.float64, Rank2]``).

Ranks are checked by mypy only; at runtime the rank is the length of ``shape``,
validated once when a descriptor is built.
"""

from __future__ import annotations


class Rank0:
    """Rank-0 (scalar) marker."""


class Rank1:
    """Rank-1 marker."""


class Rank2:
    """Rank-2 marker."""


class Rank3:
    """Rank-3 marker."""


class Rank4:
    """Rank-4 marker."""


class DynRank:
    """Rank known only at runtime (a first-class rank, not an erasure of a static one)."""
