"""The rule-author surface: define your own primitive with its rules.

    >>> import numpy as np
    >>> from tenferro_ad import extend
    >>> SOFTPLUS = extend.defprimitive(
    ...     "my_softplus", lambda x: np.logaddexp(0.0, x), 1, save_in=(0,),
    ...     vjp=(lambda ops, g, x: ops.div(g, ops.add(ops.exp(ops.neg(x)), 1.0)),),
    ...     jvp=(lambda ops, t, x: ops.div(t, ops.add(ops.exp(ops.neg(x)), 1.0)),),
    ... )
    >>> def softplus(x):
    ...     return extend.bind(SOFTPLUS, x)

This is tenferro's ``custom_vjp``/``custom_jvp``: the primal kernel is plain numpy (it
must return a fresh array), the rules are written once against the rule namespace
``ops`` (see :data:`VOCABULARY`) so they also work when the backward is recorded, and the
residual declaration (``save_in``/``save_out``) is exactly what the tape will retain.
"""

from __future__ import annotations

from typing import Any

from ._core._dispatch import bind
from ._core._namespace import HANDLE_NS, NUMPY_NS, VOCABULARY
from ._core._primitive import (
    NONDIFF,
    Primitive,
    Zero,
    defbilinear,
    deflinear,
    nondifferentiable,
)
from ._core._primitive import defpointwise as _defpointwise
from ._core._primitive import defprimitive as _defprimitive
from ._core._state import allocation_reason
from ._traced._lowering import deflower


def defprimitive(*args: Any, **kwargs: Any) -> Primitive:
    """Create and register a user primitive (see :func:`tenferro_ad._core._primitive.defprimitive`
    for the parameters).  Its rules' cotangents are checked against their arguments'
    shapes and dtypes in every backward (an ``ArgumentError`` naming the primitive and
    the argument), so a rule bug never becomes a silently wrong gradient.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): registers a primitive.
    Raises: ArgumentError."""
    p = _defprimitive(*args, **kwargs)
    p.checked = True
    return p


def defpointwise(*args: Any, **kwargs: Any) -> Primitive:
    """Create and register a user pointwise primitive whose VJP and JVP both come from one
    tuple of partial derivatives (see :func:`tenferro_ad._core._primitive.defpointwise`),
    its cotangents checked as :func:`defprimitive`'s are.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): registers a primitive and its rules.
    Raises: ArgumentError."""
    p = _defpointwise(*args, **kwargs)
    p.checked = True
    return p


__all__ = [
    "HANDLE_NS",
    "NONDIFF",
    "NUMPY_NS",
    "VOCABULARY",
    "Primitive",
    "Zero",
    "allocation_reason",
    "bind",
    "defbilinear",
    "deflinear",
    "deflower",
    "defpointwise",
    "defprimitive",
    "nondifferentiable",
]
