"""The docs site builds with warnings as errors, as a reader builds it (``python -m sphinx
-W -b html docs build/docs``): every page in a toctree, every cross-reference resolved,
every tutorial run for its page (a tutorial that raises fails the build), the API pages
generated from the live ``__all__``.  The output goes to a temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.docs._stale import ROOT


def test_the_docs_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), "docs", str(tmp_path / "html")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )
    assert done.returncode == 0, f"the docs build failed:\n{done.stderr[-6000:]}"
    assert (tmp_path / "html" / "index.html").is_file()
    assert (tmp_path / "html" / "api" / "index.html").is_file()
