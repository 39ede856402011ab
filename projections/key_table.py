"""The operator page's schedules: one row per schedule key, with its latest migration in either
direction and who runs the schedule now, read from the projection's tables (no log scan, and
never a call to Temporal).

``owner_of(rows)`` is the one place the owner column comes from. Today it reads the store's
own history (what the folded key, schedule and migrations say); an ownership audit's last
result may later overlay it (``Owner.basis``, ``Owner.drift``), and the page shows whatever it
returns.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from sqlalchemy import select
from sqlalchemy.engine import Engine

from schedfence.domain.direction import DIRECTIONS, FORWARD, ROLLBACK
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.forward.aggregate import PHASES as FORWARD_PHASES
from schedfence.domain.forward.aggregate import ForwardMigration, ForwardState
from schedfence.domain.ids import schedule_aggregate_id
from schedfence.domain.owners.audit import AuditState
from schedfence.domain.rollback.phases import PHASES as ROLLBACK_PHASES
from schedfence.domain.source.key import KeyState, ScheduleKey
from schedfence.domain.source.program import upcoming
from schedfence.domain.source.state import ScheduleState

from . import tables as t

Key = tuple[str, str]  # (namespace, schedule id)
SOURCE, TEMPORAL, NONE = "source", "temporal", "none"
OWNERS = (SOURCE, TEMPORAL, NONE)
NO_MIGRATION = "none"  # the state filter's word for a key never migrated
STATES = tuple(dict.fromkeys(ROLLBACK_PHASES + FORWARD_PHASES)) + (NO_MIGRATION,)
PAUSED = "paused"  # a handed-over schedule's next run when it was handed over paused
MAX_PER_PAGE = 500


@dataclass(frozen=True)
class Owner:
    """Who runs a schedule now: ``source``, ``temporal`` or ``none`` (closed or deleted);
    ``next_run``: Temporal's next run (ISO 8601 UTC) of a handed-over schedule, or ``paused``;
    ``drift``: what an ownership audit found wrong at this key (None: nothing, or no audit);
    ``basis``: ``history`` (the store's own events) or ``audit`` (the last ownership audit)."""

    owner: str
    next_run: str | None = None
    drift: str | None = None
    basis: str = "history"


@dataclass(frozen=True)
class KeyRow:
    """A schedule key as the store knows it: its current incarnation, and its latest migration
    (the one requested last, in either direction)."""

    namespace: str
    schedule_id: str
    incarnation: int
    schedule: ScheduleState | None  # the current incarnation (None: a forward made none yet)
    forward_open: str | None  # the open forward migration holding the key
    migration_id: str | None = None
    direction: str | None = None  # rollback | forward
    state: str | None = None  # the migration's phase
    park_reason: str | None = None
    handed_paused: bool | None = None  # a completed rollback: created paused at Temporal
    forwards: int = 0  # forward migrations ever requested at this key

    @property
    def key(self) -> Key:
        return self.namespace, self.schedule_id


def owner_of(rows: Iterable[KeyRow], now: datetime | None = None) -> dict[Key, Owner]:
    """Who runs each key's schedule now, from the store's own history: the source while its
    incarnation is open and no forward migration holds it; Temporal once a rollback handed it
    over (its next run from the handed-over spec), while a forward migration still takes it in
    or after one was aborted; nobody once it was deleted."""
    moment = now or datetime.now(timezone.utc)
    return {row.key: _owner(row, moment) for row in rows}


def with_audits(owners: dict[Key, Owner], rows: Iterable[KeyRow],
                audits: Iterable[AuditState]) -> dict[Key, Owner]:
    """``owners`` where the last ownership audit of the key's namespace still describes it
    (the key's latest migration is the one the audit saw decide it): who runs it by that audit,
    Temporal's own next run, and the drift it found. A key migrated since keeps the store's
    history's answer, which is newer."""
    latest = {row.key: row.migration_id for row in rows}
    seen = dict(owners)
    for audit in audits:
        for found in audit.owner_rows():
            key = (audit.namespace, found.schedule_id)
            if key not in seen or latest[key] != found.migration_id:
                continue
            drift = None if found.kind in ("none", "native") else found.kind
            seen[key] = Owner(found.owner, found.next_run or seen[key].next_run, drift, "audit")
    return seen


def _owner(row: KeyRow, now: datetime) -> Owner:
    s = row.schedule
    if row.forward_open is not None:
        return Owner(TEMPORAL)
    if s is None:
        return Owner(TEMPORAL if row.forwards else NONE)
    if not s.closed:
        return Owner(SOURCE)
    if s.close_reason == "migrated":
        return Owner(TEMPORAL, _next_run(row, s, now))
    if s.close_reason == "takeover_abandoned":  # the forward was aborted: Temporal runs it
        return Owner(TEMPORAL)
    return Owner(NONE)


def _next_run(row: KeyRow, s: ScheduleState, now: datetime) -> str | None:
    if row.handed_paused:
        return PAUSED
    times = upcoming(replace(s, closed=False), now, 1)
    return times[0].astimezone(timezone.utc).isoformat() if times else None


# -- reading the rows ------------------------------------------------------------------------
def read_key_rows(engine: Engine, only: Key | None = None) -> list[KeyRow]:
    """Every schedule key (or ``only`` that one), in the order the keys were created."""
    with engine.connect() as conn:
        a, c = t.aggregates.c, t.audit.c
        keys = conn.execute(select(c.namespace, c.schedule_id).where(
            c.topic == ScheduleKey.Created.TOPIC, *_at(c, only)).order_by(c.position)).all()
        folded = {(r.kind, r.namespace, r.schedule_id, r.aggregate_id): r.folded
                  for r in conn.execute(select(a.kind, a.namespace, a.schedule_id,
                                               a.aggregate_id, a.folded).where(
                      a.kind.in_(("key", "forward")), *_at(a, only)))}
        key_states = {(ns, sid): KeyState(**json.loads(f))
                      for (kind, ns, sid, _), f in folded.items() if kind == "key" and f}
        schedules = _schedules(conn, key_states)
        latest = _latest_migrations(conn, folded, only)
    rows = []
    for ns, sid in keys:
        ks = key_states.get((ns, sid)) or KeyState(ns, sid)
        base = KeyRow(ns, sid, ks.incarnation, schedules.get((ns, sid)),
                      ks.forward_migration_id)
        found = latest.get((ns, sid))
        rows.append(replace(base, **found) if found else base)
    return rows


def _at(columns: Any, only: Key | None) -> list[Any]:
    """The conditions that narrow a table with namespace and schedule id columns to a key."""
    if only is None:
        return []
    return [columns.namespace == only[0], columns.schedule_id == only[1]]


def _schedules(conn: Any, keys: Mapping[Key, KeyState]) -> dict[Key, ScheduleState]:
    """Each key's current incarnation, as its reducer folded it."""
    ids = {str(schedule_aggregate_id(ns, sid, k.incarnation)): (ns, sid)
           for (ns, sid), k in keys.items() if k.incarnation}
    a, found = t.aggregates.c, {}
    wanted = sorted(ids)
    for chunk in t.chunks(wanted):
        for aid, f in conn.execute(select(a.aggregate_id, a.folded).where(
                a.aggregate_id.in_(chunk))):
            if f:
                found[ids[aid]] = ScheduleState(**json.loads(f))
    return found


def _latest_migrations(conn: Any, folded: Mapping[tuple[str, str, str, str], str | None],
                       only: Key | None) -> dict[Key, dict[str, Any]]:
    """Each key's latest migration (by the log position it was requested at), either way."""
    m, c = t.migrations.c, t.audit.c
    best: dict[Key, tuple[int, dict[str, Any]]] = {}
    forwards: dict[Key, int] = {}

    def offer(key: Key, position: int, fields: dict[str, Any]) -> None:
        if key not in best or position > best[key][0]:
            best[key] = (position, fields)

    for r in conn.execute(select(m.migration_id, m.namespace, m.schedule_id, m.state,
                                 m.park_reason, m.created_position).where(*_at(m, only))):
        offer((r.namespace, r.schedule_id), r.created_position, {
            "migration_id": r.migration_id, "direction": ROLLBACK, "state": r.state,
            "park_reason": r.park_reason})
    requested = dict(conn.execute(select(c.aggregate_id, c.position).where(
        c.topic == ForwardMigration.ForwardRequested.TOPIC, *_at(c, only))).tuples().all())
    for (kind, ns, sid, aid), f in folded.items():
        if kind != "forward" or not f:
            continue
        st = ForwardState(**json.loads(f))
        forwards[(ns, sid)] = forwards.get((ns, sid), 0) + 1
        offer((ns, sid), requested.get(aid, 0), {
            "migration_id": aid, "direction": FORWARD, "state": st.phase,
            "park_reason": st.park_reason})
    out = {k: dict(fields, forwards=forwards.get(k, 0)) for k, (_, fields) in best.items()}
    _handed_paused(conn, out)
    return out


def _handed_paused(conn: Any, latest: dict[Key, dict[str, Any]]) -> None:
    """For each completed rollback: whether the schedule went to Temporal paused."""
    m = t.migrations.c
    done = {f["migration_id"]: f for f in latest.values()
            if f["direction"] == ROLLBACK and f["state"] == "completed"}
    wanted = sorted(done)
    for chunk in t.chunks(wanted):
        for mid, f in conn.execute(select(m.migration_id, m.folded).where(
                m.migration_id.in_(chunk))):
            done[mid]["handed_paused"] = bool(json.loads(f).get("pre_paused"))


def migration_counts(engine: Engine) -> dict[str, dict[str, int]]:
    """Every migration, by direction and state (the states each direction has, in order)."""
    out: dict[str, dict[str, int]] = {ROLLBACK: dict.fromkeys(ROLLBACK_PHASES, 0),
                                      FORWARD: dict.fromkeys(FORWARD_PHASES, 0)}
    with engine.connect() as conn:
        for state, n in conn.execute(select(t.counts.c.state, t.counts.c.n)):
            out[ROLLBACK][state] = out[ROLLBACK].get(state, 0) + int(n)
        a = t.aggregates.c
        for (f,) in conn.execute(select(a.folded).where(a.kind == "forward")):
            if f:
                phase = json.loads(f)["phase"]
                out[FORWARD][phase] = out[FORWARD].get(phase, 0) + 1
    return out


# -- the table's filters and pages -----------------------------------------------------------
@dataclass(frozen=True)
class TableQuery:
    state: str | None = None
    direction: str | None = None
    key: str | None = None  # a substring of NAMESPACE/ID
    owner: str | None = None
    page: int = 1
    per_page: int = 100

    def check(self) -> TableQuery:
        for name, value, allowed in (("state", self.state, STATES),
                                     ("direction", self.direction, DIRECTIONS),
                                     ("owner", self.owner, OWNERS)):
            if value is not None and value not in allowed:
                raise InvalidArgument(f"unknown {name} {value[:40]!r} (one of "
                                      f"{', '.join(allowed)})")
        if self.key is not None and len(self.key) > 1000:
            raise InvalidArgument("key filter is longer than 1000 characters")
        if not 1 <= self.page <= 10**9 or not 1 <= self.per_page <= MAX_PER_PAGE:
            raise InvalidArgument(f"page must be 1 or more, per_page from 1 to {MAX_PER_PAGE}")
        return self

    def matches(self, row: KeyRow, owner: Owner) -> bool:
        state = row.state or NO_MIGRATION
        return ((self.state is None or state == self.state)
                and (self.direction is None or row.direction == self.direction)
                and (self.owner is None or owner.owner == self.owner)
                and (self.key is None or self.key in f"{row.namespace}/{row.schedule_id}"))


@dataclass(frozen=True)
class TablePage:
    rows: list[tuple[KeyRow, Owner]]
    matched: int  # rows matching the filters, over all pages
    page: int
    pages: int


def table_page(rows: list[KeyRow], owners: Mapping[Key, Owner], q: TableQuery) -> TablePage:
    """The page ``q.page`` of the rows matching ``q`` (keys in creation order)."""
    matching = [(r, owners[r.key]) for r in rows if q.matches(r, owners[r.key])]
    pages = max(1, -(-len(matching) // q.per_page))
    start = (q.page - 1) * q.per_page
    return TablePage(matching[start:start + q.per_page], len(matching), q.page, pages)


def owner_counts(owners: Mapping[Key, Owner]) -> dict[str, int]:
    out = dict.fromkeys(OWNERS, 0)
    for o in owners.values():
        out[o.owner] = out.get(o.owner, 0) + 1
    return out
