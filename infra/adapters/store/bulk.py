"""Loading many aggregates in one read: one ``SELECT ... WHERE originator_id IN (...)`` for a
batch instead of one round trip per aggregate (the batched worker, infra/engines/batch.py).

Each history is folded exactly as the repository folds it (``fold_events``: a gap or a
version stored twice is ``CorruptHistory``). With snapshots on, loads go through the
repository (a snapshot is another table), one by one.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, cast
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from .eventstore import FenceApplication
from .codec import fold_events

CHUNK = 500  # ids per query


def load_many(app: FenceApplication, ids: Iterable[UUID]) -> dict[UUID, Any]:
    """Every aggregate of ``ids`` that exists, by id (a missing one is left out)."""
    wanted = list(dict.fromkeys(ids))
    if getattr(app, "snapshots", None) is not None:
        return {i: a for i in wanted if (a := app.find(i)) is not None}
    found: dict[UUID, Any] = {}
    for start in range(0, len(wanted), CHUNK):
        chunk = wanted[start:start + CHUNK]
        rows = app.read_retrying(lambda: _select(app.recorder, chunk))
        histories: dict[UUID, list[Any]] = defaultdict(list)
        for row in rows:
            oid = cast(UUID, row.originator_id)  # both selects give UUIDs
            histories[oid].append(app.mapper.to_domain_event(row))
        found.update({oid: fold_events(None, events) for oid, events in histories.items()})
    return found


def _select(recorder: Any, ids: list[UUID]) -> list[StoredEvent]:
    """The stored events of ``ids``, each history in version order."""
    table = recorder.events_table_name
    if hasattr(recorder.datastore, "schema"):  # PostgreSQL
        from psycopg.rows import tuple_row
        from psycopg.sql import SQL, Identifier
        statement = SQL("SELECT originator_id, originator_version, topic, state FROM "
                        "{schema}.{table} WHERE originator_id = ANY(%s) ORDER BY "
                        "originator_id, originator_version").format(
            schema=Identifier(recorder.datastore.schema), table=Identifier(table))
        # Binary tuple rows: uuid and bytea arrive as UUID and bytes, no dict per row.
        with recorder.datastore.get_connection() as conn, \
                conn.cursor(row_factory=tuple_row, binary=True) as curs:
            curs.execute(statement, [ids])
            return [StoredEvent(*row) for row in curs.fetchall()]
    marks = ",".join("?" * len(ids))
    query = (f"SELECT originator_id, originator_version, topic, state FROM {table} "
             f"WHERE originator_id IN ({marks}) ORDER BY originator_id, originator_version")
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(query, [i.hex for i in ids])
        return [StoredEvent(originator_id=UUID(r["originator_id"]),
                            originator_version=r["originator_version"], topic=r["topic"],
                            state=bytes(r["state"])) for r in curs.fetchall()]
