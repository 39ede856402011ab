"""The operator views as one eventsourcing ``TrackingRecorder`` on SQLAlchemy tables.

A batch of events is staged in memory (``Batch``) and written with its tracking row in ONE
transaction: rows and position commit together or not at all, which is what makes every event
apply exactly once. The transaction also compares the stored position with the one the batch
was built on, so two projectors racing over one store cannot both apply a batch.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from eventsourcing.persistence import IntegrityError, Tracking, TrackingRecorder
from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import IntegrityError as SqlIntegrityError

from schedfence.domain.decisions import due
from schedfence.domain.migration import MigrationState
from schedfence.domain.read_shape import read_shape

from . import tables as t

CrashHook = Callable[[str], None]
CHUNK = 500  # ids per IN (...) list: far below every dialect's parameter limit


class TrackingConflict(Exception):
    """Another projector committed since this batch was read; it must be read again."""


@dataclass
class FoldedMigration:
    state: MigrationState
    created_us: int
    created_position: int
    updated_us: int = 0
    last_position: int = 0
    version: int = 0


@dataclass
class Batch:
    application_name: str
    base: int  # the tracked position this batch builds on (0: nothing applied yet)
    position: int = 0
    applied: int = 0
    mono_us: int = 0  # running maximum of event times through ``position``
    audit_rows: list[dict[str, Any]] = field(default_factory=list)
    aggregates: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    new_aggregates: dict[str, dict[str, Any]] = field(default_factory=dict)
    migrations: dict[str, FoldedMigration | None] = field(default_factory=dict)
    stored_migrations: set[str] = field(default_factory=set)
    dirty: set[str] = field(default_factory=set)
    counts: Counter = field(default_factory=Counter)


class FenceViews(TrackingRecorder):
    def __init__(self, engine: Engine, projection_name: str,
                 crash_hook: CrashHook | None = None, *,
                 write_options: dict[str, Any]) -> None:
        """``write_options``: the execution options that mark a writing transaction on
        ``engine`` (the store's engine takes SQLite's write lock up front for them, so
        concurrent writers queue instead of failing a lock upgrade). Required: there is no
        safe default without knowing the engine."""
        self.engine = engine
        self.write_options = write_options
        self.projection_name = projection_name
        self.crash_hook = crash_hook or (lambda point: None)
        self.batch: Batch | None = None

    # -- schema -------------------------------------------------------------------------
    def create_tables(self) -> None:
        """Create the tables; a projection built with another layout is dropped first."""
        try:
            self._create_tables()
        except DBAPIError:  # a concurrent process created them first (PostgreSQL DDL race)
            self._create_tables()

    def _create_tables(self) -> None:
        # One writing transaction (SQLite: the write lock taken up front), so a worker writing
        # meanwhile makes this wait on the lock rather than fail a lock upgrade half way.
        with self._writing() as conn:
            t.metadata.create_all(conn, tables=[t.tracking], checkfirst=True)
            versions = conn.execute(select(t.tracking.c.schema_version).where(
                t.tracking.c.projection == self.projection_name)).scalars().all()
            if any(v != t.SCHEMA_VERSION for v in versions):
                self._drop(conn)
            t.metadata.create_all(conn, tables=list(t.VIEW_TABLES), checkfirst=True)

    def drop_tables(self) -> None:
        """Forget everything this projection derived, so it can be rebuilt from position 0."""
        with self._writing() as conn:
            self._drop(conn)

    def _drop(self, conn: Connection) -> None:
        t.metadata.drop_all(conn, tables=list(t.VIEW_TABLES), checkfirst=True)
        conn.execute(delete(t.tracking).where(t.tracking.c.projection == self.projection_name))

    # -- TrackingRecorder ---------------------------------------------------------------
    def max_tracking_id(self, application_name: str) -> int | None:
        with self.engine.connect() as conn:
            return self._tracked(conn, application_name)

    def insert_tracking(self, tracking: Tracking) -> None:
        """Inside a batch: stage the position. Outside: record it now (only forwards)."""
        if self.batch is not None:
            if tracking.notification_id <= self.batch.position:
                raise IntegrityError(f"position {tracking.notification_id} is not after "
                                     f"{self.batch.position}")
            self.batch.position = tracking.notification_id
            self.batch.applied += 1
            return
        with self._writing() as conn:
            current = self._tracked(conn, tracking.application_name, lock=True)
            if current is not None and tracking.notification_id <= current:
                raise IntegrityError(f"position {tracking.notification_id} is not after "
                                     f"{current}")
            self._write_tracking(conn, tracking.application_name, current,
                                 tracking.notification_id)

    # -- staging one batch ----------------------------------------------------------------
    def begin_batch(self, application_name: str) -> Batch:
        with self.engine.connect() as conn:
            base = self._tracked(conn, application_name) or 0
            mono = conn.execute(select(t.audit.c.mono_us).order_by(
                t.audit.c.position.desc()).limit(1)).scalar()
        self.batch = Batch(application_name, base, position=base, mono_us=mono or 0)
        return self.batch

    def end_batch(self) -> None:
        self.batch = None

    def prefetch(self, ids: Iterable[str]) -> None:
        """Load the stored rows of the batch's aggregates in bulk (one query per CHUNK ids)."""
        b = self._current()
        todo = sorted({i for i in ids if i not in b.aggregates and i not in b.migrations})
        with self.engine.connect() as conn:
            for start in range(0, len(todo), CHUNK):
                chunk = todo[start:start + CHUNK]
                for row in conn.execute(select(t.aggregates).where(
                        t.aggregates.c.aggregate_id.in_(chunk))).mappings():
                    b.aggregates[row["aggregate_id"]] = dict(row)
                for row in conn.execute(select(t.migrations).where(
                        t.migrations.c.migration_id.in_(chunk))).mappings():
                    b.migrations[row["migration_id"]] = _folded(row)
                    b.stored_migrations.add(row["migration_id"])

    def aggregate(self, aggregate_id: str) -> dict[str, Any] | None:
        return self._current().aggregates.get(aggregate_id)

    def register_aggregate(self, aggregate_id: str, **fields: Any) -> None:
        row = dict(fields, aggregate_id=aggregate_id)
        b = self._current()
        b.aggregates[aggregate_id] = b.new_aggregates[aggregate_id] = row

    def migration(self, migration_id: str) -> FoldedMigration | None:
        return self._current().migrations.get(migration_id)

    def put_migration(self, migration_id: str, folded: FoldedMigration,
                      before: MigrationState | None) -> None:
        b = self._current()
        if before is not None:
            b.counts[(before.namespace, before.phase)] -= 1
        b.counts[(folded.state.namespace, folded.state.phase)] += 1
        b.migrations[migration_id] = folded
        b.dirty.add(migration_id)

    def add_audit(self, row: dict[str, Any]) -> None:
        b = self._current()
        b.mono_us = max(b.mono_us, row["ts_us"])
        b.audit_rows.append(dict(row, mono_us=b.mono_us))

    def _current(self) -> Batch:
        if self.batch is None:
            raise RuntimeError("no batch is open")
        return self.batch

    # -- writing one batch --------------------------------------------------------------
    def commit_batch(self) -> None:
        """Write the staged rows and the new position in one transaction (crash points:
        ``projection.rows_written``, ``projection.tracking_written`` inside it, and
        ``projection.committed`` after it)."""
        b = self._current()
        try:
            with self._writing() as conn:
                current = self._tracked(conn, b.application_name, lock=True)
                if (current or 0) != b.base:
                    raise TrackingConflict(f"tracked {current}, batch built on {b.base}")
                self._write_rows(conn, b)
                self.crash_hook("projection.rows_written")
                self._write_tracking(conn, b.application_name, current, b.position)
                self.crash_hook("projection.tracking_written")
        except SqlIntegrityError as exc:  # e.g. a racing first tracking insert
            raise TrackingConflict(str(exc)) from exc
        self.crash_hook("projection.committed")

    def _write_rows(self, conn: Connection, b: Batch) -> None:
        if b.new_aggregates:
            conn.execute(t.aggregates.insert(), list(b.new_aggregates.values()))
        if b.audit_rows:
            self._write_audit(conn, b.audit_rows)
        new = [_migration_row(m, b.migrations[m]) for m in sorted(b.dirty - b.stored_migrations)]
        if new:
            conn.execute(t.migrations.insert(), new)
        changed = [_migration_row(m, b.migrations[m], key="b_id")
                   for m in sorted(b.dirty & b.stored_migrations)]
        if changed:
            columns = {k: bindparam(k) for k in changed[0] if k != "b_id"}
            conn.execute(update(t.migrations).where(
                t.migrations.c.migration_id == bindparam("b_id")).values(columns), changed)
        self._write_counts(conn, b.counts)

    @staticmethod
    def _write_audit(conn: Connection, rows: list[dict[str, Any]]) -> None:
        """Insert the batch's rows with their ``floor_us`` (see tables.py), lowering the floor
        of earlier rows the batch's earliest time undercuts (normally a few recent ones)."""
        floor = rows[-1]["ts_us"]
        for row in reversed(rows):
            floor = row["floor_us"] = min(floor, row["ts_us"])
        c = t.audit.c
        conn.execute(update(t.audit).where(c.floor_us > floor).values(floor_us=floor))
        conn.execute(t.audit.insert(), rows)

    @staticmethod
    def _write_counts(conn: Connection, deltas: Counter) -> None:
        """Apply the batch's count changes: read the touched rows, then one statement per
        kind of change (the write lock is held, so read-then-write is safe)."""
        keys = {k for k, delta in deltas.items() if delta}
        if not keys:
            return
        c = t.counts.c
        stored = {(r.namespace, r.state): r.n for r in conn.execute(select(t.counts).where(
            c.namespace.in_(sorted({ns for ns, _ in keys}))))}
        new = {k: stored.get(k, 0) + deltas[k] for k in sorted(keys)}
        rows = [{"b_ns": ns, "b_state": st, "n": n} for (ns, st), n in new.items()]
        where = (c.namespace == bindparam("b_ns")) & (c.state == bindparam("b_state"))
        if gone := [r for r in rows if r["n"] == 0 and (r["b_ns"], r["b_state"]) in stored]:
            conn.execute(delete(t.counts).where(where), gone)
        if kept := [r for r in rows if r["n"] and (r["b_ns"], r["b_state"]) in stored]:
            conn.execute(update(t.counts).where(where).values(n=bindparam("n")), kept)
        if added := [{"namespace": r["b_ns"], "state": r["b_state"], "n": r["n"]} for r in rows
                     if r["n"] and (r["b_ns"], r["b_state"]) not in stored]:
            conn.execute(t.counts.insert(), added)

    def _tracked(self, conn: Connection, application_name: str,
                 lock: bool = False) -> int | None:
        c = t.tracking.c
        query = select(c.notification_id).where(
            (c.projection == self.projection_name) & (c.application_name == application_name))
        if lock:
            query = query.with_for_update()  # PostgreSQL; SQLite holds BEGIN IMMEDIATE
        return conn.execute(query).scalar()

    def _write_tracking(self, conn: Connection, application_name: str, current: int | None,
                        position: int) -> None:
        c = t.tracking.c
        if current is None:
            conn.execute(t.tracking.insert().values(
                projection=self.projection_name, application_name=application_name,
                notification_id=position, schema_version=t.SCHEMA_VERSION))
            return
        conn.execute(update(t.tracking).where(
            (c.projection == self.projection_name) & (c.application_name == application_name)
        ).values(notification_id=position))

    def _writing(self) -> Any:
        """A write transaction (on SQLite it takes the write lock at BEGIN)."""
        return _WriteTransaction(self.engine, self.write_options)

    # -- reading everything (tests, rebuild checks) ---------------------------------------
    def dump(self) -> dict[str, list[tuple]]:
        """Every row of every view table, in key order: equal dumps mean equal views."""
        with self.engine.connect() as conn:
            return {table.name: [tuple(r) for r in conn.execute(
                select(table).order_by(*table.primary_key.columns))]
                for table in t.VIEW_TABLES}


class _WriteTransaction:
    def __init__(self, engine: Engine, options: dict[str, Any]) -> None:
        self.engine, self.options = engine, options

    def __enter__(self) -> Connection:
        self.conn = self.engine.connect().execution_options(**self.options)
        self.txn = self.conn.begin()
        return self.conn

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        try:
            if exc_type is None:
                self.txn.commit()
            else:
                self.txn.rollback()
        finally:
            self.conn.close()


def _folded(row: Any) -> FoldedMigration:
    return FoldedMigration(MigrationState(**json.loads(row["folded"])), row["created_us"],
                           row["created_position"], row["updated_us"], row["last_position"],
                           row["version"])


def _migration_row(migration_id: str, f: FoldedMigration,
                   key: str = "migration_id") -> dict[str, Any]:
    """The migration's read shape, where and when it changed, and the whole folded state (and
    the domain's due class of it): no field is derived here."""
    s = f.state
    row = read_shape(s)
    row.pop("migration_id")
    return dict(row, **{key: migration_id}, last_answer=(s.last_answer or {}).get("kind"),
                created_us=f.created_us, updated_us=f.updated_us,
                created_position=f.created_position, last_position=f.last_position,
                version=f.version, epoch=s.epoch, due=due(s),
                folded=json.dumps(vars(s), sort_keys=True))  # flat fields: no asdict copy
