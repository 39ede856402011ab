"""The simulator kept in PostgreSQL locks only the workflows a call is about (sim_rows.py's
``PgSimTx``): calls about other workflows run beside it, calls about the same one wait for
it and then read what it committed, and racing batches neither deadlock nor double a run."""
from __future__ import annotations

import random
import threading

import pytest

from schedfence.domain.ports import AlreadyStarted, StartAccepted, StartWorkflow
from schedfence.infra.adapters.destination.simulator import SimulatedDestination, SqlSimState

NS = "ns"


def start(wid: str, rid: str) -> StartWorkflow:
    return StartWorkflow(NS, wid, rid, "T")


def test_a_call_waits_only_for_calls_about_its_own_workflows(pg_store):
    # On the old counters row "b" would wait too: the lock timeout turns that into a failure.
    other_url = pg_store + ("&" if "?" in pg_store else "?") + "lock_timeout=3s"
    holder, other = SqlSimState(pg_store), SqlSimState(other_url)
    dest = SimulatedDestination(other)
    answers: list[object] = []
    try:
        with holder.session() as tx:  # a call about "a", not committed yet
            tx.preload([(NS, "a")])
            tx.add_run(NS, "a", {"run_id": "held", "first_execution_run_id": "held",
                                 "workflow_type": "T", "status": "running",
                                 "create_request_id": "R1", "request_ids": ["R1"],
                                 "input": {}, "action": None, "deleted": False,
                                 "by_start": True})
            dest.start_workflow(start("b", "R1"))  # another workflow: does not wait

            def same() -> None:
                try:
                    answers.append(dest.start_workflow(start("a", "R2")))
                except Exception as exc:  # noqa: BLE001 (the answer is what is checked)
                    answers.append(exc)

            waiter = threading.Thread(target=same)
            waiter.start()
            waiter.join(0.5)
            assert waiter.is_alive() and answers == []  # the same workflow waits
        waiter.join(10)
        # It read what the first call committed: a run is there, so its own start is refused.
        assert len(answers) == 1 and isinstance(answers[0], AlreadyStarted), answers
        assert answers[0].run_id == "held"
        assert dest.created_count(NS, "a") == 1 and dest.created_count(NS, "b") == 1
    finally:
        holder.dispose()
        other.dispose()


def test_racing_batches_make_one_run_per_workflow_and_never_deadlock(pg_store):
    ids = [f"w{i}" for i in range(60)]
    states = [SqlSimState(pg_store) for _ in range(2)]  # two engines: two processes' pools
    errors: list[BaseException] = []

    def race(k: int) -> None:
        dest = SimulatedDestination(states[k % 2])
        order = random.Random(k).sample(ids, len(ids))
        try:
            for at in range(0, len(order), 20):
                answers = dest.start_workflows([start(w, f"R{k}") for w in order[at:at + 20]])
                errors.extend(a for a in answers
                              if not isinstance(a, (StartAccepted, AlreadyStarted)))
        except Exception as exc:  # noqa: BLE001 (a deadlock would be one: it is the finding)
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(k,)) for k in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        dest = SimulatedDestination(states[0])
        assert sorted(w for _, w in dest.workflow_ids()) == sorted(ids)
        for w in ids:
            assert dest.created_count(NS, w) == 1
            outcomes = [o for _, o in dest.start_log(NS, w)]
            # Each workflow's log is in the order its calls committed: the creating start first.
            assert outcomes[0] == "created" and outcomes.count("created") == 1
            assert len(outcomes) == 6
        run_ids = [dest.describe(NS, w).run_id for w in ids]
        assert len(set(run_ids)) == len(ids)
    finally:
        for s in states:
            s.dispose()


@pytest.mark.parametrize("legacy", [3, 40])
def test_an_older_releases_counters_row_raises_the_sequences_and_goes(pg_store, legacy):
    """A state an older release numbered from its counters row: the first open raises the
    sequences above the row and deletes it, so no number is handed out twice (also after a
    second open), and the counters-row path (an older release's open) now refuses the state
    instead of numbering from the stale row."""
    from sqlalchemy import text
    from schedfence.infra.adapters.destination.sim_rows import (META_TABLE, SEQUENCES,
                                                                TABLE_NAME, TOMBSTONE, metadata)
    first = SqlSimState(pg_store)
    first._pg.ensure_schema()
    with first._engine.begin() as conn:  # as an older release left it
        metadata.create_all(conn)
        conn.execute(text(f"INSERT INTO {META_TABLE} VALUES ('default', :n, :n, :n)"),
                     {"n": legacy})
        conn.execute(text(f"INSERT INTO {TABLE_NAME} VALUES ('default', :t)"), {"t": TOMBSTONE})
    first.dispose()
    for n in range(2):  # the first open raises them, the second finds them ahead
        state = SqlSimState(pg_store)
        try:
            SimulatedDestination(state).start_workflow(start(f"x{n}", "R"))
            with state._engine.begin() as conn:
                taken = [conn.execute(text(f"SELECT last_value FROM {SEQUENCES[k]}")).scalar()
                         for k in SEQUENCES]
                seqs = list(conn.execute(text("SELECT seq FROM schedfence_sim_start_log"))
                            .scalars())
                assert conn.execute(text(f"SELECT count(*) FROM {META_TABLE}")).scalar() == 0
            assert all(t > legacy for t in taken) and min(seqs) > legacy and len(seqs) == n + 1
        finally:
            state.dispose()
    older = SqlSimState(pg_store)
    try:
        with pytest.raises(RuntimeError, match="missing"), older._engine.begin() as conn:
            older._init_counters(conn)  # what an older release runs on open (rolled back)
    finally:
        older.dispose()


def test_a_workflows_log_follows_the_order_its_calls_committed_in(pg_store):
    """A start without a request id numbers one (a block of ids) before it locks its
    workflow; its log row must still come after the row of the call it waited for. Log rows
    are numbered when written, every lock of the call held."""
    import time
    holder, other = SqlSimState(pg_store), SqlSimState(pg_store)
    dest, answers = SimulatedDestination(other), []
    try:
        with holder.session() as tx:
            tx.preload([(NS, "w")])  # holds "w"
            def second() -> None:
                try:
                    answers.append(dest.start_workflow(StartWorkflow(NS, "w", "", "T")))
                except AlreadyStarted as exc:  # "w" runs: the first call's run
                    answers.append(exc)

            waiter = threading.Thread(target=second)
            waiter.start()
            time.sleep(0.5)  # it has numbered its request id and waits for "w"
            assert answers == []
            SimulatedDestination(holder)._start_logged(tx, start("w", "R1"), None, False)
        waiter.join(10)
        assert len(answers) == 1 and isinstance(answers[0], AlreadyStarted)
        assert [o for _, o in dest.start_log(NS, "w")] == ["created", "already_started"]
    finally:
        holder.dispose()
        other.dispose()
