"""The schedules' due index: which schedules a scheduler pass must look at, without loading
every schedule (a pass costs what is due, not the fleet's size).

One row per schedule aggregate (``schedfence_schedule_due``): ``due_us``, when a pass must
look at it next (the domain's ``scheduling.due``; NULL: not until it changes), ``version``,
the schedule version that time was decided on, and a lease (``holder``, ``lease_us``).

- **Kept from the log.** ``sweep`` marks, in one statement on the store, every schedule
  whose events after the last position swept (by topic) reach a version above its row's: it
  is due at once (a command, a fence, another scheduler's step). No event is read into the
  process, let alone decoded. The position swept is one shared row, moved only forward and
  locked while a sweep runs, so two schedulers never sweep the same events. The log is read
  directly, not through the operator views, so a pass never waits on (or for) the projection.
- **Kept by the pass that decided.** ``settle`` writes a schedule's next due time with the
  version it was decided on, only over a row of that version or older (a change the pass did
  not see stays due), and gives back the pass's lease: a batch in one statement on
  PostgreSQL, a statement per row elsewhere.
- **Leases.** ``take`` leases a bounded batch of due rows to one scheduler (PostgreSQL: ``FOR
  UPDATE SKIP LOCKED``, so concurrent takers get different rows; SQLite has one writer at a
  time). A given-back lease keeps its ``holder``, the scheduler that stepped the schedule
  last, and a take leases that scheduler's own due rows first (among the earliest due, a few
  batches' worth), then any other's: a schedule tends to stay with one scheduler, whose copy
  of it (``SeenSchedules``) is then current, so its next step folds no other scheduler's
  events; a row whose scheduler is gone or slow is taken by another once that one has done
  its own. A lease is an efficiency device only: a lost or stolen lease costs a second look;
  the store's optimistic concurrency decides every step and an action start's request id is a
  function of (schedule, nominal time, origin), so the runner deduplicates a second start.
  A pass gives back every lease it took, failed or not (step_failures.py): a schedule whose
  step fails alone is given back by ``fail``, which counts the failure in its row (with the
  last error) and puts its due time off; a settle sets the count back to 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from sqlalchemy import (BigInteger, Column, Index, Integer, MetaData, String, Table,
                        bindparam, func, inspect, select, text, update)
from sqlalchemy.exc import DBAPIError

from schedfence.domain.topics import STORED_TOPICS

from schedfence.infra.adapters.store.sql import SideTables, create_tables
from schedfence.infra.engines.lease import LEASE_SECONDS, now_us
from schedfence.projections.records import EPOCH, MICROSECOND, to_us

SWEEP_PAGE = 50_000  # log positions marked per statement
# Every event of a schedule (not of its key: ``schedfence.schedule_key.*``).
SCHEDULE_TOPICS = tuple(sorted(t for t in STORED_TOPICS if t.startswith("schedfence.schedule.")))

_metadata = MetaData()
due_rows = Table(
    "schedfence_schedule_due", _metadata,
    Column("aggregate_id", String(36), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("due_us", BigInteger),  # NULL: not due until the schedule changes
    Column("holder", String(300), nullable=False, default=""),
    Column("lease_us", BigInteger, nullable=False, default=0),
    # A step that failed alone (``fail``): how many times in a row, when (wall µs), the last
    # error; a step that succeeds (``settle``) sets ``failures`` back to 0. Added to tables
    # of older releases on first use (``_FAILURE_COLUMNS``).
    Column("failures", Integer, nullable=False, server_default=text("0")),
    Column("failed_us", BigInteger),
    Column("error", String(500)),
    Index("schedfence_schedule_due_at", "due_us"),
)
swept = Table(
    "schedfence_schedule_due_swept", _metadata,
    Column("name", String(20), primary_key=True),
    Column("position", BigInteger, nullable=False),
)

# The schedules changed in a range of log positions, as the due table names them: the
# originator id as text (PostgreSQL: a uuid; SQLite: 32 hex digits, hyphenated here).
_CHANGED = {
    "postgresql": ("notification_id", "originator_id::text"),
    "sqlite": ("rowid", "lower(substr(originator_id, 1, 8) || '-' || substr(originator_id, 9, 4)"
               " || '-' || substr(originator_id, 13, 4) || '-' || substr(originator_id, 17, 4)"
               " || '-' || substr(originator_id, 21))"),
}
# Only a schedule whose row is missing or older in the statement's snapshot is inserted or
# updated: an upsert locks every row it conflicts with, even one its WHERE leaves as it is, and
# most schedules a sweep meets were settled at their last version already (by the pass that
# wrote it); locking those held up other schedulers' settles and hid the rows from their takes
# (SKIP LOCKED). A row's version only rises, so one new enough in the snapshot still is.
_MARK = (
    f"INSERT INTO {due_rows.name} (aggregate_id, version, due_us, holder, lease_us) "
    "SELECT c.aid, c.version, 0, '', 0 FROM (SELECT originator_id, {aid} AS aid, "
    "max(originator_version) AS version FROM {events} "
    "WHERE {position} > :after AND {position} <= :until AND topic IN :topics "
    "GROUP BY originator_id) c "
    f"LEFT JOIN {due_rows.name} d ON d.aggregate_id = c.aid "
    "WHERE d.version IS NULL OR d.version < c.version "
    "ORDER BY c.originator_id "  # rows locked in settle's order
    "ON CONFLICT (aggregate_id) DO UPDATE SET version = excluded.version, due_us = 0 "
    "WHERE " + due_rows.name + ".version < excluded.version")
# The position swept, its row locked for the sweep (one sweep at a time).
_SWEPT = select(swept.c.position).where(swept.c.name == "log").with_for_update()
_ADVANCE = text(
    f"INSERT INTO {swept.name} (name, position) VALUES ('log', :position) ON CONFLICT (name) "
    f"DO UPDATE SET position = excluded.position WHERE {swept.name}.position < excluded.position")
# A lease is given back by its holder only: a row another scheduler took since keeps its lease.
_HELD = "holder = :holder"
# A settle's rule, written once for both forms below: the decision lands over a row of its
# version or older only, and the holder gives back its own lease. ``{d}``: the row's columns;
# ``{v}``: the decision's (bind parameters, or a joined row).
_SETTLED = ("due_us = CASE WHEN {d}version <= {v}version THEN {v}due ELSE {d}due_us END, "
            "version = CASE WHEN {d}version <= {v}version THEN {v}version ELSE {d}version END, "
            "lease_us = CASE WHEN {d}" + _HELD + " THEN 0 ELSE {d}lease_us END, failures = 0")
_SETTLE = text(f"UPDATE {due_rows.name} SET " + _SETTLED.format(d="", v=":")
               + " WHERE aggregate_id = :aggregate_id")
# PostgreSQL: a batch's settle in one statement (a row at a time cost the scheduler 26 us of
# CPU a row, against 10 here; the server's share about the same: benchmarks/RESULTS.md). Its
# rows are locked first, in id order, as every writer locks them (the mark, a release):
# ``locked``, an InitPlan behind the update's one-time filter, runs to its end before the
# update reads a row, so the join's own order (a hash join follows the table's) takes no lock.
_SETTLE_ARRAYS = text(
    "WITH v AS (SELECT * FROM unnest(CAST(:ids AS varchar[]), CAST(:versions AS integer[]), "
    "CAST(:dues AS bigint[])) AS v(aggregate_id, version, due)), "
    f"locked AS (SELECT aggregate_id FROM {due_rows.name} "
    "WHERE aggregate_id = ANY(CAST(:ids AS varchar[])) ORDER BY aggregate_id FOR UPDATE) "
    f"UPDATE {due_rows.name} d SET " + _SETTLED.format(d="d.", v="v.")
    + " FROM v WHERE d.aggregate_id = v.aggregate_id AND (SELECT count(*) FROM locked) >= 0")
_RELEASE = text(f"UPDATE {due_rows.name} SET lease_us = 0 "
                f"WHERE aggregate_id = :aggregate_id AND {_HELD}")
# The earliest due rows free to the holder, ``WINDOW`` times a batch (an index range: a sort of
# the whole backlog cost 78 ms a take at 100,000 due), then the holder's own among them first.
# PostgreSQL locks the window's rows (SKIP LOCKED: concurrent takers get different rows) and
# updates the chosen by their row address (``ctid``), which the take's own lock keeps from
# changing until it ends: updated by id, the plan joined them to a scan of the whole table
# (6.0 against 4.4 ms of the server's CPU a take of 200 among 30,000: benchmarks/RESULTS.md).
WINDOW = 4
_TAKE = (f"UPDATE {due_rows.name} SET holder = :holder, lease_us = :lease "
         "WHERE {key} IN (SELECT {key} FROM (SELECT {key}, holder, due_us "
         f"FROM {due_rows.name} WHERE due_us <= :now AND (lease_us < :wall OR holder = :holder) "
         "ORDER BY due_us LIMIT :window{lock}) w "
         "ORDER BY CASE WHEN holder = :holder THEN 0 ELSE 1 END, due_us LIMIT :limit) "
         "RETURNING aggregate_id")
_TAKES = {True: text(_TAKE.format(key="ctid", lock=" FOR UPDATE SKIP LOCKED")),
          False: text(_TAKE.format(key="aggregate_id", lock=""))}

# The columns ``fail`` writes, added to a table an older release created (PostgreSQL: IF NOT
# EXISTS, so two processes racing both succeed; SQLite: the loser's duplicate is ignored).
_FAILURE_COLUMNS = {"failures": "INTEGER NOT NULL DEFAULT 0", "failed_us": "BIGINT",
                    "error": "VARCHAR(500)"}
ERROR_CHARS = 500


@dataclass(frozen=True)
class FailingRow:
    """A schedule whose last step failed alone: ``failures`` in a row, the last at
    ``failed_us`` (wall µs) with ``error``; looked at again at ``due_us`` (the pass's clock,
    µs; None: when it changes)."""

    aggregate_id: str
    failures: int
    due_us: int | None
    failed_us: int | None
    error: str


class ScheduleDue(SideTables):
    """The due index of one store, beside its operator views."""

    metadata = _metadata

    def __init__(self, engine: Any, recorder: Any, lease_seconds: float = LEASE_SECONDS) -> None:
        """``engine``: SQLAlchemy's, on the store (the operator views'); ``recorder``: the
        store's, which names the events table the sweep reads (through ``engine``)."""
        self.engine, self.recorder, self.lease_seconds = engine, recorder, lease_seconds
        self._sweeping: tuple[Any, Any, Any] | None = None  # _sweep_statements

    def sweep(self) -> int:
        """Mark due at once every schedule changed since the last sweep; how many were."""
        self._ensure_table()
        mark, tail, behind = self._sweep_statements()
        with self.engine.connect() as conn:  # nothing new (an idle pass): nothing written
            if not conn.execute(behind).scalar():
                return 0
        marked = 0
        with self._writing() as conn:  # the swept row locked: one sweep at a time
            after = conn.execute(_SWEPT).scalar() or 0
            until = conn.execute(tail).scalar() or 0
            for start in range(after, until, SWEEP_PAGE):
                marked += conn.execute(mark, {
                    "after": start, "until": min(start + SWEEP_PAGE, until),
                    "topics": list(SCHEDULE_TOPICS)}).rowcount
            if until > after:
                conn.execute(_ADVANCE, {"position": until})
        return marked

    def _sweep_statements(self) -> tuple[Any, Any, Any]:
        """The sweep's mark, the log's tail, and whether the log is past the position swept
        (one round trip for an idle pass): built once, from the dialect and the events table."""
        if self._sweeping is None:
            position, aid = _CHANGED[self.engine.dialect.name]
            events = self.recorder.events_table_name
            mark = text(_MARK.format(aid=aid, events=events, position=position)).bindparams(
                bindparam("topics", expanding=True))
            tail = f"SELECT max({position}) FROM {events}"
            behind = text(f"SELECT coalesce(({tail}), 0) > coalesce((SELECT position FROM "
                          f"{swept.name} WHERE name = 'log'), 0)")
            self._sweeping = (mark, text(tail), behind)
        return self._sweeping

    def take(self, now: datetime, holder: str, limit: int) -> list[str]:
        """Lease up to ``limit`` schedules due at ``now`` (earliest first) to ``holder``."""
        self._ensure_table()
        wall = now_us()
        postgres = self.engine.dialect.name == "postgresql"
        with self._writing() as conn:
            return [r[0] for r in conn.execute(_TAKES[postgres], {
                "holder": holder, "lease": wall + int(self.lease_seconds * 1e6),
                "now": to_us(now), "wall": wall, "limit": limit, "window": WINDOW * limit})]

    def settle(self, decided: list[tuple[str, int, int | None]], holder: str) -> None:
        """Each (aggregate id, version, next due in µs or None) as its pass decided it, over a
        row of that version or older; the holder's leases on them given back."""
        if not decided:
            return
        # One row per schedule, its latest decision (a pass decides each once), in id order.
        latest = {r[0]: r for r in sorted(decided, key=lambda r: (r[0], r[1]))}
        rows = [latest[a] for a in sorted(latest)]
        with self._writing() as conn:  # rows locked in one order by every writer: no deadlock
            if conn.dialect.name == "postgresql":
                ids, versions, dues = (list(column) for column in zip(*rows))
                conn.execute(_SETTLE_ARRAYS, {"ids": ids, "versions": versions, "dues": dues,
                                              "holder": holder})
                return
            conn.execute(_SETTLE, [{"aggregate_id": a, "version": v, "due": d, "holder": holder}
                                   for a, v, d in rows])

    def release(self, ids: list[str], holder: str) -> None:
        """Give back ``holder``'s leases on ``ids``, their rows as they are."""
        if ids:
            with self._writing() as conn:
                conn.execute(_RELEASE, [{"aggregate_id": a, "holder": holder}
                                        for a in sorted(ids)])

    def _ensure_table(self) -> None:
        if not self._ready:
            create_tables(self.engine, self.metadata)
            self._add_failure_columns()
            self._ready = True

    def _add_failure_columns(self) -> None:
        have = {c["name"] for c in inspect(self.engine).get_columns(due_rows.name)}
        postgres = self.engine.dialect.name == "postgresql"
        for name, kind in _FAILURE_COLUMNS.items():
            if name in have:
                continue
            try:
                with self._writing() as conn:
                    conn.execute(text(f"ALTER TABLE {due_rows.name} ADD COLUMN "
                                      f"{'IF NOT EXISTS ' if postgres else ''}{name} {kind}"))
            except DBAPIError:  # SQLite: another process added it first
                if name not in {c["name"] for c in inspect(self.engine).get_columns(
                        due_rows.name)}:
                    raise

    def fail(self, aggregate_id: str, holder: str, version: int, at: datetime, error: str,
             delay: Callable[[int], float]) -> int | None:
        """A step of the schedule failed alone at ``at`` while ``holder`` held it: one more
        failure in a row recorded with ``error``, its lease given back (to no holder, so the
        failing scheduler does not take it back first), and its next look put off by
        ``delay(failures)`` seconds after ``at`` (0: due as it was). ``version``: the
        schedule's version in the store, so a sweep does not mark due at once what the failed
        step saved itself. The failures in a row; None where ``holder`` no longer held it."""
        self._ensure_table()
        c = due_rows.c
        with self._writing() as conn:  # the row locked: two failures count two
            row = conn.execute(select(c.failures, c.due_us).where(
                c.aggregate_id == aggregate_id, c.holder == holder).with_for_update()).first()
            if row is None:
                return None
            failures = (row.failures or 0) + 1
            later = delay(failures)
            due_us = row.due_us if later <= 0 else to_us(at) + int(later * 1e6)
            conn.execute(update(due_rows).where(c.aggregate_id == aggregate_id).values(
                failures=failures, failed_us=now_us(), error=error[:ERROR_CHARS],
                due_us=due_us, version=func.greatest(c.version, version)
                if self.engine.dialect.name == "postgresql" else func.max(c.version, version),
                holder="", lease_us=0))
            return failures

    def failing(self, limit: int = 100) -> list[FailingRow]:
        """The schedules whose last step failed (most failures first, at most ``limit``);
        none where no scheduler of this release ever ran (a read creates nothing)."""
        if not self._ready:
            if not inspect(self.engine).has_table(due_rows.name):
                return []
            if "failures" not in {c["name"] for c in inspect(self.engine).get_columns(
                    due_rows.name)}:
                return []
        c = due_rows.c
        with self.engine.connect() as conn:
            rows = conn.execute(select(c.aggregate_id, c.failures, c.due_us, c.failed_us,
                                       c.error).where(c.failures > 0)
                                .order_by(c.failures.desc(), c.aggregate_id).limit(limit))
            return [FailingRow(r.aggregate_id, r.failures, r.due_us, r.failed_us,
                               r.error or "") for r in rows]

    def next_after(self, at: datetime) -> datetime | None:
        """The earliest due time after ``at`` (a schedule's next time, a start's retry, a
        look at running actions), leased or not; None: none. One probe of the due index."""
        self._ensure_table()
        with self.engine.connect() as conn:
            due_us = conn.execute(select(func.min(due_rows.c.due_us)).where(
                due_rows.c.due_us > to_us(at))).scalar()
        return None if due_us is None else EPOCH + due_us * MICROSECOND

    def backlog(self, now: datetime) -> int:
        """Schedules due at ``now`` (the due-backlog gauge); 0 where no scheduler ever ran (a
        read creates nothing)."""
        if not self._ready and not inspect(self.engine).has_table(due_rows.name):
            return 0
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(due_rows).where(
                due_rows.c.due_us <= to_us(now))).scalar() or 0

