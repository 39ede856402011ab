"""Issue 27 item 9: paused time is never caught up, however rarely the scheduler passes. A
pause ticks first (the times that came due before it are the schedule's), an unpause moves
the cursor to its instant (``Schedule.Paused`` v2), so a schedule paused and unpaused between
two passes starts exactly the times of its unpaused stretches."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.ids import schedule_aggregate_id
from schedfence.domain.source.runs import ActionStartIssued
from schedfence.domain.source.schedule import Schedule, evolve_schedule
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import InMemorySimState, SimulatedDestination
from schedfence.infra.application.service import open_service
from tests.helpers import MEMORY

NS, SID = "ns", "p1"
T0 = datetime(2026, 3, 1, 9, 0, 0, tzinfo=timezone.utc)
SPEC = make_spec(intervals=[(60, 0)])
MIN = timedelta(minutes=1)


def issued(svc) -> list[datetime]:
    events = [svc.app.mapper.to_domain_event(e) for e in
              svc.app.recorder.select_events(schedule_aggregate_id(NS, SID, 1))]
    return [parse_nominal(e.nominal) for e in events if isinstance(e, ActionStartIssued)]


def test_a_pause_and_an_unpause_between_two_passes_catch_nothing_up() -> None:
    clock = {"now": T0}
    sim = SimulatedDestination(InMemorySimState(), clock=lambda: clock["now"])
    with open_service(MEMORY, sim, worker_id="w") as svc:
        svc.create_schedule(NS, SID, spec=SPEC, now=T0,
                            action=make_action(workflow_type="W", task_queue="q",
                                               workflow_id="a"),
                            policies=make_policies(overlap="allow_all"))
        paused_at, resumed_at, last = T0 + 3 * MIN + timedelta(seconds=5), T0 + 10 * MIN, \
            T0 + 13 * MIN
        svc.update_schedule(NS, SID, paused=True, now=paused_at)  # no pass since T0
        svc.update_schedule(NS, SID, paused=False, now=resumed_at)  # none inside the pause
        svc.run_scheduler(now=last)
        started = issued(svc)
    owed = Owed(SPEC, T0, last, paused=((paused_at, resumed_at),))
    verdict = check_exactly_once(owed, started, [])
    assert verdict.ok, verdict.describe()
    assert started == [T0 + n * MIN for n in (1, 2, 3, 11, 12, 13)]


def test_an_older_pause_record_reads_as_before() -> None:
    """A v1 ``Paused`` (no cursor) upcasts to cursor None: the cursor stays where it was."""
    assert Schedule.Paused.class_version == 3  # v3: the actor
    fields = {"paused": False}
    Schedule.Paused.upcast_v1_v2(fields)
    Schedule.Paused.upcast_v2_v3(fields)
    assert fields == {"paused": False, "cursor": None, "actor": ""}
    created = Schedule.create(NS, SID, 1, True, "", program=None)
    state = created.state
    event = Schedule.Paused(originator_id=created.id, originator_version=2, timestamp=T0,
                            paused=False, cursor=None)
    assert evolve_schedule(state, event).cursor == state.cursor
