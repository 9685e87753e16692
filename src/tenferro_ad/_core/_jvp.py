"""Forward mode: a context mapping value records to tangents, fed by the JVP rules.

While a :class:`JvpContext` is active (``STATE.jvp``), every eager op whose arguments
carry tangents calls each argument's JVP rule (``jvp_i(ops, t_i, *residuals, **params)``)
and sums the contributions into the output's tangent.  Tangents are numpy kernel scratch
(no ledger events) — only the tangent delivered by ``tenferro_ad.jvp`` becomes an owner.
Missing tangents are symbolic zeros (absent).  Rules run on the numpy namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import MissingRuleError
from ._namespace import NUMPY_NS
from ._primitive import NONDIFF, Primitive, Zero
from ._retention import AdValueRecord


class JvpContext:
    """Tangents by record (identity). Entered by ``tenferro_ad.jvp``."""

    __slots__ = ("tangents",)

    def __init__(self) -> None:
        self.tangents: dict[AdValueRecord, Any] = {}

    def push(
        self,
        prim: Primitive,
        recs: Sequence[Any],
        vals: Sequence[Any],
        out: Any,
        params: dict[str, Any],
    ) -> Any:
        """The output tangent of one op, or ``None`` when no argument carries one.

        Called by the binder before the output is adopted, so a failing rule changes
        nothing.  ``vals`` are the kernel inputs, ``out`` the kernel output."""
        tans = self.tangents
        ts = [tans.get(r) if type(r) is AdValueRecord else None for r in recs]
        if prim.nondiff or all(t is None for t in ts):
            return None
        res = [vals[i] for i in prim.save_in]
        if prim.save_out:
            res.append(out)
        total: Any = None
        if prim.jvp_all is not None:
            total = prim.jvp_all(NUMPY_NS, ts, *res, **params)
            ts = []  # the joint rule gave the whole tangent
        for i, t in enumerate(ts):
            if t is None:
                continue
            rule = prim.jvps[0 if prim.variadic else i]
            if rule is None:
                raise MissingRuleError(prim.name, "jvp", i)
            if rule is NONDIFF:
                continue
            if prim.variadic:
                c = rule(NUMPY_NS, t, *res, argnum=i, **params)  # type: ignore[operator]
            else:
                c = rule(NUMPY_NS, t, *res, **params)  # type: ignore[operator]
            if type(c) is Zero:
                continue
            total = c if total is None else np.add(total, c)
        if total is not None:
            shape = np.shape(out)
            if np.shape(total) != shape:
                total = np.broadcast_to(total, shape)
        return total
