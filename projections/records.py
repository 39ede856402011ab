"""What the operator read models return: plain, JSON-ready values."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from schedfence.domain.read_shape import ReadShape

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MICROSECOND = timedelta(microseconds=1)


def to_us(moment: datetime) -> int:
    """Exact microseconds since the epoch; a naive time is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - EPOCH) // MICROSECOND


def from_us(us: int) -> str:
    return (EPOCH + us * MICROSECOND).isoformat()


@dataclass(frozen=True)
class AuditEntry:
    position: int
    time: str
    namespace: str | None
    schedule_id: str | None
    aggregate: str  # key | schedule | migration | other
    aggregate_id: str
    version: int
    migration_id: str | None
    request_id: str | None
    actor: str | None
    type: str
    topic: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AuditPage:
    entries: list[AuditEntry]
    truncated: bool  # more entries match than ``limit``
    projected_through: int  # the log position the answer is up to date with

    def to_dict(self) -> dict[str, Any]:
        return {"entries": [e.to_dict() for e in self.entries], "truncated": self.truncated,
                "projected_through": self.projected_through}


@dataclass(frozen=True)
class MigrationRow(ReadShape):
    """The read shape, the last answer's kind, and when the migration began and last moved."""

    last_answer: str | None
    created_at: str
    updated_at: str
    age_seconds: float
    idle_seconds: float  # since the migration's last event


@dataclass(frozen=True)
class OnCallItem:
    category: str  # parked | legacy | stuck
    migration: MigrationRow
    abort_allowed: bool
    abort_refusal: str  # decide_abort's reason when abort is refused
    verdicts: dict[str, str] = field(default_factory=dict)  # action -> allowed | refused: why
    actions: list[str] = field(default_factory=list)  # advice, most useful first
    # Attempts that keep failing (infra/engines/stalls.py): step, error, failures, since_us,
    # stalled_seconds; None: none recorded since the migration's last event.
    stall: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["migration"] = self.migration.to_dict()
        return doc
