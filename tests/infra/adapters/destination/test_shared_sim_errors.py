"""A database error in the shared simulator's start: before COMMIT the transaction is rolled
back, so the start provably created nothing (``DestinationNotReached``: the worker re-arms its
claim); in the COMMIT itself the outcome is unknown (``DestinationUnavailable``: the worker
reconciles). Found by tests/e2e/test_db_restart.py, where a server restart killed starts
mid-transaction and each one parked ``head_missing`` although nothing had been written."""
from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from schedfence.domain.rollback import decide as d
from schedfence.domain.ports import DestinationNotReached, DestinationUnavailable
from schedfence.infra.adapters.destination.shared_sim import SharedSimDestination, open_shared_sim
from tests.infra.adapters.destination.sim_requests import NS, WID, req


@pytest.fixture
def sim(tmp_path: Path):
    shared = open_shared_sim(f"sim+sqlite:///{tmp_path}/sim.db")
    shared.chains(NS, WID)  # tables made before any fault is armed
    yield shared
    shared.close()


def _dropped() -> OperationalError:
    return OperationalError("statement", {}, Exception("server closed the connection unexpectedly"))


def _fail_on(sim: SharedSimDestination, hook: str, when=lambda sql: True):
    def boom(*args) -> None:
        if hook == "commit" or when(args[2]):
            raise _dropped()
    event.listen(sim.state._engine, hook, boom)
    return lambda: event.remove(sim.state._engine, hook, boom)


def test_an_error_before_commit_is_a_start_that_provably_never_happened(sim) -> None:
    disarm = _fail_on(sim, "before_cursor_execute", lambda sql: sql.startswith("INSERT"))
    with pytest.raises(DestinationNotReached, match="nothing committed.*before COMMIT") as err:
        sim.start_workflow(req("r1"))
    assert d.outcome_of_start(err.value).kind == "not_sent"  # the claim is re-armed
    disarm()
    assert sim.chains(NS, WID) == [] and sim.start_log() == []  # and nothing was written


def test_an_error_in_the_commit_leaves_the_outcome_unknown(sim) -> None:
    _fail_on(sim, "commit")
    with pytest.raises(DestinationUnavailable) as err:
        sim.start_workflow(req("r1"))
    assert not isinstance(err.value, DestinationNotReached)
    assert d.outcome_of_start(err.value).kind == "unavailable"  # reconcile: never a re-arm


def test_reads_keep_failing_as_unavailable(sim) -> None:
    _fail_on(sim, "before_cursor_execute", lambda sql: sql.startswith("SELECT"))
    with pytest.raises(DestinationUnavailable) as err:
        sim.describe(NS, WID)
    assert not isinstance(err.value, DestinationNotReached)
    with pytest.raises(DestinationUnavailable, match="describe on sim\\+"):
        sim.run_statuses(NS, [WID])  # the scheduler's watch: the same mapping



def test_a_batch_of_starts_fails_as_a_single_start_does(sim) -> None:
    disarm = _fail_on(sim, "before_cursor_execute", lambda sql: sql.startswith("INSERT"))
    with pytest.raises(DestinationNotReached, match="starts on .*before COMMIT"):
        sim.start_workflows([req("r1"), req("r2", wid="w2")])
    disarm()
    assert sim.chains(NS, WID) == [] and sim.start_log() == []
    _fail_on(sim, "commit")
    with pytest.raises(DestinationUnavailable) as err:
        sim.start_workflows([req("r1")])
    assert not isinstance(err.value, DestinationNotReached)


def test_a_batch_failing_after_a_chunk_committed_answers_each_start_for_its_own_chunk(
        sim, monkeypatch) -> None:
    """A batch call's starts go ``START_CHUNK`` to a transaction (a catch-up of thousands
    ran a PostgreSQL server's lock table out in one): the first chunk's starts are made and
    answered; a later chunk that fails before COMMIT answers its starts and every later one
    ``DestinationNotReached`` (nothing of them written), not the whole call."""
    from schedfence.infra.adapters.destination import simulator
    monkeypatch.setattr(simulator, "START_CHUNK", 2)
    inserts = []

    def second_chunk(sql: str) -> bool:  # the first chunk writes its workflows and its log
        inserts.append(sql)
        return sql.startswith("INSERT") and len([s for s in inserts if "INSERT" in s]) > 2
    _fail_on(sim, "before_cursor_execute", second_chunk)
    answers = sim.start_workflows([req(f"r{k}", wid=f"w{k}") for k in range(5)])
    assert [type(a).__name__ for a in answers] == ["StartAccepted"] * 2 + \
        ["DestinationNotReached"] * 3
    assert [r.workflow_id for r, _ in sim.start_log()] == ["w0", "w1"]
