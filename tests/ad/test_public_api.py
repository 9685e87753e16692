"""The public surface of ``tenferro_ad`` is explicit, sorted, pinned and documented.

Adding or removing a public name is an API change: update the pin here in the same change.
"""

from __future__ import annotations

import inspect

import pytest

import tenferro_ad as ad
import tenferro_ad.errors as errors
import tenferro_ad.linalg as linalg

PINNED_AD = (
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
    "jit",
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
    "traced",
    "transpose",
    "value_and_grad",
    "view_as_complex",
    "view_as_real",
    "vjp",
    "vmap",
    "where",
)
PINNED_LINALG = (
    "cholesky",
    "det",
    "diagonal",
    "eigh",
    "inv",
    "matmul",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "trace",
    "tril",
    "triu",
)
PINNED_ERRORS = (
    "ArgumentError",
    "ArgumentTypeError",
    "AxisError",
    "BackwardError",
    "CheckpointError",
    "Extract",
    "IndexOutOfBoundsError",
    "IntoValueError",
    "MissingRuleError",
    "NotUnique",
    "ScenarioError",
    "TapeError",
)


@pytest.mark.parametrize(
    ("module", "pinned"),
    [(ad, PINNED_AD), (linalg, PINNED_LINALG), (errors, PINNED_ERRORS)],
    ids=["tenferro_ad", "linalg", "errors"],
)
def test_public_names_are_pinned_and_sorted(module: object, pinned: tuple[str, ...]) -> None:
    """``__all__`` equals the pin, is sorted, and every name resolves."""
    names = tuple(module.__all__)  # type: ignore[attr-defined]
    assert names == pinned
    assert list(names) == sorted(names)
    for name in names:
        assert hasattr(module, name), name


@pytest.mark.parametrize("name", PINNED_AD + PINNED_LINALG)
def test_every_public_callable_has_a_docstring(name: str) -> None:
    """Each public function or class says what it does (and what it costs)."""
    obj = getattr(ad, name, None) or getattr(linalg, name)
    if inspect.ismodule(obj) or not callable(obj):
        return
    assert inspect.getdoc(obj), f"{name} has no docstring"


def test_errors_subclass_the_builtin_a_user_would_catch() -> None:
    """Each AD error is also the builtin exception a user would naturally catch."""
    assert issubclass(errors.MissingRuleError, NotImplementedError)
    assert issubclass(errors.NotUnique, errors.IntoValueError)
    assert issubclass(errors.Extract, errors.IntoValueError)
