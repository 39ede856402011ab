"""What the service returns to callers (plain, JSON-ready values), and the operator views it
opens on its store (SQLAlchemy: imported only when they are built)."""
from __future__ import annotations

from copy import deepcopy
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, Literal

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

# What a request for a migration answers, and where its request id came from (``legacy``: a
# migration an older release wrote without one; ``adopted``: one an operator adopted).
Outcome = Literal["accepted", "already_pending", "already_completed"]
Origin = Literal["caller", "derived", "legacy", "adopted"]


@dataclass(frozen=True)
class MigrationResult:
    """What a request for a migration answered, in either direction (``rollback``,
    ``forward`` and the bulk forms)."""

    outcome: Outcome
    request_id: str
    request_id_origin: Origin
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

    @staticmethod
    def folded_dict(state: dict[str, Any], version: int) -> dict[str, Any]:
        """``of(ScheduleState(**state), version).to_dict()`` from a state's fields freshly
        decoded (a folded row's JSON: nothing else holds them, so nothing is copied); the
        order of the keys is the view's."""
        return {"namespace": state["namespace"], "schedule_id": state["schedule_id"],
                "incarnation": state["incarnation"], "paused": state["paused"],
                "notes": state["notes"], "closed": state["closed"],
                "close_reason": state["close_reason"],
                "migration_pending": state["fence_migration_id"] is not None,
                "migration_id": state["fence_migration_id"] or state["last_migration_id"],
                **{name: state[name] for name in _STATE_AS_IS}, "conflict_token": version}

    def to_dict(self) -> dict[str, Any]:
        """``asdict(self)``, at a fifth of its cost: its values are JSON-shaped (``list`` reads
        up to 10,000 of them)."""
        return {f.name: _copied(getattr(self, f.name)) for f in fields(self)}


# The view's fields between migration_id and conflict_token: the state's, unchanged.
_STATE_AS_IS = ("spec", "action", "policies", "remaining_actions", "cursor", "action_count",
                "recent_actions", "running", "issued", "buffered", "stopping", "backfills")


def _copied(value: Any) -> Any:
    """What ``asdict`` makes of a field's value: containers rebuilt, each leaf copied."""
    if isinstance(value, (str, int, float, type(None))):
        return value  # bool is an int; each is immutable, and deepcopy returns it as is
    if isinstance(value, dict):
        return type(value)((_copied(k), _copied(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_copied(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return deepcopy(value)


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

