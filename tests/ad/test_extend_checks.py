"""A user primitive's rule output is checked at the boundary where it enters the sweep."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad import extend
from tenferro_ad._core._primitive import REGISTRY, Primitive
from tenferro_ad.errors import ArgumentTypeError, IndexOutOfBoundsError
from tenferro_storage.errors import TenferroError


@pytest.fixture
def sin_with() -> Iterator[Callable[[Any, str], Any]]:
    """Define a user sine with a given VJP rule; unregistered afterwards (so registry-driven
    tests elsewhere never see a deliberately broken rule)."""
    made: list[str] = []

    def make(rule: Any, name: str) -> Any:
        made.append(name)
        return extend.defprimitive(name, lambda x: np.sin(x), 1, save_in=(0,), vjp=(rule,))

    yield make
    for name in made:
        REGISTRY.pop(name, None)


def test_a_rule_returning_the_wrong_shape_is_refused_naming_the_primitive(
    sin_with: Callable[[Any, str], Any],
) -> None:
    bad = sin_with(lambda ops, g, x: np.ones(7, np.float64), "test_bad_shape_rule")
    x = ts.from_numpy(np.ones(3))
    with pytest.raises(ad.errors.ArgumentError, match=r"test_bad_shape_rule.*argument 0"):
        ad.grad(lambda v: ad.sum(extend.bind(bad, v)))(x)
    np.testing.assert_array_equal(x.to_numpy(), np.ones(3))  # nothing changed


def test_a_rule_returning_an_integer_cotangent_is_refused(
    sin_with: Callable[[Any, str], Any],
) -> None:
    bad = sin_with(lambda ops, g, x: np.ones(3, np.int32), "test_bad_dtype_rule")
    with pytest.raises(ad.errors.ArgumentTypeError, match="test_bad_dtype_rule"):
        ad.grad(lambda v: ad.sum(extend.bind(bad, v)))(ts.from_numpy(np.ones(3)))


@pytest.mark.parametrize(
    "dtype, arg", [(np.float32, np.float64), (np.complex64, np.complex128)],
    ids=["float32-for-float64", "complex64-for-complex128"],
)
def test_a_rule_returning_another_precision_is_refused(
    sin_with: Callable[[Any, str], Any], dtype: Any, arg: Any
) -> None:
    """A cotangent of the argument's kind but another precision is a silent precision
    loss: refused naming the primitive and both dtypes.  Mutant: ``check_rule_output``'s
    ``dt.kind == want_dt.kind`` turned into ``!=`` (float32 passes for float64)."""
    bad = sin_with(lambda ops, g, x: np.ones(3, dtype), "test_bad_precision_rule")
    x = ts.from_numpy(np.ones(3, arg))
    want = rf"test_bad_precision_rule: .*argument 0 returned a {np.dtype(dtype)} cotangent"
    with pytest.raises(ad.errors.ArgumentTypeError, match=want):
        ad.grad(lambda v: ad.sum(ad.real(extend.bind(bad, v))))(x)


def test_a_correct_rule_passes_the_check(sin_with: Callable[[Any, str], Any]) -> None:
    good = sin_with(lambda ops, g, x: ops.mul(g, ops.cos(x)), "test_good_rule")
    g = ad.grad(lambda v: ad.sum(extend.bind(good, v)))(ts.from_numpy(np.ones(3)))
    np.testing.assert_allclose(g.to_numpy(), np.cos(np.ones(3)))


def _refusal(f: Callable[[], object]) -> BaseException:
    with pytest.raises(TenferroError) as info:
        f()
    return info.value


def test_defvjp_and_defjvp_refuse_extra_or_uncallable_rules_naming_the_primitive() -> None:
    """Too many rules, or a rule that is neither callable, NONDIFF nor None, is an
    ArgumentTypeError naming the primitive and the argument; nothing is stored."""
    prim = Primitive("rule_checks_p", np.sin, 1)
    for define in (prim.defvjp, prim.defjvp):
        err = _refusal(lambda define=define: define(np.cos, np.cos))
        assert isinstance(err, ArgumentTypeError)
        assert "'rule_checks_p'" in str(err) and "argument 'rules'" in str(err)
        err = _refusal(lambda define=define: define(5))
        assert isinstance(err, ArgumentTypeError)
        assert "'rule_checks_p'" in str(err) and "argument 0" in str(err)
    assert prim.vjps == [None] and prim.jvps == [None]
    prim.defvjp(extend.NONDIFF).defjvp(None)  # the sentinels stay accepted


@pytest.mark.parametrize("i", [1, 5, -1])
def test_rule_lookup_outside_the_arguments_names_the_index(i: int) -> None:
    """vjp_rule/jvp_rule(i) with i outside 0..nargs-1 (negative included: it must not count
    from the end) is an IndexOutOfBoundsError naming the primitive and ``i``."""
    prim = Primitive("rule_index_p", np.sin, 1).defvjp(np.cos).defjvp(np.cos)
    for lookup in (prim.vjp_rule, prim.jvp_rule):
        err = _refusal(lambda lookup=lookup: lookup(i))
        assert isinstance(err, IndexOutOfBoundsError)
        assert "'rule_index_p'" in str(err) and f"argument 'i' is {i}" in str(err)
    with pytest.raises(ArgumentTypeError, match="argument 'i' must be an int"):
        prim.vjp_rule("0")  # type: ignore[arg-type]
    assert prim.vjp_rule(0) is np.cos
