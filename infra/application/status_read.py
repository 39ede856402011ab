"""``status`` from the read model: the document ``views.status_doc`` builds from the log, built
instead from the operator projection's folded rows when the projection has applied the whole log
(checked in the same read transaction), so it is exactly as fresh as a read of the log.

It loads no event class, no pydantic model, no SQLAlchemy and no eventsourcing: one sqlite3 or
psycopg connection and a few queries (benchmarks/cli_startup.py). Wherever the rows cannot
answer (the projection behind the log or never built, a key with no current incarnation, a row
missing, a store URL this path does not read, any error) it answers None and the caller reads
the log as before: the same document, and the same errors."""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import fields
from types import SimpleNamespace
from typing import Any, Iterator

from schedfence.domain.ids import schedule_aggregate_id, schedule_key_id, validate_id
from schedfence.domain.read_shape import read_shape
from schedfence.domain.source.state import ScheduleState
from schedfence.projections.status_rows import StatusRows

from schedfence.infra.application.views import MigrationView, ScheduleView

# The log's highest notification id, as eventsourcing's recorders read it (their tables:
# sqlite's default ``stored_events``; on PostgreSQL the application's, eventstore.event_table).
SQLITE_MAX_POSITION = "SELECT MAX(rowid) FROM stored_events"
PG_EVENTS = "schedfence_events"
SQLITE = "sqlite:///"
STATE_FIELDS = {f.name for f in fields(ScheduleState)}


def read_model_status(store: str, namespace: str, schedule_id: str) -> dict[str, Any] | None:
    """``status_doc``'s document from the projection's rows, or None (then read the log)."""
    try:
        validate_id("namespace", namespace)
        validate_id("schedule id", schedule_id)
        with _rows(store) as rows:
            return None if rows is None else _status(rows, namespace, schedule_id)
    except Exception:  # noqa: BLE001 - the log's read names any problem, in its words
        return None


def _status(rows: StatusRows, namespace: str, schedule_id: str) -> dict[str, Any] | None:
    if not rows.caught_up():
        return None
    key = rows.folded(str(schedule_key_id(namespace, schedule_id)))
    if key is None or not key[1]["incarnation"]:
        return None  # not found: the log's read says so
    views = []
    for n in range(key[1]["incarnation"], 0, -1):  # newest first, as Aggregates.incarnations
        found = rows.folded(str(schedule_aggregate_id(namespace, schedule_id, n)))
        if found is None or set(found[1]) != STATE_FIELDS:
            return None  # folded by code whose state had other fields: read the log
        views.append(ScheduleView.of(ScheduleState(**found[1]), found[0]))
        if views[-1].migration_id:
            break
    # The open migration of the key, else its most recent (latest_migration_id's rule).
    migration_id = views[-1].migration_id
    migration = None
    if migration_id:
        folded = rows.migration(migration_id)
        if folded is None:
            return None
        version, state = folded
        migration = MigrationView(**read_shape(SimpleNamespace(**state)),  # type: ignore[arg-type]
                                  last_answer=state["last_answer"], version=version).to_dict()
    return {"schedule": views[0].to_dict(), "migration": migration}


@contextmanager
def _rows(store: str) -> Iterator[StatusRows | None]:
    """The projection's rows in one read transaction on ``store`` (None: a URL this path does
    not read). Nothing is created: a SQLite file must exist."""
    if store.startswith(SQLITE):
        path = store[len(SQLITE):]
        if not path or "?" in path or path == ":memory:" or not os.path.isfile(path):
            yield None
            return
        import sqlite3
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("BEGIN")  # one snapshot: position and rows read together
            yield StatusRows(conn, "?", None, SQLITE_MAX_POSITION)
        finally:
            conn.close()
        return
    from schedfence.infra.adapters.store.pg import SCHEMES, parse_pg_url
    if not store.startswith(SCHEMES) or store.partition("://")[2].split("?")[0].count("@") > 1:
        yield None  # not PostgreSQL, or a URL the store refuses (eventstore._parse_pg)
        return
    target = parse_pg_url(store)
    with target.connect() as pg:
        pg.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield StatusRows(pg, "%s", target.schema,
                         f'SELECT MAX(notification_id) FROM "{target.schema}".{PG_EVENTS}')
