"""The standby side of replication: eventsourcing's process recorders, with a tail guard.

A unit of copied stored events (whole source transactions, see ``replica_source``) and the
follower's tracking position (the last source notification id copied) are written in ONE
transaction of the standby, through eventsourcing's
own process recorder pieces (its insert statements, its conditional tracking upsert, its table
lock on PostgreSQL). So a crash anywhere leaves either the whole batch with its position or
neither: resuming from the tracked position copies every event exactly once.

The guard: inside that transaction, after the write lock is taken, the standby's last
notification id must still be the one this follower left there. Any other writer of the standby
(a service, a second follower) makes the batch roll back with ``StandbyChanged`` instead of
interleaving events the follower did not copy.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterable, Sequence

from eventsourcing.persistence import StoredEvent, Tracking
from eventsourcing.postgres import (PostgresAggregateRecorder, PostgresFactory,
                                    PostgresProcessRecorder)
from eventsourcing.sqlite import SQLiteFactory, SQLiteProcessRecorder

from schedfence.domain.failover import STORE_EPOCH_ID, check_active
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.infra.pacing import retry_call

PREFIX = "replica-of:"  # tracking rows of followers (other rows are not ours to judge)
PG_TRACKING_TABLE = f"{FenceApplication.name.lower()}_replica_tracking"
BeforeCommit = Callable[[], None]
Copied = tuple[Sequence[StoredEvent], int]  # a page of events, and its last source id


@dataclass
class Written:
    """What one standby transaction wrote."""

    count: int = 0
    position: int = 0  # the last source notification id copied
    tail: int = 0  # the standby's last notification id

    def add(self, count: int, position: int, tail: int) -> None:
        self.count += count
        self.position, self.tail = position, tail


class StandbyChanged(Exception):
    """The standby's log gained events this follower did not write (or lost its last)."""

    def __init__(self, found: int, expected: int) -> None:
        super().__init__(f"the standby's last event is #{found}, not #{expected} as this "
                         "follower left it")
        self.found, self.expected = found, expected


class PostgresStandby(PostgresProcessRecorder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Create only the tracking table: the events table, its type and its insert function
        # exist (the application made them), and re-running that DDL while another process
        # opens the store races in the catalog ("tuple concurrently updated").
        self.sql_create_statements = [
            s for s in self.sql_create_statements
            if self.tracking_table_name in s.as_string() and "FUNCTION" not in s.as_string()]

    def insert_unit(self, pages: Iterable[Copied], name: str, expected_tail: int,
                    before_commit: BeforeCommit | None = None) -> Written:
        """One transaction: lock, guard, every page's events, the tracking position.

        Not eventsourcing's pipelined ``insert_events``: the guard must read the tail under
        the lock before anything is written."""
        written = Written()
        with self.datastore.transaction(commit=True) as curs:
            # The same EXCLUSIVE lock every writer of this log takes: commit order stays id
            # order for the standby's own readers (its projections), and the tail is stable.
            self._lock_table(curs)
            curs.execute(self.max_notification_id_statement)
            row = curs.fetchone()
            tail = (row["max"] if row else None) or 0
            if tail != expected_tail:
                raise StandbyChanged(tail, expected_tail)
            self._notify_channel(curs)
            for events, last_source_id in pages:
                PostgresAggregateRecorder._insert_stored_events(self, curs, events)
                written.add(len(events), last_source_id,
                            max(r["notification_id"] for r in curs.fetchall()))
            if written.count:
                # Raises IntegrityError unless the position advances (a racing follower).
                self._insert_tracking(curs, Tracking(name, written.position))
            if before_commit is not None:
                before_commit()
        return written

    def tracked(self) -> dict[str, int]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(f'SELECT application_name, notification_id FROM '
                         f'"{self.datastore.schema}"."{self.tracking_table_name}"')
            rows = curs.fetchall()
        return {r["application_name"]: r["notification_id"] for r in rows
                if r["application_name"].startswith(PREFIX)}


class SQLiteStandby(SQLiteProcessRecorder):
    def insert_unit(self, pages: Iterable[Copied], name: str, expected_tail: int,
                    before_commit: BeforeCommit | None = None) -> Written:
        """One transaction: guard, every page's events, the tracking position. SQLite's WAL
        snapshot makes the guard hold: a writer that commits after our read makes our first
        write fail as busy."""
        written = Written()
        with self.datastore.transaction(commit=True) as c:
            tail = self._max_notification_id(c) or 0
            if tail != expected_tail:
                raise StandbyChanged(tail, expected_tail)
            for events, last_source_id in pages:
                ids = self._insert_events(c, events) or []  # no tracking yet
                written.add(len(events), last_source_id, max(ids))
            if written.count:
                self._insert_tracking(c, Tracking(name, written.position))
            if before_commit is not None:
                before_commit()
        return written

    def tracked(self) -> dict[str, int]:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT application_name, notification_id FROM tracking")
            rows = c.fetchall()
        return {r["application_name"]: r["notification_id"] for r in rows
                if r["application_name"].startswith(PREFIX)}


Standby = PostgresStandby | SQLiteStandby


def standby_recorder(app: FenceApplication, create: bool = True) -> Standby:
    """The standby recorder on ``app``'s own datastore and events table."""
    factory: Any = app.factory
    events_table = app.recorder.events_table_name  # type: ignore[attr-defined]  # only SQL recorders name a table
    recorder: Standby
    if isinstance(factory, PostgresFactory):
        recorder = PostgresStandby(factory.datastore, events_table_name=events_table,
                                   tracking_table_name=PG_TRACKING_TABLE)
    elif isinstance(factory, SQLiteFactory):
        recorder = SQLiteStandby(factory.datastore, events_table_name=events_table)
    else:  # pragma: no cover - open_application only builds these two
        raise TypeError(f"no standby recorder for {type(factory).__name__}")
    if create:
        recorder.create_table()
    return recorder


def replica_positions(app: FenceApplication) -> dict[str, int]:
    """Each follower's last copied source position in ``app``'s store (empty if it never
    was a standby): what a promotion records. Reads only (no DDL on a store that never
    was a standby)."""
    try:
        return standby_recorder(app, create=False).tracked()
    except Exception as exc:  # noqa: BLE001 - no tracking table: never a standby
        if "tracking" in str(exc).lower() or "does not exist" in str(exc).lower():
            return {}
        raise


def require_active(app: FenceApplication) -> None:
    """Refuse to act on a standby that was not promoted since its last copy: its claims may
    have been used on the active already (domain/failover.py). Reads retried as
    ``read_retrying`` retries them, run from here."""
    found = retry_call(partial(app.find, STORE_EPOCH_ID), **app.read_retry())
    copied = retry_call(partial(replica_positions, app), **app.read_retry())
    check_active(copied, found.state if found is not None else None,
                 shown=lambda name: name.removeprefix(PREFIX))
