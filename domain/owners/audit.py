"""The recorded ownership audit: one aggregate per namespace, one ``AuditRecorded`` event per
audit (when, namespace, counts by owner and kind, every row, the calls it made), so ``oncall``,
the gauge ``schedfence_ownership_drift`` and the web page read the last audit from the log
without calling Temporal.

Each ``AuditRecorded`` holds the whole audit, so the state is a function of the last event
alone: the aggregate loads from its last event (``OwnershipAudits.from_last``) however many
audits came before, and its fold (``evolve``) keeps only the last.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from schedfence.domain.ids import SCHEDFENCE_NAMESPACE
from schedfence.domain.model import EvolvingAggregate, Fact, Facts
from schedfence.domain.owners.classify import OwnerRow, counts

ROW_FIELDS = ("schedule_id", "owner", "store", "migration_id", "kind", "next_run")


def audits_aggregate_id(namespace: str) -> uuid.UUID:
    return uuid.uuid5(SCHEDFENCE_NAMESPACE, f"ownership/{len(namespace)}:{namespace}")


@dataclass(frozen=True)
class AuditState:
    """The last audit of a namespace (``at``: None before the first)."""

    namespace: str
    at: str | None = None  # RFC 3339 UTC
    deep: bool = False
    destination: str = ""
    actor: str = ""
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    rows: list[list[str]] = field(default_factory=list)  # ROW_FIELDS each, "" for None
    calls: dict[str, int] = field(default_factory=dict)

    def owner_rows(self) -> list[OwnerRow]:
        return [OwnerRow.of_list(r) for r in self.rows]


class OwnershipAudits(EvolvingAggregate):
    TOPIC = "schedfence.OwnershipAudits"

    class Created(EvolvingAggregate.Created):
        TOPIC: ClassVar[str] = "schedfence.ownership.Created"
        class_version: ClassVar[int] = 1
        namespace: str

    class AuditRecorded(EvolvingAggregate.Event):
        """v1. ``rows``: one list per key, ``ROW_FIELDS`` in order; ``counts``: by ``owner``
        and by ``kind``; ``calls``: the Temporal calls made (``list``, ``describe``);
        ``destination``: where it looked (no secret); ``deep``: one describe per schedule."""

        TOPIC: ClassVar[str] = "schedfence.ownership.AuditRecorded"
        class_version: ClassVar[int] = 1
        namespace: str
        deep: bool
        destination: str
        actor: str
        counts: dict[str, dict[str, int]]
        rows: list[list[str]]
        calls: dict[str, int]

    if TYPE_CHECKING:  # folded by evolve; an annotation here would make a dataclass field
        state: AuditState

    @staticmethod
    def evolve(state: AuditState | None, event: object) -> AuditState:
        return evolve_audits(state, event)

    @classmethod
    def start(cls, namespace: str) -> OwnershipAudits:
        return cls._create(cls.Created, id=audits_aggregate_id(namespace), namespace=namespace)

    @classmethod
    def from_last(cls, last: Any) -> OwnershipAudits:
        """The aggregate as of its last stored event (decoded): the state depends on it alone."""
        aggregate = object.__new__(cls)
        aggregate.__dict__.update(
            _id=last.originator_id, _version=last.originator_version,
            _created_on=last.timestamp, _modified_on=last.timestamp, _pending_events=[],
            state=evolve_audits(None, last))
        return aggregate


def evolve_audits(state: AuditState | None, event: object) -> AuditState:
    """Pure reducer: each audit replaces the last. Unknown events raise (never skipped)."""
    if isinstance(event, OwnershipAudits.Created):
        return AuditState(event.namespace)
    if isinstance(event, OwnershipAudits.AuditRecorded):
        return AuditState(event.namespace, _text(event.timestamp), event.deep,
                          event.destination, event.actor, event.counts, event.rows,
                          event.calls)
    raise TypeError(f"unknown ownership audit event {type(event).__name__}")


def _text(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def decide_record(namespace: str, rows: list[OwnerRow], *, deep: bool, destination: str,
                  actor: str, calls: dict[str, int]) -> Facts:
    """The audit's one event: its rows in key order, counted."""
    ordered = sorted(rows, key=lambda r: r.schedule_id)
    return [Fact(OwnershipAudits.AuditRecorded, {
        "namespace": namespace, "deep": deep, "destination": destination, "actor": actor,
        "counts": counts(ordered), "rows": [r.to_list() for r in ordered],
        "calls": dict(calls)})]
