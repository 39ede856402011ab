"""The operator views as one eventsourcing ``TrackingRecorder`` on SQLAlchemy tables.

A batch of events is staged in memory (``Batch``) and written with its tracking row in ONE
transaction: rows and position commit together or not at all, which is what makes every event
apply exactly once. The transaction also compares the stored position with the one the batch
was built on, so two projectors racing over one store cannot both apply a batch. The batch
itself, and the shape of its rows, are batch.py's.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from eventsourcing.persistence import IntegrityError, Tracking, TrackingRecorder
from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import IntegrityError as SqlIntegrityError

from schedfence.domain.ports import CrashHook
from schedfence.domain.rollback.aggregate import MigrationState

from . import tables as t
from .batch import Batch, FoldedMigration, RowWriter, folded_from_row, migration_row, set_floors

KNOWN_LIMIT = 50_000  # folded rows kept between batches (see FenceViews._known)


class TrackingConflict(Exception):
    """Another projector committed since this batch was read; it must be read again."""


class FenceViews(TrackingRecorder):
    def __init__(self, engine: Engine, projection_name: str,
                 crash_hook: CrashHook | None = None, *,
                 write_options: dict[str, Any], rows: RowWriter | None = None) -> None:
        """``write_options``: the execution options that mark a writing transaction on
        ``engine`` (the store's engine takes SQLite's write lock up front for them, so
        concurrent writers queue instead of failing a lock upgrade). Required: there is no
        safe default without knowing the engine. ``rows``: how batches write their rows (see
        ``RowWriter``)."""
        self.engine = engine
        self.write_options = write_options
        self.projection_name = projection_name
        self.crash_hook = crash_hook or (lambda point: None)
        self.rows = rows or RowWriter()
        self.batch: Batch | None = None
        # The rows of the batch this view sealed last (committed, or being committed before
        # the next batch's), valid for a batch built on ``_known_through``, that batch's
        # position: the views are a function of the log up to the tracked position, and every
        # writer moves that position, so equal positions mean equal rows (whoever wrote them).
        # A batch built on any other stored position forgets them.
        self._known_through: int | None = None
        self._known_aggregates: dict[str, dict[str, Any]] = {}
        self._known_migrations: dict[str, FoldedMigration] = {}

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
        self._forget()
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
    def begin_batch(self, application_name: str, after: Batch | None = None) -> Batch:
        """Stage a batch on the stored position, or on ``after``, a sealed batch whose commit
        may still be under way (its commit checks the position it was built on)."""
        if after is None:
            with self.engine.connect() as conn:
                base = self._tracked(conn, application_name) or 0
                last = conn.execute(select(t.audit.c.mono_us, t.audit.c.floor_us).order_by(
                    t.audit.c.position.desc()).limit(1)).first()
            mono, top_floor = (last.mono_us, last.floor_us) if last else (0, None)
        else:
            base, mono = after.position, after.mono_us
            top_floor = after.audit_rows[-1]["floor_us"] if after.audit_rows \
                else after.top_floor_us
        if base != self._known_through:
            self._forget()
        self.batch = Batch(application_name, base, position=base, mono_us=mono,
                           top_floor_us=top_floor)
        return self.batch

    def seal_batch(self) -> Batch:
        """The staged batch is complete: work out its audit floors and keep its rows for the
        next batch (``_known``); it can be committed, in any thread."""
        b = self._current()
        set_floors(b.audit_rows)
        self._remember(b)
        return b

    def end_batch(self) -> None:
        self.batch = None

    def prefetch(self, ids: Iterable[str]) -> None:
        """Load the stored rows of the batch's aggregates: those this view committed last
        from memory, the others in bulk (one query per ``t.CHUNK`` ids). ``ids``: aggregates
        that may have stored rows (an aggregate whose first event in the batch is its creation
        has none)."""
        b = self._current()
        todo = []
        for i in {i for i in ids if i not in b.aggregates and i not in b.migrations}:
            if (row := self._known_aggregates.get(i)) is not None:
                b.aggregates[i] = row
            elif (folded := self._known_migrations.get(i)) is not None:
                b.migrations[i] = folded
                b.stored_migrations.add(i)
            else:
                todo.append(i)
        if not todo:
            return
        todo.sort()
        with self.engine.connect() as conn:
            for chunk in t.chunks(todo):
                for stored in conn.execute(select(t.aggregates).where(
                        t.aggregates.c.aggregate_id.in_(chunk))).mappings():
                    b.aggregates[stored["aggregate_id"]] = dict(stored)
                for stored in conn.execute(select(t.migrations).where(
                        t.migrations.c.migration_id.in_(chunk))).mappings():
                    b.migrations[stored["migration_id"]] = folded_from_row(stored)
                    b.stored_migrations.add(stored["migration_id"])

    def aggregate(self, aggregate_id: str) -> dict[str, Any] | None:
        return self._current().aggregates.get(aggregate_id)

    def register_aggregate(self, aggregate_id: str, **fields: Any) -> None:
        row = dict(fields, aggregate_id=aggregate_id, version=None, folded=None)
        b = self._current()
        b.aggregates[aggregate_id] = b.new_aggregates[aggregate_id] = row

    def put_folded(self, aggregate_id: str, version: int, folded: str) -> None:
        """A registered aggregate's folded state (a new row: the one the previous batch may
        still be writing is never changed in place)."""
        b = self._current()
        row = b.aggregates[aggregate_id] = dict(b.aggregates[aggregate_id] or {},
                                                version=version, folded=folded)
        if aggregate_id in b.new_aggregates:
            b.new_aggregates[aggregate_id] = row
        else:
            b.changed_aggregates.add(aggregate_id)

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

    def add_start_lag(self, seconds: float) -> None:
        """One action start, ``seconds`` after its nominal time."""
        lags = self._current().start_lag
        lags[t.lag_bucket(seconds)] += 1
        lags[t.LAG_SUM] += max(int(seconds * 1000), 0)

    def add_audit(self, row: dict[str, Any]) -> None:
        b = self._current()
        b.mono_us = row["mono_us"] = max(b.mono_us, row["ts_us"])  # the row is the caller's
        b.audit_rows.append(row)

    def _current(self) -> Batch:
        if self.batch is None:
            raise RuntimeError("no batch is open")
        return self.batch

    # -- writing one batch --------------------------------------------------------------
    def commit_batch(self, b: Batch) -> None:
        """Write a sealed batch's rows and its new position in one transaction, if the stored
        position is still the one it was built on (crash points: ``projection.rows_written``,
        ``projection.tracking_written`` inside it, and ``projection.committed`` after it)."""
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

    def _remember(self, b: Batch) -> None:
        """Keep the rows of a sealed batch for the next one (see ``_known``). They hold every
        aggregate the batch touched, so while its commit is under way every other row the next
        batch reads is already stored (the commit before it has finished)."""
        if len(self._known_aggregates) + len(self._known_migrations) > KNOWN_LIMIT:
            self._forget()
        self._known_aggregates.update((k, v) for k, v in b.aggregates.items() if v is not None)
        self._known_migrations.update((k, v) for k, v in b.migrations.items() if v is not None)
        self._known_through = b.position

    def _forget(self) -> None:
        self._known_through = None
        self._known_aggregates, self._known_migrations = {}, {}

    def _write_rows(self, conn: Connection, b: Batch) -> None:
        if b.new_aggregates:
            self.rows.insert(conn, t.aggregates, list(b.new_aggregates.values()))
        if b.changed_aggregates:
            folded = [b.aggregates.get(a) for a in sorted(b.changed_aggregates)]
            self.rows.replace(conn, t.aggregates, "aggregate_id",
                              [r for r in folded if r is not None])
        if b.audit_rows:
            self._write_audit(conn, b.audit_rows, b.top_floor_us)
        new = [migration_row(m, b.migrations[m]) for m in sorted(b.dirty - b.stored_migrations)]
        if new:
            self.rows.insert(conn, t.migrations, new)
        changed = [migration_row(m, b.migrations[m])
                   for m in sorted(b.dirty & b.stored_migrations)]
        if changed:
            self.rows.replace(conn, t.migrations, "migration_id", changed)
        self._write_counts(conn, b.counts)
        self._write_start_lag(conn, b.start_lag)

    def _write_audit(self, conn: Connection, rows: list[dict[str, Any]],
                     top_floor: int | None) -> None:
        """Insert the batch's rows (their ``floor_us`` set by ``seal_batch``), lowering the
        floor of earlier rows the batch's earliest time undercuts (normally a few recent ones;
        none when it is not below ``top_floor``, the highest stored floor)."""
        floor = rows[0]["floor_us"]
        c = t.audit.c
        if top_floor is not None and floor < top_floor:
            conn.execute(update(t.audit).where(c.floor_us > floor).values(floor_us=floor))
        self.rows.insert(conn, t.audit, rows)

    @staticmethod
    def _write_counts(conn: Connection, deltas: Counter[tuple[str, str]]) -> None:
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

    @staticmethod
    def _write_start_lag(conn: Connection, deltas: Counter[str]) -> None:
        """Add the batch's start-lag counts (the write lock is held: read, then write)."""
        if not deltas:
            return
        c = t.start_lag.c
        stored = dict(conn.execute(select(c.bucket, c.n).where(
            c.bucket.in_(sorted(deltas)))).tuples().all())
        if kept := [{"b_bucket": k, "n": stored[k] + n} for k, n in deltas.items() if k in stored]:
            conn.execute(update(t.start_lag).where(c.bucket == bindparam("b_bucket"))
                         .values(n=bindparam("n")), kept)
        if added := [{"bucket": k, "n": n} for k, n in deltas.items() if k not in stored]:
            conn.execute(t.start_lag.insert(), added)

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
    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
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
