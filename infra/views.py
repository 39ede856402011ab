"""What the service returns to callers: plain, JSON-ready values."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from schedfence.domain.migration import MigrationState, ReadShape, read_shape
from schedfence.domain.schedule import ScheduleState


@dataclass(frozen=True)
class RollbackResult:
    outcome: str  # accepted | already_pending | already_completed
    request_id: str
    request_id_origin: str  # caller | derived
    migration_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ScheduleView:
    namespace: str
    schedule_id: str
    incarnation: int
    paused: bool
    notes: str
    closed: bool
    close_reason: str
    migration_pending: bool
    migration_id: str | None

    @classmethod
    def of(cls, s: ScheduleState) -> ScheduleView:
        return cls(s.namespace, s.schedule_id, s.incarnation, s.paused, s.notes, s.closed,
                   s.close_reason, s.migration_pending, s.fence_migration_id or s.last_migration_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MigrationView(ReadShape):
    """The read shape, the last answer in full, and the aggregate's version."""

    last_answer: dict | None
    version: int

    @classmethod
    def of(cls, m: MigrationState, version: int) -> MigrationView:
        return cls(**read_shape(m), last_answer=m.last_answer, version=version)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class HistoryEntry:
    position: int  # notification id: the store's total order
    aggregate: str  # schedule | migration | key
    aggregate_id: str
    version: int
    type: str
    timestamp: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
