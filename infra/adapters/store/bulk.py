"""Loading many aggregates in one read: one ``SELECT`` for a batch instead of one round trip
per aggregate (the batched worker, infra/engines/batch.py; the scheduler, which also brings
the schedules it saw last pass up to date from their new events only).

Each history is folded exactly as the repository folds it (``fold_events``: a gap or a
version stored twice is ``CorruptHistory``). With snapshots on, loads go through the
repository (a snapshot is another table), one by one.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping, cast
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from .eventstore import FenceApplication
from .codec import fold_events

CHUNK = 500  # ids per query


def load_many(app: FenceApplication, ids: Iterable[UUID],
              known: Mapping[UUID, Any] | None = None) -> dict[UUID, Any]:
    """Every aggregate of ``ids`` that exists, by id (a missing one is left out). An aggregate
    in ``known`` (as a caller last saw it, committed) is brought up to date from the events
    stored after its version, folded onto it in place: a long history is not read again."""
    wanted, known = list(dict.fromkeys(ids)), known or {}
    if getattr(app, "snapshots", None) is not None:
        fresh = [i for i in wanted if i not in known]
        found = {i: a for i in fresh if (a := app.find(i)) is not None}
        wanted = [i for i in wanted if i in known]
    else:
        found = {}
    for start in range(0, len(wanted), CHUNK):
        chunk = [(i, known[i].version if i in known else 0) for i in wanted[start:start + CHUNK]]
        rows = app.read_retrying(lambda: _select(app.recorder, chunk))
        histories: dict[UUID, list[Any]] = defaultdict(list)
        for row in rows:
            oid = cast(UUID, row.originator_id)  # both selects give UUIDs
            histories[oid].append(app.mapper.to_domain_event(row))
        found.update({i: fold_events(known.get(i), histories[i]) for i, _ in chunk
                      if i in known or i in histories})
    return found


def pg_statement(schema: str, table: str) -> Any:
    """The PostgreSQL select of ``_select`` (two array parameters: ids, versions after).

    One index range per id, whatever the statistics say: the subquery's OFFSET 0 keeps the
    planner from flattening it into a hash join over the whole table, which it chose (a
    parallel scan of 1.3 million events per batch) before autovacuum had analysed the table
    of a freshly written fleet."""
    from psycopg.sql import SQL, Identifier
    return SQL("SELECT e.originator_id, e.originator_version, e.topic, e.state FROM "
               "unnest(%s::uuid[], %s::bigint[]) WITH ORDINALITY AS w(id, v, n) "
               "CROSS JOIN LATERAL (SELECT * FROM {schema}.{table} x "
               "WHERE x.originator_id = w.id AND x.originator_version > w.v OFFSET 0) e "
               "ORDER BY w.n, e.originator_version").format(
        schema=Identifier(schema), table=Identifier(table))


def _select(recorder: Any, after: list[tuple[UUID, int]]) -> list[StoredEvent]:
    """The stored events of each id after its version (0: all), each history in order."""
    table = recorder.events_table_name
    if hasattr(recorder.datastore, "schema"):  # PostgreSQL
        from psycopg.rows import tuple_row
        statement = pg_statement(recorder.datastore.schema, table)
        # Binary tuple rows: uuid and bytea arrive as UUID and bytes, no dict per row.
        with recorder.datastore.get_connection() as conn, \
                conn.cursor(row_factory=tuple_row, binary=True) as curs:
            curs.execute(statement, [[i for i, _ in after], [v for _, v in after]])
            return [StoredEvent(*row) for row in curs.fetchall()]
    pairs = ",".join("(?, ?)" for _ in after)
    query = (f"WITH w(id, v) AS (VALUES {pairs}) SELECT originator_id, originator_version, "
             f"topic, state FROM {table} JOIN w ON originator_id = w.id AND "
             f"originator_version > w.v ORDER BY originator_id, originator_version")
    with recorder.datastore.transaction(commit=False) as curs:
        curs.execute(query, [x for i, v in after for x in (i.hex, v)])
        return [StoredEvent(originator_id=UUID(r["originator_id"]),
                            originator_version=r["originator_version"], topic=r["topic"],
                            state=bytes(r["state"])) for r in curs.fetchall()]
