"""The README's main job, ``python -m tenferro_ad.demo``, runs and proves a saving."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tenferro_ad as ad
from tenferro_ad.demo import main, train
from tenferro_storage.ledger import AllocationReason


def test_checkpointed_training_matches_and_lowers_the_peak() -> None:
    plain_losses, plain = train(None, steps=2)
    ckpt_losses, ckpt = train(ad.save_nothing, steps=2)
    assert ckpt_losses == pytest.approx(plain_losses, rel=1e-12)
    assert plain_losses[1] < plain_losses[0]
    assert ckpt.peak_bytes < 0.5 * plain.peak_bytes
    assert plain.copies == ckpt.copies == {}
    assert ckpt.allocations[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT] > 0
    assert AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT not in plain.allocations


def test_demo_main_prints_the_saving(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--steps", "1", "--plot", str(tmp_path / "demo.png")]) == 0
    out = capsys.readouterr().out
    assert "peak-memory saving" in out and "losses identical: True" in out
    assert f"wrote the live-bytes plot to {tmp_path / 'demo.png'}" in out
    assert (tmp_path / "demo.png").is_file()


def test_demo_never_writes_into_the_current_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --plot the picture goes to a new temporary directory, and the path is said."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(["--steps", "1"]) == 0
    out = capsys.readouterr().out
    assert list(cwd.iterdir()) == []
    line = next(ln for ln in out.splitlines() if ln.startswith("wrote the live-bytes plot to "))
    written = Path(line.removeprefix("wrote the live-bytes plot to "))
    assert written.is_file() and cwd not in written.parents
    shutil.rmtree(written.parent)
    assert main(["--steps", "1", "--no-plot"]) == 0
    assert "wrote" not in capsys.readouterr().out
    assert main(["--steps", "1", "--plot", str(tmp_path / "missing" / "x.png")]) == 2
    assert "does not exist" in capsys.readouterr().err
