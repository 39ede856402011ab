"""The audit query: the log's events matching an operator's filters, a page at a time, from
the projection's audit index (never by scanning the log). Its time and schedule arguments are
parsed by queries.py (``parse_time``, ``parse_schedule``); it pages as every query does
(queries.py's cursors and limit)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine

from schedfence.domain.errors import InvalidArgument, NotFound
from schedfence.domain.text import validate_id
from schedfence.domain.topics import is_event_type

from . import tables as t
from .cursors import decode_cursor, encode_cursor
from .queries import check_limit
from .records import AuditEntry, AuditPage, from_us


@dataclass(frozen=True)
class AuditRow(AuditEntry):
    """An audit entry and the reason its event gives (an operator's, or a park's), if any,
    and the destination it names (an accept's or a bind's, domain/destination_id.py)."""

    reason: str | None = None
    destination: str | None = None


@dataclass(frozen=True)
class CursorAuditPage(AuditPage):
    next_cursor: str | None = None  # set while more entries match: the next page's ``after``

    def to_dict(self) -> dict[str, Any]:
        return dict(super().to_dict(), next_cursor=self.next_cursor)


def check_text(label: str, value: object, most: int = 1000) -> None:
    if not isinstance(value, str) or not value or len(value) > most:
        raise InvalidArgument(f"{label} must be a non-empty string of at most {most} "
                              "characters")
    check_storable(label, value)


def check_storable(label: str, value: str) -> None:
    """A filter's text that no stored value can hold, and a store cannot take as a parameter
    (PostgreSQL's text refuses NUL: a ``DataError``, not an empty page)."""
    if "\x00" in value:
        raise InvalidArgument(f"{label} must not hold a NUL character")
    if any("\ud800" <= c <= "\udfff" for c in value):
        raise InvalidArgument(f"{label} must not hold a lone surrogate")


def check_event_type(value: object) -> None:
    """A type ``audit`` can filter on: a stored event's class name or topic
    (domain/topics.py); any other is refused, never answered with an empty page."""
    check_text("event type", value, 200)
    if not isinstance(value, str) or not is_event_type(value):
        raise InvalidArgument(f"unknown event type {str(value)[:80]!r}: a class name "
                              "such as MigrationAborted, or its topic "
                              "(schedfence.migration.MigrationAborted)")


@dataclass(frozen=True)
class AuditQuery:
    schedule: tuple[str, str] | None = None
    request_id: str | None = None
    migration_id: str | None = None
    actor: str | None = None
    since_us: int | None = None
    until_us: int | None = None
    newest_first: bool = False
    limit: int = 100
    namespace: str | None = None
    event_types: tuple[str, ...] = ()  # class names (MigrationAborted) or topics
    exclude_types: tuple[str, ...] = ()  # dropped: class names or topics
    job_id: str | None = None  # events of the migrations a batch job requested
    after: str | None = None  # a cursor a previous page returned

    def check(self) -> None:
        check_limit(self.limit)
        if self.namespace is not None:
            validate_id("namespace", self.namespace)
        for event_type in (*self.event_types, *self.exclude_types):
            check_event_type(event_type)
        if self.job_id is not None:
            validate_id("job id", self.job_id)
        if self.after is not None:
            self.after_position()
        if self.since_us is not None and self.until_us is not None \
                and self.since_us > self.until_us:
            raise InvalidArgument("since is after until")
        for label, value in (("request id", self.request_id), ("actor", self.actor)):
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidArgument(f"{label} must be a non-empty string")
            if value is not None:
                check_storable(label, value)

    def after_position(self) -> int | None:
        if self.after is None:
            return None
        position: int
        newest_first: bool
        position, newest_first = decode_cursor("audit", self.after, (int, bool))
        if newest_first != self.newest_first:
            raise InvalidArgument("cursor was returned in the other order: pass "
                                  "--newest-first (newest_first) as on the first page")
        return position


def audit(engine: Engine, q: AuditQuery, projected_through: int) -> CursorAuditPage:
    q.check()
    c = t.audit.c
    conds = _audit_filters(q)
    with engine.connect() as conn:
        if q.schedule is not None:
            _require_schedule(conn, *q.schedule)
            conds += [c.namespace == q.schedule[0], c.schedule_id == q.schedule[1]]
        if q.migration_id is not None:
            _require_migration(conn, q.migration_id)
            conds.append(c.migration_id == q.migration_id)
        if q.request_id is not None:
            conds.append(c.request_id == q.request_id)
        if q.actor is not None:
            conds.append(c.actor == q.actor)
        window = _position_window(conn, q.since_us, q.until_us)
        if window is None:
            return CursorAuditPage([], False, projected_through)
        conds += window
        order = c.position.desc() if q.newest_first else c.position.asc()
        rows = conn.execute(select(t.audit).where(*conds).order_by(order)
                            .limit(q.limit + 1)).mappings().all()
    entries: list[AuditEntry] = [_entry(r) for r in rows[:q.limit]]
    more = len(rows) > q.limit
    return CursorAuditPage(entries, more, projected_through, encode_cursor(
        "audit", entries[-1].position, q.newest_first) if more else None)


def _audit_filters(q: AuditQuery) -> list[Any]:
    c, conds = t.audit.c, []
    if q.namespace is not None:
        conds.append(c.namespace == q.namespace)
    if q.event_types:
        conds.append(or_(c.event_type.in_(q.event_types), c.topic.in_(q.event_types)))
    if q.exclude_types:
        conds += [c.event_type.not_in(q.exclude_types), c.topic.not_in(q.exclude_types)]
    if q.job_id is not None:  # its rollbacks, and its forward migrations
        m, a = t.migrations.c, t.aggregates.c
        conds.append(c.migration_id.in_(select(m.migration_id).where(m.job_id == q.job_id)
                                        .union(select(a.aggregate_id).where(
                                            a.kind == "forward", a.job_id == q.job_id))))
    after = q.after_position()
    if after is not None:
        conds.append(c.position < after if q.newest_first else c.position > after)
    return conds


def _position_window(conn: Any, since: int | None, until: int | None) -> list[Any] | None:
    """The time filter, plus the position range that must hold every match (tables.py's
    mono/floor bracket), so the planner seeks instead of scanning; None: nothing matches."""
    c, conds = t.audit.c, []
    if since is not None:
        first = conn.execute(select(c.position).where(c.mono_us >= since)
                             .order_by(c.mono_us, c.position).limit(1)).scalar()
        if first is None:
            return None
        conds += [c.position >= first, c.ts_us >= since]
    if until is not None:
        last = conn.execute(select(c.position).where(c.floor_us <= until)
                            .order_by(c.floor_us.desc(), c.position.desc()).limit(1)).scalar()
        if last is None:
            return None
        conds += [c.position <= last, c.ts_us <= until]
    return conds


def _require_schedule(conn: Any, namespace: str, schedule_id: str) -> None:
    c = t.aggregates.c
    found = conn.execute(select(c.aggregate_id).where(
        (c.namespace == namespace) & (c.schedule_id == schedule_id)).limit(1)).first()
    if found is None:
        raise NotFound(f"schedule {namespace}/{schedule_id} not found")


def _require_migration(conn: Any, migration_id: str) -> None:
    c = t.migrations.c
    if conn.execute(select(c.migration_id).where(c.migration_id == migration_id)).first() \
            is None:
        raise NotFound(f"migration {migration_id} not found")


def _entry(r: Any) -> AuditRow:
    return AuditRow(r["position"], from_us(r["ts_us"]), r["namespace"], r["schedule_id"],
                      r["aggregate"], r["aggregate_id"], r["version"], r["migration_id"],
                      r["request_id"], r["actor"], r["event_type"], r["topic"])
