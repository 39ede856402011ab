"""Where the simulated destination keeps its state: in memory, or in one SQL row.

The simulator treats its whole state as one plain-JSON dict read and written inside a single
serialised transaction, so stores only need "lock, load, save" and no schema of their own.
"""
from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from sqlalchemy import Column, MetaData, String, Table, Text, create_engine, event, select
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError

from .pg import SCHEMES as PG_SCHEMES, parse_pg_url

TABLE_NAME = "schedfence_sim_destination"


@runtime_checkable
class SimState(Protocol):
    def transaction(self) -> Iterator[dict]:
        """Context manager yielding the whole mutable state; committed if the block exits cleanly."""
        ...


class InMemorySimState:
    """State in a dict, one transaction at a time; a failed block leaves the state untouched.

    ``rollback=False`` skips the per-call copy of the whole state that makes a failed block
    roll back; every SimulatedDestination call checks before it changes anything, so it needs
    none, and the copy grows with the runs kept (benchmarks of long workloads turn it off).
    """

    def __init__(self, rollback: bool = True) -> None:
        self._lock = threading.Lock()
        self._state: dict = {}
        self._rollback = rollback

    @contextmanager
    def transaction(self) -> Iterator[dict]:
        with self._lock:
            if not self._rollback:
                yield self._state
                return
            # Work on a copy so an exception inside the block behaves like a rollback.
            working = copy.deepcopy(self._state)
            yield working
            self._state = working


_metadata = MetaData()
_table = Table(
    TABLE_NAME,
    _metadata,
    Column("name", String(200), primary_key=True),
    Column("state", Text, nullable=False),
)


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


class SqlSimState:
    """State as JSON text in one row of ``schedfence_sim_destination``, locked per transaction.

    SQLite serialises with BEGIN IMMEDIATE; other databases (PostgreSQL) with SELECT ... FOR UPDATE.
    ``url`` is a store URL (``sqlite:///PATH``, ``postgresql://...?schema=S``) or any
    SQLAlchemy URL.
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
        self._ready = False

    def _ensure_row(self) -> None:
        """Create the table and this state's row once, tolerating another process racing us."""
        if self._ready:
            return
        if self._pg is not None:
            # A store URL names a schema that may not exist yet (the simulator can be opened
            # before the event store, or in a store of its own); tables need it to exist.
            self._pg.ensure_schema()
        try:
            with self._engine.begin() as conn:
                _metadata.create_all(conn, checkfirst=True)
        except DBAPIError:
            # A concurrent CREATE TABLE may win on PostgreSQL; the table then exists, which is all we need.
            pass
        try:
            with self._engine.begin() as conn:
                if conn.execute(self._select()).first() is None:
                    conn.execute(_table.insert().values(name=self.name, state="{}"))
        except IntegrityError:
            pass  # another process inserted the row between our select and insert
        self._ready = True

    def _select(self):
        return select(_table.c.state).where(_table.c.name == self.name)

    @contextmanager
    def transaction(self) -> Iterator[dict]:
        self._ensure_row()
        with self._engine.begin() as conn:
            row = conn.execute(self._select().with_for_update()).one()
            state = json.loads(row.state)
            yield state
            text = json.dumps(state)
            if text != row.state:  # reads need no write-back
                conn.execute(
                    _table.update().where(_table.c.name == self.name).values(state=text)
                )

    def dispose(self) -> None:
        """Close pooled connections (tests and short-lived scripts)."""
        self._engine.dispose()


def sim_state_for(store_url: str, memory: bool) -> InMemorySimState | SqlSimState:
    """The simulator state that goes with a store: private in memory for an in-memory store,
    else one row in the store's own database, shared by every process opening that store."""
    return InMemorySimState() if memory else SqlSimState(store_url)
