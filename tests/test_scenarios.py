"""The shipped ledger scenarios (package data: ``tenferro_ad/scenarios/data/*.toml``)
checked through the runner and the command line, their gradients against JAX
(``jax.checkpoint`` for the checkpointed ones), and the deep chain's checkpoint saving
against the arithmetic of the program."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import tenferro_storage as ts
from tenferro_ad.scenarios import (
    SHIPPED,
    Expectation,
    Scenario,
    ScenarioResult,
    format_table,
    load_files,
    make_inputs,
    run_scenarios,
)
from tenferro_ad.scenarios.__main__ import main
from tenferro_storage.ledger import AllocationReason

SCENARIOS = SHIPPED
REQUIRED = {"mlp", "deep_chain", "deep_chain_checkpointed", "tensor_network", "explicit_copies"}
# the contract's CPU lane: eager and traced forward plus backward, and a checkpoint case
REQUIRED_TRACED = {"mlp_traced", "deep_chain_traced", "deep_chain_checkpointed_traced",
                   "named_chain_traced", "tensor_network_save_contractions_traced"}


@pytest.fixture(scope="module")
def results() -> dict[str, ScenarioResult]:
    return {r.scenario.name: r for r in run_scenarios(load_files([SCENARIOS]))}


def test_the_required_scenarios_are_shipped(results: dict[str, ScenarioResult]) -> None:
    assert set(results) >= REQUIRED | REQUIRED_TRACED
    assert {r.scenario.name for r in results.values() if r.scenario.mode == "traced"} >= \
        REQUIRED_TRACED


def _twin(results: dict[str, ScenarioResult], traced: Scenario) -> ScenarioResult:
    """The eager scenario running the same program on the same inputs and policy."""
    (twin,) = [
        r for r in results.values()
        if r.scenario.mode == "eager" and (r.scenario.program, r.scenario.inputs,
                                           r.scenario.checkpoint, r.scenario.policy,
                                           r.scenario.params, r.scenario.seed)
        == (traced.program, traced.inputs, traced.checkpoint, traced.policy, traced.params,
            traced.seed)
    ]
    return twin


def test_every_traced_scenario_has_an_eager_twin_with_the_same_loss_and_gradients(
    results: dict[str, ScenarioResult],
) -> None:
    """Both modes run the same program; each has its own expected multisets."""
    traced = [r for r in results.values() if r.scenario.mode == "traced"]
    assert traced
    for r in traced:
        twin = _twin(results, r.scenario)
        assert r.passed and twin.passed
        assert r.observation.loss == pytest.approx(twin.observation.loss, rel=1e-12)
        for a, b in zip(r.observation.gradients, twin.observation.gradients, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14, err_msg=r.scenario.name)
        assert r.scenario.expect != twin.scenario.expect  # derived per mode, not shared


def test_traced_recomputation_matches_the_eager_checkpoint(
    results: dict[str, ScenarioResult],
) -> None:
    recompute = AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT
    for r in results.values():
        if r.scenario.mode == "traced" and r.scenario.checkpoint:
            twin = _twin(results, r.scenario)
            assert r.allocations[recompute] == twin.allocations[recompute], r.scenario.name
            assert r.allocations[recompute] > 0


def test_traced_deep_chain_peak_follows_the_program_arithmetic(
    results: dict[str, ScenarioResult],
) -> None:
    """Compiled halves: the residuals are the backward execution's inputs, held until it
    ends.  Plain: D - 1 sine outputs handed over plus the loss, and in backward the
    previous cotangent, cos and the product: (D - 1 + 3)*n + 8.  Checkpointed: S - 1
    boundaries, one segment's L - 1 recomputed values, cos and the product:
    (S - 1 + L - 1 + 2)*n + 8."""
    d, s, n = 64, 8, 4096 * 8
    l_ = d // s
    assert results["deep_chain_traced"].peak_bytes == (d - 1 + 3) * n + 8
    ckpt = results["deep_chain_checkpointed_traced"].peak_bytes
    assert ckpt == (s - 1 + l_ - 1 + 2) * n + 8
    assert results["named_chain_traced"].peak_bytes == ckpt


def test_traced_forward_half_hands_over_only_the_checkpoint_boundaries() -> None:
    """The cut value_and_grad graph: the plain chain hands over x and 63 sines, the
    checkpointed one x and the 7 segment boundaries (interior sines die in forward)."""
    from tenferro_ad import save_nothing, traced
    from tenferro_ad._traced._retained import split_halves
    from tenferro_ad.scenarios.programs import deep_chain

    x = np.zeros(16)
    for policy, handed in ((None, 64), (save_nothing, 8)):
        g = traced.trace(lambda v, p=policy: deep_chain(v, checkpoint=p))(x)
        halves = split_halves(traced.value_and_grad(g))
        assert len(halves.residuals) == handed
        assert len(traced.retained(traced.value_and_grad(g))) == handed


def test_a_wrong_traced_expectation_makes_the_runner_fail(
    results: dict[str, ScenarioResult],
) -> None:
    s = results["mlp_checkpointed_traced"].scenario
    counts = dict(s.expect.allocations)
    counts[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT] = 2
    wrong = attrs.evolve(s, expect=attrs.evolve(s.expect, allocations=counts))
    (r,) = run_scenarios([wrong])
    assert r.mismatches == (
        "allocations differ (checkpoint_recompute_output: expected 2, observed 3)",
    )


def test_an_unknown_mode_is_refused_naming_the_key(tmp_path: Path) -> None:
    from tenferro_ad.scenarios import ScenarioError, load_file

    text = (SCENARIOS / "traced.toml").read_text()
    text = text.replace('\nmode = "traced"', '\nmode = "jit"', 1)
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ScenarioError, match=r"scenario\[0\]\.mode: unknown mode 'jit'"):
        load_file(bad)


def test_every_shipped_scenario_matches_its_expected_multisets(
    results: dict[str, ScenarioResult],
) -> None:
    failed = [r for r in results.values() if not r.passed]
    assert not failed, format_table(failed)


def test_retention_adds_no_allocation_and_no_copy_in_any_scenario(
    results: dict[str, ScenarioResult],
) -> None:
    for r in results.values():
        assert (r.retention_allocations, r.retention_copies) == (0, 0), r.scenario.name
        obs = r.observation
        assert obs.untaped_forward is not None
        assert obs.forward.allocations == obs.untaped_forward.allocations
        assert obs.forward.copies == obs.untaped_forward.copies
        # every allocation is fresh work, a requested copy's destination, or recompute
        assert set(r.allocations) <= set(AllocationReason)


def test_a_wrong_expectation_makes_the_runner_fail(results: dict[str, ScenarioResult]) -> None:
    s = results["deep_chain_checkpointed"].scenario
    counts = dict(s.expect.allocations)
    counts[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT] -= 1
    wrong = attrs.evolve(s, expect=attrs.evolve(s.expect, allocations=counts))
    (r,) = run_scenarios([wrong])
    assert not r.passed
    assert r.mismatches == (
        "allocations differ (checkpoint_recompute_output: expected 55, observed 56)",
    )


def test_cli_exits_nonzero_on_a_wrong_expectation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (SCENARIOS / "explicit_copies.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(
        text.replace(
            "copies = { explicit_duplicate = 1, transfer = 1 }",
            "copies = { explicit_duplicate = 1 }",
            1,
        )
    )
    assert main(["run", str(bad), "-k", "explicit_copies"]) == 1
    out = capsys.readouterr().out
    assert "copies differ (transfer: expected 0, observed 1)" in out
    assert main(["run", str(SCENARIOS / "explicit_copies.toml")]) == 0
    capsys.readouterr()


def test_the_scenarios_ship_inside_the_package() -> None:
    """The scenario files are package data next to the runner, not a repository folder."""
    import tenferro_ad.scenarios as pkg

    assert Path(pkg.__file__).resolve().parent / "data" == SHIPPED
    assert {p.stem for p in SHIPPED.glob("*.toml")} >= {
        "mlp", "deep_chain", "tensor_network", "explicit_copies"
    }


def test_cli_runs_the_shipped_scenarios_from_any_directory(tmp_path: Path) -> None:
    """``python -m tenferro_ad.scenarios run`` outside the repository runs every shipped
    scenario (and a shipped one by name) and writes nothing into the directory."""
    import subprocess
    import sys

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-W", "error", "-m", "tenferro_ad.scenarios", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        )

    by_name = cli("run", "explicit_copies")
    assert by_name.returncode == 0, by_name.stderr
    assert "scenarios passed" in by_name.stdout and "FAIL" not in by_name.stdout
    listed = cli("run", "--list")
    assert listed.returncode == 0 and "mlp.toml" in listed.stdout
    missing = cli("run", "no_such_scenario")
    assert missing.returncode == 2 and "shipped scenarios: " in missing.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_default_is_every_shipped_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "-k", "explicit_copies"]) == 0
    out = capsys.readouterr().out
    assert "2/2 scenarios passed" in out and "mlp" not in out


def test_deep_chain_peak_follows_the_program_arithmetic(
    results: dict[str, ScenarioResult],
) -> None:
    """sum(sin^D(x)), D = 64 sines in S = 8 segments of L = 8, n bytes per value.

    Without checkpointing the tape retains every sine's input, so when ``sum``
    allocates its 8-byte result all D sine outputs are alive: peak = D*n + 8.  With
    checkpointing only the S - 1 segment boundaries stay; backward recomputes, one
    segment at a time, exactly the values something reads — a segment's last sine feeds
    only the next (retained) boundary and its own VJP needs only its input, so L - 1 per
    segment — while the 8-byte loss lives: peak = (S - 1 + L - 1)*n + 8, and
    S*(L - 1) recomputations.  Ratio = 14/64 (about 0.219, a 4.6x saving).
    """
    d, s, n = 64, 8, 4096 * 8
    l_ = d // s
    plain = results["deep_chain"].peak_bytes
    ckpt = results["deep_chain_checkpointed"].peak_bytes
    assert plain == d * n + 8
    assert ckpt == (s - 1 + l_ - 1) * n + 8
    assert ckpt / plain == pytest.approx(14 / 64, rel=1e-3)
    assert results["named_chain"].peak_bytes == ckpt  # saved names split the same way
    assert results["deep_chain_save_everything"].peak_bytes == plain
    rec = results["deep_chain_checkpointed"]
    needed = s * (l_ - 1)  # the sines something reads in backward
    assert rec.allocations[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT] == needed
    assert rec.allocation_bytes[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT] == needed * n


# -- gradients against JAX -------------------------------------------------------------------


def _jax_programs() -> dict[str, Callable[..., Any]]:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def ck(f: Callable[..., Any], on: bool) -> Callable[..., Any]:
        return jax.checkpoint(f) if on else f

    def mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any, y: Any, *, on: bool) -> Any:
        h = ck(lambda x, w1, b1: jnp.tanh(x @ w1 + b1), on)(x, w1, b1)
        d = h @ w2 + b2 - y
        return jnp.mean(d * d)

    def deep_chain(x: Any, *, on: bool, depth: int, segments: int) -> Any:
        def seg(v: Any) -> Any:
            for _ in range(depth // segments):
                v = jnp.sin(v)
            return v

        for _ in range(segments):
            x = ck(seg, on)(x)
        return jnp.sum(x)

    def named_chain(x: Any, *, on: bool, depth: int, every: int) -> Any:
        def chain(v: Any) -> Any:
            for _ in range(depth):
                v = jnp.sin(v)
            return v

        return jnp.sum(ck(chain, on)(x))

    def tensor_network(a: Any, b: Any, c: Any, d: Any, *, on: bool) -> Any:
        def contract(a: Any, b: Any, c: Any, d: Any) -> Any:
            abc = jnp.einsum("ip,pjq,qkr->ijkr", a, b, c)
            return jnp.einsum("ijkr,rl->ijkl", jnp.tanh(abc), d)

        psi = ck(contract, on)(a, b, c, d)
        return jnp.sum(psi * psi)

    def explicit_copies(x: Any, *, on: bool) -> Any:
        y = jnp.sin(x)
        frozen = jax.lax.stop_gradient(y)
        weights = np.linspace(0.5, 1.5, num=x.size).reshape(x.shape)
        z = ck(lambda v: jnp.exp(v) * weights, on)(y)
        return jnp.sum(z * frozen)

    return {
        "mlp": mlp,
        "deep_chain": deep_chain,
        "named_chain": named_chain,
        "tensor_network": tensor_network,
        "explicit_copies": explicit_copies,
    }


def _inputs(s: Scenario) -> list[np.ndarray[Any, Any]]:
    owners = make_inputs(s)
    arrays = [ts.kernel.read_array(t).copy() for t in owners]
    del owners
    return arrays


def test_gradients_match_jax_and_checkpointing_changes_no_gradient(
    results: dict[str, ScenarioResult],
) -> None:
    jax = pytest.importorskip("jax")
    programs = _jax_programs()
    by_program: dict[str, list[ScenarioResult]] = {}
    for r in results.values():
        by_program.setdefault(r.scenario.program.rpartition(":")[2], []).append(r)
    assert set(by_program) == set(programs)
    for prog, rs in by_program.items():
        reference = rs[0].observation.gradients
        for r in rs:
            s = r.scenario
            args = _inputs(s)
            wrt = tuple(i for i, spec in enumerate(s.inputs) if spec.wrt)
            fn = programs[prog]
            loss, grads = jax.value_and_grad(
                lambda *a, fn=fn, s=s: fn(*a, on=s.checkpoint, **s.kwargs), argnums=wrt
            )(*args)
            assert r.observation.loss == pytest.approx(float(loss), rel=1e-12), s.name
            for ours, theirs in zip(r.observation.gradients, grads, strict=True):
                np.testing.assert_allclose(
                    ours, np.asarray(theirs), rtol=1e-10, atol=1e-13, err_msg=s.name
                )
            for ours, plain in zip(r.observation.gradients, reference, strict=True):
                np.testing.assert_allclose(ours, plain, rtol=1e-12, atol=1e-14, err_msg=s.name)


def test_expectation_zero_counts_are_dropped() -> None:
    e = Expectation(allocations={AllocationReason.OPERATION_OUTPUT: 0})
    assert e.allocations == ()
