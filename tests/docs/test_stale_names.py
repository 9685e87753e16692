"""The docs and the README mention only names that exist (``_stale``); the check fails on a
page that names what the code does not have."""

from __future__ import annotations

import pytest

from tests.docs._stale import ROOT, Surface, check_text, doc_files


@pytest.fixture(scope="module")
def surface() -> Surface:
    return Surface()


def test_docs_name_only_what_exists(surface: Surface) -> None:
    found = [
        f"{path.relative_to(ROOT)}: {p}"
        for path in doc_files()
        for p in check_text(path.read_text(), surface, internals="design" in path.parts)
    ]
    assert not found, "stale names in the docs:\n" + "\n".join(found)


def test_stale_check_fails_on_names_the_code_does_not_have(surface: Surface) -> None:
    bad = (
        "Call `ad.grad_everything(f)`, read `grads.take_gradient(x)`, build with "
        "`NoSuchBuilder`, see `docs/guides/missing.md`, run "
        "`python -m tenferro_ad.nothing` with `--no-such-flag`, or `ts.Tensor.nope`, "
        "recorded as `TO_NUMPY`."
    )
    problems = check_text(bad, surface)
    assert len(problems) == 8, problems
    assert "`ad.grad_everything(f)`: ad.grad_everything does not exist" in problems


def test_stale_check_accepts_names_that_exist(surface: Surface) -> None:
    good = (
        "`ad.grad(f)`, `grads.take_grad(x)`, `Gradients`, `tenferro_storage.runtime.download`, "
        "`docs/guides/for-jax-users.md`, `python -m tenferro_ad.scenarios run`, `--trace`, "
        "`np.asarray(x)`, `BorrowError`, `ts.Tensor.duplicate`, `CHECKPOINT_RECOMPUTE_OUTPUT`"
    )
    assert check_text(good, surface) == []


def test_stale_check_resolves_the_modules_a_page_imports_under_its_own_names(
    surface: Surface,
) -> None:
    page = (
        "```python\nfrom tenferro_storage import sharding as sh\nimport tenferro_ad.lax as L\n"
        "```\n\n`sh.shard(x, mesh, P())`, `L.scan(f, init, xs)`, `sh.no_such_function(x)`, "
        "`L.no_such_loop`\n"
    )
    assert check_text(page, surface) == [
        "`sh.no_such_function(x)`: sh.no_such_function does not exist",
        "`L.no_such_loop`: L.no_such_loop does not exist",
    ]


def test_stale_check_resolves_a_public_module_by_its_own_name(surface: Surface) -> None:
    text = "`sharding.initialize`, `lax.scan`, `sharding.no_such`, `lax.no_such_loop(f)`"
    assert check_text(text, surface) == [
        "`sharding.no_such`: sharding.no_such does not exist",
        "`lax.no_such_loop(f)`: lax.no_such_loop does not exist",
    ]


def test_stale_check_knows_the_classes_public_functions_return(surface: Surface) -> None:
    # ``ad.jit`` returns a ``Jitted`` (not exported): its methods are what a caller uses
    assert check_text("`jitted.cache_info()`, `jitted.cache_size`", surface) == []
    assert check_text("`jitted.no_such_method()`", surface) == [
        "`jitted.no_such_method()`: no public class has an attribute 'no_such_method'"
    ]
