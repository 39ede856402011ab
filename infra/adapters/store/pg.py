"""PostgreSQL stores: parsing ``postgresql://`` URLs, eventsourcing's environment, first use.

The event store is eventsourcing's own ``eventsourcing.postgres`` module (psycopg 3 and its
connection pool); the projection and simulator tables go beside it through SQLAlchemy, in the
same database and schema. A URL names its schema with ``?schema=NAME`` (default ``public``);
the schema is created on first use, and eventsourcing creates its tables in it.

Every command imports this module (through the event store's), so it imports neither psycopg
nor SQLAlchemy until a PostgreSQL store is used (a URL is read by SQLAlchemy's ``make_url``,
imported when a ``postgresql://`` URL is parsed): a command on a SQLite store loads neither.
"""
from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from schedfence.domain.errors import DomainError, InvalidArgument

if TYPE_CHECKING:
    import psycopg
    from sqlalchemy.engine import URL

SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
CONNECT_TIMEOUT = 5  # seconds: an unreachable server fails the command, it does not hang it
DDL_LOCK_KEY = 0x5CED_FE0C  # advisory lock id taken around eventsourcing's per-open DDL
# Every connection the store opens (event store pool, projection and simulator engines, our own
# psycopg connections) waits at most LOCK_TIMEOUT_MS for a lock and runs a statement at most
# STATEMENT_TIMEOUT_MS; ``?lock_timeout=``/``?statement_timeout=`` in the URL change them. A writer
# also waits LOCK_TIMEOUT_MS (rounded up to whole seconds) for eventsourcing's insert lock, and
# retries that wait (eventsourcing's 10 attempts); a read gives up at its first timeout.
LOCK_TIMEOUT_MS = 10_000
STATEMENT_TIMEOUT_MS = 60_000
MAX_TIMEOUT_MS = 24 * 3600 * 1000
LOCK_TIMEOUT_KEY = "POSTGRES_LOCK_TIMEOUT_MS"  # our env keys beside eventsourcing's
STATEMENT_TIMEOUT_KEY = "POSTGRES_STATEMENT_TIMEOUT_MS"
_DURATION = re.compile(r"^\s*(\d{1,9})\s*(ms|s|min)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "min": 60_000}


class StoreUnavailable(DomainError):
    """The store's server cannot be reached or refused us (the URL is named without password)."""

    code = "store_unavailable"


class StoreTimeout(StoreUnavailable):
    """A statement or lock wait ran out of its timeout (the message names which, and how long)."""

    retryable = True


def parse_duration(name: str, text: str) -> int:
    """``10s``, ``500ms`` or ``2min`` as milliseconds, between 1 ms and 24 hours."""
    match = _DURATION.match(text)
    if match is None:
        raise InvalidArgument(f"store URL option {name}={text[:40]!r} is not a duration such "
                              "as 10s, 500ms or 2min")
    ms = int(match.group(1)) * _UNIT_MS[match.group(2)]
    if not 0 < ms <= MAX_TIMEOUT_MS:
        raise InvalidArgument(f"store URL option {name}={text!r} must be more than 0 and at "
                              "most 24 hours")
    return ms


def format_ms(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def session_options(lock_ms: int, statement_ms: int) -> str:
    """libpq ``options`` that set both timeouts for the whole session."""
    return f"-c lock_timeout={lock_ms} -c statement_timeout={statement_ms}"


def timeout_of(exc: BaseException | None, lock_ms: int, statement_ms: int,
               where: str) -> StoreTimeout | None:
    """The ``StoreTimeout`` that ``exc`` (a psycopg, eventsourcing or SQLAlchemy error, or any
    error it was raised from) stands for, naming the timeout; None if it is no timeout."""
    psycopg = _psycopg_if_loaded()
    seen = 0
    while psycopg is not None and exc is not None and seen < 8:
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return StoreTimeout(f"{where}: a lock held by another session was not granted "
                                f"in time (lock timeout {format_ms(lock_ms)}; store URL "
                                f"option ?lock_timeout=): {_first_line(exc)}")
        if isinstance(exc, psycopg.errors.QueryCanceled) and "statement timeout" in str(exc):
            return StoreTimeout(f"{where}: a statement ran out of time (statement timeout "
                                f"{format_ms(statement_ms)}; store URL option "
                                f"?statement_timeout=): {_first_line(exc)}")
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
        seen += 1
    return None


def unavailable_of(exc: BaseException | None, where: str) -> StoreUnavailable | None:
    """The ``StoreUnavailable`` that ``exc`` stands for when PostgreSQL itself failed the call
    (the server went away, restarted, refused or cut the connection): one line, naming the
    store; None for any other error (a bug stays ``internal``)."""
    psycopg = _psycopg_if_loaded()
    seen = 0
    while psycopg is not None and exc is not None and seen < 8:
        if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            return StoreUnavailable(f"{where}: {_first_line(exc)}")
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
        seen += 1
    return None


def _psycopg_if_loaded() -> Any:
    """psycopg if this process imported it; else None, and no error can be one of its own."""
    return sys.modules.get("psycopg")  # its errors module is loaded with it


@dataclass(frozen=True)
class PgTarget:
    host: str
    port: int
    user: str
    password: str
    dbname: str
    schema: str
    lock_timeout_ms: int = LOCK_TIMEOUT_MS
    statement_timeout_ms: int = STATEMENT_TIMEOUT_MS

    @property
    def redacted(self) -> str:
        """The URL as an operator may see it: everything but the password."""
        auth = f"{self.user}:***@" if self.password else f"{self.user}@"
        query = [f"schema={self.schema}"] if self.schema != "public" else []
        if self.lock_timeout_ms != LOCK_TIMEOUT_MS:
            query.append(f"lock_timeout={format_ms(self.lock_timeout_ms)}")
        if self.statement_timeout_ms != STATEMENT_TIMEOUT_MS:
            query.append(f"statement_timeout={format_ms(self.statement_timeout_ms)}")
        suffix = f"?{'&'.join(query)}" if query else ""
        return f"postgresql://{auth}{self.host}:{self.port}/{self.dbname}{suffix}"

    @property
    def session_options(self) -> str:
        return session_options(self.lock_timeout_ms, self.statement_timeout_ms)

    def timeout_of(self, exc: BaseException | None, what: str) -> StoreTimeout | None:
        return timeout_of(exc, self.lock_timeout_ms, self.statement_timeout_ms,
                          f"{what} on {self.redacted}")

    def sqlalchemy_url(self) -> URL:
        from sqlalchemy.engine import URL
        return URL.create("postgresql+psycopg", username=self.user,
                          password=self.password or None, host=self.host, port=self.port,
                          database=self.dbname)

    def connect_args(self) -> dict[str, Any]:
        return {"options": f"-csearch_path={self.schema} {self.session_options}",
                "connect_timeout": CONNECT_TIMEOUT}

    def env(self) -> dict[str, str]:
        """eventsourcing.postgres settings. Never POSTGRES_ENABLE_DB_FUNCTIONS: its insert
        function is per schema, not per application, and skips the insert lock."""
        return {"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_HOST": self.host,
                "POSTGRES_PORT": str(self.port), "POSTGRES_USER": self.user,
                "POSTGRES_PASSWORD": self.password, "POSTGRES_DBNAME": self.dbname,
                "POSTGRES_SCHEMA": self.schema,
                "POSTGRES_CONNECT_TIMEOUT": str(CONNECT_TIMEOUT),
                "POSTGRES_LOCK_TIMEOUT": str(-(-self.lock_timeout_ms // 1000)),
                LOCK_TIMEOUT_KEY: str(self.lock_timeout_ms),
                STATEMENT_TIMEOUT_KEY: str(self.statement_timeout_ms),
                "POSTGRES_POOL_SIZE": "4", "POSTGRES_MAX_OVERFLOW": "8"}

    def connect(self) -> psycopg.Connection:
        import psycopg
        try:
            return psycopg.connect(host=self.host, port=self.port, user=self.user,
                                   password=self.password or None, dbname=self.dbname,
                                   connect_timeout=CONNECT_TIMEOUT, autocommit=True,
                                   options=self.session_options)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot connect to {self.redacted}: "
                                   f"{_first_line(exc)}") from None

    @contextmanager
    def ddl_lock(self) -> Iterator[None]:
        """Create the schema, then hold a database-wide advisory lock for the block, so
        concurrent first uses (and eventsourcing's DDL on every open) take turns."""
        import psycopg
        with self.connect() as conn:
            self._create_schema(conn)
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (DDL_LOCK_KEY,))
            except psycopg.Error as exc:
                raise (self.timeout_of(exc, "waiting for the store's setup lock")
                       or StoreUnavailable(f"cannot lock {self.redacted} for setup: "
                                           f"{_first_line(exc)}")) from None
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (DDL_LOCK_KEY,))

    def ensure_schema(self) -> None:
        """Create the schema on first use (eventsourcing creates its tables, not schemas)."""
        with self.connect() as conn:
            self._create_schema(conn)

    def _create_schema(self, conn: psycopg.Connection) -> None:
        import psycopg
        from psycopg import sql
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


def url_parts(url: str) -> URL:
    """SQLAlchemy's ``make_url`` reading of ``url`` (imported here: only a PostgreSQL store
    pays for SQLAlchemy). ValueError for a port that is not a number.

    ``make_url`` stops at a line break in the options and ignores text its pattern does not
    match (after a bracketed IPv6 host). So a raw line break, which no well-formed URL holds,
    is read as its percent-encoding ``%0A``, and a URL whose end would be ignored is refused:
    its reading would not change if more were appended."""
    from sqlalchemy.engine import make_url
    url = url.replace("\n", "%0A")
    parts = make_url(url)
    try:
        ignored = make_url(url + "/p=1") == parts
    except ValueError:  # the appended text was read, as the port
        ignored = False
    if ignored:
        raise InvalidArgument("store URL is not a valid postgresql:// URL")
    return parts


def parse_pg_url(url: str) -> PgTarget:
    parsed = url_parts(url)  # ValueError: a port that is not a number
    query: dict[str, str | tuple[str, ...]] = dict(parsed.query)
    repeated = sorted(key for key, value in query.items() if not isinstance(value, str))
    if repeated:
        raise InvalidArgument(f"store URL repeats option(s) {', '.join(repeated)}")
    schema = str(query.pop("schema", "public"))
    lock_ms = parse_duration("lock_timeout", str(query.pop("lock_timeout"))) \
        if "lock_timeout" in query else LOCK_TIMEOUT_MS
    statement_ms = parse_duration("statement_timeout", str(query.pop("statement_timeout"))) \
        if "statement_timeout" in query else STATEMENT_TIMEOUT_MS
    if query:
        raise InvalidArgument(f"store URL option(s) {', '.join(sorted(query))} are not "
                              "supported (only schema, lock_timeout and statement_timeout)")
    if not _IDENT.match(schema):
        raise InvalidArgument(f"schema {schema!r} is not a plain identifier")
    if not parsed.database:
        raise InvalidArgument("store URL names no database (postgresql://USER@HOST:PORT/DB)")
    port = parsed.port or 5432
    return PgTarget(host=parsed.host or "localhost", port=port,
                    user=parsed.username or "postgres", password=parsed.password or "",
                    dbname=parsed.database, schema=schema, lock_timeout_ms=lock_ms,
                    statement_timeout_ms=statement_ms)
