"""The architecture, kept by a test: imports point down the layers, and nothing closes a cycle.

Every ``import`` of a project module counts, at module level or inside a function (a
function-level import is still a dependency; it only hides the cycle from Python), except
those under ``if TYPE_CHECKING:``, which never run.  The layers, lowest first, are in
:data:`AD_LAYERS` and :data:`STORAGE_LAYERS`; ``README.md`` (Architecture) and
``tests/README.md`` describe them.  A failure lists every offending edge as
``importer -> imported (line)``.
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict
from collections.abc import Iterator

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"
PACKAGES = ("tenferro_ad", "tenferro_storage")

# (layer name, module-name prefixes), lowest first.  A module belongs to the layer of its
# longest matching prefix; a module may import only from its own layer or lower ones.
AD_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("tenferro_ad.errors",)),
    ("core", ("tenferro_ad._core",)),
    ("traced", ("tenferro_ad._traced",)),
    ("checkpoint", ("tenferro_ad._checkpoint",)),
    ("ops", ("tenferro_ad.ops",)),
    ("api", (
        "tenferro_ad._functional", "tenferro_ad._forward", "tenferro_ad._transforms",
        "tenferro_ad._custom", "tenferro_ad._custom_call", "tenferro_ad.linalg", "tenferro_ad.fft",
        "tenferro_ad.optim",
        "tenferro_ad.traced", "tenferro_ad.tree_util", "tenferro_ad.extend",
        "tenferro_ad.scipy", "tenferro_ad._control", "tenferro_ad.lax",
    )),
    ("wiring", ("tenferro_ad._wiring", "tenferro_ad._numpy_protocol",
                "tenferro_ad._numpy_keywords")),
    ("package", ("tenferro_ad",)),
    # programs written against the public package, as a user writes them
    ("programs", ("tenferro_ad.demo", "tenferro_ad.scenarios", "tenferro_ad.tn")),
)
STORAGE_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("tenferro_storage.errors",)),
    ("kernel", ("tenferro_storage._", "tenferro_storage.kernel", "tenferro_storage.ledger")),
    ("runtime", ("tenferro_storage.runtime",)),
    ("providers", ("tenferro_storage.providers",)),
    ("package", ("tenferro_storage",)),
    ("programs", ("tenferro_storage.demo",)),
)

# Modules over the line budget, each with its reason.  Everything else stays at or under it.
LINE_BUDGET = 600
OVER_BUDGET: dict[str, str] = {
    "tenferro_ad.ops.manip": "numpy's array-manipulation family: ~40 small public ops, one file",
    "tenferro_ad.ops.dense_linalg": "one family: the dense decompositions and their rules",
    "tenferro_ad.ops.math": "numpy's math family: ~50 small ops, each docstring states its cost",
    "tenferro_ad.ops.shape": "the shape family's ops and rules; each docstring states its cost",
    "tenferro_ad.ops.scan": "cumulative ops, sorting and selection with their rules (split owed)",
    "tenferro_ad.ops._linalg_math": "the decompositions' derivative formulas, one per op",
    "tenferro_ad.ops.elementwise": "the core elementwise family and its fast rules",
    "tenferro_ad.ops._einsum_path": "einsum parsing and path search, with no AD in it",
    "tenferro_ad._checkpoint._replay": "the eager region's recomputation, one state machine",
    "tenferro_ad._functional": "grad/vjp/value_and_grad's argument handling and sweeps",
    "tenferro_storage._tensor": "the owner and its two view classes (G4's method homes)",
    "tenferro_storage._root": "roots and claims: the one audited module that creates roots",
    "tenferro_storage._pytree": "the pytree registry, flatten/unflatten and key paths",
    "tenferro_storage.runtime._submission": "submission and its outcomes, one state table",
}


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    out: dict[str, tuple[pathlib.Path, bool]] = {}
    for pkg in PACKAGES:
        for p in (SRC / pkg).rglob("*.py"):
            parts = list(p.relative_to(SRC).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            out[".".join(parts)] = (p, is_pkg)
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _imports(other)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _imports(child)


def _targets(mod: str, is_pkg: bool, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    for name in names:
        while name and name not in MODULES:  # ``pkg.mod.attr`` -> ``pkg.mod``
            name = name.rpartition(".")[0]
        if name and name != mod:
            yield name


def _edges() -> dict[str, dict[str, int]]:
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for mod, (path, is_pkg) in MODULES.items():
        for node in _imports(ast.parse(path.read_text(), str(path))):
            for t in _targets(mod, is_pkg, node):
                edges[mod].setdefault(t, node.lineno)
    return edges


EDGES = _edges()


def _sccs(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _layer(mod: str, layers: tuple[tuple[str, tuple[str, ...]], ...]) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            matches = mod == p or mod.startswith(p if p.endswith("_") else p + ".")
            if matches and len(p) > best:
                best, rank = len(p), i
    assert rank >= 0, f"{mod} is in no layer: add it to tests/test_layers.py"
    return rank


def _layers_of(mod: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return AD_LAYERS if mod.startswith("tenferro_ad") else STORAGE_LAYERS


def test_no_import_cycles() -> None:
    lines = []
    for comp in _sccs(EDGES):
        inside = set(comp)
        lines.append(f"cycle of {len(comp)} modules:")
        lines += [
            f"  {a} -> {b} (line {n})"
            for a in comp for b, n in sorted(EDGES[a].items()) if b in inside
        ]
    assert not lines, "\n".join(lines)


def test_imports_point_down_the_layers() -> None:
    bad = []
    for a, targets in sorted(EDGES.items()):
        for b, n in sorted(targets.items()):
            if a.split(".")[0] != b.split(".")[0]:
                if a.startswith("tenferro_storage"):
                    bad.append(f"{a} -> {b} (line {n}): storage never imports AD")
                continue
            la, lb = _layer(a, _layers_of(a)), _layer(b, _layers_of(b))
            if lb > la:
                names = _layers_of(a)
                bad.append(f"{a} [{names[la][0]}] -> {b} [{names[lb][0]}] (line {n})")
    assert not bad, "imports running up a layer:\n" + "\n".join(bad)


def test_every_module_is_in_a_layer() -> None:
    for mod in MODULES:
        _layer(mod, _layers_of(mod))


def test_line_budget() -> None:
    over = {
        mod: n for mod, (path, _) in MODULES.items()
        if (n := len(path.read_text().splitlines())) > LINE_BUDGET and mod not in OVER_BUDGET
    }
    assert not over, f"modules over {LINE_BUDGET} lines (split them, or list why): {over}"
    stale = [m for m in OVER_BUDGET if len(MODULES[m][0].read_text().splitlines()) <= LINE_BUDGET]
    assert not stale, f"listed as over the budget but no longer are: {stale}"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_checker_sees_function_level_imports(package: str) -> None:
    # the checker itself: an import inside a function is an edge, one under TYPE_CHECKING
    # is not (a guard for the guard, so that a refactor of _imports cannot blind it)
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from . import hidden\n"
        "def f():\n    from . import errors\n"
    )
    nodes = list(_imports(ast.parse(src)))
    targets = {t for n in nodes for t in _targets(f"{package}.somewhere", False, n)}
    assert targets == {f"{package}.errors"}


def test_the_checker_finds_a_planted_cycle_and_an_upward_edge() -> None:
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert _sccs(graph) == [["a", "b", "c"]]
    core = _layer("tenferro_ad._core._tape", AD_LAYERS)
    assert _layer("tenferro_ad.ops.math", AD_LAYERS) > core
    assert _layer("tenferro_ad._checkpoint._region", AD_LAYERS) > core
    assert _layer("tenferro_storage.runtime._engine", STORAGE_LAYERS) < _layer(
        "tenferro_storage.providers._host", STORAGE_LAYERS
    )
