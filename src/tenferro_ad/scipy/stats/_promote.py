"""Argument promotion shared by the distributions' formulas."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._core._handle import EagerTensor
from ...ops._util import dtype_of
from ...ops.elementwise import astype

__all__ = ["promote"]


def promote(*args: Any) -> list[Any]:
    """JAX's ``promote_args_inexact`` for derived formulas: every argument is brought to the
    common inexact dtype of the array arguments (Python scalars are weakly typed and do not
    take part; float64 when there are no arrays).  Python scalars and numpy arrays become
    numpy arrays of that dtype; a handle of another dtype goes through ``astype`` (whose
    VJP casts the cotangent back, as JAX's ``convert_element_type`` does)."""
    arrays = [a for a in args if not isinstance(a, int | float | bool)]
    dts = [dtype_of(a) for a in arrays]
    dt = np.result_type(*dts) if dts else np.dtype(np.float64)
    if dt.kind not in "fc":
        dt = np.dtype(np.float64)
    out: list[Any] = []
    for a in args:
        if isinstance(a, int | float | bool):
            out.append(np.asarray(a, dtype=dt))
        elif isinstance(a, EagerTensor):
            if dtype_of(a) != dt:
                a = astype(a, dt)
            out.append(a)
        elif isinstance(a, np.ndarray | np.generic | list | tuple):
            out.append(np.asarray(a, dtype=dt))
        else:
            out.append(a)
    return out
