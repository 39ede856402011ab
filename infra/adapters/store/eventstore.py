"""Opening the event store from a URL (eventsourcing's own persistence).

Its loads fold with ``fold_events`` (codec.py) and its recorder is guarded against timeouts and
lost commits (recorder_guard.py).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar, cast
from uuid import UUID

from eventsourcing.application import (AggregateNotFoundError, Application, ProcessingEvent,
                                       Repository)
from eventsourcing.persistence import IntegrityError, PersistenceError
from eventsourcing.utils import get_topic

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.model import EvolvingAggregate
from schedfence.domain.source.schedule import Schedule
from schedfence.infra.pacing import linear, retry_call
from schedfence.infra.adapters.store.codec import (FenceRepository, JSONBytes, PydanticMapper,
                                                    lenient_uuid)
from schedfence.infra.adapters.store.pg import (CONNECT_TIMEOUT, LOCK_TIMEOUT_KEY,
                                                 SCHEMES as PG_SCHEMES, connect_wait,
                                                 STATEMENT_TIMEOUT_KEY, TARGET_SESSION_ATTRS_KEY,
                                                 PgTarget, StoreTimeout, StoreUnavailable,
                                                 hosts_text, parse_pg_url, session_options,
                                                 timeout_of, unavailable_of)
from schedfence.infra.adapters.store.recorder_guard import guard_recorder

DEFAULT_STORE = "sqlite:///schedfence.db"
PG_RECORDER_TOPIC = "schedfence.infra.adapters.store.pg_recorder:ArrayInsertRecorder"
PAGE = 1000
OCC_RETRIES = 20
SQLITE_LOCK_TIMEOUT = 30  # seconds a SQLite writer waits for another writer's lock
T = TypeVar("T")


def conflict_retry(exhausted: Exception) -> dict[str, Any]:
    """How a step that lost an optimistic-concurrency race is run again, as ``pacing.retry_call``'s
    arguments: each run re-reads what it needs and decides again on what the winner wrote, and
    ``exhausted`` is raised if the aggregates keep changing under it (the unit of work runs it:
    infra/engines/unit_of_work.py)."""
    return {"attempts": OCC_RETRIES, "retry_on": IntegrityError, "exhausted": exhausted}


@dataclass(frozen=True)
class StoreURL:
    url: str
    kind: str  # sqlite-file | sqlite-memory | postgresql
    path: str = ""
    pg: PgTarget | None = None

    @property
    def redacted(self) -> str:
        """The URL without its password, for messages and logs."""
        return self.pg.redacted if self.pg is not None else self.url


def parse_store_url(url: str) -> StoreURL:
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument("store URL is empty (expected sqlite:///PATH or "
                              "postgresql://USER@HOST:PORT/DB)")
    if url in ("sqlite:///:memory:", "sqlite://"):
        return StoreURL(url, "sqlite-memory")
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if not path:
            raise InvalidArgument(f"store URL {url!r} names no file")
        if "?" in path:  # not a URI filename: it would become part of the file's name
            raise InvalidArgument(f"store URL {url!r}: sqlite:///PATH takes no '?' options "
                                  "(mode=ro and the like are not supported)")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise InvalidArgument(f"store URL {url!r}: directory {directory} does not exist")
        return StoreURL(url, "sqlite-file", path)
    if url.startswith(PG_SCHEMES):
        return StoreURL(url, "postgresql", pg=_parse_pg(url))
    scheme, sep, rest = url.partition("://")
    shown = f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url  # never echo a password
    raise InvalidArgument(f"unsupported store URL {shown!r} (expected sqlite:///PATH or "
                          "postgresql://USER@HOST:PORT/DB)")


def _parse_pg(url: str) -> PgTarget:
    """``parse_pg_url``, refusing what it would misread; no message echoes the password."""
    if url.partition("://")[2].split("?", 1)[0].count("@") > 1:
        raise InvalidArgument("store URL has more than one '@' before its host: percent-encode "
                              "'@' in the user name or password as %40")
    try:
        target = parse_pg_url(url)
    except InvalidArgument:
        raise
    except (ValueError, TypeError):  # e.g. a port that is not a number: its text may be secret
        raise InvalidArgument("store URL is not a valid postgresql://USER[:PASSWORD]@HOST:PORT/"
                              "DB URL (the port must be a number; percent-encode ':', '/' and "
                              "'@' in the password)") from None
    for _, port in target.hosts:
        if not 0 < port < 65536:
            raise InvalidArgument(f"store URL port {port} is not between 1 and 65535")
    return target


class FenceApplication(Application[UUID]):
    """The event store of schedules and migrations. It only loads and saves.

    Snapshots are off unless ``SNAPSHOT_INTERVAL`` (env ``SCHEDFENCE_SNAPSHOT_INTERVAL``, or
    ``env={"SNAPSHOT_INTERVAL": "100"}``) is a positive N: then every save that reaches a
    multiple of N of a migration or schedule snapshots it, and loads start from the latest
    snapshot. Off by default because a normal migration has ~6 events and would only pay the
    extra snapshot lookup on every load (benchmarks/RESULTS.md).
    """

    name = "schedfence"
    env = {"MAPPER_TOPIC": get_topic(PydanticMapper), "TRANSCODER_TOPIC": get_topic(JSONBytes)}

    def construct_env(self, name: str, env: Any = None) -> Any:
        environment = super().construct_env(name, env)
        raw = environment.get("SNAPSHOT_INTERVAL", "0")
        if not raw.isdigit():
            raise InvalidArgument(f"SNAPSHOT_INTERVAL must be a whole number, not {raw!r}")
        if int(raw) > 0:
            environment["IS_SNAPSHOTTING_ENABLED"] = "y"
            self.snapshotting_intervals = {Migration: int(raw), Schedule: int(raw)}  # type: ignore[misc]  # eventsourcing's ClassVar, set per app
        if environment.get("PERSISTENCE_MODULE") == "eventsourcing.postgres":
            # Its saves go in as binary arrays (infra/adapters/store/pg_recorder.py), not composites.
            environment.setdefault("APPLICATION_RECORDER_TOPIC", PG_RECORDER_TOPIC)
            # Never the library's insert function, whatever the process environment says: it
            # skips the table lock that makes notification ids commit in order (readers that
            # tail the log by position rely on it) and the failover fence of pg_recorder.py.
            environment["POSTGRES_ENABLE_DB_FUNCTIONS"] = "n"
        return environment

    def forget_on_close(self, finalizer: Callable[[], Any]) -> None:
        """Run ``finalizer`` (once) when this application closes: a scratch store's files."""
        self._forget = finalizer

    def close(self) -> None:
        super().close()
        forget = getattr(self, "_forget", None)
        if forget is not None:
            forget()

    def construct_factory(self, env: Any) -> Any:
        factory = super().construct_factory(env)
        datastore = getattr(factory, "datastore", None)
        pool = getattr(datastore, "pool", None)
        if pool is not None and env.get(LOCK_TIMEOUT_KEY):  # eventsourcing.postgres: not open yet
            pool.kwargs["options"] = session_options(int(env.get(LOCK_TIMEOUT_KEY)),
                                                     int(env.get(STATEMENT_TIMEOUT_KEY)))
            if env.get(TARGET_SESSION_ATTRS_KEY):  # its hosts and ports: libpq's lists already
                pool.kwargs["target_session_attrs"] = env.get(TARGET_SESSION_ATTRS_KEY)
            # libpq's timeout per host, and a wait for a connection that covers every host
            # (eventsourcing sets both to one host's: a hung first host failed every command)
            pool.kwargs["connect_timeout"] = CONNECT_TIMEOUT
            pool.timeout = connect_wait(str(env.get("POSTGRES_HOST") or ""))
            from schedfence.infra.adapters.store.pg_failover import watch_failovers
            watch_failovers(datastore, event_table())  # a promotion under us
        return factory

    def construct_recorder(self) -> Any:
        recorder = super().construct_recorder()
        if hasattr(recorder, "convert_originator_id"):  # SQLite: a bad row id names its row
            recorder.convert_originator_id = lenient_uuid
        return guard_recorder(recorder, self._timeout_of, self._after_drop)

    def read_retrying(self, read: Callable[[], T], attempts: int = 3) -> T:
        """A read that a dropped connection (a server restart, a killed backend) fails once
        is tried again on a fresh one, after a short pause; other failures are raised."""
        return retry_call(read, **self.read_retry(attempts))

    def read_retry(self, attempts: int = 3) -> dict[str, Any]:
        """``read_retrying``'s arguments to ``pacing.retry_call``: a module above the store
        retries its own reads with them, so the store never calls back up into its code."""
        return {"attempts": attempts, "retry_on": Exception, "retry_if": self._dropped,
                "pause": linear(0.2), "before_retry": self._after_drop}

    def _after_drop(self, exc: BaseException, attempt: int) -> None:
        """Before a retry after a dropped connection: test the pool's idle connections, so
        the retry takes a live one (after a failover every idle one was the old primary's;
        their replacements connect to the new one: pg.py's hosts)."""
        pool = getattr(getattr(self.factory, "datastore", None), "pool", None)
        if pool is not None and self._dropped(exc):
            try:
                pool.check()
            except Exception:  # noqa: BLE001 - the retry reports what is wrong, not this
                pass

    def _dropped(self, exc: BaseException) -> bool:
        named = self.store_error(exc)
        return isinstance(named, StoreUnavailable) and not isinstance(named, StoreTimeout)

    def store_error(self, exc: BaseException) -> StoreUnavailable | None:
        """What a failure of any read or write on this store (events, projections, the
        simulator's tables) means to a user: a named timeout, or the server unavailable, in
        one line; None when the store is not to blame."""
        if isinstance(exc, StoreUnavailable):
            return exc
        timed_out = self._timeout_of(exc)
        if timed_out is not None or not self.env.get(LOCK_TIMEOUT_KEY):
            return timed_out
        return unavailable_of(exc, self._where())

    def _where(self) -> str:
        env = self.env
        servers = hosts_text(str(env.get("POSTGRES_HOST")), str(env.get("POSTGRES_PORT")))
        return (f"the store on postgresql://{servers}/{env.get('POSTGRES_DBNAME')} (schema "
                f"{env.get('POSTGRES_SCHEMA')})")

    def _timeout_of(self, exc: BaseException) -> StoreTimeout | None:
        env = self.env
        if env.get(LOCK_TIMEOUT_KEY):
            return timeout_of(exc, int(cast(str, env.get(LOCK_TIMEOUT_KEY))),
                              int(cast(str, env.get(STATEMENT_TIMEOUT_KEY))), self._where())
        seconds = env.get("SQLITE_LOCK_TIMEOUT")
        if seconds and "database is locked" in str(exc):
            return StoreTimeout(f"the SQLite store {env.get('SQLITE_DBNAME')} stayed locked by "
                                f"another connection (lock timeout {seconds}s, "
                                f"SQLITE_LOCK_TIMEOUT): {exc}")
        return None

    def construct_repository(self) -> Repository[UUID]:
        repository = super().construct_repository()
        # Same settings, our fold: see FenceRepository.
        repository.__class__ = FenceRepository
        return repository

    def save(self, *objs: Any, **kwargs: Any) -> Any:
        """``Application.save``, collecting our aggregates' events without its two runtime
        ``Protocol`` checks per object (each walks every attribute the protocol names: 10% of
        a batched rollback's time, benchmarks/RESULTS.md). Anything else is collected as the
        library collects it."""
        processing = ProcessingEvent[UUID]()
        for obj in objs:
            if isinstance(obj, EvolvingAggregate):
                processing.events.extend(obj.collect_events())
                processing.aggregates[obj.id] = obj
            else:
                processing.collect_events(obj)
        processing.saved_kwargs.update(kwargs)
        recordings = self._record(processing)
        self._take_snapshots(processing)
        self._notify(recordings)
        self.notify(processing.events)  # the library's deprecated hook, kept as it calls it
        return recordings

    def _take_snapshots(self, processing_event: Any) -> None:
        # The events are committed by now; a snapshot is only a cache, so failing to write one
        # must not turn a recorded step into an error (a worker would misread it as a conflict).
        try:
            super()._take_snapshots(processing_event)
        except (PersistenceError, StoreUnavailable):
            pass

    def find(self, aggregate_id: UUID) -> Any | None:
        try:
            return self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None

    def notifications(self, topics: tuple[str, ...] = (), start: int = 1,
                      stop: int | None = None) -> Iterator[Any]:
        """Every stored notification from ``start`` (to ``stop``, inclusive) in log order,
        paged."""
        while True:
            page = self.recorder.select_notifications(start=start, limit=PAGE, stop=stop,
                                                      topics=topics)
            yield from page
            if len(page) < PAGE:
                return
            start = page[-1].id + 1

    def event_count(self) -> int:
        """The log position (highest notification id): the event count on SQLite, an upper
        bound on PostgreSQL, whose ids skip a value wherever a save rolled back. Right for
        "did anything change"; count with ``events_since`` where the number matters."""
        return self.recorder.max_notification_id() or 0

    def events_since(self, position: int) -> int:
        """How many events were appended after log ``position`` (holes not counted)."""
        return sum(1 for _ in self.notifications(start=position + 1))


def open_application(store: StoreURL) -> FenceApplication:
    if store.pg is not None:
        return _open_postgres(store.pg)
    scratch = _scratch_directory() if store.kind == "sqlite-memory" else None
    name = os.path.join(scratch, "events.db") if scratch else store.path
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": name,
           "SQLITE_LOCK_TIMEOUT": str(SQLITE_LOCK_TIMEOUT)}
    app = FenceApplication(env=env)
    if scratch:
        app.forget_on_close(weakref.finalize(app, shutil.rmtree, scratch, ignore_errors=True))
    return app


def _scratch_directory() -> str:
    """Where a ``sqlite:///:memory:`` store lives: a private file in RAM (``/dev/shm`` where
    there is one), removed when the application closes or the process exits.

    Not SQLite's shared-cache memory database: there, a second connection's writer (a pool
    thread, the views' engine) fails at once with "database table is locked" instead of
    waiting for the lock (shared-cache locks ignore the busy timeout), and eventsourcing's
    connection is then left inside its failed transaction. A file has ordinary locks that
    wait, exactly like the file store users run."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="schedfence-memory-", dir=base)


def event_table() -> str:
    """eventsourcing.postgres's table of stored events for this application."""
    return f"{FenceApplication.name.lower()}_events"


def holds_event_log(store: StoreURL) -> bool:
    """Whether ``store`` exists already (a SQLite file, or the schema's event table), read
    without creating anything: opening it would create the file, schema and tables."""
    if store.kind == "sqlite-file":
        return os.path.isfile(store.path)
    if store.pg is None:
        return True  # in memory: nothing to create by mistake
    with store.pg.connect() as conn:  # StoreUnavailable, with the redacted URL
        found = conn.execute("SELECT to_regclass(%s)",
                             (f'"{store.pg.schema}"."{event_table()}"',)).fetchone()
    return found is not None and found[0] is not None


def _open_postgres(target: PgTarget) -> FenceApplication:
    """eventsourcing.postgres on ``target``; its tables are created on first use.

    eventsourcing runs its DDL (CREATE TABLE/TYPE/OR REPLACE FUNCTION) on every open, and two
    processes doing that at once can fail ("tuple concurrently updated"), so openers of one
    database take turns under an advisory lock held for the construction only.
    """
    with target.ddl_lock():  # also proves the server is reachable, with a clear error
        try:
            return FenceApplication(env=target.env())
        except Exception as exc:  # psycopg/pool errors while creating tables
            timed_out = target.timeout_of(exc, "opening the event store")
            if timed_out is not None:
                raise timed_out from None
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise StoreUnavailable(f"cannot open the event store on {target.redacted}: "
                                   f"{type(exc).__name__}: {first}") from None
