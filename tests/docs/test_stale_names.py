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
