"""The rollback's start as a real Temporal Schedule (infra/adapters/destination/temporal_schedule.py),
on a dev server: CreateSchedule with the durable request id creates the server's own scheduler
workflow with that id as its create request id; the same request again is a dedupe; another
request id is AlreadyStarted naming the first. The server's own Schedules API then shows the
handed-over spec, action, notes and pause, the initial patch's backfills ran as the server's
action workflows named ``<prefix>-<nominal Z>``, and pause/unpause work on it."""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.source.action import make_action, make_policies, nominal_text
from schedfence.domain.rollback.handover import handover_of
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE, destination_workflow_id
from schedfence.domain.ports import AlreadyStarted, StartWorkflow
from schedfence.domain.source.program import Program
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import make_spec
from tests.contract.temporal_env import NS, wait_for

ACTION_QUEUE = "schedfence-schedule-contract-no-worker"


def handover_start(sid: str, request_id: str, cursor: datetime, paused: bool = True,
                   backfills: tuple[dict, ...] = ()) -> StartWorkflow:
    program = Program(make_spec(intervals=[(3600, 0)]),
                      make_action(workflow_type="Report", task_queue=ACTION_QUEUE,
                                  workflow_id=f"act-{sid}", input={"region": "eu"}),
                      make_policies(overlap="allow_all"))
    state = replace(ScheduleState(NS, sid, 1, False, ""), **program.fields(),
                    cursor=nominal_text(cursor), backfills=list(backfills))
    h = handover_of(state, paused, f"handed over {sid}").model_dump(mode="json")
    return StartWorkflow(NS, destination_workflow_id(sid), request_id, SCHEDULER_WORKFLOW_TYPE,
                         {"paused": paused, "notes": f"handed over {sid}", "handover": h})


@pytest.fixture
def server(temporal_env):
    return temporal_env


def test_create_by_request_id_is_the_scheduler_workflows_create_id_and_deduplicates(server):
    sid = f"sched-{uuid.uuid4().hex[:8]}"
    start = handover_start(sid, "R1", datetime.now(timezone.utc))
    first = server.destination.start_workflow(start)
    assert first.started is True and first.status == "running"
    run = server.destination.describe(NS, destination_workflow_id(sid))
    assert run.create_request_id == "R1" and run.run_id == first.run_id
    again = server.destination.start_workflow(start)  # the same request: a dedupe
    assert (again.run_id, again.started) == (first.run_id, True)
    with pytest.raises(AlreadyStarted) as other:
        server.destination.start_workflow(replace(start, request_id="R2"))
    assert (other.value.start_request_id, other.value.run_id) == ("R1", first.run_id)


def test_the_servers_schedule_shows_the_handover_and_runs_its_backfill(server):
    sid = f"sched-{uuid.uuid4().hex[:8]}"
    now = datetime.now(timezone.utc)
    cursor = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=3, seconds=1)
    hour = cursor + timedelta(seconds=1)
    backfill = {"backfill_id": "backfill-1", "start": nominal_text(hour - timedelta(hours=6)),
                "end": nominal_text(hour - timedelta(hours=4)), "overlap": "allow_all",
                "cursor": nominal_text(cursor - timedelta(hours=6))}
    server.destination.start_workflow(handover_start(sid, "R1", cursor, backfills=(backfill,)))
    handle = server.ops.client.get_schedule_handle(sid)
    desc = server.ops.run(lambda: handle.describe())
    assert desc.schedule.state.paused is True
    assert desc.schedule.state.note == f"handed over {sid}"
    assert desc.schedule.action.workflow == "Report"
    assert [i.every for i in desc.schedule.spec.intervals] == [timedelta(hours=1)]
    # the backfill in progress runs on, paused or not (a manual start, on both sides); the
    # gap after the cursor (three whole hours of the spec) does not: the source was paused
    expected = {f"act-{sid}-{nominal_text(hour - timedelta(hours=k))}" for k in (6, 5, 4)}
    gap = {f"act-{sid}-{nominal_text(hour + timedelta(hours=k))}" for k in range(4)}
    started = wait_for(lambda: {a.action.workflow_id for a in
                                server.ops.run(lambda: handle.describe()).info.recent_actions},
                       lambda ids: expected <= ids, 20.0, "the backfilled actions")
    assert expected <= started and not gap & started
    server.ops.run(lambda: handle.unpause())
    server.ops.run(lambda: handle.pause(note="paused by an operator"))
    assert server.ops.run(lambda: handle.describe()).schedule.state.paused is True


def test_the_boundary_between_the_gap_backfill_and_the_servers_own_times_is_settled(server):
    """Every second from the handed-over cursor on starts on the server exactly once: the gap
    backfill ends before the create, the server's own processing begins at its create time,
    and settle_handover starts the times between (a second settle starts nothing)."""
    sid = f"sched-{uuid.uuid4().hex[:8]}"
    start = handover_start(sid, "R1", datetime.now(timezone.utc) - timedelta(seconds=6),
                           paused=False)
    h = start.input["handover"]
    h["spec"]["intervals"] = [{"every": 1, "offset": 0}]
    cursor = datetime.fromisoformat(h["cursor"])
    chain = server.destination.start_workflow(start).first_execution_run_id
    settled = server.destination.settle_handover(start, chain).started
    assert settled, "the gap backfill ends 2 s before the create: some times fall between"
    assert server.destination.settle_handover(start, chain).started == []  # started: nothing twice
    handle = server.ops.client.get_schedule_handle(sid)
    created = server.ops.run(lambda: handle.describe()).info.created_at
    last = created.replace(microsecond=0) + timedelta(seconds=2)
    expected = [f"act-{sid}-{nominal_text(cursor + timedelta(seconds=k))}"
                for k in range(1, int((last - cursor).total_seconds()) + 1)]

    def missing() -> list[str]:
        return [w for w in expected if not _exists(server, w)]
    wait_for(missing, lambda m: m == [], 20.0, "every second's action workflow")
    server.ops.run(lambda: handle.pause())
    assert all(len(server.ops.list_runs(w)) == 1 for w in expected)


def _exists(server, workflow_id: str) -> bool:
    from schedfence.domain.ports import DestinationNotFound
    try:
        server.destination.describe(NS, workflow_id)
        return True
    except DestinationNotFound:
        return False


def test_a_limited_schedules_own_starts_move_its_token_and_a_stale_update_is_dropped(
        server, monkeypatch):
    """What the settle's updates rely on (``clear_pin``, ``limit_settle``): a create leaves
    the update time unset; each start the server takes of its own spec lowers the remaining
    count and moves the conflict token, a backfill moves neither; an update under a token
    that moved is answered OK and dropped (count and update time unchanged); one under the
    current token applies and sets the update time. Created without the pin (as before it),
    so the backfill of an hour ago starts at once."""
    from temporalio.api.schedule.v1 import BackfillRequest, SchedulePatch
    from schedfence.infra.adapters.destination import temporal_schedule
    monkeypatch.setattr(temporal_schedule, "pinned", lambda h: False)
    from temporalio.api.workflowservice.v1 import (DescribeScheduleRequest,
                                                   PatchScheduleRequest, UpdateScheduleRequest)
    sid = f"sched-{uuid.uuid4().hex[:8]}"
    start = handover_start(sid, "R1", datetime.now(timezone.utc), paused=False)
    h = start.input["handover"]
    h["spec"]["intervals"], h["remaining_actions"] = [{"every": 1, "offset": 0}], 100
    server.destination.start_workflow(start)
    service = server.ops.client.workflow_service

    def describe():
        return server.ops.run(lambda: service.describe_schedule(
            DescribeScheduleRequest(namespace=NS, schedule_id=sid)))
    first = describe()
    assert not first.info.HasField("update_time")
    count, token0 = first.schedule.state.remaining_actions, int.from_bytes(first.conflict_token,
                                                                           "big")
    moved = wait_for(describe, lambda d: d.conflict_token != first.conflict_token, 10.0,
                     "an own start")
    own = count - moved.schedule.state.remaining_actions
    assert own >= 1 and int.from_bytes(moved.conflict_token, "big") - token0 == own
    hour_ago = first.info.create_time
    hour_ago.FromSeconds(hour_ago.seconds - 3600)
    server.ops.run(lambda: service.patch_schedule(PatchScheduleRequest(
        namespace=NS, schedule_id=sid, request_id=uuid.uuid4().hex,
        patch=SchedulePatch(backfill_request=[BackfillRequest(
            start_time=hour_ago, end_time=hour_ago)]))))  # a time no own start collides with
    wait_for(describe, lambda d: d.info.action_count > count - d.schedule.state.remaining_actions,
             10.0, "the backfilled start")
    stale = first.schedule
    stale.state.remaining_actions = 7
    server.ops.run(lambda: service.update_schedule(UpdateScheduleRequest(
        namespace=NS, schedule_id=sid, schedule=stale, conflict_token=first.conflict_token,
        request_id=uuid.uuid4().hex)))  # answered OK
    after = describe()
    assert after.schedule.state.remaining_actions not in (7, 0)
    assert not after.info.HasField("update_time")
    assert int.from_bytes(after.conflict_token, "big") - token0 == \
        count - after.schedule.state.remaining_actions  # the backfill moved neither
    fresh = after.schedule
    fresh.state.remaining_actions = 0
    server.ops.run(lambda: service.update_schedule(UpdateScheduleRequest(
        namespace=NS, schedule_id=sid, schedule=fresh, conflict_token=after.conflict_token,
        request_id=uuid.uuid4().hex)))
    wait_for(describe, lambda d: d.info.HasField("update_time"), 10.0, "the update applied")
    assert describe().schedule.state.remaining_actions == 0
