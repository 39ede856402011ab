"""What the service returns to callers (plain, JSON-ready values), and the operator views it
opens on its store (SQLAlchemy: imported only when they are built)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from schedfence.domain.destination_id import describe_binding
from schedfence.domain.errors import NotFound
from schedfence.domain.ids import schedule_aggregate_id
from schedfence.domain.read_shape import ReadShape, read_shape
from schedfence.domain.source.state import ScheduleState
from schedfence.projections.narration import narrate, short_type

if TYPE_CHECKING:
    from schedfence.domain.rollback.aggregate import MigrationState
    from schedfence.projections.service_views import OperatorViews

    from schedfence.infra.adapters.store.eventstore import FenceApplication


@dataclass(frozen=True)
class MigrationResult:
    """What a request for a migration answered, in either direction (``rollback``,
    ``forward`` and the bulk forms)."""

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
    spec: dict[str, Any] | None = None
    action: dict[str, Any] | None = None
    policies: dict[str, Any] | None = None
    remaining_actions: int | None = None
    # What it did and does: the scheduler's state (domain/source/runs.py), oldest first.
    cursor: str | None = None
    action_count: int = 0
    recent_actions: list[dict[str, Any]] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    issued: list[dict[str, Any]] = field(default_factory=list)
    buffered: list[dict[str, Any]] = field(default_factory=list)
    stopping: list[str] = field(default_factory=list)
    backfills: list[dict[str, Any]] = field(default_factory=list)
    conflict_token: int | None = None  # the schedule's version: pass it to an update

    @classmethod
    def of(cls, s: ScheduleState, version: int | None = None) -> ScheduleView:
        return cls(s.namespace, s.schedule_id, s.incarnation, s.paused, s.notes, s.closed,
                   s.close_reason, s.migration_pending, s.fence_migration_id or s.last_migration_id,
                   s.spec, s.action, s.policies, s.remaining_actions, s.cursor, s.action_count,
                   s.recent_actions, s.running, s.issued, s.buffered, s.stopping, s.backfills,
                   version)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MigrationView(ReadShape):
    """The read shape, the last answer in full, and the aggregate's version."""

    last_answer: dict | None
    version: int
    # What it was accepted against (domain/destination_id.py): one line, and the binding
    # itself (None: unknown, accepted by an older release).
    destination: str = ""
    destination_binding: dict[str, str] | None = None

    @classmethod
    def of(cls, m: MigrationState, version: int) -> MigrationView:
        return cls(**read_shape(m), last_answer=m.last_answer, version=version,
                   destination=describe_binding(m.destination),
                   destination_binding=m.destination)


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


# -- the documents `status`, `list` and `history` print with --json (and the HTTP API serves) --
def status_doc(service: Any, namespace: str, schedule_id: str) -> dict[str, Any]:
    view = service.schedule(namespace, schedule_id).to_dict()
    try:
        migration: dict[str, Any] | None = service.migration(namespace, schedule_id).to_dict()
    except NotFound:
        migration = None
    return {"schedule": view, "migration": migration}


def history_doc(service: Any, namespace: str, schedule_id: str) -> dict[str, Any]:
    """Every event of the key, each with its type's name and its narration (``summary``)."""
    events = []
    for entry in service.history(namespace, schedule_id):
        doc = entry.to_dict()
        doc["short_type"] = short_type(entry.type)
        line = narrate(entry.type, entry.data)
        doc["summary"] = None if line is None else line.text
        events.append(doc)
    return {"namespace": namespace, "schedule_id": schedule_id, "events": events}


def schedule_list(service: Any, namespace: str | None = None, limit: int = 1000,
                  after: str | None = None) -> dict[str, Any]:
    """A page of ``list``: one row per schedule key (its current incarnation and the state of
    its migration, as ``status`` shows them), keys in creation order; ``next_cursor`` is set
    while more keys match (pass it back as ``after``). One definition for the CLI and HTTP.

    The keys, their incarnations and migration states come from the operator projection; only
    each listed key's current incarnation is loaded from the log."""
    page = service.views.schedule_keys(namespace, limit, after)
    views = [ScheduleView.of(s.state, s.version) for s in (
        service.app.repository.get(schedule_aggregate_id(ns, sid, n))
        for ns, sid, n in page.keys)]
    states = service.views.migration_states(sorted({v.migration_id for v in views
                                                    if v.migration_id}))
    rows = []
    for view in views:
        row = view.to_dict()
        row["migration_state"] = states.get(view.migration_id) if view.migration_id else \
            _older_migration_state(service, view)
        rows.append(row)
    return {"schedules": rows, "next_cursor": page.next_cursor}


def _older_migration_state(service: Any, view: ScheduleView) -> str | None:
    """A later incarnation with no migration yet shows its predecessors' latest (``status``)."""
    if view.incarnation <= 1:
        return None
    try:
        return service.migration(view.namespace, view.schedule_id).state
    except NotFound:
        return None


def operator_views(app: FenceApplication) -> OperatorViews:
    """The operator views on the store's own database (the engine is the store's)."""
    from schedfence.projections.service_views import OperatorViews

    from schedfence.infra.adapters.store.sql import (WRITE_OPTIONS, engine_for_application,
                                            row_writer_for, timeout_error)
    engine = engine_for_application(app)
    return OperatorViews(
        app, engine, write_options=WRITE_OPTIONS, rows=row_writer_for(engine),
        tolerate_gaps=app.env.get("PERSISTENCE_MODULE") == "eventsourcing.postgres",
        pipeline=engine.dialect.name == "postgresql",
        timeout_error=lambda exc: timeout_error(app, exc))

