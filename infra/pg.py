"""PostgreSQL stores: parsing ``postgresql://`` URLs, eventsourcing's environment, first use.

The event store is eventsourcing's own ``eventsourcing.postgres`` module (psycopg 3 and its
connection pool); the projection and simulator tables go beside it through SQLAlchemy, in the
same database and schema. A URL names its schema with ``?schema=NAME`` (default ``public``);
the schema is created on first use, and eventsourcing creates its tables in it.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import psycopg
from psycopg import sql
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from domain.errors import DomainError, InvalidArgument

SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
CONNECT_TIMEOUT = 5  # seconds: an unreachable server fails the command, it does not hang it
DDL_LOCK_KEY = 0x5CED_FE0C  # advisory lock id taken around eventsourcing's per-open DDL
LOCK_TIMEOUT = 10  # seconds a writer waits for the event table's insert lock before retrying


class StoreUnavailable(DomainError):
    """The store's server cannot be reached or refused us (the URL is named without password)."""

    code = "store_unavailable"


@dataclass(frozen=True)
class PgTarget:
    host: str
    port: int
    user: str
    password: str
    dbname: str
    schema: str

    @property
    def redacted(self) -> str:
        """The URL as an operator may see it: everything but the password."""
        auth = f"{self.user}:***@" if self.password else f"{self.user}@"
        suffix = "" if self.schema == "public" else f"?schema={self.schema}"
        return f"postgresql://{auth}{self.host}:{self.port}/{self.dbname}{suffix}"

    def sqlalchemy_url(self) -> URL:
        return URL.create("postgresql+psycopg", username=self.user,
                          password=self.password or None, host=self.host, port=self.port,
                          database=self.dbname)

    def connect_args(self) -> dict[str, Any]:
        return {"options": f"-csearch_path={self.schema}", "connect_timeout": CONNECT_TIMEOUT}

    def env(self) -> dict[str, str]:
        """eventsourcing.postgres settings. Never POSTGRES_ENABLE_DB_FUNCTIONS: its insert
        function is per schema, not per application, and skips the insert lock."""
        return {"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_HOST": self.host,
                "POSTGRES_PORT": str(self.port), "POSTGRES_USER": self.user,
                "POSTGRES_PASSWORD": self.password, "POSTGRES_DBNAME": self.dbname,
                "POSTGRES_SCHEMA": self.schema,
                "POSTGRES_CONNECT_TIMEOUT": str(CONNECT_TIMEOUT),
                "POSTGRES_LOCK_TIMEOUT": str(LOCK_TIMEOUT),
                "POSTGRES_POOL_SIZE": "4", "POSTGRES_MAX_OVERFLOW": "8"}

    def connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(host=self.host, port=self.port, user=self.user,
                                   password=self.password or None, dbname=self.dbname,
                                   connect_timeout=CONNECT_TIMEOUT, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot connect to {self.redacted}: "
                                   f"{_first_line(exc)}") from None

    @contextmanager
    def ddl_lock(self) -> Iterator[None]:
        """Create the schema, then hold a database-wide advisory lock for the block, so
        concurrent first uses (and eventsourcing's DDL on every open) take turns."""
        with self.connect() as conn:
            self._create_schema(conn)
            conn.execute("SELECT pg_advisory_lock(%s)", (DDL_LOCK_KEY,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (DDL_LOCK_KEY,))

    def ensure_schema(self) -> None:
        """Create the schema on first use (eventsourcing creates its tables, not schemas)."""
        with self.connect() as conn:
            self._create_schema(conn)

    def _create_schema(self, conn: psycopg.Connection) -> None:
        try:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                sql.Identifier(self.schema)))
        except psycopg.errors.UniqueViolation:
            pass  # another process created it at the same moment
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot create schema {self.schema!r} on "
                                   f"{self.redacted}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def parse_pg_url(url: str) -> PgTarget:
    try:
        parsed = make_url(url.replace("postgres://", "postgresql://", 1)
                          if url.startswith("postgres://") else url)
    except ArgumentError:
        raise InvalidArgument("store URL is not a valid postgresql:// URL") from None
    query = dict(parsed.query)
    schema = str(query.pop("schema", "public"))
    if query:
        raise InvalidArgument(f"store URL option(s) {', '.join(sorted(query))} are not "
                              "supported (only ?schema=NAME)")
    if not _IDENT.match(schema):
        raise InvalidArgument(f"schema {schema!r} is not a plain identifier")
    if not parsed.database:
        raise InvalidArgument("store URL names no database (postgresql://USER@HOST:PORT/DB)")
    try:
        port = parsed.port or 5432
    except ValueError:
        raise InvalidArgument("store URL has an invalid port") from None
    return PgTarget(host=parsed.host or "localhost", port=port,
                    user=parsed.username or "postgres", password=parsed.password or "",
                    dbname=parsed.database, schema=schema)
