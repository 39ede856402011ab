"""Operator queries, answered from the projection's indexed tables (never by scanning the log)."""
from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Engine

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.text import validate_id
from schedfence.domain.rollback.aggregate import MigrationState
from schedfence.domain.rollback.phases import OPEN_PHASES, OPERATOR_PHASES, PHASES, WORKER_PHASES
from schedfence.domain.read_shape import READ_FIELDS
from schedfence.domain.source.key import ScheduleKey

from . import oncall as oc
from .cursors import decode_cursor, encode_cursor, keys_after
from . import tables as t
from .batch import migration_state
from .records import MigrationRow, OnCallItem, from_us, to_us

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


# -- pages (their cursors: projections/cursors.py) --------------------------------------------


@dataclass(frozen=True)
class MigrationPage:
    rows: list[MigrationRow]
    next_cursor: str | None  # set while more migrations match

    def to_dict(self) -> dict[str, Any]:
        return {"migrations": [r.to_dict() for r in self.rows], "next_cursor": self.next_cursor}


@dataclass(frozen=True)
class KeyPage:
    keys: list[tuple[str, str, int]]  # namespace, schedule id, current incarnation
    next_cursor: str | None


def check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}")


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


def check_state(state: str | None) -> None:
    """``state`` is None (every state) or a rollback migration's phase."""
    if state is not None and state not in PHASES:
        raise InvalidArgument(f"unknown state {state!r} (one of {', '.join(PHASES)})")


def migrations_page(engine: Engine, state: str | None, limit: int, after: str | None = None,
                    now: float | None = None) -> MigrationPage:
    """Migrations (of ``state``, or all, grouped by state), most recently changed first. A
    migration that changes between two pages moves in this order (as on the HTTP API)."""
    check_state(state)
    check_limit(limit)
    c = t.migrations.c
    conds = [] if state is None else [c.state == state]
    if after is not None:
        last_state, updated, mid = migrations_after(after)
        if state is not None and last_state != state:
            raise InvalidArgument("cursor was returned for another --state: pass the same "
                                  "filters as on the first page")
        tail = or_(c.updated_us < updated, and_(c.updated_us == updated, c.migration_id > mid))
        conds.append(tail if state is not None else
                     or_(c.state > last_state, and_(c.state == last_state, tail)))
    order = ([] if state is not None else [c.state]) + [c.updated_us.desc(), c.migration_id]
    with engine.connect() as conn:
        rows = conn.execute(select(t.migrations).where(*conds).order_by(*order)
                            .limit(limit + 1)).mappings().all()
    now_us = _now_us(now)
    last = rows[limit - 1] if len(rows) > limit else None
    return MigrationPage([_row(r, now_us)[0] for r in rows[:limit]], None if last is None else
                         encode_cursor("migrations", last["state"], last["updated_us"],
                                       last["migration_id"]))


def migrations_after(after: str) -> tuple[str, int, str]:
    """The last row a migrations page returned (its state, updated µs and id), from the
    page's cursor; a cursor of anything else is refused."""
    state, updated, migration_id = decode_cursor("migrations", after, (str, int, str))
    return state, updated, migration_id


def migrations_by_state(engine: Engine, state: str | None, limit: int,
                        now: float | None = None) -> list[MigrationRow]:
    """The first page of ``migrations_page``."""
    return migrations_page(engine, state, limit, None, now).rows


def schedule_keys(engine: Engine, namespace: str | None, limit: int,
                  after: str | None = None) -> KeyPage:
    """Schedule keys that have an incarnation, in the order they were created (the position
    of their key's creation in the log), with their current incarnation."""
    check_limit(limit)
    if namespace is not None:
        validate_id("namespace", namespace)
    c = t.audit.c
    conds = [c.topic == ScheduleKey.Created.TOPIC]
    if namespace is not None:
        conds.append(c.namespace == namespace)
    if after is not None:
        conds.append(c.position > keys_after(after))
    with engine.connect() as conn:
        rows = conn.execute(select(c.position, c.namespace, c.schedule_id).where(*conds)
                            .order_by(c.position).limit(limit + 1)).all()
        incarnations = _incarnations(conn, [(r.namespace, r.schedule_id) for r in rows[:limit]])
    keys = [(r.namespace, r.schedule_id, incarnations[(r.namespace, r.schedule_id)])
            for r in rows[:limit] if incarnations.get((r.namespace, r.schedule_id))]
    more = len(rows) > limit
    return KeyPage(keys, encode_cursor("schedules", rows[limit - 1].position) if more else None)


def migration_states(engine: Engine, ids: list[str]) -> dict[str, str]:
    """The state of each of these (rollback) migrations the projection holds."""
    c = t.migrations.c
    found: dict[str, str] = {}
    with engine.connect() as conn:
        for chunk in t.chunks(ids):
            found.update(conn.execute(select(c.migration_id, c.state).where(
                c.migration_id.in_(chunk))).tuples().all())
    return found


def _incarnations(conn: Any, keys: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """The newest incarnation of each key (its schedule aggregates' highest number)."""
    a, found = t.aggregates.c, {}
    for chunk in t.chunks(keys):  # bound the size of the IN lists
        wanted = set(chunk)
        rows = conn.execute(select(a.namespace, a.schedule_id, func.max(a.incarnation)).where(
            a.kind == "schedule", a.namespace.in_({k[0] for k in chunk}),
            a.schedule_id.in_({k[1] for k in chunk})).group_by(a.namespace, a.schedule_id))
        found.update({(ns, sid): n for ns, sid, n in rows if (ns, sid) in wanted and n})
    return found


def oncall(engine: Engine, stuck_after_seconds: float, now: float | None = None,
           limit: int = MAX_LIMIT,
           stalls: Mapping[str, Mapping[str, Any]] | None = None) -> list[OnCallItem]:
    """Parked and legacy migrations, and open ones that made no progress for
    ``stuck_after_seconds``: no event, or only failed attempts (``stalls``: the stall rows
    by migration id, infra/engines/stalls.py)."""
    if not isinstance(stuck_after_seconds, (int, float)) or stuck_after_seconds < 0:
        raise InvalidArgument("stuck_after_seconds must be a number >= 0")
    now_us = _now_us(now)
    cutoff = now_us - int(stuck_after_seconds * 1_000_000)
    stalled = sorted(m for m, s in (stalls or {}).items() if s["since_us"] <= cutoff)
    c = t.migrations.c
    query = select(t.migrations).where(or_(
        c.state.in_(OPERATOR_PHASES),
        c.state.in_(WORKER_PHASES) & (c.updated_us <= cutoff),
        c.state.in_(WORKER_PHASES) & c.migration_id.in_(stalled[:MAX_LIMIT]),
    )).order_by(c.updated_us, c.migration_id).limit(limit)
    with engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    items = []
    for r in rows:
        row, state = _row(r, now_us)
        stall = _current_stall((stalls or {}).get(row.migration_id), r["updated_us"], now_us)
        idle = max(row.idle_seconds, stall["stalled_seconds"] if stall else 0.0)
        kind = oc.category(state, idle, stuck_after_seconds)
        if kind is None:
            continue
        verdicts = oc.verdicts(state)
        abort = verdicts["abort"]
        actions = oc.actions(state, f"{shlex.quote(row.namespace)} "
                             f"{shlex.quote(row.schedule_id)}", row.idle_seconds, verdicts)
        if stall is not None and kind == "stuck":
            actions.insert(0, oc.stall_line(stall))  # a worker runs: what it runs into
        items.append(OnCallItem(
            kind, row, abort == oc.ALLOWED, abort.removeprefix("refused: ")
            if abort != oc.ALLOWED else "", verdicts, actions, stall))
    rank = {"parked": 0, "legacy": 1, "stuck": 2}
    return sorted(items, key=lambda i: rank[i.category])  # stable: oldest first within


def _current_stall(stall: Mapping[str, Any] | None, updated_us: int,
                   now_us: int) -> dict[str, Any] | None:
    """A stall row that still stands (no event of the migration after its last failure),
    with how long it has lasted; None otherwise."""
    if stall is None or stall["at_us"] < updated_us:
        return None
    return dict(stall, stalled_seconds=round(max(now_us - stall["since_us"], 0) / 1e6, 3))


def _now_us(now: float | None) -> int:
    """``now`` (seconds since the epoch), else the clock's time, in µs."""
    return to_us(datetime.now(timezone.utc)) if now is None else int(now * 1_000_000)


def _row(r: Any, now_us: int) -> tuple[MigrationRow, MigrationState]:
    state = migration_state(r)
    row = MigrationRow(**{name: r[name] for name in READ_FIELDS}, last_answer=r["last_answer"],
                       created_at=from_us(r["created_us"]), updated_at=from_us(r["updated_us"]),
                       age_seconds=round(max(now_us - r["created_us"], 0) / 1e6, 3),
                       idle_seconds=round(max(now_us - r["updated_us"], 0) / 1e6, 3))
    return row, state


def count_rows(engine: Engine) -> dict[str, int]:
    """Rows per view table (projection status)."""
    with engine.connect() as conn:
        return {table.name: conn.execute(select(func.count()).select_from(table)).scalar_one()
                for table in t.VIEW_TABLES}

