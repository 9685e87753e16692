"""P0: engine discovery, caller-selected engine ids, domains distinct from endpoints.

Run alone with ``python3 -m pytest tests/runtime/test_engine_identity.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_storage import runtime as rt
from tenferro_storage.errors import EngineError, SubmitRejected
from tenferro_storage.providers import HostExecutionProvider, SimulatedAsyncProvider

from .support import axpy_program, inputs, sim_provider


def test_discovery_lists_a_host_and_a_simulated_asynchronous_engine() -> None:
    infos = rt.engines()
    kinds = {i.id.kind: i for i in infos}
    assert kinds["host"].synchronous is True
    assert kinds["sim-async"].synchronous is False
    assert list(infos) == sorted(infos, key=lambda i: i.id)


def test_an_allocation_domain_is_distinct_from_an_access_endpoint() -> None:
    """Both engines reach host-domain memory, through different endpoints; the
    asynchronous engine also reaches its own device domain, which the host cannot."""
    infos = rt.engines()
    host = next(i for i in infos if i.id.kind == "host")
    sim = next(i for i in infos if i.id.kind == "sim-async")
    assert host.domains == frozenset({rt.AllocationDomainId("host")})
    assert rt.AllocationDomainId("host") in sim.domains and len(sim.domains) == 2
    assert host.endpoint != sim.endpoint
    assert not isinstance(host.endpoint, rt.AllocationDomainId)


def test_a_device_engine_reports_its_own_device_domain_next_to_the_host_domain() -> None:
    """A device engine reaches its own memory and host memory; each device has its own
    domain, and upload targets the selected engine's domain only."""
    with sim_provider() as a, sim_provider() as b:
        assert a.engine is not None and b.engine is not None
        assert a.domain is not None and b.domain is not None and a.domain.name != b.domain.name
        info = rt.engine_info(a.engine)
        assert info.domains == {rt.AllocationDomainId("host"), rt.AllocationDomainId(a.domain.name)}
        assert a.domain.name in info.description
        assert rt.engine_info(rt.host_engine()).domains == {rt.AllocationDomainId("host")}
        x = ts.arange(3.0)
        on_a = rt.upload(a.engine, x)
        with on_a.as_view() as v:
            assert v._storage.claim.root.domain == a.domain.name
        g = ts.AllocationGroup()
        pkg = rt.ExecutionInputs(g, [g.insert(on_a)])
        with pytest.raises(SubmitRejected) as err:  # b cannot reach a's memory
            rt.submit(b.engine, rt.ProgramBuilder(1).build(rt.Value(0)), pkg)
        assert err.value.cause.kind is rt.SubmitErrorKind.DOMAIN and err.value.value is pkg
        del err
        unknown = rt.EngineId("sim-async", 10**6)
        with pytest.raises(EngineError):
            rt.upload(unknown, x)


def test_registered_engines_get_fresh_ids_and_are_selected_by_id_only() -> None:
    with sim_provider() as a, sim_provider() as b:
        assert a.engine is not None and b.engine is not None
        assert a.engine != b.engine and a.engine.kind == b.engine.kind == "sim-async"
        ids = {i.id for i in rt.engines()}
        assert {a.engine, b.engine} <= ids
        # Each submission runs on exactly the engine the caller named.
        pkg, _, _ = inputs()
        h = rt.submit(b.engine, axpy_program(), pkg)
        assert h.engine == b.engine
        assert isinstance(h.wait(), rt.Completed)
        assert b.drain(5)
        assert b.counters.dispatches == 1 and a.counters.dispatches == 0
        gone = a.engine
    assert gone not in {i.id for i in rt.engines()}


def test_an_unknown_engine_id_is_rejected_with_the_exact_inputs() -> None:
    pkg, _, _ = inputs()
    with pytest.raises(SubmitRejected) as err:
        rt.submit(rt.EngineId("host", 10_000), axpy_program(), pkg)
    cause, back = err.value.into_parts()
    assert back is pkg and cause.kind is rt.SubmitErrorKind.UNKNOWN_ENGINE
    with pytest.raises(EngineError):
        rt.engine_info(rt.EngineId("nope", 0))
    del err, back


def test_nothing_assumes_engine_zero() -> None:
    """A second host engine is as good as the first: the caller picks it by id."""
    provider = HostExecutionProvider()
    engine = rt.register_engine(provider)
    try:
        assert engine.index >= 1
        pkg, _, _ = inputs()
        out = rt.submit(engine, axpy_program(), pkg).wait()
        assert isinstance(out, rt.Completed)
        assert provider.counters.submissions == 1
        view = out.bundle.output(0)
        assert isinstance(view, ts.TensorView)
        np.testing.assert_array_equal(view.to_numpy(), [1.0, 2.0, 5.0])
        del view, out
    finally:
        rt.unregister_engine(engine)
    assert rt.engine_info(rt.host_engine()).synchronous


def test_registering_twice_or_unregistering_an_unknown_engine_is_refused() -> None:
    provider = SimulatedAsyncProvider()
    engine = rt.register_engine(provider)
    try:
        with pytest.raises(ValueError, match="already registered"):
            rt.register_engine(provider)
    finally:
        rt.unregister_engine(engine)
        provider.close()
    with pytest.raises(EngineError):
        rt.unregister_engine(engine)
    with pytest.raises(TypeError):
        rt.register_engine(object())  # type: ignore[arg-type]


def test_engine_ids_print_as_kind_and_index() -> None:
    assert str(rt.EngineId("sim-async", 3)) == "sim-async:3"
    assert str(rt.AccessEndpoint("x")) == "x" and str(rt.AllocationDomainId("host")) == "host"


class _ElsewhereProvider(HostExecutionProvider):
    """A synchronous engine whose endpoint reaches only another allocation domain."""

    def domains(self) -> frozenset[rt.AllocationDomainId]:
        return frozenset({rt.AllocationDomainId("elsewhere")})


def test_submission_routes_by_domain_and_refuses_unreachable_inputs() -> None:
    engine = rt.register_engine(_ElsewhereProvider())
    try:
        assert rt.engine_info(engine).domains == {rt.AllocationDomainId("elsewhere")}
        pkg, _, _ = inputs()
        with pytest.raises(SubmitRejected) as err:
            rt.submit(engine, axpy_program(), pkg)
        cause, back = err.value.into_parts()
        del err
        assert back is pkg and cause.kind is rt.SubmitErrorKind.DOMAIN
        assert "'host'" in cause.message and "elsewhere" in cause.message
        # The same package runs on an engine whose endpoint reaches the host domain.
        assert isinstance(rt.submit(rt.host_engine(), axpy_program(), back).wait(), rt.Completed)
        del back
    finally:
        rt.unregister_engine(engine)
