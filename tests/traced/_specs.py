"""Comparison helper shared by the traced suites.

The traced op-spec table that used to live here is now part of the one op table,
``tests/_opspecs.py`` (its ``traced`` mode drives ``tests/traced/test_ops_vs_jax.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np


def close(got: Any, want: Any, tol: float = 1e-9) -> None:
    got, want = (x.to_numpy() if hasattr(x, "to_numpy") else x for x in (got, want))
    g, w = np.asarray(got), np.asarray(want)
    kind = np.complex128 if np.iscomplexobj(g) or np.iscomplexobj(w) else np.float64
    np.testing.assert_allclose(
        np.asarray(g, dtype=kind), np.asarray(w, dtype=kind), rtol=tol, atol=tol
    )
