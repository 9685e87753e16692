"""Sphinx configuration for the tenferro docs site.

Built with ``python -m sphinx -W -b html docs build/docs``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE / "_ext"))

project = "tenferro"
author = "the tenferro developers"
release = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "tenferro_tutorials",
]
source_suffix = {".md": "markdown"}
myst_heading_anchors = 3
root_doc = "index"
exclude_patterns = ["_build", "testing", "_ext"]
html_theme = "alabaster"
html_static_path: list[str] = []
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options: dict[str, bool] = {}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
suppress_warnings = ["myst.header"]
