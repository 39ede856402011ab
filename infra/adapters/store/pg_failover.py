"""Following a PostgreSQL failover from a running process, and fencing an asynchronous one.

With several hosts in its URL (pg.py), a process's next connection after the primary is gone
lands on whichever server became the primary: no restart. Whether it may go on writing there is
the failover rule of docs/operators.md ("PostgreSQL high availability"):

- **the old primary was synchronous** (its commits waited for a standby:
  ``synchronous_standby_names`` set and ``synchronous_commit`` ``on``, ``remote_write`` or
  ``remote_apply``): the promoted standby holds every commit a writer saw acknowledged, so the
  process carries on;
- **it was asynchronous**: acknowledged appends may be lost with it, so nothing is appended
  until ``schedfence promote`` has raised the store's failover epoch (domain/failover.py) on
  the new primary: refused as ``StandbyNotPromoted``, the refusal of an unpromoted
  ``replicate`` standby, nothing written. ``promote``'s own append is the one let through.

A promotion is seen as a change of the server's WAL timeline (a promoted standby starts a new
one); every new connection of the store's pool reads the timeline, the replication settings and
the epoch's version (``FailoverWatch.on_connect``), so what the old primary was is known from
before it died. The fence is checked inside each append, under eventsourcing's table lock
(``check_append``, called by pg_recorder.py): a ``promote`` committed by another process is seen
there, and lifts it.

A process that starts after the failover never saw the old primary: for it the operator's rule
stands (``promote`` before starting the workers after an asynchronous failover).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Sequence

from psycopg.errors import LockNotAvailable
from psycopg.sql import SQL, Identifier

from schedfence.domain.errors import StandbyNotPromoted
from schedfence.domain.failover import STORE_EPOCH_ID

_SERVER = SQL(
    "SELECT CASE WHEN pg_is_in_recovery() THEN NULL "
    "ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END AS timeline, "
    "current_setting('synchronous_standby_names') <> '' AND "
    "current_setting('synchronous_commit') IN ('on', 'remote_write', 'remote_apply') AS sync, "
    "to_regclass(%s) IS NOT NULL AS has_log")
EPOCH_LOCK_MS = 200  # a new connection's wait for the events table, to read the epoch
_EPOCH = "SELECT max(originator_version) AS version FROM {}.{} WHERE originator_id = %s"


@dataclass(frozen=True)
class Server:
    """What one connection found: the primary's timeline, whether its commits waited for a
    synchronous standby, and the store epoch's version (0: no epoch yet; -1: not read)."""

    timeline: str
    synchronous: bool
    epoch_version: int


def _values(row: Any) -> tuple[Any, ...]:
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


class FailoverWatch:
    def __init__(self, schema: str, events_table: str) -> None:
        self._table = f'"{schema}"."{events_table}"'
        self._epoch = SQL(_EPOCH).format(Identifier(schema), Identifier(events_table))
        self._lock = threading.Lock()
        self.primary: Server | None = None  # the last primary this process wrote on
        self.fenced: tuple[Server, str] | None = None  # (old primary, new timeline)

    def read(self, cursor: Any, epoch_lock_ms: int | None = None) -> Server | None:
        """The server ``cursor`` is connected to; None on a standby (no timeline of its own).
        With ``epoch_lock_ms``, the epoch's version is read in a transaction of its own that
        waits at most that long for the events table (a session holding it must not stall a
        new connection): -1 if it did not get it."""
        cursor.execute(_SERVER, (self._table,))
        row = _values(cursor.fetchone())
        if row[0] is None:
            return None
        version = 0
        if row[2] and epoch_lock_ms is None:
            version = self._epoch_version(cursor)
        elif row[2]:  # one round trip: BEGIN, SET LOCAL, the read, COMMIT
            try:
                with cursor.connection.pipeline(), cursor.connection.transaction():
                    cursor.execute(SQL("SET LOCAL lock_timeout = {}").format(epoch_lock_ms))
                    version = self._epoch_version(cursor)
            except LockNotAvailable:
                version = -1
        return Server(row[0], bool(row[1]), version)

    def _epoch_version(self, cursor: Any) -> int:
        cursor.execute(self._epoch, (STORE_EPOCH_ID,))
        return _values(cursor.fetchone())[0] or 0

    def on_connect(self, conn: Any) -> None:
        """The pool's hook on every new connection (autocommit): note a promotion."""
        server = self.read(conn.cursor(), EPOCH_LOCK_MS)
        if server is not None:
            with self._lock:
                self._met(server)

    def _met(self, server: Server) -> None:
        old = self.primary
        if self.fenced is not None:
            return  # lifted only inside an append (check_append)
        if old is not None and server.timeline != old.timeline and not old.synchronous:
            self.fenced = (old, server.timeline)
            return
        if server.epoch_version < 0 and old is not None and server.timeline == old.timeline:
            server = replace(server, epoch_version=old.epoch_version)  # the last one read
        self.primary = server  # the first, the same, or a synchronous standby's: carry on

    def check_append(self, cursor: Any, originator_ids: Sequence[Any]) -> None:
        """Inside an append, after its table lock: refuse it (nothing written) while this
        process follows an asynchronous promotion that no ``promote`` has answered yet."""
        if self.fenced is None:
            return
        server = self.read(cursor)
        with self._lock:
            if self.fenced is None:
                return
            old, timeline = self.fenced
            if server is not None and old.epoch_version < 0:  # never read: from now on
                old = replace(old, epoch_version=server.epoch_version)
                self.fenced = (old, timeline)
            elif server is not None and server.epoch_version > old.epoch_version:
                self.fenced, self.primary = None, server  # promote ran on the new primary
                return
        if originator_ids and all(oid == STORE_EPOCH_ID for oid in originator_ids):
            return  # promote's own append: what lifts the fence
        raise StandbyNotPromoted(
            f"the store's primary changed (WAL timeline {int(old.timeline, 16)} -> "
            f"{int(timeline, 16)}) and the old one replicated asynchronously: appends made "
            "there may be lost, so nothing is written until `schedfence promote` has recorded "
            "a failover epoch on the new primary")


def watch_failovers(datastore: Any, events_table: str) -> FailoverWatch:
    """Give eventsourcing's datastore (not open yet) a ``FailoverWatch``: its pool's hook on
    each new connection runs the watch after the library's own (``datastore.failover_watch``
    is what pg_recorder.py checks in each append)."""
    watch = FailoverWatch(datastore.schema, events_table)
    pool = datastore.pool
    library_hook = pool._configure  # psycopg_pool's ``configure``: the library's after_connect

    def configure(conn: Any) -> None:
        if library_hook is not None:
            library_hook(conn)
        watch.on_connect(conn)

    pool._configure = configure
    datastore.failover_watch = watch
    return watch
