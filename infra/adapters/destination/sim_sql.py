"""The simulated destination's state in SQL rows per workflow id, shared by every process
opening one store (sim_store.py has the interface and the state in memory).

It is one row per workflow id (``schedfence_sim_workflows``, its runs as JSON), one row per
logged start (``schedfence_sim_start_log``) and one small row of counters
(``schedfence_sim_meta``) that every call locks first. A call therefore reads and writes only
the rows it touches, and its cost does not grow with the number of workflows. A state an older
release kept in one row is migrated on first open.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import (BigInteger, Column, Index, MetaData, String, Table, Text, bindparam,
                        create_engine, event, select)
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from schedfence.infra.pacing import retry_call
from schedfence.infra.adapters.destination.sim_store import InMemorySimState, SimTx
from schedfence.infra.adapters.store.pg import SCHEMES as PG_SCHEMES, parse_pg_url

PRELOAD_CHUNK = 500  # workflow ids read in one query
TABLE_NAME = "schedfence_sim_destination"  # the one-row layout of older releases
META_TABLE = "schedfence_sim_meta"
WORKFLOWS_TABLE = "schedfence_sim_workflows"
LOG_TABLE = "schedfence_sim_start_log"
# What the old single row holds once migrated: an older release loads it as a JSON string and
# fails on it, instead of silently starting over from an empty destination.
TOMBSTONE = json.dumps(
    f"schedule-fence: this simulated destination moved to per-workflow rows ({META_TABLE}, "
    f"{WORKFLOWS_TABLE}, {LOG_TABLE}); a release that keeps it in this one row cannot read it")


class RolledBack(SQLAlchemyError):
    """A database error in a simulator call before its COMMIT was sent: the server rolls that
    transaction back, so the call provably changed nothing (an error in the COMMIT itself
    stays a plain ``SQLAlchemyError``: its outcome is unknown)."""


_metadata = MetaData()
_legacy = Table(
    TABLE_NAME, _metadata,
    Column("name", String(200), primary_key=True),
    Column("state", Text, nullable=False),
)
_meta = Table(
    META_TABLE, _metadata,
    Column("name", String(200), primary_key=True),
    Column("counter", BigInteger, nullable=False),  # ids handed out (runs, request ids)
    Column("log_count", BigInteger, nullable=False),  # start-log entries, the last seq
    Column("workflow_count", BigInteger, nullable=False),  # workflow rows, the last ord
)
_workflows = Table(
    WORKFLOWS_TABLE, _metadata,
    Column("name", String(200), primary_key=True),
    Column("namespace", String, primary_key=True),
    Column("workflow_id", String, primary_key=True),
    Column("ord", BigInteger, nullable=False),  # order of the first run (workflow_ids)
    Column("runs", Text, nullable=False),
)
_log = Table(
    LOG_TABLE, _metadata,
    Column("name", String(200), primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("namespace", String, nullable=False),
    Column("workflow_id", String, nullable=False),
    Column("entry", Text, nullable=False),
    Index(f"{LOG_TABLE}_by_workflow", "name", "namespace", "workflow_id", "seq"),
)


# One primary-key lookup per id on PostgreSQL, whatever its statistics say: with an IN list
# the planner, on a table it had not analysed yet, scanned every row of the namespace and
# filtered the ids (40-150 ms for 80,000 workflows, inside the call that holds the counters
# row, so every other call queued behind it); the subquery's OFFSET 0 keeps it a nested loop.
_PG_PRELOAD = sql_text(
    f"SELECT w.workflow_id, x.runs FROM unnest(CAST(:ids AS varchar[])) AS w(workflow_id) "
    f"CROSS JOIN LATERAL (SELECT s.runs FROM {WORKFLOWS_TABLE} s WHERE s.name = :name "
    f"AND s.namespace = :ns AND s.workflow_id = w.workflow_id OFFSET 0) x")


def preload_select(dialect: str, name: str, namespace: str,
                   workflow_ids: list[str]) -> tuple[Any, dict[str, Any]]:
    """The select of these workflows' rows (workflow id, runs): a statement and its
    parameters, for ``Connection.execute``."""
    if dialect == "postgresql":
        return _PG_PRELOAD, {"ids": workflow_ids, "name": name, "ns": namespace}
    c = _workflows.c
    return select(c.workflow_id, c.runs).where(
        c.name == name, c.namespace == namespace, c.workflow_id.in_(workflow_ids)), {}


class SqlSimTx:
    """``SimTx`` over the SQL rows: loads the workflows it is asked about, writes back the ones
    that changed, appends log rows, and updates the counters row (locked by the caller)."""

    def __init__(self, conn: Connection, name: str, counters: tuple[int, int, int]) -> None:
        self._conn, self._name = conn, name
        self._counters = counters
        self._counter, self._log_count, self._workflow_count = counters
        self._loaded: dict[tuple[str, str], tuple[str | None, list[dict]]] = {}
        self._ords: dict[tuple[str, str], int] = {}  # ids whose first run is in this call
        self._pending_log: list[dict] = []

    def runs(self, namespace: str, workflow_id: str) -> list[dict]:
        k = (namespace, workflow_id)
        if k not in self._loaded:
            self.preload([k])
        return self._loaded[k][1]

    def preload(self, keys: list[tuple[str, str]]) -> None:
        c = _workflows.c
        wanted = [k for k in dict.fromkeys(keys) if k not in self._loaded]
        for start in range(0, len(wanted), PRELOAD_CHUNK):
            chunk = wanted[start:start + PRELOAD_CHUNK]
            found: dict[tuple[str, str], str] = {}
            for ns in {ns for ns, _ in chunk}:
                rows = self._conn.execute(*preload_select(
                    self._conn.dialect.name, self._name, ns, [w for n, w in chunk if n == ns]))
                found.update({(ns, wid): text for wid, text in rows})
            for k in chunk:
                text = found.get(k)
                self._loaded[k] = (text, json.loads(text) if text is not None else [])

    def add_run(self, namespace: str, workflow_id: str, run: dict) -> None:
        runs = self.runs(namespace, workflow_id)
        k = (namespace, workflow_id)
        if self._loaded[k][0] is None and k not in self._ords:
            self._workflow_count += 1
            self._ords[k] = self._workflow_count
        runs.append(run)

    def next_counter(self) -> int:
        self._counter += 1
        return self._counter

    def append_log(self, entry: dict) -> None:
        self._log_count += 1
        req = entry["request"]
        self._pending_log.append({"name": self._name, "seq": self._log_count,
                                  "namespace": req["namespace"],
                                  "workflow_id": req["workflow_id"],
                                  "entry": json.dumps(entry)})

    def log(self, namespace: str | None = None, workflow_id: str | None = None) -> list[dict]:
        self._flush()
        c = _log.c
        q = select(c.entry).where(c.name == self._name).order_by(c.seq)
        if namespace is not None:
            q = q.where(c.namespace == namespace)
        if workflow_id is not None:
            q = q.where(c.workflow_id == workflow_id)
        return [json.loads(text) for text in self._conn.execute(q).scalars()]

    def workflow_ids(self) -> list[tuple[str, str]]:
        self._flush()
        c = _workflows.c
        rows = self._conn.execute(select(c.namespace, c.workflow_id)
                                  .where(c.name == self._name).order_by(c.ord))
        return [(ns, wid) for ns, wid in rows]

    def _flush(self) -> None:
        """Write the changed workflow rows and the new log rows (still inside the transaction):
        each kind in one statement."""
        c = _workflows.c
        inserts, updates = [], []
        for (ns, wid), (old, runs) in self._loaded.items():
            if old is None and not runs:
                continue  # asked about, never created
            text = json.dumps(runs)
            if old is None:
                inserts.append({"name": self._name, "namespace": ns, "workflow_id": wid,
                                "ord": self._ords[(ns, wid)], "runs": text})
            elif text != old:
                updates.append({"k_ns": ns, "k_wid": wid, "runs": text})
            else:
                continue
            self._loaded[(ns, wid)] = (text, runs)
        if inserts:
            self._conn.execute(_workflows.insert(), inserts)
        if updates:
            self._conn.execute(_workflows.update().where(
                c.name == self._name, c.namespace == bindparam("k_ns"),
                c.workflow_id == bindparam("k_wid")), updates)
        if self._pending_log:
            self._conn.execute(_log.insert(), self._pending_log)
            self._pending_log = []

    def commit(self) -> None:
        self._flush()
        counters = (self._counter, self._log_count, self._workflow_count)
        if counters != self._counters:  # reads need no write-back
            self._conn.execute(_meta.update().where(_meta.c.name == self._name).values(
                counter=counters[0], log_count=counters[1], workflow_count=counters[2]))
            self._counters = counters


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
        conn.execute(_workflows.insert(), rows)
    if log:
        conn.execute(_log.insert(), log)
    return int(state.get("counter", 0)), len(log), len(rows)


class SqlSimState:
    """State in rows per workflow id (see the module docstring); each call is one transaction
    that locks the counters row first, so calls are serialised across processes.

    SQLite serialises with BEGIN IMMEDIATE; other databases (PostgreSQL) with SELECT ... FOR
    UPDATE on the counters row. ``url`` is a store URL (``sqlite:///PATH``,
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
            _metadata.create_all(conn, checkfirst=True)

    def _insert_counters(self) -> None:
        with self._engine.begin() as conn:
            self._init_counters(conn)

    def _init_counters(self, conn: Connection) -> None:
        if conn.execute(select(_meta.c.name).where(_meta.c.name == self.name)).first():
            return
        # Inserted first: a racing process blocks on this key, then fails and starts over.
        conn.execute(_meta.insert().values(name=self.name, counter=0, log_count=0,
                                           workflow_count=0))
        old = conn.execute(select(_legacy.c.state).where(_legacy.c.name == self.name)
                           .with_for_update()).scalar()
        if old is None:
            conn.execute(_legacy.insert().values(name=self.name, state=TOMBSTONE))
            return
        counter, log_count, workflow_count = _migrate_legacy(conn, self.name, old)
        conn.execute(_meta.update().where(_meta.c.name == self.name).values(
            counter=counter, log_count=log_count, workflow_count=workflow_count))
        conn.execute(_legacy.update().where(_legacy.c.name == self.name)
                     .values(state=TOMBSTONE))

    @contextmanager
    def session(self) -> Iterator[SimTx]:
        self._ensure_ready()
        with self._engine.connect() as conn:
            try:
                trans = conn.begin()
                c = _meta.c
                counters = conn.execute(select(c.counter, c.log_count, c.workflow_count)
                                        .where(c.name == self.name).with_for_update()).one()
                tx = SqlSimTx(conn, self.name, tuple(counters))
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
