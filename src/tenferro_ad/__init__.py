"""tenferro_ad: automatic differentiation on the tenferro ownership kernel.

Eager mode::

    import tenferro_ad as ad, tenferro_storage as ts
    with ad.Tape() as tape:
        x = tape.watch(ts.from_numpy([1.0, 2.0]))   # consumes the owner
        loss = (ad.sin(x) * x).sum()
    grads = tape.backward(loss)
    g = grads.take_grad(x)                         # an owner, no copy

Functional mode: ``ad.grad(f)(params)`` borrows ``params`` and returns fresh owners.
The tape retains exactly what the rules' residual declarations name
(``tape.retained()`` explains it); the ledgers (``tenferro_storage.ledger``) prove it.
"""

from . import errors, extend, linalg, ops, optim
from ._checkpoint import (
    CheckpointPolicy,
    checkpoint,
    name,
    save_contractions,
    save_everything,
    save_named,
    save_nothing,
)
from ._functional import VjpFunction, grad, jvp, value_and_grad, vjp
from ._gradients import Gradients
from ._handle import EagerTensor, ValueGuard
from ._primitive import Primitive, Zero
from ._retention import AdValueRecord, RetentionContainer
from ._state import allocation_reason, no_grad
from ._tape import RetainedEntry, Tape, current_tape
from .errors import IntoValueError, MissingRuleError, NotUnique
from .ops import (
    abs,
    add,
    astype,
    broadcast_to,
    clip,
    concatenate,
    cos,
    div,
    equal,
    exp,
    expand_dims,
    expm1,
    gather,
    getitem,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    log_softmax,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    not_equal,
    pow,
    prod,
    reshape,
    sign,
    sin,
    softmax,
    sqrt,
    stack,
    stop_gradient,
    sub,
    sum,
    swapaxes,
    tanh,
    transpose,
    where,
)
from .ops.complex import angle, complex, conj, imag, real, view_as_complex, view_as_real
from .ops.einsum import einsum, tensordot

__all__ = [
    "AdValueRecord",
    "CheckpointPolicy",
    "EagerTensor",
    "Gradients",
    "IntoValueError",
    "MissingRuleError",
    "NotUnique",
    "Primitive",
    "RetainedEntry",
    "RetentionContainer",
    "Tape",
    "ValueGuard",
    "VjpFunction",
    "Zero",
    "abs",
    "add",
    "allocation_reason",
    "angle",
    "astype",
    "broadcast_to",
    "checkpoint",
    "clip",
    "complex",
    "concatenate",
    "conj",
    "cos",
    "current_tape",
    "div",
    "einsum",
    "equal",
    "errors",
    "exp",
    "expand_dims",
    "expm1",
    "extend",
    "gather",
    "getitem",
    "grad",
    "greater",
    "greater_equal",
    "imag",
    "jvp",
    "less",
    "less_equal",
    "linalg",
    "log",
    "log1p",
    "log_softmax",
    "logsumexp",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "name",
    "neg",
    "no_grad",
    "not_equal",
    "ops",
    "optim",
    "pow",
    "prod",
    "real",
    "reshape",
    "save_contractions",
    "save_everything",
    "save_named",
    "save_nothing",
    "sign",
    "sin",
    "softmax",
    "sqrt",
    "stack",
    "stop_gradient",
    "sub",
    "sum",
    "swapaxes",
    "tanh",
    "tensordot",
    "transpose",
    "value_and_grad",
    "view_as_complex",
    "view_as_real",
    "vjp",
    "where",
]
