"""A SQLAlchemy engine on the event store's own database, for the read models' tables.

The store is opened by eventsourcing from its environment; the engine is derived from that same
environment, so the read models always sit beside the events they are built from. The
application hands the engine (and ``WRITE_OPTIONS``) to the projections, which import no infra.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import StaticPool

from schedfence.infra.pacing import retry_call

from .pg import (LOCK_TIMEOUT_KEY, STATEMENT_TIMEOUT_KEY, TARGET_SESSION_ATTRS_KEY, StoreTimeout,
                 session_options, timeout_of)

SQLITE_TIMEOUT = 30  # seconds a SQLite connection waits for another's lock
WRITE = "schedfence_write"  # execution option: this transaction will write (see _sqlite_engine)
WRITE_OPTIONS = {WRITE: True}


def engine_for_application(app: Any, url: str | None = None) -> Engine:
    """An engine on ``app``'s database; ``url`` overrides the derivation (any SQLAlchemy URL)."""
    if url is not None:
        return _sqlite_engine(url) if url.startswith("sqlite") else create_engine(url)
    module = app.env.get("PERSISTENCE_MODULE") or ""
    if module == "eventsourcing.sqlite":
        return _sqlite_engine(_sqlite_url(app.env.get("SQLITE_DBNAME") or ""))
    if module == "eventsourcing.postgres":
        return _postgres_engine(app.env)
    raise ValueError(f"projections need an SQL event store, not {module or 'popo'!r}")


def _sqlite_url(name: str) -> str:
    if name == ":memory:":
        return "sqlite://"  # private to one connection: see _sqlite_engine's StaticPool
    if name.startswith("file:"):
        # The store's shared-cache memory database (infra.store.open_application) or a URI.
        return f"sqlite:///{name}{'&' if '?' in name else '?'}uri=true"
    return f"sqlite:///{name}"


def _sqlite_engine(url: str) -> Engine:
    """Driver autocommit, so the 'begin' hook decides how transactions start: a writing one
    takes the write lock up front (BEGIN IMMEDIATE), so two projectors, or a projector and a
    worker, queue on the lock instead of failing a lock upgrade half way."""
    kw: dict[str, Any] = {"connect_args": {"timeout": SQLITE_TIMEOUT, "isolation_level": None}}
    if url == "sqlite://":
        kw["poolclass"] = StaticPool
        kw["connect_args"]["check_same_thread"] = False
    engine = create_engine(url, **kw)

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(WRITE)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _postgres_engine(env: Any) -> Engine:
    url = URL.create("postgresql+psycopg", username=env.get("POSTGRES_USER"),
                     password=env.get("POSTGRES_PASSWORD"), database=env.get("POSTGRES_DBNAME"))
    schema = env.get("POSTGRES_SCHEMA")
    options = [f"-csearch_path={schema}"] if schema else []
    if env.get(LOCK_TIMEOUT_KEY):  # the store's lock and statement timeouts (infra/adapters/store/pg.py)
        options.append(session_options(int(env.get(LOCK_TIMEOUT_KEY)),
                                       int(env.get(STATEMENT_TIMEOUT_KEY))))
    connect_args: dict[str, Any] = {"options": " ".join(options)} if options else {}
    # Every server of the store, as libpq lists them (a failover is followed, as by the store).
    connect_args["host"] = env.get("POSTGRES_HOST")
    connect_args["port"] = env.get("POSTGRES_PORT") or "5432"
    if env.get(TARGET_SESSION_ATTRS_KEY):
        connect_args["target_session_attrs"] = env.get(TARGET_SESSION_ATTRS_KEY)
    # The store's own connect timeout: an unreachable server fails a query, never hangs it.
    connect_args["connect_timeout"] = int(env.get("POSTGRES_CONNECT_TIMEOUT") or 5)
    return create_engine(url, connect_args=connect_args, pool_pre_ping=True)


def timeout_error(app: Any, exc: BaseException) -> StoreTimeout | None:
    """``exc`` (from this engine or the store) as a ``StoreTimeout`` naming the timeout."""
    env = app.env
    if env.get(LOCK_TIMEOUT_KEY):
        return timeout_of(exc, int(env.get(LOCK_TIMEOUT_KEY)),
                          int(env.get(STATEMENT_TIMEOUT_KEY)),
                          f"the projection on {env.get('POSTGRES_DBNAME')} (schema "
                          f"{env.get('POSTGRES_SCHEMA')})")
    if "database is locked" in str(exc):
        return StoreTimeout(f"the projection's SQLite store stayed locked by another "
                            f"connection (lock timeout {SQLITE_TIMEOUT}s): {exc}")
    return None


def row_writer_for(engine: Engine) -> Any:
    """How the operator views write a batch's rows on ``engine``: COPY on PostgreSQL
    (``CopyRows``), else None (the views' own executemany)."""
    if engine.dialect.name != "postgresql":
        return None
    from .pg_copy import CopyRows
    return CopyRows()


def writing(engine: Engine) -> Any:
    """A write transaction (on SQLite it takes the write lock up front, see _sqlite_engine)."""
    return engine.execution_options(**WRITE_OPTIONS).begin()


def create_tables(engine: Engine, metadata: Any) -> None:
    """Create ``metadata``'s tables if missing, in a writing transaction; a DDL race with
    another process creating them at the same moment is answered by looking again."""
    from sqlalchemy.exc import DBAPIError

    def create() -> None:
        with writing(engine) as conn:
            metadata.create_all(conn, checkfirst=True)
    retry_call(create, attempts=2, retry_on=DBAPIError)


class SideTables:
    """Tables kept beside the views on the same engine (the worker's due-work backoff, its
    leases), created on first use: a subclass names its ``metadata``."""

    metadata: Any
    engine: Any
    _ready = False

    def _writing(self) -> Any:
        return writing(self.engine)

    def _ensure_table(self) -> None:
        if not self._ready:
            create_tables(self.engine, self.metadata)
            self._ready = True
