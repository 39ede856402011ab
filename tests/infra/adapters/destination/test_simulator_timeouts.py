"""A schedule action's execution or run timeout in the simulator: the run closes ``timed_out``
at its deadline, as the server closes it, seen by every read after that time (describe, the
scheduler's watch, a start's reuse policy), kept in SQL rows too; a run without a timeout runs
until it is closed."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.ports import StartWorkflow
from schedfence.domain.source.action import make_action
from schedfence.infra.adapters.destination.sim_sql import SqlSimState
from schedfence.infra.adapters.destination.sim_store import InMemorySimState
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

NS = "ns"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def start(dest, wid: str, request_id: str, **timeouts) -> None:
    action = make_action(workflow_type="W", task_queue="q", workflow_id="a", **timeouts)
    dest.start_workflow(StartWorkflow(NS, wid, request_id, "W", {}, "allow_duplicate", "fail",
                                      action=action))


@pytest.fixture(params=["memory", "sql"])
def sim(request, tmp_path):
    clock = Clock()
    state = InMemorySimState() if request.param == "memory" else \
        SqlSimState(f"sqlite:///{tmp_path}/sim.db")
    return SimulatedDestination(state, clock=clock), clock, state


def test_a_run_closes_timed_out_at_its_actions_timeout(sim):
    dest, clock, state = sim
    start(dest, "w1", "r1", execution_timeout=10, run_timeout=5)  # the shorter one counts
    start(dest, "w2", "r2")  # no timeout: runs until closed
    clock.now = T0 + timedelta(seconds=4.9)
    assert dest.run_statuses(NS, ["w1", "w2"]) == {"w1": "running", "w2": "running"}
    clock.now = T0 + timedelta(seconds=5)
    assert dest.describe(NS, "w1").status == "timed_out"
    assert dest.run_statuses(NS, ["w1", "w2"]) == {"w1": "timed_out", "w2": "running"}
    closed = [r for r in dest.runs(NS, "w1")]
    assert len(closed) == 1
    again = SimulatedDestination(state, clock=Clock())  # another process, its clock at T0
    assert again.describe(NS, "w1").status == "timed_out"  # the close was saved


def test_a_start_after_the_timeout_meets_a_closed_run(sim):
    dest, clock, _ = sim
    start(dest, "w1", "r1", execution_timeout=3)
    clock.now = T0 + timedelta(seconds=3)
    start(dest, "w1", "r2")  # allow_duplicate over a closed run: a new run, not a conflict
    assert [r.status for r in dest.runs(NS, "w1")] == ["timed_out", "running"]
