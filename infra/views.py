"""What the service returns to callers: plain, JSON-ready values."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from schedfence.domain.migration import MigrationState, read_shape
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
class MigrationView:
    migration_id: str
    namespace: str
    schedule_id: str
    incarnation: int
    state: str
    request_id: str | None
    request_id_origin: str
    park_reason: str | None
    park_detail: str
    destination_first_run_id: str | None
    claim_armed: bool
    starts_issued: int
    attempts: int
    last_answer: dict | None
    version: int
    last_worker: str = ""

    @classmethod
    def of(cls, m: MigrationState, version: int) -> MigrationView:
        """The read shape (domain.migration.read_shape), the last answer in full, and the
        aggregate's version."""
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
