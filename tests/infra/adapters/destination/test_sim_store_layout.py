"""The simulator persisted in a store keeps rows per workflow id (infra/adapters/destination/sim_store.py).

A call touches only its own workflow's row, the counters row and, for a start, one new start-log
row, so its statements do not grow with the number of workflows; an older release's one-row
state is migrated on first open. Both run on SQLite and PostgreSQL (``file_store_url``).
"""
from __future__ import annotations

import json

import pytest
from sqlalchemy import event, text

from schedfence.domain.ports import AlreadyStarted, StartWorkflow
from schedfence.infra.adapters.destination.sim_rows import TABLE_NAME, TOMBSTONE, preload_select
from schedfence.infra.adapters.destination.sim_sql import SqlSimState
from schedfence.infra.adapters.destination.simulator import InMemorySimState, SimulatedDestination

NS = "ns"


def req(wid: str, rid: str = "R") -> StartWorkflow:
    return StartWorkflow(NS, wid, rid, "T")


def _statements(state: SqlSimState, fn) -> list[str]:
    seen: list[str] = []

    def record(conn, cursor, statement, *args) -> None:
        seen.append(statement)

    event.listen(state._engine, "before_cursor_execute", record)
    try:
        fn()
    finally:
        event.remove(state._engine, "before_cursor_execute", record)
    return seen


def test_a_call_touches_the_same_rows_whatever_the_number_of_workflows(file_store_url):
    state = SqlSimState(file_store_url)
    try:
        dest = SimulatedDestination(state)
        dest.start_workflow(req("w0"))
        first = (_statements(state, lambda: dest.start_workflow(req("new-1"))),
                 _statements(state, lambda: dest.describe(NS, "new-1")))
        for i in range(1, 200):
            dest.start_workflow(req(f"w{i}"))
        later = (_statements(state, lambda: dest.start_workflow(req("new-2"))),
                 _statements(state, lambda: dest.describe(NS, "new-2")))
        assert first == later  # the same statements (parameters differ), however many rows
        assert len(later[0]) <= 6 and len(later[1]) <= 3
        assert len(dest.workflow_ids()) == 202 and dest.created_count(NS, "w199") == 1
    finally:
        state.dispose()


def _legacy_store(url: str, state: dict) -> None:
    """Write ``state`` the way an older release kept it: one JSON row."""
    sql = SqlSimState(url)
    try:
        if sql._pg is not None:
            sql._pg.ensure_schema()
        with sql._engine.begin() as conn:
            conn.execute(text(f"CREATE TABLE {TABLE_NAME} (name VARCHAR(200) PRIMARY KEY, "
                              "state TEXT NOT NULL)"))
            conn.execute(text(f"INSERT INTO {TABLE_NAME} VALUES ('default', :s)"),
                         {"s": json.dumps(state)})
    finally:
        sql.dispose()


def test_an_older_one_row_state_is_migrated_on_first_open(file_store_url):
    raw = InMemorySimState()
    old = SimulatedDestination(raw)
    a = old.start_workflow(req("a", "R1"))
    old.start_workflow(StartWorkflow("ns2", "b", "", "T"))  # a generated request id
    b2 = old.continue_as_new("ns2", "b")
    old.attach_request_id(NS, "a", "extra")
    with pytest.raises(AlreadyStarted):
        old.start_workflow(req("a", "R2"))  # logged as already_started
    with raw.transaction() as whole:
        _legacy_store(file_store_url, whole)

    state = SqlSimState(file_store_url)
    try:
        new = SimulatedDestination(state)
        assert new.workflow_ids() == old.workflow_ids() == [(NS, "a"), ("ns2", "b")]
        assert new.runs(NS, "a") == old.runs(NS, "a")
        assert new.runs("ns2", "b") == old.runs("ns2", "b")
        assert new.start_log() == old.start_log()
        assert new.start_log(NS, "a") == old.start_log(NS, "a")
        assert new.chains("ns2", "b") == old.chains("ns2", "b")
        assert new.start_workflow(req("a", "R1")) == a  # dedupe over migrated runs
        # The numbers carried over: no id the old state handed out is handed out again. The
        # counters row hands out the very next one; PostgreSQL's sequences may skip some.
        made = {r.run_id for ns, wid in old.workflow_ids() for r in old.runs(ns, wid)}
        fresh = new.start_workflow(req("c"))
        assert fresh.run_id not in made
        if state._engine.dialect.name != "postgresql":
            assert fresh == old.start_workflow(req("c"))
        assert new.describe("ns2", "b").run_id == b2
        with state._engine.begin() as conn:
            kept = conn.execute(text(f"SELECT state FROM {TABLE_NAME}")).scalar()
        assert kept == TOMBSTONE and isinstance(json.loads(kept), str)  # an old release fails
        log = new.start_log()
        assert [o for _, o in log[-2:]] == ["deduplicated", "created"]
    finally:
        state.dispose()
    again = SqlSimState(file_store_url)  # a second open migrates nothing twice
    try:
        assert SimulatedDestination(again).start_log() == log
    finally:
        again.dispose()


def test_a_fresh_state_leaves_a_tombstone_for_older_releases(file_store_url):
    state = SqlSimState(file_store_url)
    try:
        SimulatedDestination(state).start_workflow(req("a"))
        with state._engine.begin() as conn:
            rows = conn.execute(text(f"SELECT name, state FROM {TABLE_NAME}")).all()
        assert [tuple(r) for r in rows] == [("default", TOMBSTONE)]
    finally:
        state.dispose()


def test_a_preload_is_a_key_lookup_per_id_before_any_analyze(pg_store):
    """Issue 30's 100,000-schedule move: on a workflows table PostgreSQL had not analysed yet,
    an IN list read every row of the namespace and filtered the ids, inside the call that
    holds the counters row. The preload must look each id up by the whole primary key."""
    state = SqlSimState(pg_store)
    try:
        state._ensure_ready()
        with state._engine.begin() as conn:
            conn.execute(text("ALTER TABLE schedfence_sim_workflows "
                              "SET (autovacuum_enabled = false)"))
            conn.execute(text("INSERT INTO schedfence_sim_workflows SELECT 'default', 'ns', "
                              "'w' || g, g, '[]' FROM generate_series(1, 30000) g"))
        ids = [f"w{i}" for i in range(1, 30000, 150)]
        with state._engine.connect() as conn:
            def plan(statement, params):
                compiled = statement.compile(conn, compile_kwargs={"literal_binds": True}) \
                    if not params else statement
                rows = conn.execute(text(f"EXPLAIN {compiled}"), params)
                return "\n".join(r[0] for r in rows)
            control = plan(*preload_select("sqlite", "default", "ns", ids))  # the IN list
            ours = plan(*preload_select("postgresql", "default", "ns", ids))
            assert len(conn.execute(*preload_select("postgresql", "default", "ns",
                                                    ids + ["absent"])).all()) == len(ids)
        assert "Filter" in control  # this table makes the IN list scan the namespace
        assert "Nested Loop" in ours and "Filter" not in ours, ours
        assert "(workflow_id) = (w.workflow_id)" in ours.replace("::text", ""), ours
    finally:
        state.dispose()
