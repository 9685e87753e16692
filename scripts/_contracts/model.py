"""The typed form of a manifest once its TOML has passed the shape checks.

Frozen dataclasses only: artifacts, commands and tagged states make up an obligation; units,
edges and cohorts make up the registry; a ``Manifest`` holds both, plus the optional revision
log and the acknowledged historical violations.  Nothing here validates anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Artifact:
    id: str
    kind: str
    path: str
    selector: str | None


@dataclass(frozen=True)
class Command:
    id: str
    kind: str
    argv: tuple[str, ...]
    cwd: str
    path_args: tuple[str, ...]
    artifact_id: str


@dataclass(frozen=True)
class State:
    kind: str  # "active" | "deferred"
    activation_unit: str | None
    promotion_mode: str | None


@dataclass(frozen=True)
class Obligation:
    id: str
    unit: str
    gates: tuple[str, ...]
    artifact: Artifact
    command: Command
    state: State
    raw: Mapping[str, Any]

    @property
    def active(self) -> bool:
        return self.state.kind == "active"


@dataclass(frozen=True)
class Unit:
    id: str
    name: str
    title: str


@dataclass(frozen=True)
class Edge:
    source: str
    target: str


@dataclass(frozen=True)
class Cohort:
    id: str
    members: tuple[str, ...]
    title: str


@dataclass(frozen=True)
class Registry:
    revision: int
    gates: tuple[tuple[str, str], ...]
    units: tuple[Unit, ...]
    edges: tuple[Edge, ...]
    cohorts: tuple[Cohort, ...]
    raw: Mapping[str, Any]

    @property
    def unit_ids(self) -> list[str]:
        return [u.id for u in self.units]

    @property
    def gate_ids(self) -> list[str]:
        return [g for g, _ in self.gates]


@dataclass(frozen=True)
class Acknowledgement:
    """A historical violation the ledger admits instead of hiding (see the replay tool).

    ``diagnostics`` holds one canonical key per diagnostic (``diagnostic_key``) that replaying
    ``commit`` against its first parent must reproduce exactly.
    """

    commit: str
    reason: str
    diagnostics: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    registry: Registry
    obligations: tuple[Obligation, ...]
    # The revision log: (revision, reason) for revisions 2.. in order; None when absent (the
    # manifests written before the log existed).
    revisions: tuple[tuple[int, str], ...] | None = None
    acknowledged: tuple[Acknowledgement, ...] = ()

    def by_id(self) -> dict[str, Obligation]:
        return {o.id: o for o in self.obligations}

    def unit_rows(self, unit: str) -> list[Obligation]:
        return [o for o in self.obligations if o.unit == unit]
