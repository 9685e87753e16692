"""Sphinx extension: the generated pages -- each tutorial with its output, and the API pages.

At ``builder-inited`` every ``tutorials/NN_name.py`` is run as a user runs it (``python
tutorials/NN_name.py``, its own process, two at a time) and written as
``docs/tutorials/NN_name.md``: the module docstring as the introduction, each ``# %%`` cell's
comment as prose, its code as a block, then everything the tutorial printed.  A tutorial that
raises fails the build.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def cells(source: str) -> tuple[str, list[tuple[str, str]]]:
    """The module docstring and the ``(prose, code)`` cells of a tutorial's source."""
    body = source
    doc = ""
    if body.startswith('"""'):
        end = body.index('"""', 3)
        doc, body = body[3:end].strip(), body[end + 3 :]
    out: list[tuple[str, str]] = []
    prose: list[str] = []
    code: list[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if line.startswith("# %%"):  # a cell at top level (an indented one stays a comment)
            if code and "".join(code).strip():
                out.append(("\n".join(prose), "\n".join(code).strip("\n")))
                prose, code = [], []
            prose.append(stripped[4:].strip())
        elif line.startswith("#") and prose and not "".join(code).strip():
            prose.append(stripped.lstrip("#").strip())
        else:
            code.append(line.replace("# %% ", "# ", 1) if stripped.startswith("# %%") else line)
    if "".join(code).strip():
        out.append(("\n".join(prose), "\n".join(code).strip("\n")))
    return doc, out


def run(path: Path) -> str:
    """What the tutorial prints when run as ``python tutorials/NN_name.py``; a failure
    fails the build with its stderr."""
    path_entries = [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path_entries))
    done = subprocess.run(
        [sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"tutorial {path.name} failed:\n{done.stderr}")
    return done.stdout


def render(path: Path, output: str) -> str:
    """The Markdown page of one tutorial, with its ``output``."""
    source = path.read_text()
    doc, parts = cells(source)
    title, _, rest = doc.partition("\n")
    lines = [f"# {title.strip()}", "", rest.strip(), ""]
    for prose, code in parts:
        if prose.strip():
            lines += [" ".join(prose.split()), ""]
        lines += ["```python", code, "```", ""]
    lines += ["## Output", "", "```text", output.rstrip(), "```", ""]
    return "\n".join(lines)


def generate(app: Any) -> None:
    """Write one page per tutorial into ``docs/tutorials/`` (generated, not committed)."""
    outdir = Path(app.srcdir) / "tutorials"
    outdir.mkdir(exist_ok=True)
    paths = sorted((ROOT / "tutorials").glob("[0-9]*.py"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        outputs = list(pool.map(run, paths))
    for path, output in zip(paths, outputs, strict=True):
        write_if_changed(outdir / f"{path.stem}.md", render(path, output))
    index = ["# Tutorials", "", "Each tutorial is a script under `tutorials/`, shown with what it",
             "prints; the test suite runs every one.", "", "```{toctree}", ":maxdepth: 1", "",
             *[p.stem for p in paths], "```", ""]
    write_if_changed(outdir / "index.md", "\n".join(index))


#: public modules that are not in a package's ``__all__`` but are documented API
EXTRA_MODULES = ("tenferro_ad.tree_util",)


def api_modules() -> list[str]:
    """Both packages and every module in their live ``__all__`` (so names other engineers
    add appear without editing the docs), then :data:`EXTRA_MODULES`."""
    mods: list[str] = []
    for top in ("tenferro_storage", "tenferro_ad"):
        pkg = importlib.import_module(top)
        mods.append(top)
        for name in pkg.__all__:
            value = getattr(pkg, name)
            if isinstance(value, types.ModuleType) and value.__name__ not in mods:
                mods.append(value.__name__)
    return mods + [m for m in EXTRA_MODULES if m not in mods]


def write_if_changed(page: Path, text: str) -> None:
    """Write ``text`` to ``page`` unless it already holds it (keeps Sphinx's cache warm)."""
    if not page.exists() or page.read_text() != text:
        page.write_text(text)


def generate_api(app: Any) -> None:
    """One page per public module (``automodule`` over its ``__all__``) and an index."""
    outdir = Path(app.srcdir) / "api"
    outdir.mkdir(exist_ok=True)
    mods = api_modules()
    index = [
        "# API reference",
        "",
        "Generated from the docstrings of each package's public surface (its `__all__`).",
        "Every function states its cost on a `Cost:` line and its errors under `Raises:`",
        "(the convention: [docstrings](../contributing.md#docstrings)).",
        "",
        "```{toctree}",
        ":maxdepth: 1",
        "",
        *mods,
        "```",
        "",
    ]
    write_if_changed(outdir / "index.md", "\n".join(index))
    seen: dict[int, str] = {}
    for mod in mods:
        write_if_changed(outdir / f"{mod}.md", module_page(mod, seen))


def module_page(modname: str, seen: dict[int, str]) -> str:
    """The page of one public module: its docstring, then one autodoc entry per name of its
    ``__all__``; a name already documented under another module links there instead (one
    description per object)."""
    mod = importlib.import_module(modname)
    lines = [f"# `{modname}`", "", "```{eval-rst}", f".. automodule:: {modname}", ""]
    again: list[str] = []
    for name in getattr(mod, "__all__", ()):
        value = getattr(mod, name)
        if isinstance(value, types.ModuleType):
            continue
        key = id(value)
        if key in seen and seen[key] != f"{modname}.{name}":
            again.append(f"* ``{name}``: see :py:obj:`{seen[key]}`")
            continue
        seen[key] = f"{modname}.{name}"
        if isinstance(value, type):
            lines += [f".. autoclass:: {modname}.{name}", "   :members:", ""]
        elif callable(value):
            lines += [f".. autofunction:: {modname}.{name}", ""]
        else:
            lines += [f".. autodata:: {modname}.{name}", "   :no-value:", ""]
    lines += ["```", ""]
    if again:
        lines += ["## Also exported here", "", "```{eval-rst}", *again, "```", ""]
    return "\n".join(lines)


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    app.connect("builder-inited", generate_api)
    return {"parallel_read_safe": True, "version": "1"}
