"""User-style programs (``users/``: a params dict of owners of mixed ranks, a minibatch
training loop, transforms) type-check under mypy strict, mypy's default mode and pyright,
and run.  pyright is optional (``pip install pyright``; it needs node): without it the
pyright case skips saying so."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
USERS = HERE / "users"
SRC = HERE.parent.parent / "src"
PROGRAMS = sorted(USERS.glob("*.py"))


def test_there_are_user_programs() -> None:
    """The folder holds the three kinds of program the issue names."""
    assert {p.stem for p in PROGRAMS} >= {"params_dict", "training_loop", "transforms"}


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "default"])
def test_user_programs_pass_mypy(strict: bool) -> None:
    """mypy accepts ``.shape``/``.dtype``/``.ndim``/``.size`` of owners and infers a usable
    type for a params dict of owners of different ranks, in strict and default mode (no
    project config: a user's own settings), against this checkout's src."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # src via MYPYPATH only
    env["MYPYPATH"] = str(SRC)
    args = ["--strict"] if strict else []
    run = subprocess.run(
        [sys.executable, "-m", "mypy", *args, "--config-file", os.devnull,
         "--python-version", "3.11", "--no-incremental", "--show-error-codes",
         *map(str, PROGRAMS)],
        capture_output=True, text=True, timeout=600, env=env, cwd=HERE, check=False,
    )
    stdout, stderr = run.stdout, run.stderr
    # what a user sees: errors in their own files (mypy silences an installed package's
    # own; src/ here is on MYPYPATH, so its untyped-scipy notes are filtered the same way)
    mine = [line for line in stdout.splitlines()
            if ": error:" in line and (HERE / line.split(":", 1)[0]).resolve().parent == USERS]
    assert "Found" in stdout or "Success" in stdout, stdout + stderr
    assert mine == [], "\n".join(mine)


def test_user_programs_pass_pyright(tmp_path: Path) -> None:
    """pyright (standard mode) accepts the same programs against this checkout's src."""
    exe = shutil.which("pyright")
    if exe is None:
        pytest.skip("pyright is not installed (pip install pyright; it needs node)")
    config = {
        "include": [os.path.relpath(USERS, tmp_path)],
        "extraPaths": [os.path.relpath(SRC, tmp_path)],
        "typeCheckingMode": "standard",
    }
    (tmp_path / "pyrightconfig.json").write_text(json.dumps(config))
    run = subprocess.run(
        [exe, "-p", str(tmp_path / "pyrightconfig.json"), "--pythonpath", sys.executable,
         "--outputjson"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    report = json.loads(run.stdout)
    assert report["summary"]["filesAnalyzed"] == len(PROGRAMS), run.stdout[-2000:]
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert errors == [], errors


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_user_programs_run(program: Path) -> None:
    """Each program also runs (types that check but code that fails would prove nothing)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    run = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                         timeout=300, env=env, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
