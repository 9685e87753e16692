"""One ``argnums`` check for every transform: ``grad``/``value_and_grad`` and the Jacobian
transforms (``jacfwd``/``jacrev``/``hessian``) refuse the same inputs with the same error
class, each message naming the transform and 'argnums' (JAX refuses duplicates too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
from tenferro_ad.errors import ArgumentError, ArgumentTypeError

TRANSFORMS: list[tuple[str, Callable[..., Any]]] = [
    ("grad", ad.grad),
    ("grad", ad.value_and_grad),
    ("jacfwd", ad.jacfwd),
    ("jacrev", ad.jacrev),
]


def _f(x: Any, y: Any) -> Any:
    return ad.sum(x * y)


@pytest.mark.parametrize(("name", "transform"), TRANSFORMS)
@pytest.mark.parametrize(
    ("argnums", "error"),
    [((0, 0), ArgumentError), ((1, -1), ArgumentError), ((), ArgumentError),
     ((0, 2), ArgumentError), ("0", ArgumentTypeError)],
)
def test_every_transform_refuses_the_same_argnums(
    name: str, transform: Callable[..., Any], argnums: Any, error: type
) -> None:
    x = np.linspace(0.1, 1.0, 3)
    with pytest.raises(error, match="argnums") as info:
        transform(_f, argnums=argnums)(x, x)
    assert type(info.value) is error
    assert str(info.value).startswith(f"{name}:"), str(info.value)


def test_jacfwd_and_grad_refuse_a_duplicate_argnum_alike() -> None:
    """``argnums=(0, 0)``: the same error class from both, naming 'argnums' and the
    duplicate."""
    x = np.linspace(0.1, 1.0, 3)
    errors = []
    for transform in (ad.jacfwd, ad.grad):
        with pytest.raises(ArgumentError, match="argnums") as info:
            transform(_f, argnums=(0, 0))(x, x)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert all("twice" in str(e) for e in errors)
