"""Triggers, backfills, updates and stops through the service and the scheduler loop, with
the simulator as the runner: manual starts are named and deduplicated like the spec's, the
overlap policy's stops are carried out, and while fenced every change is refused with
``migration_pending`` and writes nothing."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.source.action import make_action, make_policies, nominal_text, parse_nominal
from schedfence.domain.errors import MigrationPending
from schedfence.domain.source.spec import make_spec
from tests.infra.engines.sched_world import world  # noqa: F401 (the fixture)

NS, SID = "ns", "s"


def away_from_now(every: int) -> int:
    """An offset that puts the spec's times half an interval from now, so none falls inside
    a test's few seconds whatever the wall clock (at 12:19:57 one did)."""
    now = datetime.now(timezone.utc)
    return int((now.timestamp() + every // 2) % every)


def create(svc, overlap: str = "allow_all", every: int = 600, offset: int = 0):
    svc.create_schedule(NS, SID, spec=make_spec(intervals=[(every, offset)]),
                        action=make_action(workflow_type="W", task_queue="q",
                                           workflow_id="act"),
                        policies=make_policies(overlap=overlap))
    return parse_nominal(svc.load.source(NS, SID).state.cursor)


def ids(dest) -> list[str]:
    return sorted(w for ns, w in dest.workflow_ids() if ns == NS)


def test_a_trigger_and_a_backfill_start_their_times_once(world):
    svc, dest = world
    offset = away_from_now(600)
    t0 = create(svc, offset=offset)
    svc.trigger_schedule(NS, SID, now=t0 + timedelta(seconds=1))
    start = t0.replace(minute=0, second=0) - timedelta(hours=2) + timedelta(seconds=offset)
    svc.backfill_schedule(NS, SID, start, start + timedelta(hours=1), now=t0)
    svc.run_scheduler(now=t0 + timedelta(seconds=1))
    svc.run_scheduler(now=t0 + timedelta(seconds=5))  # nothing new: each started once
    backfilled = [f"act-{nominal_text(start + timedelta(minutes=10 * k))}" for k in range(7)]
    assert ids(dest) == sorted([*backfilled, f"act-{nominal_text(t0 + timedelta(seconds=1))}"])
    assert all(dest.created_count(NS, w) == 1 for w in ids(dest))
    origins = {a["origin"] for a in svc.load.source(NS, SID).state.recent_actions}
    assert origins == {"trigger", "backfill-1"}
    assert svc.verify() == []


def test_terminate_other_terminates_the_running_action_then_starts_the_next(world):
    svc, dest = world
    t0 = create(svc, overlap="terminate_other", every=2)
    svc.run_scheduler(now=t0 + timedelta(seconds=2))
    [first] = ids(dest)
    report = svc.run_scheduler(now=t0 + timedelta(seconds=4))  # asks for the terminate
    report = svc.run_scheduler(now=t0 + timedelta(seconds=4))  # carries it out
    assert report.stops == 1 and dest.describe(NS, first).status == "terminated"
    svc.run_scheduler(now=t0 + timedelta(seconds=4))  # sees it closed: the next one starts
    svc.run_scheduler(now=t0 + timedelta(seconds=4))
    assert len(ids(dest)) == 2 and svc.load.source(NS, SID).state.stopping == []
    assert svc.verify() == []


def test_an_update_changes_what_runs_from_the_next_pass(world):
    svc, dest = world
    t0 = create(svc, every=600)
    svc.update_schedule(NS, SID, spec=make_spec(intervals=[(2, 0)]), now=t0)
    svc.run_scheduler(now=t0 + timedelta(seconds=4))
    assert len(ids(dest)) >= 1  # an every-600-s schedule would not have run yet
    assert svc.verify() == []


def test_while_fenced_every_change_is_refused_and_nothing_is_written(world):
    svc, dest = world
    t0 = create(svc)
    assert svc.rollback(NS, SID, "R1").outcome == "accepted"
    before = svc.event_count()
    for change in (lambda: svc.trigger_schedule(NS, SID, now=t0),
                   lambda: svc.backfill_schedule(NS, SID, t0 - timedelta(hours=1), t0, now=t0),
                   lambda: svc.update_schedule(NS, SID, spec=make_spec(intervals=[(5, 0)])),
                   lambda: svc.update_schedule(NS, SID, paused=True),
                   lambda: svc.update_schedule(NS, SID, delete=True)):
        with pytest.raises(MigrationPending):
            change()
    assert svc.event_count() == before


def test_a_delete_waits_behind_the_phase_gate_so_no_start_lands_after_it(tmp_path):
    """A start whose answer was lost is still in flight: deleting the schedule then would leave
    its answer (or its retry) to land on a closed source. The delete is refused
    (phase_blocked) and writes nothing; once answered, it goes through."""
    from datetime import timedelta

    from schedfence.domain.source.action import make_action, make_policies, parse_nominal
    from schedfence.domain.errors import PhaseBlocked
    from schedfence.domain.source.spec import make_spec
    from schedfence.infra.adapters.destination.simulator import SimulatedDestination
    from schedfence.infra.application.service import open_service
    dest = SimulatedDestination()
    with open_service(f"sqlite:///{tmp_path / 'd.db'}", dest) as svc:
        svc.create_schedule("ns", "s", spec=make_spec(intervals=[(60, 0)]),
                            action=make_action(workflow_type="W", task_queue="q",
                                               workflow_id="a"),
                            policies=make_policies(overlap="allow_all"))
        t0 = parse_nominal(svc.load.source("ns", "s").state.cursor)
        dest.inject("start", "lose_response")
        svc.run_scheduler(now=t0 + timedelta(minutes=2))
        before = svc.event_count()
        with pytest.raises(PhaseBlocked):
            svc.update_schedule("ns", "s", delete=True)
        assert svc.event_count() == before
        svc.run_scheduler(now=t0 + timedelta(minutes=2, seconds=5))  # answered by a dedupe
        assert svc.update_schedule("ns", "s", delete=True).closed
        svc.run_scheduler(now=t0 + timedelta(minutes=5))
        assert svc.verify() == []
