"""The simulated destination's state in SQL rows per workflow id, shared by every process
opening one store (sim_store.py has the interface and the state in memory).

It is one row per workflow id (``schedfence_sim_workflows``, its runs as JSON), one row per
logged start (``schedfence_sim_start_log``) and, except on PostgreSQL (sequences), one small
row of counters (``schedfence_sim_meta``); sim_rows.py has them, and how calls are kept
apart (on PostgreSQL a lock per workflow id, elsewhere the counters row). A call reads and
writes only the rows it touches, and its cost does not grow with the number of workflows. A
state an older release kept in one row is migrated on first open.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import create_engine, event, select
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from schedfence.infra.pacing import retry_call
from schedfence.infra.adapters.destination.sim_rows import (
    META_TABLE, NUMBERS, SEQUENCES, TABLE_NAME, TOMBSTONE, PgSimTx, SqlSimTx, legacy_table,
    log_table, meta_table, metadata, workflows_table)
from schedfence.infra.adapters.destination.sim_store import InMemorySimState, SimTx
from schedfence.infra.adapters.store.pg import SCHEMES as PG_SCHEMES, parse_pg_url


class RolledBack(SQLAlchemyError):
    """A database error in a simulator call before its COMMIT was sent: the server rolls that
    transaction back, so the call provably changed nothing (an error in the COMMIT itself
    stays a plain ``SQLAlchemyError``: its outcome is unknown)."""


def _is_memory_sqlite(url: str) -> bool:
    if url.startswith(PG_SCHEMES):
        return False
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    return database in ("", ":memory:") or parsed.query.get("mode") == "memory"


def _make_engine(url: str) -> Engine:
    if url.startswith(PG_SCHEMES):  # a store URL: same database and schema as the events
        target = parse_pg_url(url)
        return create_engine(target.sqlalchemy_url(), connect_args=target.connect_args(),
                             pool_pre_ping=True)
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url)
    # Driver-level autocommit so that the 'begin' hook below decides how transactions start;
    # BEGIN IMMEDIATE takes the write lock up front, serialising read-modify-write across processes.
    engine = create_engine(url, connect_args={"timeout": 30, "isolation_level": None})

    @event.listens_for(engine, "begin")
    def _begin_immediate(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _counters(name: str) -> Any:
    """The select of the counters row's numbers (``NUMBERS``' order), locking the row."""
    c = meta_table.c
    return select(c.counter, c.log_count, c.workflow_count).where(c.name == name) \
        .with_for_update()


def _raise_sequences(conn: Connection, counters: tuple[int, int, int]) -> None:
    """Each sequence above ``counters`` (the numbers an older release handed out from its
    counters row); a sequence already ahead is left alone."""
    for kind, held in zip(NUMBERS, counters):
        seq = SEQUENCES[kind]
        conn.execute(sql_text(
            f"SELECT setval('{seq}', :held) WHERE :held > (SELECT CASE WHEN is_called "
            f"THEN last_value ELSE last_value - 1 END FROM {seq})"), {"held": held})


def _migrate_legacy(conn: Connection, name: str, text: str) -> tuple[int, int, int]:
    """Copy an older release's one-row state into the per-workflow tables; returns counters."""
    if text == TOMBSTONE:
        raise RuntimeError(f"simulated destination {name!r}: {TABLE_NAME} says the state moved "
                           f"to per-workflow rows, but its row in {META_TABLE} is missing; "
                           f"the state cannot be recovered automatically")
    try:
        state = json.loads(text)
    except ValueError:
        state = None
    if not isinstance(state, dict):
        raise RuntimeError(f"simulated destination {name!r}: the row in {TABLE_NAME} is not "
                           f"a state this release can migrate ({text[:80]!r})")
    rows = [{"name": name, "namespace": ns, "workflow_id": wid, "ord": i, "runs": json.dumps(runs)}
            for i, (ns, wid, runs) in enumerate(
                ((*json.loads(k), runs) for k, runs in state.get("workflows", {}).items()),
                start=1)]
    log = [{"name": name, "seq": i, "namespace": e["request"]["namespace"],
            "workflow_id": e["request"]["workflow_id"], "entry": json.dumps(e)}
           for i, e in enumerate(state.get("log", []), start=1)]
    if rows:
        conn.execute(workflows_table.insert(), rows)
    if log:
        conn.execute(log_table.insert(), log)
    return int(state.get("counter", 0)), len(log), len(rows)


class SqlSimState:
    """State in rows per workflow id (see the module docstring); each call is one transaction.

    On PostgreSQL a call locks each workflow id it reads (``PgSimTx``), so calls about one
    workflow are serialised across processes and calls about others run beside them. SQLite
    serialises every call with BEGIN IMMEDIATE, other databases with SELECT ... FOR UPDATE on
    the counters row. ``url`` is a store URL (``sqlite:///PATH``,
    ``postgresql://...?schema=S``) or any SQLAlchemy URL. A state an older release kept in one
    row of ``schedfence_sim_destination`` is migrated on first open.
    """

    def __init__(self, url: str, name: str = "default") -> None:
        if _is_memory_sqlite(url):
            raise ValueError(
                "SqlSimState needs a database shared between connections; an in-memory SQLite URL "
                f"({url!r}) is private to one connection. Use InMemorySimState instead."
            )
        self.url = url
        self.name = name
        self._engine = _make_engine(url)
        self._pg = parse_pg_url(url) if url.startswith(PG_SCHEMES) else None
        self._locks_rows = self._engine.dialect.name == "postgresql"  # else the counters row
        self._scope = self._pg.schema if self._pg is not None else ""  # of the advisory locks
        self._ready = False

    def _ensure_ready(self) -> None:
        """Create the tables and this state's counters row once (migrating an old one-row
        state), tolerating other processes racing us."""
        if self._ready:
            return
        if self._pg is not None:
            # A store URL names a schema that may not exist yet (the simulator can be opened
            # before the event store, or in a store of its own); tables need it to exist.
            self._pg.ensure_schema()
        # A concurrent CREATE TABLE may win on PostgreSQL; checking again then finds it.
        retry_call(self._create_tables, attempts=3, retry_on=DBAPIError)
        # Another process inserted the counters row: looking again finds it there.
        retry_call(self._insert_counters, attempts=3, retry_on=IntegrityError)
        self._ready = True

    def _create_tables(self) -> None:
        with self._engine.begin() as conn:
            metadata.create_all(conn, checkfirst=True)

    def _insert_counters(self) -> None:
        with self._engine.begin() as conn:
            if self._locks_rows:
                self._init_sequences(conn)
            else:
                self._init_counters(conn)

    def _init_sequences(self, conn: Connection) -> None:
        """PostgreSQL numbers from sequences, and this state keeps no counters row: a row an
        older release numbered from raises the sequences above it and is deleted, so that
        release, opening the state again, meets the tombstone without a row and fails (it
        would hand out numbers this release has) instead of numbering on. Every step runs
        under a row lock: a racing open waits, then finds the work done."""
        held = conn.execute(_counters(self.name)).first()
        if held is not None:
            _raise_sequences(conn, (held[0], held[1], held[2]))
            conn.execute(meta_table.delete().where(meta_table.c.name == self.name))
            return
        old = conn.execute(select(legacy_table.c.state).where(legacy_table.c.name == self.name)
                           .with_for_update()).scalar()
        if old is None:  # a racing first open inserts it too: one fails and starts over
            conn.execute(legacy_table.insert().values(name=self.name, state=TOMBSTONE))
        elif old != TOMBSTONE:
            _raise_sequences(conn, _migrate_legacy(conn, self.name, old))
            conn.execute(legacy_table.update().where(legacy_table.c.name == self.name)
                         .values(state=TOMBSTONE))

    def _init_counters(self, conn: Connection) -> None:
        if conn.execute(select(meta_table.c.name).where(meta_table.c.name == self.name)).first():
            return
        # Inserted first: a racing process blocks on this key, then fails and starts over.
        conn.execute(meta_table.insert().values(name=self.name, counter=0, log_count=0,
                                           workflow_count=0))
        old = conn.execute(select(legacy_table.c.state).where(legacy_table.c.name == self.name)
                           .with_for_update()).scalar()
        if old is None:
            conn.execute(legacy_table.insert().values(name=self.name, state=TOMBSTONE))
            return
        counter, log_count, workflow_count = _migrate_legacy(conn, self.name, old)
        conn.execute(meta_table.update().where(meta_table.c.name == self.name).values(
            counter=counter, log_count=log_count, workflow_count=workflow_count))
        conn.execute(legacy_table.update().where(legacy_table.c.name == self.name)
                     .values(state=TOMBSTONE))

    @contextmanager
    def session(self) -> Iterator[SimTx]:
        self._ensure_ready()
        with self._engine.connect() as conn:
            try:
                trans = conn.begin()
                if self._locks_rows:
                    tx: SqlSimTx = PgSimTx(conn, self.name, self._scope)
                else:
                    counter, log_count, ords = conn.execute(_counters(self.name)).one()
                    tx = SqlSimTx(conn, self.name, (counter, log_count, ords))
                yield tx
                tx.commit()
            except SQLAlchemyError as exc:
                raise RolledBack(f"{type(exc).__name__}: {exc}") from exc
            trans.commit()

    def dispose(self) -> None:
        """Close pooled connections (tests and short-lived scripts)."""
        self._engine.dispose()


def sim_state_for(store_url: str, memory: bool) -> InMemorySimState | SqlSimState:
    """The simulator state that goes with a store: private in memory for an in-memory store,
    else rows in the store's own database, shared by every process opening that store."""
    return InMemorySimState() if memory else SqlSimState(store_url)
