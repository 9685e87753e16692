"""``jit(static_argnums=, static_argnames=)``, ``Jitted.cache_info()``, and the error for
Python control flow on a traced value (it names the value, the line and the construct)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentTypeError
from tenferro_ad.traced import TracerError
from tenferro_storage.errors import UseAfterMoveError
from tests.ad._oracle import to_np


def _power(x: Any, n: int, *, scale: float = 1.0) -> Any:
    for _ in range(n):  # a Python loop over a static count: unrolled once per value
        x = x * 2.0
    return x * scale


@pytest.mark.parametrize("engine", ["host", "xla"])
def test_static_values_are_part_of_the_cache_key(engine: str) -> None:
    f = ad.jit(_power, static_argnums=1, static_argnames="scale", engine=engine)
    x = np.ones(2)
    np.testing.assert_allclose(to_np(f(x, 3)), 8.0)
    np.testing.assert_allclose(to_np(f(x, 3)), 8.0)
    np.testing.assert_allclose(to_np(f(x, 2, scale=0.5)), 2.0)
    np.testing.assert_allclose(to_np(f(x, 1)), 2.0)
    info = f.cache_info()
    assert (info.hits, info.misses, info.size) == (1, 3, 3)
    np.testing.assert_allclose(to_np(f(x + 1.0, 3)), 16.0)  # same types, same statics: a hit
    assert f.cache_info().hits == 2


def test_unhashable_static_value_is_refused_naming_it() -> None:
    f = ad.jit(_power, static_argnums=(1,))
    with pytest.raises(ArgumentTypeError, match="static positional argument 1 must be hashable"):
        f(np.ones(2), [1, 2])
    g = ad.jit(_power, static_argnames=("scale",))
    with pytest.raises(ArgumentTypeError, match="static keyword argument 'scale'"):
        g(np.ones(2), 1, scale={"a": 1})
    assert f.cache_info().misses == 0 and g.cache_info().misses == 0
    with pytest.raises(ArgumentTypeError, match="static_argnums"):
        ad.jit(_power, static_argnums="n")  # type: ignore[arg-type]


def _branchy(x: Any) -> Any:
    if ad.sum(x) > 0:  # the line the error must name
        return x
    return -x


def _loopy(x: Any) -> Any:
    while ad.sum(x) < 10.0:
        x = x * 2.0
    return x


def _indexy(x: Any, k: Any) -> Any:
    return x[k]


def test_python_control_flow_on_a_traced_value_names_value_line_and_construct() -> None:
    with pytest.raises(TracerError) as e:
        ad.jit(_branchy)(np.ones(3))
    msg = str(e.value)
    assert "bool[]" in msg and "`gt`" in msg
    assert "test_jit_static.py" in msg and "if ad.sum(x) > 0:" in msg
    assert "lax.cond" in msg and "lax.switch" in msg and "lax.while_loop" in msg
    assert "ad.where(c, a, b) only selects elementwise" in msg
    with pytest.raises(TracerError, match=r"while ad.sum\(x\) < 10.0:.*lax.while_loop"):
        ad.jit(_loopy)(np.ones(3))
    with pytest.raises((TracerError, ArgumentTypeError),
                       match=r"return x\[k\].*lax.fori_loop or lax.scan"):
        ad.jit(_indexy)(np.ones(3), np.int64(1))


def test_donated_positions_count_only_traced_arguments() -> None:
    """``donate_argnums`` names positions of the call; with a static argument before it,
    the donated one is still the argument the caller named (and a static one cannot be
    donated)."""
    f = ad.jit(lambda n, x: x * float(n), static_argnums=0, donate_argnums=1, engine="host")
    x = ts.from_numpy(np.ones(3))
    out = f(3, x)
    np.testing.assert_allclose(to_np(out), 3.0)
    with pytest.raises(UseAfterMoveError):  # the owner the caller donated was consumed
        x.to_numpy()
    del out
    g = ad.jit(lambda n, x: x * float(n), static_argnums=0, donate_argnums=0, engine="host")
    with pytest.raises(ArgumentTypeError, match="both static and donated"):
        g(3, np.ones(3))
