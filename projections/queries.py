"""Operator queries, answered from the projection's indexed tables (never by scanning the log)."""
from __future__ import annotations

import shlex

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Engine

from schedfence.domain.errors import InvalidArgument, NotFound
from schedfence.domain.ids import validate_id
from schedfence.domain.migration import (OPEN_PHASES, OPERATOR_PHASES, PHASES, WORKER_PHASES,
                                         MigrationState)
from schedfence.domain.read_shape import READ_FIELDS

from . import oncall as oc
from . import tables as t
from .records import (AuditEntry, AuditPage, MigrationRow, OnCallItem, from_us, to_us)

MAX_LIMIT = 10_000
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


MAX_AGO = 62_000_000_000.0  # seconds: about 1,960 years, within datetime's range from now


def parse_time(text: str | datetime, name: str, now: float | None = None) -> int:
    """ISO 8601 (naive = UTC) or a duration ago (``90s``, ``15m``, ``2h``, ``7d``) → µs."""
    if isinstance(text, datetime):
        return to_us(text)
    value = str(text).strip()
    ago = _AGO.match(value)
    if ago:
        seconds = float(ago.group(1)) * _UNITS[ago.group(2)]
        if not seconds < MAX_AGO:  # also refuses nan and inf
            raise InvalidArgument(f"{name} {value[:40]!r} is out of range (further back "
                                  "than year 1)")
        return int(((now if now is not None else time.time()) - seconds) * 1_000_000)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{name} {value!r} is not a time: expected ISO 8601 "
                              "(2026-12-02T10:00:00Z) or a duration ago (90s, 15m, 2h, 7d)")
    return to_us(moment)


def parse_schedule(text: str) -> tuple[str, str]:
    namespace, sep, schedule_id = str(text).partition("/")
    if not sep:
        raise InvalidArgument(f"schedule {text!r} must be NAMESPACE/SCHEDULE_ID")
    validate_id("namespace", namespace)
    validate_id("schedule id", schedule_id)
    return namespace, schedule_id


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

    def check(self) -> None:
        if not isinstance(self.limit, int) or not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}")
        if self.since_us is not None and self.until_us is not None \
                and self.since_us > self.until_us:
            raise InvalidArgument("since is after until")
        for label, value in (("request id", self.request_id), ("actor", self.actor)):
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidArgument(f"{label} must be a non-empty string")


def audit(engine: Engine, q: AuditQuery, projected_through: int) -> AuditPage:
    q.check()
    c = t.audit.c
    conds = []
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
            return AuditPage([], False, projected_through)
        conds += window
        order = c.position.desc() if q.newest_first else c.position.asc()
        rows = conn.execute(select(t.audit).where(*conds).order_by(order)
                            .limit(q.limit + 1)).mappings().all()
    entries = [_entry(r) for r in rows[:q.limit]]
    return AuditPage(entries, len(rows) > q.limit, projected_through)


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


def _entry(r: Any) -> AuditEntry:
    return AuditEntry(r["position"], from_us(r["ts_us"]), r["namespace"], r["schedule_id"],
                      r["aggregate"], r["aggregate_id"], r["version"], r["migration_id"],
                      r["request_id"], r["actor"], r["event_type"], r["topic"])


def stats(engine: Engine, projected_through: int) -> dict[str, Any]:
    """Migrations per state and per namespace and state, from the maintained counts."""
    by_state = {phase: 0 for phase in PHASES}
    by_namespace: dict[str, dict[str, int]] = {}
    with engine.connect() as conn:
        rows = conn.execute(select(t.counts).order_by(t.counts.c.namespace,
                                                      t.counts.c.state)).all()
    for namespace, state, n in rows:
        by_state[state] = by_state.get(state, 0) + n
        by_namespace.setdefault(namespace, {})[state] = n
    return {"projected_through": projected_through, "migrations": sum(by_state.values()),
            "open": sum(by_state[p] for p in OPEN_PHASES),
            "by_state": by_state, "by_namespace": by_namespace}


def migrations_by_state(engine: Engine, state: str | None, limit: int,
                        now: float | None = None) -> list[MigrationRow]:
    if state is not None and state not in PHASES:
        raise InvalidArgument(f"unknown state {state!r} (one of {', '.join(PHASES)})")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}")
    c = t.migrations.c
    query = select(t.migrations).order_by(c.state, c.updated_us.desc(), c.migration_id)
    if state is not None:
        query = select(t.migrations).where(c.state == state).order_by(
            c.updated_us.desc(), c.migration_id)
    with engine.connect() as conn:
        rows = conn.execute(query.limit(limit)).mappings().all()
    now_us = to_us(datetime.now(timezone.utc)) if now is None else int(now * 1_000_000)
    return [_row(r, now_us)[0] for r in rows]


def oncall(engine: Engine, stuck_after_seconds: float, now: float | None = None,
           limit: int = MAX_LIMIT) -> list[OnCallItem]:
    """Parked and legacy migrations, and open ones with no event for ``stuck_after_seconds``."""
    if not isinstance(stuck_after_seconds, (int, float)) or stuck_after_seconds < 0:
        raise InvalidArgument("stuck_after_seconds must be a number >= 0")
    now_us = to_us(datetime.now(timezone.utc)) if now is None else int(now * 1_000_000)
    cutoff = now_us - int(stuck_after_seconds * 1_000_000)
    c = t.migrations.c
    query = select(t.migrations).where(or_(
        c.state.in_(OPERATOR_PHASES),
        c.state.in_(WORKER_PHASES) & (c.updated_us <= cutoff),
    )).order_by(c.updated_us, c.migration_id).limit(limit)
    with engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    items = []
    for r in rows:
        row, state = _row(r, now_us)
        kind = oc.category(state, row.idle_seconds, stuck_after_seconds)
        if kind is None:
            continue
        verdicts = oc.verdicts(state)
        abort = verdicts["abort"]
        items.append(OnCallItem(
            kind, row, abort == oc.ALLOWED, abort.removeprefix("refused: ")
            if abort != oc.ALLOWED else "", verdicts,
            oc.actions(state, f"{shlex.quote(row.namespace)} {shlex.quote(row.schedule_id)}",
                       row.idle_seconds, verdicts)))
    rank = {"parked": 0, "legacy": 1, "stuck": 2}
    return sorted(items, key=lambda i: rank[i.category])  # stable: oldest first within


def _row(r: Any, now_us: int) -> tuple[MigrationRow, MigrationState]:
    state = MigrationState(**json.loads(r["folded"]))
    row = MigrationRow(**{name: r[name] for name in READ_FIELDS}, last_answer=r["last_answer"],
                       created_at=from_us(r["created_us"]), updated_at=from_us(r["updated_us"]),
                       age_seconds=round(max(now_us - r["created_us"], 0) / 1e6, 3),
                       idle_seconds=round(max(now_us - r["updated_us"], 0) / 1e6, 3))
    return row, state


def count_rows(engine: Engine) -> dict[str, int]:
    """Rows per view table (projection status)."""
    with engine.connect() as conn:
        return {table.name: conn.execute(select(func.count()).select_from(table)).scalar()
                for table in t.VIEW_TABLES}

