"""The source scheduler's loop on a store with the simulator as the action runner: actions
start at their nominal times with the server's naming, at most once under every fault at a
start's boundaries, nothing while fenced, and a rollback waits behind the phase gate."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.errors import PhaseBlocked
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from tests.infra.engines.sched_world import world  # noqa: F401 (the fixture)

NS, SID = "ns", "s"


def create(svc, overlap: str = "allow_all", every: int = 2) -> datetime:
    svc.create_schedule(NS, SID, spec=make_spec(intervals=[(every, 0)]),
                        action=make_action(workflow_type="Report", task_queue="q",
                                           workflow_id="act"),
                        policies=make_policies(overlap=overlap))
    cursor = svc.load.source(NS, SID).state.cursor
    return datetime.fromisoformat(cursor.replace("Z", "+00:00"))


def action_ids(dest: SimulatedDestination) -> list[str]:
    return sorted(w for ns, w in dest.workflow_ids() if ns == NS and w.startswith("act-"))


def test_due_actions_start_once_each_with_the_servers_naming(world):
    svc, dest = world
    t0 = create(svc)
    for k in range(1, 6):
        svc.run_scheduler(now=t0 + timedelta(seconds=2 * k))
    ids = action_ids(dest)
    assert len(ids) == 5 and all(w.endswith("Z") for w in ids)
    assert all(dest.created_count(NS, w) == 1 for w in ids)
    assert svc.run_scheduler(now=t0 + timedelta(seconds=10)).started == 0  # nothing new
    assert svc.verify() == []


@pytest.mark.parametrize("fault", ["unavailable", "lose_response"])
def test_a_start_whose_answer_is_lost_is_asked_again_and_deduplicated(world, fault):
    svc, dest = world
    t0 = create(svc)
    dest.inject("start", fault)
    first = svc.run_scheduler(now=t0 + timedelta(seconds=2))
    assert first.retrying == 1 and svc.load.source(NS, SID).state.issued  # still in flight
    with pytest.raises(PhaseBlocked):  # the phase gate: no fence while a start is in flight
        svc.rollback(NS, SID, "R1")
    assert svc.run_scheduler(now=t0 + timedelta(seconds=2)).started == 0  # backing off
    svc.run_scheduler(now=t0 + timedelta(seconds=3))  # after the backoff: asked again
    wid = action_ids(dest)[0]
    assert dest.created_count(NS, wid) == 1  # the retry was a dedupe, not a second run
    state = svc.load.source(NS, SID).state
    assert wid in state.running and wid not in [i["workflow_id"] for i in state.issued]
    assert svc.verify() == []


def test_nothing_happens_on_a_fenced_schedule_and_the_rollback_proceeds(world):
    svc, dest = world
    t0 = create(svc)
    svc.run_scheduler(now=t0 + timedelta(seconds=2))
    assert svc.rollback(NS, SID, "R1").outcome == "accepted"
    report = svc.run_scheduler(now=t0 + timedelta(seconds=60))
    assert report.ticks == report.started == 0
    assert len(action_ids(dest)) == 1 and svc.verify() == []


def test_closed_actions_are_recorded_and_buffered_starts_follow(world):
    svc, dest = world
    t0 = create(svc, overlap="buffer_one")
    svc.run_scheduler(now=t0 + timedelta(seconds=2))
    svc.run_scheduler(now=t0 + timedelta(seconds=6))  # one waits, the rest are skipped
    [first] = action_ids(dest)
    assert len(svc.load.source(NS, SID).state.buffered) == 1
    dest.complete(NS, first)
    report = svc.run_scheduler(now=t0 + timedelta(seconds=6))
    assert report.closed == 1
    svc.run_scheduler(now=t0 + timedelta(seconds=6))
    assert len(action_ids(dest)) == 2 and svc.verify() == []
