"""The programs the shipped scenarios run (``tenferro_ad/scenarios/data/*.toml``, package data).

Every program takes its inputs as positional handles, a keyword ``checkpoint`` (a
checkpoint policy, or ``None`` to run without checkpointing) and its scenario
``params`` as keywords, and returns a scalar loss handle.  They are written with the
public ``tenferro_ad`` API only, so they double as examples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tenferro_ad as ad

__all__ = ["deep_chain", "explicit_copies", "mlp", "named_chain", "tensor_network"]


def _maybe_checkpoint(fn: Callable[..., Any], policy: Any) -> Callable[..., Any]:
    return fn if policy is None else ad.checkpoint(fn, policy=policy)


def mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any, y: Any, *, checkpoint: Any = None) -> Any:
    """Mean squared error of a one-hidden-layer tanh MLP; the hidden layer is the
    checkpoint region when checkpointing."""

    def hidden(x: Any, w1: Any, b1: Any) -> Any:
        return ad.tanh(x @ w1 + b1)

    h = _maybe_checkpoint(hidden, checkpoint)(x, w1, b1)
    d = h @ w2 + b2 - y
    return ad.mean(d * d)


def deep_chain(x: Any, *, checkpoint: Any = None, depth: int = 64, segments: int = 8) -> Any:
    """``sum(sin(sin(...sin(x))))`` with ``depth`` sines in ``segments`` equal segments;
    each segment is a checkpoint region when checkpointing.

    Memory arithmetic (n = x's bytes, L = depth // segments): without checkpointing the
    tape retains every sine's input, ``depth - 1`` interior values; with checkpointing it
    retains the ``segments - 1`` segment boundaries and, during one segment's backward,
    that segment's ``L - 1`` recomputed interior values.
    """
    if depth % segments:
        raise ValueError(f"deep_chain: depth {depth} is not a multiple of segments {segments}")
    steps = depth // segments

    def segment(v: Any) -> Any:
        for _ in range(steps):
            v = ad.sin(v)
        return v

    seg = _maybe_checkpoint(segment, checkpoint)
    for _ in range(segments):
        x = seg(x)
    return ad.sum(x)


def named_chain(x: Any, *, checkpoint: Any = None, depth: int = 64, every: int = 8) -> Any:
    """The deep sine chain as ONE region whose every ``every``-th value is named
    ``"stage"`` with :func:`tenferro_ad.name`: under ``save_named`` those values become
    region boundaries, so backward recomputes one stage at a time."""

    def chain(v: Any) -> Any:
        for i in range(1, depth + 1):
            v = ad.sin(v)
            if i % every == 0 and i < depth:
                v = ad.name(v, "stage")
        return v

    return ad.sum(_maybe_checkpoint(chain, checkpoint)(x))


def tensor_network(a: Any, b: Any, c: Any, d: Any, *, checkpoint: Any = None) -> Any:
    """Squared norm of a four-site open tensor train ``psi[i,j,k,l]`` contracted with
    ``einsum``; under ``save_contractions`` each einsum output is a region boundary."""

    def contract(a: Any, b: Any, c: Any, d: Any) -> Any:
        ab = ad.einsum("ip,pjq->ijq", a, b)
        abc = ad.einsum("ijq,qkr->ijkr", ab, c)
        return ad.einsum("ijkr,rl->ijkl", ad.tanh(abc), d)

    psi = _maybe_checkpoint(contract, checkpoint)(a, b, c, d)
    return ad.sum(psi * psi)


def explicit_copies(x: Any, *, checkpoint: Any = None) -> Any:
    """The only copies a program makes are the ones it asks for: one explicit duplicate
    (``duplicate_value``) and one numpy constant imported (a recorded ``TRANSFER``)."""
    y = ad.sin(x)
    frozen = y.duplicate_value()  # an owner: borrowed by the next op as a constant
    weights = np.linspace(0.5, 1.5, num=int(np.prod(x.shape))).reshape(x.shape)
    z = _maybe_checkpoint(lambda v: ad.exp(v) * weights, checkpoint)(y)
    return ad.sum(z * frozen)
