"""Rules about the registry as a whole and about how obligations sit in it.

Ids are unique; the dependency graph only names known units or the cohort, has no duplicate
edge and no cycle; the fixed shape of the graph (the two roots, P2's single prerequisite, the
one cohort and its prerequisites) holds; every obligation names a known unit and known gates;
every unit owns at least one obligation; deferred rows name their own unit and the in-place
promotion mode; and activation respects the cohort and the direct prerequisites.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .diagnostics import Diagnostics
from .model import Cohort, Edge, Manifest, Registry

# Rules the contract states about named units.  The registry still owns the graph; these
# constants only encode the normative constraints the registry must satisfy.
ROOT_UNITS = ("P0", "P1")
SINGLE_INCOMING = ("P2", ("P1",))
COHORT_MEMBERS = ("P3", "P9")
COHORT_PREREQUISITES = ("P0", "P5")
PROMOTION_MODE = "activate-in-place"


def expand_node(node: str, cohorts: Mapping[str, Cohort]) -> tuple[str, ...]:
    return cohorts[node].members if node in cohorts else (node,)


def incoming_sources(registry: Registry) -> dict[str, list[str]]:
    """Direct prerequisite nodes for every graph node (a unit or the cohort)."""
    result: dict[str, list[str]] = {}
    for e in registry.edges:
        result.setdefault(e.target, [])
        if e.source not in result[e.target]:
            result[e.target].append(e.source)
    return result


def check_registry(manifest: Manifest, sink: Diagnostics) -> None:
    reg = manifest.registry
    _check_duplicates(manifest, sink)
    units = set(reg.unit_ids)
    cohorts = {c.id: c for c in reg.cohorts}
    member_of = {m: c.id for c in reg.cohorts for m in c.members}
    nodes = units | set(cohorts)

    graph_ok = True
    seen_edges: set[tuple[str, str]] = set()
    for e in reg.edges:
        for node in (e.source, e.target):
            if node not in nodes:
                graph_ok = False
                sink.add(
                    "E_GRAPH_UNKNOWN_NODE",
                    f"edge {e.source} -> {e.target} names {node!r}, which is neither a "
                    "registered unit nor a cohort",
                    **{"from": e.source, "to": e.target, "node": node},
                )
            elif node in member_of:
                graph_ok = False
                sink.add(
                    "E_GRAPH_COHORT_MEMBER_ENDPOINT",
                    f"edge {e.source} -> {e.target} names cohort member {node}; edges must "
                    f"name the cohort {member_of[node]!r} so its members move together",
                    **{"from": e.source, "to": e.target},
                    unit=node,
                    cohort_id=member_of[node],
                )
        if (e.source, e.target) in seen_edges:
            sink.add(
                "E_GRAPH_DUPLICATE_EDGE",
                f"edge {e.source} -> {e.target} is registered more than once",
                **{"from": e.source, "to": e.target},
            )
        seen_edges.add((e.source, e.target))
    if graph_ok:
        for cycle in _cycles(sorted(nodes), reg.edges):
            sink.add(
                "E_GRAPH_CYCLE",
                f"the registry graph has a cycle through {', '.join(cycle)}",
                nodes=cycle,
            )

    incoming = incoming_sources(reg)
    for root in ROOT_UNITS:
        if root in units and incoming.get(root):
            sink.add(
                "E_GRAPH_ROOT_INCOMING",
                f"{root} is an independent root of the graph and must have no incoming edge",
                unit=root,
                sources=sorted(incoming[root]),
            )
    target, expected_sources = SINGLE_INCOMING
    if target in units and sorted(incoming.get(target, [])) != list(expected_sources):
        sink.add(
            "E_GRAPH_SINGLE_INCOMING",
            f"{target} must have exactly one incoming edge, from {', '.join(expected_sources)}",
            unit=target,
            expected=list(expected_sources),
            actual=sorted(incoming.get(target, [])),
        )

    if len(reg.cohorts) != 1:
        sink.add(
            "E_COHORT_COUNT",
            f"the registry must define exactly one atomic cohort, found {len(reg.cohorts)}",
            expected=1,
            actual=len(reg.cohorts),
        )
    for c in reg.cohorts:
        unknown = [m for m in c.members if m not in units]
        for m in unknown:
            sink.add(
                "E_COHORT_UNKNOWN_UNIT",
                f"cohort {c.id} names unregistered unit {m!r}",
                cohort_id=c.id,
                unit=m,
            )
        if not unknown and list(c.members) != list(COHORT_MEMBERS):
            sink.add(
                "E_COHORT_DEFINITION",
                f"cohort {c.id} must contain exactly {', '.join(COHORT_MEMBERS)}",
                cohort_id=c.id,
                field="members",
                expected=list(COHORT_MEMBERS),
                actual=list(c.members),
            )
        prereqs = sorted(incoming.get(c.id, []))
        if prereqs != sorted(COHORT_PREREQUISITES):
            sink.add(
                "E_COHORT_DEFINITION",
                f"cohort {c.id} must have exactly {', '.join(COHORT_PREREQUISITES)} as "
                "direct prerequisites",
                cohort_id=c.id,
                field="prerequisites",
                expected=sorted(COHORT_PREREQUISITES),
                actual=prereqs,
            )

    gate_ids = set(reg.gate_ids)
    for o in manifest.obligations:
        if o.unit not in units:
            sink.add(
                "E_UNKNOWN_UNIT",
                f"obligation {o.id} names unregistered unit {o.unit!r}",
                obligation_id=o.id,
                unit=o.unit,
            )
        if not o.gates or len(set(o.gates)) != len(o.gates):
            sink.add(
                "E_GATE_LIST",
                f"obligation {o.id} must name one or more distinct gates",
                obligation_id=o.id,
                gates=list(o.gates),
            )
        for g in dict.fromkeys(o.gates):
            if g not in gate_ids:
                sink.add(
                    "E_UNKNOWN_GATE",
                    f"obligation {o.id} names unregistered gate {g!r}",
                    obligation_id=o.id,
                    gate=g,
                )
        if o.state.kind == "deferred":
            if o.unit in units and o.state.activation_unit != o.unit:
                sink.add(
                    "E_DEFERRED_ACTIVATION_UNIT",
                    f"deferred obligation {o.id} must name its own unit {o.unit} as "
                    "activation_unit",
                    obligation_id=o.id,
                    expected=o.unit,
                    actual=o.state.activation_unit,
                )
            if o.state.promotion_mode != PROMOTION_MODE:
                sink.add(
                    "E_PROMOTION_MODE",
                    f"deferred obligation {o.id} must use promotion mode {PROMOTION_MODE!r}",
                    obligation_id=o.id,
                    actual=o.state.promotion_mode,
                )
    if manifest.revisions is not None:
        expected_log = list(range(2, reg.revision + 1))
        actual_log = [r for r, _ in manifest.revisions]
        if actual_log != expected_log:
            sink.add(
                "E_REVISION_LOG",
                f"the revision log must record revisions {expected_log} in order (revision 1 "
                f"is the original registry), found {actual_log}",
                expected=expected_log,
                actual=actual_log,
            )
    owned = {o.unit for o in manifest.obligations}
    for u in reg.unit_ids:
        if u not in owned:
            sink.add(
                "E_UNIT_NO_OBLIGATIONS",
                f"unit {u} owns no obligation; an empty unit is invalid, not vacuously complete",
                unit=u,
            )


def _check_duplicates(manifest: Manifest, sink: Diagnostics) -> None:
    reg = manifest.registry
    groups: list[tuple[str, Iterable[str]]] = [
        ("gate", reg.gate_ids),
        ("unit", reg.unit_ids),
        ("cohort", [c.id for c in reg.cohorts]),
        ("obligation", [o.id for o in manifest.obligations]),
    ]
    for kind, ids in groups:
        seen: set[str] = set()
        for i in ids:
            if i in seen:
                sink.add("E_DUPLICATE_ID", f"{kind} id {i!r} is not unique", kind=kind, id=i)
            seen.add(i)
    for i in set(reg.unit_ids) & {c.id for c in reg.cohorts}:
        sink.add("E_DUPLICATE_ID", f"{i!r} names both a unit and a cohort", kind="node", id=i)


def _cycles(nodes: list[str], edges: Sequence[Edge]) -> list[list[str]]:
    """Strongly connected components that form cycles (Tarjan), each sorted."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in succ[v]:
                found.append(sorted(comp))

    for n in nodes:
        if n not in index:
            visit(n)
    return sorted(found)


def check_lifecycle(manifest: Manifest, sink: Diagnostics) -> None:
    """Atomic cohort activation and direct prerequisites, derived from edges and states."""
    reg = manifest.registry
    cohorts = {c.id: c for c in reg.cohorts}
    for c in reg.cohorts:
        rows = [o for m in c.members for o in manifest.unit_rows(m)]
        active = sorted(o.id for o in rows if o.active)
        deferred = sorted(o.id for o in rows if not o.active)
        if active and deferred:
            sink.add(
                "E_COHORT_PARTIAL_ACTIVATION",
                f"cohort {c.id} activates atomically: {len(active)} member obligation(s) are "
                f"active while {len(deferred)} remain deferred",
                cohort_id=c.id,
                active=active,
                deferred=deferred,
            )
    for node, sources in sorted(incoming_sources(reg).items()):
        if not any(o.active for m in expand_node(node, cohorts) for o in manifest.unit_rows(m)):
            continue
        for source in sources:
            deferred = sorted(
                o.id
                for m in expand_node(source, cohorts)
                for o in manifest.unit_rows(m)
                if not o.active
            )
            if deferred:
                sink.add(
                    "E_PREREQUISITE_INACTIVE",
                    f"{node} has active obligations, so every obligation of its direct "
                    f"prerequisite {source} must already be active",
                    node=node,
                    prerequisite=source,
                    deferred=deferred,
                )
