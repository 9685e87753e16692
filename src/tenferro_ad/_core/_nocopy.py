"""``NoCopy``: objects that hold owners, borrows or retention counts refuse duplication.

A shallow or deep copy (or a pickle) of a tape, a pullback, a guard or a gradient bundle
would share the original's counts and borrows and give them back twice when it dies;
like owners, these objects refuse with ``OwnershipError`` instead.
"""

from __future__ import annotations

from typing import Any, NoReturn

from tenferro_storage.errors import OwnershipError


class NoCopy:
    """Mixin: ``copy.copy``, ``copy.deepcopy`` and pickling raise ``OwnershipError``."""

    __slots__ = ()

    def _no_copy(self, what: str) -> NoReturn:
        raise OwnershipError(
            f"{what}: a {type(self).__name__} holds borrows and retention counts and cannot "
            "be duplicated; keep using the original (export values with to_numpy(), a "
            "recorded TRANSFER copy)"
        )

    def __copy__(self) -> NoReturn:
        self._no_copy("copy.copy")

    def __deepcopy__(self, memo: Any) -> NoReturn:
        self._no_copy("copy.deepcopy")

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        self._no_copy("pickle")
