"""PostgreSQL stores: parsing ``postgresql://`` URLs, eventsourcing's environment, first use.

A URL may name several servers as libpq does (``postgresql://u@h1:5432,h2:5433/db``, with
``?target_session_attrs=``): every connection the store opens tries them in order
(pg_failover.py decides whether a running process may write after a promotion).

The event store is eventsourcing's own ``eventsourcing.postgres`` module (psycopg 3 and its
connection pool); the projection and simulator tables go beside it through SQLAlchemy, in the
same database and schema. A URL names its schema with ``?schema=NAME`` (default ``public``);
the schema is created on first use, and eventsourcing creates its tables in it.

Every command imports this module (through the event store's), so it imports neither psycopg
nor SQLAlchemy until a PostgreSQL store is used, and a URL is read without SQLAlchemy
(``url_parts``, as its ``make_url`` reads one): a command on a SQLite store loads neither, and
``status`` on PostgreSQL loads psycopg alone.
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


def connect_wait(libpq_host: str) -> float:
    """How long a pool waits for a connection: libpq's ``connect_timeout`` is per host and it
    tries the hosts in turn, so a hung first host costs a whole timeout before the next one is
    tried; the wait covers every host (and a second for the session's set-up)."""
    return CONNECT_TIMEOUT * max(1, len(libpq_host.split(","))) + 1.0
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
TARGET_SESSION_ATTRS_KEY = "POSTGRES_TARGET_SESSION_ATTRS"
# libpq's values of target_session_attrs (PostgreSQL 14+); a URL naming several hosts takes
# read-write unless it says otherwise: the workers must land on the primary.
SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")
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
    """libpq ``options`` for the whole session: both timeouts, and no JIT. The store's
    statements are short lookups; after a bulk load, before autovacuum has analysed the
    events table, the planner's costs run high enough to compile them (measured: a 3 ms
    index lookup of 200 schedules spent 134 ms in JIT)."""
    return f"-c lock_timeout={lock_ms} -c statement_timeout={statement_ms} -c jit=off"


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


Host = tuple[str, int]  # one server of a URL: (host, port)


@dataclass(frozen=True)
class PgTarget:
    """Where a PostgreSQL store lives. ``hosts`` holds one server, or several
    (``postgresql://h1:5432,h2:5433/db``): every connection tries them in order, as libpq does,
    and takes the first whose session matches ``target_session_attrs`` (``read-write`` by
    default when several are named: the primary)."""

    hosts: tuple[Host, ...]
    user: str
    password: str
    dbname: str
    schema: str
    lock_timeout_ms: int = LOCK_TIMEOUT_MS
    statement_timeout_ms: int = STATEMENT_TIMEOUT_MS
    target_session_attrs: str | None = None  # libpq's; None: its default (any)

    @property
    def host(self) -> str:
        """The first (in a one-host URL, the only) server's host."""
        return self.hosts[0][0]

    @property
    def port(self) -> int:
        return self.hosts[0][1]

    @property
    def libpq_host(self) -> str:
        """libpq's ``host``: the hosts, comma-separated (``port``: their ports, likewise)."""
        return ",".join(host for host, _ in self.hosts)

    @property
    def libpq_port(self) -> str:
        return ",".join(str(port) for _, port in self.hosts)

    @property
    def redacted(self) -> str:
        """The URL as an operator may see it: everything but the password."""
        auth = f"{self.user}:***@" if self.password else f"{self.user}@"
        query = [f"schema={self.schema}"] if self.schema != "public" else []
        if self.lock_timeout_ms != LOCK_TIMEOUT_MS:
            query.append(f"lock_timeout={format_ms(self.lock_timeout_ms)}")
        if self.statement_timeout_ms != STATEMENT_TIMEOUT_MS:
            query.append(f"statement_timeout={format_ms(self.statement_timeout_ms)}")
        if self.target_session_attrs is not None:
            query.append(f"target_session_attrs={self.target_session_attrs}")
        suffix = f"?{'&'.join(query)}" if query else ""
        servers = hosts_text(self.libpq_host, self.libpq_port)
        return f"postgresql://{auth}{servers}/{self.dbname}{suffix}"

    @property
    def session_options(self) -> str:
        return session_options(self.lock_timeout_ms, self.statement_timeout_ms)

    def timeout_of(self, exc: BaseException | None, what: str) -> StoreTimeout | None:
        return timeout_of(exc, self.lock_timeout_ms, self.statement_timeout_ms,
                          f"{what} on {self.redacted}")

    def sqlalchemy_url(self) -> URL:
        from sqlalchemy.engine import URL
        return URL.create("postgresql+psycopg", username=self.user,
                          password=self.password or None, database=self.dbname)

    def connect_args(self) -> dict[str, Any]:
        """psycopg's arguments besides the URL's: the servers (every host, as libpq takes
        them, so an engine follows a failover as the event store does), the session."""
        return {"options": f"-csearch_path={self.schema} {self.session_options}",
                "connect_timeout": CONNECT_TIMEOUT, **self.servers()}

    def servers(self) -> dict[str, Any]:
        """libpq's ``host``, ``port`` and (if set) ``target_session_attrs``."""
        found = {"host": self.libpq_host, "port": self.libpq_port}
        if self.target_session_attrs is not None:
            found["target_session_attrs"] = self.target_session_attrs
        return found

    def env(self) -> dict[str, str]:
        """eventsourcing.postgres settings. Never POSTGRES_ENABLE_DB_FUNCTIONS: its insert
        function is per schema, not per application, and skips the insert lock
        (``FenceApplication.construct_env`` turns it off whatever the environment says)."""
        return {"PERSISTENCE_MODULE": "eventsourcing.postgres",
                "POSTGRES_HOST": self.libpq_host, "POSTGRES_PORT": self.libpq_port,
                "POSTGRES_USER": self.user, "POSTGRES_PASSWORD": self.password,
                "POSTGRES_DBNAME": self.dbname, "POSTGRES_SCHEMA": self.schema,
                "POSTGRES_CONNECT_TIMEOUT": str(CONNECT_TIMEOUT),
                "POSTGRES_LOCK_TIMEOUT": str(-(-self.lock_timeout_ms // 1000)),
                LOCK_TIMEOUT_KEY: str(self.lock_timeout_ms),
                STATEMENT_TIMEOUT_KEY: str(self.statement_timeout_ms),
                TARGET_SESSION_ATTRS_KEY: self.target_session_attrs or "",
                # One connection kept open, up to 12 on demand (eventsourcing's pool opens its
                # pool size at once: a CLI command, or each service a test opens, held 4).
                "POSTGRES_POOL_SIZE": "1", "POSTGRES_MAX_OVERFLOW": "11"}

    def keywords(self) -> dict[str, Any]:
        """libpq's connection keywords for one session on this store (psycopg's, and the
        libpq client's of ``status``: libpq.py)."""
        found = {"user": self.user, "dbname": self.dbname, "options": self.session_options,
                 "connect_timeout": str(CONNECT_TIMEOUT), **self.servers()}
        return dict(found, password=self.password) if self.password else found

    def connect(self) -> psycopg.Connection:
        import psycopg
        try:
            return psycopg.connect(autocommit=True, **self.keywords())
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


def hosts_text(host: str, port: str) -> str:
    """``h1:5432,[::1]:5433`` from libpq's comma-separated ``host`` and ``port`` values."""
    return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}"
                    for h, p in zip(host.split(","), port.split(",")))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@dataclass(frozen=True)
class UrlParts:
    """What a ``postgresql://`` URL names, as SQLAlchemy's ``make_url`` reads it."""

    username: str | None
    password: str | None
    host: str | None
    port: int | None
    database: str | None
    query: dict[str, str | tuple[str, ...]]


# SQLAlchemy's URL grammar (``make_url``), matched from the start: scheme, an optional
# ``user[:password]@``, an optional ``[ipv6]`` or host with an optional ``:port``, an optional
# ``/database``, an optional ``?options``. A test holds the two readings equal.
_URL = re.compile(r"[\w+]+://(?:(?P<user>[^:/]*)(?::(?P<password>[^@]*))?@)?"
                  r"(?:(?:\[(?P<v6>[^/?]+)\]|(?P<host>[^/:?]+))?(?::(?P<port>[^/?]*))?)?"
                  r"(?:/(?P<database>[^?]*))?(?:\?(?P<query>.*))?")


def url_parts(url: str) -> UrlParts:
    """``url`` read as SQLAlchemy's ``make_url`` reads it, without importing SQLAlchemy (what
    ``status`` on PostgreSQL would otherwise pay). ValueError for a port that is not a number.

    ``make_url`` stops at a line break in the options and ignores text its grammar does not
    match (after a bracketed IPv6 host). So a raw line break, which no well-formed URL holds,
    is read as its percent-encoding ``%0A``, and a URL with such an ignored end is refused."""
    from urllib.parse import parse_qsl, unquote
    url = url.replace("\n", "%0A")
    m = _URL.match(url)
    if m is None or m.end() != len(url):
        raise InvalidArgument("store URL is not a valid postgresql:// URL")
    query: dict[str, str | tuple[str, ...]] = {}
    for key, value in parse_qsl(m["query"] or ""):
        seen = query.get(key)
        query[key] = value if seen is None else (
            (seen, value) if isinstance(seen, str) else (*seen, value))
    return UrlParts(username=None if m["user"] is None else unquote(m["user"]),
                    password=None if m["password"] is None else unquote(m["password"]),
                    host=m["host"] or m["v6"], port=None if m["port"] is None else int(
                        m["port"]), database=m["database"], query=query)


def parse_pg_url(url: str) -> PgTarget:
    hosts, url = _host_list(url)
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
    attrs = _session_attrs(query.pop("target_session_attrs", None), len(hosts or ((),)))
    if query:
        raise InvalidArgument(f"store URL option(s) {', '.join(sorted(query))} are not "
                              "supported (only schema, lock_timeout, statement_timeout and "
                              "target_session_attrs)")
    if not _IDENT.match(schema):
        raise InvalidArgument(f"schema {schema!r} is not a plain identifier")
    if not parsed.database:
        raise InvalidArgument("store URL names no database (postgresql://USER@HOST:PORT/DB)")
    return PgTarget(hosts=hosts or ((parsed.host or "localhost", parsed.port or 5432),),
                    user=parsed.username or "postgres", password=parsed.password or "",
                    dbname=parsed.database, schema=schema, lock_timeout_ms=lock_ms,
                    statement_timeout_ms=statement_ms, target_session_attrs=attrs)


def _session_attrs(value: str | tuple[str, ...] | None, hosts: int) -> str | None:
    if value is None:
        return "read-write" if hosts > 1 else None
    if value not in SESSION_ATTRS:
        raise InvalidArgument(f"store URL option target_session_attrs={str(value)[:40]!r} is "
                              f"not one of libpq's: {', '.join(SESSION_ATTRS)}")
    return str(value)


_NOT_HOSTS = ("store URL hosts are not HOST[:PORT] entries separated by commas (percent-encode "
              "',', '/', '?' and '@' in the password)")


def _host_list(url: str) -> tuple[tuple[Host, ...], str]:
    """A URL naming several hosts (``h1:5432,h2,[::1]:5433``, libpq's form): its servers,
    read by libpq itself (psycopg's ``conninfo_to_dict``; a host without a port gets 5432),
    and the URL with the first in their place, for ``make_url`` to read the rest. A URL with
    one host: no servers (``make_url`` reads it), and the URL unchanged."""
    scheme, _, rest = url.partition("://")
    before, at, after = rest.split("?", 1)[0].rpartition("@")
    servers = after.split("/", 1)[0]
    if "," not in servers:
        return (), url
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict
    try:
        found = conninfo_to_dict(f"postgresql://{servers}/")
    except Error:
        raise InvalidArgument(_NOT_HOSTS) from None  # their text may hold a password
    hosts = str(found.get("host", "")).split(",")
    ports = [int(port) if port else 5432 for port in str(found.get("port", "")).split(",")]
    if "" in hosts or len(ports) != len(hosts):
        raise InvalidArgument(_NOT_HOSTS)
    first = f"[{hosts[0]}]" if ":" in hosts[0] else hosts[0]
    start = len(before) + len(at)
    return tuple(zip(hosts, ports)), \
        f"{scheme}://{rest[:start]}{first}:{ports[0]}{rest[start + len(servers):]}"
