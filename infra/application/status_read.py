"""``status`` from the read model: the document ``views.status_doc`` builds from the log, built
instead from the operator projection's folded rows (the key, the incarnations it reads, the
migration) when each of those rows is at its aggregate's latest version in the log, checked in
the same read transaction. Then the answer is the log's as of that read, exactly as fresh: a
new incarnation, fence or migration step is an event of one of those aggregates. Events of other
keys do not matter, so the projection may lag elsewhere in the log.

It loads no event class, no pydantic model, no SQLAlchemy and no eventsourcing: one sqlite3
connection, or on PostgreSQL one connection through the system's libpq (infra/adapters/store/
libpq.py; psycopg where no libpq loads), and a few queries (benchmarks/cli_startup.py). Wherever the rows cannot
answer (a row behind its aggregate or missing, the projection never built or in another layout,
a state with other fields, a store URL this path does not read, any error) it answers None and
the caller reads the log as before: the same document, and the same errors."""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import fields
from types import SimpleNamespace
from typing import Any, Callable, Iterator
from uuid import UUID

from schedfence.domain.destination_id import describe_binding
from schedfence.domain.ids import schedule_aggregate_id, schedule_key_id, validate_id
from schedfence.domain.read_shape import read_shape
from schedfence.domain.source.state import ScheduleState
from schedfence.projections.status_rows import StatusRows

from schedfence.infra.application.views import MigrationView, ScheduleView

# The aggregates' latest versions, from eventsourcing's tables of stored events (sqlite's
# default ``stored_events``, ids as UUID hex; on PostgreSQL the application's table,
# eventstore.event_table(), ids as uuid).
SQLITE_EVENTS = "stored_events"
PG_EVENTS = "schedfence_events"
SQLITE = "sqlite:///"
STATE_FIELDS = {f.name for f in fields(ScheduleState)}
Latest = Callable[[list[UUID]], dict[UUID, int]]
# Whether the log holds an event of this topic after this position (notification id).
Since = Callable[[str, int], bool]


def read_model_status(store: str, namespace: str, schedule_id: str) -> dict[str, Any] | None:
    """``status_doc``'s document from the projection's rows, or None (then read the log)."""
    try:
        validate_id("namespace", namespace)
        validate_id("schedule id", schedule_id)
        with _rows(store) as found:
            return None if found is None else _status(*found[:2], namespace, schedule_id)
    except Exception:  # noqa: BLE001 - the log's read names any problem, in its words
        return None


def _status(rows: StatusRows, latest: Latest, namespace: str,
            schedule_id: str) -> dict[str, Any] | None:
    if not rows.current_layout():
        return None
    key_id = schedule_key_id(namespace, schedule_id)
    key = rows.folded(str(key_id))
    if key is None or not key[1]["incarnation"]:
        return None  # not found: the log's read says so
    read = {key_id: key[0]}  # aggregate -> the version of its row
    views = []
    for n in range(key[1]["incarnation"], 0, -1):  # newest first, as Aggregates.incarnations
        aggregate_id = schedule_aggregate_id(namespace, schedule_id, n)
        found = rows.folded(str(aggregate_id))
        if found is None or set(found[1]) != STATE_FIELDS:
            return None  # folded by code whose state had other fields: read the log
        read[aggregate_id] = found[0]
        views.append(ScheduleView.of(ScheduleState(**found[1]), found[0]))
        if views[-1].migration_id:
            break
    # The open migration of the key, else its most recent (latest_migration_id's rule).
    migration = None
    if views[-1].migration_id:
        folded = rows.migration(views[-1].migration_id)
        if folded is None:
            return None
        version, state = folded
        read[UUID(views[-1].migration_id)] = version
        # read_shape takes a MigrationState; a namespace of its stored fields reads the same
        # names without building the pydantic model this path keeps out of the process.
        shape = read_shape(SimpleNamespace(**state))  # type: ignore[arg-type]  # see above
        binding = state.get("destination")  # absent: folded from an older release's
        migration = MigrationView(**shape, last_answer=state["last_answer"],
                                  version=version, destination=describe_binding(binding),
                                  destination_binding=binding).to_dict()
    if latest(list(read)) != read:
        return None  # a row behind its aggregate: the projection has not applied it yet
    return {"schedule": views[0].to_dict(), "migration": migration}


@contextmanager
def _rows(store: str) -> Iterator[tuple[StatusRows, Latest, Since] | None]:
    """The projection's rows, the log's latest versions and whether the log holds an event of
    a topic after a position, in one read transaction on ``store`` (None: a URL this path does
    not read). Nothing is created: a SQLite file must exist."""
    if store.startswith(SQLITE):
        path = store[len(SQLITE):]
        if not path or "?" in path or path == ":memory:" or not os.path.isfile(path):
            yield None
            return
        import sqlite3
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("BEGIN")  # one snapshot: versions and rows read together
            yield StatusRows(conn, "?", None), lambda ids: {UUID(i): v for i, v in conn.execute(
                f"SELECT originator_id, MAX(originator_version) FROM {SQLITE_EVENTS} WHERE "
                f"originator_id IN ({','.join('?' * len(ids))}) GROUP BY originator_id",
                [i.hex for i in ids])}, lambda topic, position: bool(conn.execute(
                    f"SELECT 1 FROM {SQLITE_EVENTS} WHERE rowid > ? AND topic = ? LIMIT 1",
                    [position, topic]).fetchall())
        finally:
            conn.close()
        return
    from schedfence.infra.adapters.store.pg import SCHEMES, parse_pg_url
    if not store.startswith(SCHEMES) or store.partition("://")[2].split("?")[0].count("@") > 1:
        yield None  # not PostgreSQL, or a URL the store refuses (eventstore._parse_pg)
        return
    target = parse_pg_url(store)
    from schedfence.infra.adapters.store import libpq
    lib = libpq.load()  # psycopg's import costs more than the whole read (libpq.py)
    with (target.connect() if lib is None else
          libpq.Connection(lib, target.keywords(), target.redacted)) as pg:
        pg.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        events = f'"{target.schema}".{PG_EVENTS}'
        yield StatusRows(pg, "%s", target.schema), lambda ids: dict(pg.execute(
            f"SELECT originator_id, MAX(originator_version) FROM {events} "
            "WHERE originator_id = ANY(%s) GROUP BY originator_id", [ids]).fetchall()), \
            lambda topic, position: bool(pg.execute(
                f"SELECT 1 FROM {events} WHERE notification_id > %s AND topic = %s LIMIT 1",
                [position, topic]).fetchall())
