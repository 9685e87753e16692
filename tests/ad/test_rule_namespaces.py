"""The three rule namespaces implement the one vocabulary the core's Protocol declares."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tenferro_ad as ad
from tenferro_ad._core._namespace import HANDLE_NS, NUMPY_NS, VOCABULARY, RuleNamespace
from tenferro_ad._traced._trace import TRACE_NS

NAMESPACES = {"numpy": NUMPY_NS, "handle": HANDLE_NS, "trace": TRACE_NS}


def test_the_protocol_is_the_vocabulary() -> None:
    members = {
        n for n, v in vars(RuleNamespace).items() if inspect.isfunction(v) and not n.startswith("_")
    }
    assert members == set(VOCABULARY)
    assert "donated" in RuleNamespace.__annotations__


@pytest.mark.parametrize("kind", sorted(NAMESPACES))
def test_each_namespace_has_every_word(kind: str) -> None:
    ns = NAMESPACES[kind]
    # looked up on the instance's class or dict, not through a __getattr__ fallback
    missing = [w for w in VOCABULARY if w not in vars(type(ns)) and w not in vars(ns)]
    assert not missing, f"{kind} namespace lacks {missing}"
    assert all(callable(getattr(ns, w)) for w in VOCABULARY)


def test_the_handle_namespace_runs_the_public_ops() -> None:
    x = ad.constant(np.array([1.0, -2.0]))
    assert np.array_equal(HANDLE_NS.mul(x, x).to_numpy(), [1.0, 4.0])
    assert np.array_equal(HANDLE_NS.unbroadcast(ad.constant(np.ones((3, 2))), (2,)).to_numpy(),
                          [3.0, 3.0])
