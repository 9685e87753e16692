"""Compiling batched programs: ``jit(vmap(f))`` runs the batching rules (registered next to
each primitive's JVP/VJP in its op file) and compiles the batched graph, with buffer
reuse, to JAX's values."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad._traced._batch_rules import RULES
from tenferro_storage import AllocationReason, ledger
from tests.traced._specs import close

# these tests are about the host program (its instructions, buffers and ledger):
# they name the host engine, which jit no longer picks by default when jax is installed
host_jit = functools.partial(ad.jit, engine="host")

RNG = np.random.default_rng(9)
XS = RNG.normal(size=(5, 3, 4))
W = RNG.normal(size=(4, 2))


def _f(m: Any, x: Any, w: Any) -> Any:
    h = m.tanh(x @ w) * 2.0 + 1.0
    return m.sum(m.exp(m.sin(h)), axis=-1) + m.max(x[:, ::2], axis=-1)


def test_jit_of_vmap_matches_jax_and_reuses_buffers() -> None:
    """The batched program is compiled like any other: JAX's values, and the elementwise
    tail writes in place (fewer allocations than instructions)."""
    jf = host_jit(ad.vmap(lambda x, w: _f(ad, x, w), in_axes=(0, None)))
    want = jax.vmap(lambda x, w: _f(jnp, x, w), in_axes=(0, None))(XS, W)
    x, w = ts.from_numpy(XS), ts.from_numpy(W)
    close(jf(x, w), want)
    program = jf.lower(x, w).program
    with ledger.capture() as rec:
        close(jf(x, w), want)
    n_alloc = rec.allocations[AllocationReason.OPERATION_OUTPUT]
    assert sum(i.into is not None for i in program.instructions) >= 3
    assert n_alloc == len(program.instructions) - sum(
        i.into is not None for i in program.instructions
    )


def test_grad_of_jit_of_vmap_matches_jax() -> None:
    """``grad(jit(vmap(f)))`` binds the compiled batched graph on the tape."""
    got = ad.grad(lambda w: ad.sum(ad.jit(ad.vmap(lambda x, v: _f(ad, x, v),
                                                   in_axes=(0, None)))(XS, w)))(W)
    want = jax.grad(lambda w: jnp.sum(jax.vmap(lambda x: _f(jnp, x, w))(XS)))(W)
    close(got, want)


def test_every_batching_rule_is_registered_beside_its_primitive() -> None:
    """The op file that defines a primitive (``defprimitive("name", ...)``) also registers
    its batching rule (``defbatch(NAME, ...)`` after it in the same file, or inside the
    family's ``_unary`` helper); identity, defined by the functional core, is the one rule
    registered by ``_batching``."""
    import tenferro_ad._traced._batching as batching
    import tenferro_ad.ops as ops

    sources = {
        m.__name__: inspect.getsource(m)
        for m in (ops.elementwise, ops.complex, ops.reduce, ops.shape, ops.linalg, ops.einsum,
                  ops.dense_linalg, ops.math, ops.special, ops.scan, ops.fft, ops.manip,
                  importlib.import_module("tenferro_ad.ops._along"))
    }
    # loops and branches: made once per arity in tenferro_ad._control, each with its rule
    control = {
        name: inspect.getsource(importlib.import_module(f"tenferro_ad._control.{mod}"))
        for name, mod in (("scan", "_scan"), ("while_loop", "_while"), ("cond", "_cond"),
                          ("while_loop_result", "_while"))
    }
    # custom_vjp/custom_jvp calls: made once per (kind, arity) by _custom_call.call_primitive
    custom = inspect.getsource(importlib.import_module("tenferro_ad._custom_call"))
    for prim in RULES:  # (keyed by the Primitive object; its name finds its home)
        name = prim.name
        if name in ("custom_vjp_call", "custom_jvp_call"):
            assert 'Primitive(f"custom_{kind}_call"' in custom, name
            assert "defbatch(p, _batch_rule(kind))" in custom, name
            continue
        if name in control:
            assert f'Primitive(\n    "{name}"' in control[name] or \
                f'Primitive("{name}"' in control[name], name
            assert "defbatch(" in control[name], name
            continue
        if name == "identity":
            assert 'defbatch(IDENTITY' in inspect.getsource(batching)
            continue
        pat = re.compile(
            r'^(\w+)(?::[^=\n]*)? = (?:\w+\(\s*)?(?:def(?:primitive|pointwise)|_unary)\('
            r'\s*(?:#[^\n]*\n\s*)?"' + name + '"', re.M,
        )
        homes = [(m, found) for m, src in sources.items() if (found := pat.search(src))]
        assert len(homes) == 1, (name, homes)
        module, match = homes[0]
        assert match is not None
        var = match.group(1)
        if "_unary(" in match.group(0):  # the family's unary helper registers the rule
            helper = re.search(r"^def _unary\(.*?^    return defbatch\(", sources[module],
                               re.M | re.S)
            assert helper is not None, (name, module)
            continue
        assert re.search(rf"defbatch\({var},", sources[module]), (name, module, var)
