"""An optimizer step on sharded parameters (``tenferro_storage.sharding.ShardedTensor``).

XLA buffers are never written by the host, so a shard's update runs on a host copy: per
shard, one recorded ``TRANSFER`` down (``runtime.download``), the optimizer's own update
rule in place on the host (the same kernels as for host owners, with one state per
device: a shard's state lives with the rule that updates it; a gradient shard is read in
place where the host can read its buffer, else it comes down by one ``TRANSFER`` too),
one recorded ``TRANSFER`` back up into the shard's domain (``runtime.upload``), which
replaces the shard (the old one is released).  Replicas of a replicated parameter are
updated alike from identical gradients, so they stay identical.
"""

from __future__ import annotations

from typing import Any

from tenferro_storage import runtime as rt
from tenferro_storage._pytree import PyTreeDef, tree_unflatten
from tenferro_storage.providers._sharded import ShardedTensor
from tenferro_storage.runtime._engine import lookup

from ..errors import ArgumentError, ArgumentTypeError


def is_sharded(triples: list[tuple[str, Any, Any]]) -> bool:
    """Whether the step's parameters are sharded values. O(parameters)."""
    return any(type(p) is ShardedTensor for _, p, _ in triples)


def _clone(opt: Any) -> Any:
    """A fresh optimizer with ``opt``'s rule and hyperparameters and no state. O(1)."""
    c = object.__new__(type(opt))
    c.__dict__.update(opt.__dict__)
    c._state, c._scratch, c._structure, c._loaded_structure = {}, {}, None, None
    c._per_device = {}
    return c


def step_sharded(opt: Any, triples: list[tuple[str, Any, Any]], structure: PyTreeDef) -> None:
    """``opt.step`` for sharded parameters (see the module docstring): every parameter a
    ``ShardedTensor`` and its gradient one with the same layout (or ``None``).  O(size):
    two recorded ``TRANSFER`` copies per shard plus the rule's host kernels."""
    if opt.clip_norm is not None:
        raise ArgumentError(
            "step: clip_norm needs the gradients' global norm, which spans shards; clip "
            "inside the sharded program instead (or drop clip_norm) for sharded parameters"
        )
    first: ShardedTensor | None = None
    for path, p, g in triples:
        if type(p) is not ShardedTensor:
            raise ArgumentTypeError(
                f"step: {path} is a {type(p).__name__} while other parameters are sharded; "
                "shard every parameter over one mesh (sharding.shard)"
            )
        if first is None:
            first = p
        elif p.mesh != first.mesh:
            raise ArgumentError(f"step: {path} is sharded over another mesh than {triples[0][0]}")
        if g is not None and (type(g) is not ShardedTensor or g.shape != p.shape
                              or not g.sharding.is_equivalent_to(p.sharding, p.ndim)):
            raise ArgumentError(
                f"step: the gradient for {path} must be a ShardedTensor laid out as the "
                f"parameter ({p.spec}, shape {p.shape}); ask the program for that "
                "out_shardings, or reshard it"
            )
    per_device: dict[Any, Any] = opt.__dict__.setdefault("_per_device", {})
    assert first is not None
    engines = dict(zip(first.mesh.local_devices, first.mesh.engines, strict=True))
    for device in first.shard_devices:
        engine = engines[device]
        # a gradient shard is read in place where the host can read its buffer (XLA's CPU),
        # else it comes down by one recorded TRANSFER too (a GPU)
        domain = getattr(lookup(engine), "device_domain", None)
        in_place = bool(getattr(domain, "host_readable", False))
        rule = per_device.get(device)
        if rule is None:
            rule = per_device[device] = _clone(opt)
            rule.steps = opt.steps
        hosts: list[Any] = []
        grads: list[Any] = []
        views: list[Any] = []
        try:
            for _, p, g in triples:
                i = p.shard_devices.index(device)
                src = p.shard_view(i)
                views.append(src)
                hosts.append(rt.download(src))
                if g is None:
                    grads.append(None)
                else:
                    gv = g.shard_view(g.shard_devices.index(device))
                    views.append(gv)
                    grads.append(gv if in_place else rt.download(gv))
            rule.step(tree_unflatten(structure, hosts), tree_unflatten(structure, grads))
        finally:
            for v in views:
                v.release()
        for (_, p, _), h in zip(triples, hosts, strict=True):
            p.replace_shard(p.shard_devices.index(device), rt.upload(engine, h))
    opt.steps += 1
