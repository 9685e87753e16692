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


_MODES: list[tuple[str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
    ("eager", lambda g: g),
    ("jit", ad.jit),
    ("vmap", ad.vmap),
]


@pytest.mark.parametrize(("mode", "wrap"), _MODES)
@pytest.mark.parametrize("argnums", [1, -1, np.int64(1), np.int32(-1)])
def test_negative_and_numpy_integer_argnums_give_a_single_gradient_in_every_mode(
    mode: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]], argnums: Any
) -> None:
    """argnums as a negative int or a numpy integer names one argument in eager, jit(grad)
    and vmap(grad) alike, and its gradient comes back alone (not in a tuple), as JAX."""
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    g = wrap(ad.grad(lambda x, y: ad.sum(x * y * y), argnums=argnums))(a, b)
    assert not isinstance(g, tuple)
    np.testing.assert_allclose(g.to_numpy(), 2 * a * b)  # (vmap: per-example, the same)


def test_numpy_integer_argnums_in_a_tuple_gives_a_tuple() -> None:
    a = np.array([1.0, 2.0])
    g = ad.grad(lambda x, y: ad.sum(x * y), argnums=(np.int64(0), -1))(a, a)
    assert isinstance(g, tuple) and len(g) == 2
