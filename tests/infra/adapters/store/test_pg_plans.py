"""Plans that hold whatever PostgreSQL's statistics say (issue 30's 100,000-schedule move).

A fleet written in minutes is not yet analysed: the planner then took each schedule id for
thousands of events, read a batch of 200 with a parallel hash join over the whole events
table (286 ms on 1.3 million events instead of 1.8 ms), and JIT-compiled it on top. Here the
statistics are made stale on purpose (analysed while 50 ids held every event, then 20,000
ids more), and the bulk read must still be one index range per id; every connection the
store opens runs without JIT.
"""
from __future__ import annotations

import uuid

import psycopg

from schedfence.infra.adapters.store.bulk import pg_statement
from schedfence.infra.adapters.store.pg import parse_pg_url
from schedfence.infra.application.service import open_service

# The statement before the fix: a join the planner may flatten into a whole-table hash join.
FLAT = ("SELECT e.originator_id, e.originator_version, e.topic, e.state FROM {t} e "
        "JOIN unnest(%s::uuid[], %s::bigint[]) AS w(id, v) ON e.originator_id = w.id "
        "AND e.originator_version > w.v ORDER BY e.originator_id, e.originator_version")


def _stale_table(conn: psycopg.Connection, schema: str) -> str:
    table = f'"{schema}".stale_events'
    conn.execute(f"CREATE TABLE {table} (originator_id uuid, originator_version bigint, "
                 "topic text, state bytea, PRIMARY KEY (originator_id, originator_version)) "
                 "WITH (autovacuum_enabled = false)")
    few = [uuid.uuid4() for _ in range(50)]
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, 't', '\\x00')",
                        [(i, v) for i in few for v in range(1, 201)])
        conn.execute(f"ANALYZE {table}")  # 50 ids, 200 events each: what the planner keeps
        cur.executemany(f"INSERT INTO {table} VALUES (%s, 1, 't', '\\x00')",
                        [(uuid.uuid4(),) for _ in range(20_000)])
    return table


def _plan(conn: psycopg.Connection, statement: str, ids: list[uuid.UUID]) -> str:
    rows = conn.execute(f"EXPLAIN {statement}", [ids, [0] * len(ids)]).fetchall()
    return "\n".join(r[0] for r in rows)


def test_the_bulk_read_is_an_index_range_per_id_on_stale_statistics(pg_store: str) -> None:
    target = parse_pg_url(pg_store)
    target.ensure_schema()
    with psycopg.connect(autocommit=True, **target.keywords()) as conn:
        table = _stale_table(conn, target.schema)
        ids = [r[0] for r in conn.execute(
            f"SELECT originator_id FROM {table} WHERE originator_version = 1 "
            "ORDER BY originator_id LIMIT 200")]
        # The control: on these statistics the flat join reads the whole table.
        assert "Seq Scan on stale_events" in _plan(conn, FLAT.format(t=table), ids)
        ours = pg_statement(target.schema, "stale_events").as_string(conn)
        plan = _plan(conn, ours, ids)
    assert "Seq Scan on stale_events" not in plan, plan
    assert "Nested Loop" in plan and "stale_events_pkey" in plan, plan


def test_every_store_connection_runs_without_jit(pg_store: str) -> None:
    with open_service(pg_store, "sim") as svc:
        svc.create_schedule("ns", "a")
        with svc.app.recorder.datastore.get_connection() as conn:  # eventsourcing's pool
            assert conn.execute("SHOW jit").fetchone()["jit"] == "off"
        with svc.views.engine.connect() as conn:  # the read model's SQLAlchemy engine
            assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
    with parse_pg_url(pg_store).connect() as conn:  # a direct session (setup, status)
        assert conn.execute("SHOW jit").fetchone()[0] == "off"
