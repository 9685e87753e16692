"""Sharded values in this process (one host device, so a one-device mesh): the mesh and
spec checks, the explicit host read, refused implicit reads, released values, the
sharded jit's argument checks and the optimizer's refusals.  Every refusal names the
operation and the argument and changes nothing.  The multi-device behaviour is in
``test_sharded.py`` and ``test_multiprocess.py`` (subprocesses)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_ad.errors import ArgumentError, ArgumentTypeError
from tenferro_storage import ledger
from tenferro_storage import runtime as rt
from tenferro_storage import sharding as sh
from tenferro_storage.errors import (
    CopyForbiddenError,
    DeviceResidentError,
    DistributedError,
    ShardingError,
)
from tenferro_storage.runtime._engine import lookup


@pytest.fixture
def mesh() -> sh.Mesh:
    return sh.Mesh(np.array(jax.devices()[:1]), ("data",))


def test_a_mesh_names_its_axes_engines_and_domains(mesh: sh.Mesh) -> None:
    assert mesh.shape == {"data": 1} and mesh.size == 1
    assert [e.kind for e in mesh.engines] == ["xla"] and mesh.domains == ("xla-cpu:0",)
    assert sh.Mesh.from_jax(mesh.jax_mesh) == mesh
    assert "data=1" in repr(mesh)


@pytest.mark.parametrize(("devices", "names", "match"), [
    ("grid", ("a", "b"), "1 dimension"),
    ("grid", (), "non-empty strings"),
    ("twice", ("a",), "names a device twice"),
    ("ints", ("a",), "must hold jax devices"),
    ("grid", ("a", "a"), "repeats a name"),
])
def test_a_malformed_mesh_is_refused_naming_the_argument(devices: str, names: Any,
                                                         match: str) -> None:
    d = jax.devices()[0]
    grid = {"grid": np.array([d]), "twice": np.array([d, d]), "ints": np.array([0])}[devices]
    with pytest.raises(ShardingError, match=match):
        sh.Mesh(grid, names)


@pytest.mark.parametrize(("spec", "match"), [
    (P("model"), "names axis 'model'; the mesh has"),
    (P("data", "data"), "uses axis 'data' twice"),
    (P(None, None, None), "3 entries for a value of 2"),
    ("data", "must be a jax.sharding.PartitionSpec"),
])
def test_a_spec_that_does_not_fit_the_mesh_is_refused(mesh: sh.Mesh, spec: Any,
                                                      match: str) -> None:
    with ledger.capture() as rec:
        with pytest.raises(ShardingError, match=match):
            sh.shard(np.zeros((2, 2)), mesh, spec)
    assert rec.events == []


def test_shard_and_gather_are_one_recorded_transfer_each_way(mesh: sh.Mesh) -> None:
    x = ts.from_numpy(np.arange(6.0).reshape(2, 3))
    with ledger.capture() as rec:
        s = sh.shard(x, mesh, P("data"))
    assert rec.copies == {ts.CopyReason.TRANSFER: 1}
    assert rec.allocations == {ts.AllocationReason.TRANSFER_DESTINATION: 1}
    assert s.shape == (2, 3) and s.dtype == np.float64 and s.shard_domains == ("xla-cpu:0",)
    with ledger.capture() as rec:
        host = s.gather()
    assert rec.copies == {ts.CopyReason.TRANSFER: 1}
    np.testing.assert_array_equal(host.to_numpy(), x.to_numpy())
    shard_view = s.shard_view(0)  # the shard is its own buffer, never the host's bytes
    with ts.borrow_arrays(x) as src:
        assert shard_view._desc.readonly().ctypes.data != src.ctypes.data
    shard_view.release()
    with ledger.forbid_copies(), pytest.raises(CopyForbiddenError):
        s.gather()
    with ledger.forbid_copies(), pytest.raises(CopyForbiddenError):
        sh.shard(x, mesh)


def test_a_sharded_value_is_never_read_on_the_host_implicitly(mesh: sh.Mesh) -> None:
    s = sh.shard(np.ones(4), mesh)
    with ledger.capture() as rec:
        with pytest.raises(DeviceResidentError, match=r"call \.gather\(\)"):
            np.asarray(s)
        with pytest.raises(DeviceResidentError, match="never read on the host implicitly"):
            s.to_numpy()
    assert rec.events == []
    with pytest.raises(ShardingError, match=r"already sharded; use value\.reshard"):
        sh.shard(s, mesh)


def test_a_released_sharded_value_frees_its_shards_and_refuses_use(mesh: sh.Mesh) -> None:
    s = sh.shard(np.ones(4), mesh)
    with ledger.capture() as rec:
        s.release()
    assert sum(1 for e in rec.events if e.kind.name == "RELEASE") == 1
    assert not s.is_live and "released" in repr(s)
    for use in (s.gather, lambda: s.reshard(P()), lambda: s.shard_domains):
        with pytest.raises(ShardingError, match="was released"):
            use()
    s.release()  # idempotent


def test_a_sharded_jit_takes_owners_and_numpy_and_returns_sharded_owners(mesh: sh.Mesh) -> None:
    f = ad.jit(lambda a, b: (ad.sin(a) * b, a), mesh=mesh, in_shardings=(P("data"), P()))
    x = sh.shard(np.linspace(0, 1, 4), mesh, P("data"))
    with ledger.capture() as rec:
        y, same = f(x, 2.0)  # the scalar is uploaded (recorded); the input returned is copied
    assert rec.copies == {ts.CopyReason.TRANSFER: 1, ts.CopyReason.EXPLICIT_DUPLICATE: 1}
    np.testing.assert_allclose(y.gather().to_numpy(), 2 * np.sin(np.linspace(0, 1, 4)))
    np.testing.assert_array_equal(same.gather().to_numpy(), np.linspace(0, 1, 4))
    assert same.spec == P() and f.cache_size == 1
    plain = ad.jit(lambda a: a + 1.0)  # a plain jit runs over its sharded arguments' mesh
    assert isinstance(plain(x), sh.ShardedTensor)
    scaled = ad.jit(lambda a, k: a * k, static_argnums=1)  # one program per static value
    for k in (2.0, 3.0, 2.0):
        np.testing.assert_allclose(scaled(x, k).gather().to_numpy(), k * np.linspace(0, 1, 4))


def test_a_sharded_jit_refuses_what_it_cannot_run(mesh: sh.Mesh) -> None:
    with pytest.raises(ArgumentTypeError, match="engine=, scratch_bytes=, donate_argnums="):
        ad.jit(ad.sin, mesh=mesh, donate_argnums=0)
    with pytest.raises(ArgumentTypeError, match="static_argnums=/static_argnames= do not"):
        ad.jit(ad.sin, mesh=mesh, static_argnums=0)
    with pytest.raises(ArgumentTypeError, match=r"argument 'mesh' must be a sharding\.Mesh"):
        ad.jit(ad.sin, mesh="data")  # type: ignore[arg-type]
    f = ad.jit(ad.sin, in_shardings=(P(),))
    with pytest.raises(ShardingError, match="no mesh"):
        f(np.ones(2))
    g = ad.jit(lambda a, b: a + b, mesh=mesh, in_shardings=(P(),))
    with pytest.raises(ShardingError, match=r"one entry per positional argument \(2\)"):
        g(np.ones(2), np.ones(2))
    h = ad.jit(ad.sin, mesh=mesh, in_shardings=(P(),))
    with pytest.raises(ArgumentTypeError, match="argument leaf 0 is a handle on the tape"):
        ad.grad(lambda a: ad.sum(h(a)))(ts.from_numpy(np.ones(2)))


def test_an_optimizer_refuses_mixed_or_mislaid_sharded_parameters(mesh: sh.Mesh) -> None:
    p = sh.shard(np.ones(4), mesh)
    host = ts.from_numpy(np.ones(4))
    with pytest.raises(ArgumentTypeError, match=r"params\[1\] is a Tensor while"):
        ad.optim.SGD(0.1).step([p, host], [sh.shard(np.ones(4), mesh), np.ones(4)])
    with pytest.raises(ArgumentError, match=r"gradient for params\[0\] must be a ShardedTensor"):
        ad.optim.SGD(0.1).step([p], [np.ones(4)])
    with pytest.raises(ArgumentError, match="clip_norm needs the gradients' global norm"):
        ad.optim.SGD(0.1, clip_norm=1.0).step([p], [sh.shard(np.ones(4), mesh)])
    opt = ad.optim.SGD(0.5)
    opt.step([p], [sh.shard(np.full(4, 2.0), mesh)])
    np.testing.assert_array_equal(p.gather().to_numpy(), np.zeros(4))
    assert opt.steps == 1


def test_initialize_checks_its_arguments_before_starting_anything() -> None:
    with pytest.raises(DistributedError, match="process_id 2 is not below num_processes 2"):
        sh.initialize("127.0.0.1:1", 2, 2)
    with pytest.raises(DistributedError, match="argument 'num_processes' must be an int"):
        sh.initialize("127.0.0.1:1", -1, 0)
    with pytest.raises(DistributedError, match="must be 'host:port'"):
        sh.initialize("localhost", 2, 1, initialization_timeout=0)
    assert sh.process_index() == 0 and sh.process_count() == 1


def test_an_optimizer_steps_and_gathers_shards_the_host_cannot_read(mesh: sh.Mesh) -> None:
    """As on a GPU: each shard goes down by ``runtime.download`` (one TRANSFER) and back."""
    domain = lookup(mesh.engines[0]).domain  # type: ignore[union-attr]
    p = sh.shard(np.ones(4), mesh)
    g = sh.shard(np.full(4, 2.0), mesh)
    domain.host_readable = False
    try:
        opt = ad.optim.SGD(0.25)
        with ledger.capture() as rec:
            opt.step([p], [g])
        assert rec.copies[ledger.CopyReason.TRANSFER] == 3  # p and g down, p up
        np.testing.assert_array_equal(p.gather().to_numpy(), np.full(4, 0.5))
    finally:
        domain.host_readable = True


def test_replace_shard_moves_in_a_matching_owner_and_refuses_anything_else(
    mesh: sh.Mesh,
) -> None:
    s = sh.shard(np.ones(4), mesh)
    engine = mesh.engines[0]
    new = rt.upload(engine, ts.from_numpy(np.full(4, 3.0)))
    with new.as_view() as v:
        with pytest.raises(ShardingError, match=r"replace_shard: argument 'owner' must be an "
                                                r"owning Tensor.*got TensorView"):
            s.replace_shard(0, v)  # type: ignore[arg-type]
        with pytest.raises(ts.errors.BorrowError):
            s.replace_shard(0, new)  # borrowed: refused, nothing moved
    for bad in (rt.upload(engine, ts.from_numpy(np.ones(3))),  # shape
                rt.upload(engine, ts.from_numpy(np.ones(4, np.float32))),  # dtype
                ts.from_numpy(np.ones(4))):  # domain (the host)
        with pytest.raises(ShardingError, match="argument 'owner' must be a whole buffer"):
            s.replace_shard(0, bad)
        bad.to_numpy()  # not consumed
    with pytest.raises(ShardingError, match="argument 'i' must be an int"):
        s.replace_shard(1.0, new)  # type: ignore[arg-type]
    with pytest.raises(IndexError, match="argument 'i' = 1 is not one of the 1 shard"):
        s.replace_shard(1, new)
    np.testing.assert_array_equal(s.gather().to_numpy(), np.ones(4))  # nothing changed
    s.replace_shard(np.int64(0), new)
    with pytest.raises(ts.errors.UseAfterMoveError):
        new.to_numpy()  # moved in: the caller's object no longer aliases the shard
    np.testing.assert_array_equal(s.gather().to_numpy(), np.full(4, 3.0))
