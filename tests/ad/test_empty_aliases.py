"""Metadata-only ops over empty computed values: an empty alias reaches no byte, whatever
the address numpy gives it, and is differentiated like any other alias."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts

CASES: dict[str, tuple[tuple[int, ...], Callable[[Any], Any]]] = {
    "reshape (0,) to (0, 1)": ((0,), lambda t: ad.reshape(t, (0, 1))),
    "transpose (0, 3)": ((0, 3), lambda t: ad.transpose(t)),
    "empty slice of (4,)": ((4,), lambda t: t[2:2]),
    "empty column slice of (2, 3)": ((2, 3), lambda t: t[:, 3:]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_empty_alias_of_a_computed_value_is_recorded_and_differentiated(name: str) -> None:
    """``f(sin(x))`` where ``f`` is a metadata-only op with an empty result: the alias is
    recorded over the group of ``sin(x)`` (offset 0: an empty layout reaches no byte), its
    value reads back empty, and the gradient of ``sum(f(s)) + sum(s)`` is ``cos x``.
    Mutant: ``record_alias``' empty offset ``0`` made ``1`` (refused: outside the span of
    an empty allocation)."""
    shape, f = CASES[name]
    x0 = np.linspace(0.1, 1.0, int(np.prod(shape))).reshape(shape)

    def loss(t: Any) -> Any:
        s = ad.sin(t)
        e = f(s)
        assert e.to_numpy().size == 0
        return ad.sum(e) + ad.sum(s)

    g = ad.grad(loss)(ts.from_numpy(x0.copy()))
    np.testing.assert_allclose(g.to_numpy(), np.cos(x0))
