"""A Temporal Schedule deleted by its user between the receipt and the settle, on a real
Temporal dev server at 1 s intervals: the worker dies just before the settle, the user
deletes the schedule, and the next drain starts each boundary time (between the gap's end and
the server's create instant) once, as a plain workflow at ``<prefix>-<time>``, and nothing at
or after the delete; the actions on the server and the source's, together, are every time
one never-migrated scheduler deleted then would have started, none twice."""
from __future__ import annotations

import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import DescribeScheduleRequest
from temporalio.client import (Schedule, ScheduleActionStartWorkflow, ScheduleAlreadyRunningError,
                               ScheduleIntervalSpec, ScheduleSpec, ScheduleState)

from schedfence.domain.rollback import decide as d
from schedfence.domain.source.action import make_action, make_policies, nominal_text, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.rollback.handover import Handover, boundary_gap, pin_owed
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination import temporal_gone
from schedfence.infra.adapters.destination.schedule_proto import gap_end, pin_of
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env, wait_for  # noqa: F401
from tests.e2e.test_temporal_handover_e2e import listed, run_source
from tests.helpers import Crash

SPEC = make_spec(intervals=[(1, 0)])


def crash_before_settle(point: str) -> None:
    if point == "settle.before_call":
        raise Crash(point)


@pytest.mark.parametrize("limit,recreate", [(None, False), (50, False), (None, True)])
def test_a_schedule_deleted_before_the_settle_has_its_owed_times_started_once(
        temporal_env: TemporalEnv, tmp_path: Path, limit: int | None, recreate: bool) -> None:
    """Unlimited: deleted 2 s after the create, its boundary is owed. Limited (pinned): deleted
    at once, before its pin ``S``, so of the owed times before ``S`` only those before the
    delete are started (the server's own processing, pinned at ``S``, started none).
    Re-created: the user deletes it and creates their own schedule at the id; the settle
    sees another chain there, settles the deleted one and never writes to theirs (before the
    fix it read the new schedule's create time and patched backfills into it)."""
    tag = uuid.uuid4().hex[:8]
    sid, wtype, prefix = f"gone-{tag}", f"Gone{tag}", f"act-{tag}"
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    with open_service(store, temporal_env.destination, worker_id="e2e-1",
                      crash_hook=crash_before_settle) as svc:
        svc.create_schedule(NS, sid, spec=SPEC, action=make_action(
            workflow_type=wtype, task_queue=f"q-{tag}", workflow_id=prefix,
            execution_timeout=1), policies=make_policies(overlap="allow_all"), limit=limit)
        first = parse_nominal(svc.load.source(NS, sid).state.cursor)
        run_source(svc, 2.0)
        time.sleep(3.5)  # the source's scheduler is down: a gap, then the boundary
        assert svc.rollback(NS, sid, f"R-{tag}").outcome == "accepted"
        with pytest.raises(Crash):
            svc.run_until_idle()
        assert svc.migration(NS, sid).state == "receipted"
        state = svc.load.migration(svc.migration(NS, sid).migration_id).state
        handover = Handover.model_validate(state.handover)
    raw = temporal_env.ops.run(lambda: temporal_env.ops.client.workflow_service
                               .describe_schedule(DescribeScheduleRequest(
                                   namespace=NS, schedule_id=sid)))
    created, pin = raw.info.create_time.ToDatetime(tzinfo=timezone.utc), pin_of(raw.memo)
    end = gap_end(raw.memo)
    assert end is not None and (pin is None) == (limit is None)
    owed = boundary_gap(handover, end, created) if pin is None else \
        pin_owed(handover, pin) + boundary_gap(handover, pin - timedelta(seconds=1), created)
    # The settle reads the create instant from the scheduler workflow's history (the first
    # workflow task's start): the very instant DescribeSchedule shows as the create time.
    assert temporal_gone._began(temporal_env.destination, d.start_request(state),
                                state.receipt or "") == created
    assert owed  # the test is only worth its time if something is owed
    if pin is None:
        time.sleep(2.0)  # the server runs its own times
        time.sleep(1.5 - time.time() % 1.0)  # mid-second: the delete races no tick if it can
    temporal_env.destination.delete_schedule(NS, sid)  # the user deletes it
    deleted_by = datetime.now(timezone.utc)
    if recreate:
        create_theirs(temporal_env, sid, tag)
    with open_service(store, temporal_env.destination, worker_id="e2e-2",
                      claim_grace=2.0) as svc:
        svc.run_until_idle(retry_for=90.0)  # the settle waits until the delete is quiet
        assert svc.migration(NS, sid).state == "completed"
        settled, = [e.data for e in svc.history(NS, sid) if e.type.endswith("BoundarySettled")]
        # The server's own starts at or after the delete (its scheduler can still start a
        # tick as the delete lands, issue 45 item 4): recorded, and the checker names them.
        after = {parse_nominal(t) for t in settled["after_delete"]}
        assert [v.invariant for v in svc.verify()] == (["I21"] if after else [])
        source = [parse_nominal(e.data["nominal"]) for e in svc.history(NS, sid)
                  if e.type.endswith("ActionStartIssued")]
        svc.run_until_idle(retry_for=0)  # a second drain: nothing more
    time.sleep(1.0)
    cut = [t for t in owed if t < deleted_by]
    ids = wait_for(lambda: listed(temporal_env, wtype),
                   lambda got: {f"{prefix}-{nominal_text(t)}" for t in cut} <= set(got),
                   60.0, "the owed action workflows")  # before the fix: never there
    deleted = parse_nominal(settled["deleted_at"])
    assert created < deleted <= deleted_by
    # The boundary's times, and any time before the delete the server had not started (its
    # own tick just before the delete, a gap time the delete cut): each once, as listed below.
    assert {nominal_text(t) for t in owed if t < deleted} <= set(settled["started"])
    assert all(parse_nominal(t) < deleted for t in settled["started"]), settled
    if pin is not None:  # the cut was exercised: owed times from the delete to the pin
        assert deleted < pin and any(t >= deleted for t in owed)
    assert max(Counter(ids).values()) == 1, Counter(ids).most_common(3)  # none twice
    started = sorted(parse_nominal(w.removeprefix(f"{prefix}-")) for w in ids)
    assert all(t < deleted for t in started if t not in after), (started[-1], deleted)
    assert after <= set(started)  # what the settle recorded is what the server did
    assert set(source) <= set(started)
    until = deleted - timedelta(seconds=2)  # what the server's own processing surely reached
    if recreate:  # theirs: never written (no backfill ran, no memo of ours, still paused)
        theirs = temporal_env.ops.run(lambda: temporal_env.ops.client.workflow_service
                                      .describe_schedule(DescribeScheduleRequest(
                                          namespace=NS, schedule_id=sid)))
        assert gap_end(theirs.memo) is None and theirs.schedule.state.paused
        assert theirs.info.action_count == 0 and not theirs.info.recent_actions
        assert listed(temporal_env, f"Theirs{tag}") == []
    verdict = check_exactly_once(Owed(SPEC, first, until, remaining=limit), [],
                                 [t for t in started if t <= until])
    assert verdict.ok, verdict.describe()


def create_theirs(env: TemporalEnv, sid: str, tag: str) -> None:
    """The user's own schedule at ``sid`` (paused, hourly): a new scheduler chain. The
    create is asked again while the deleted one's scheduler workflow is still closing."""
    schedule = Schedule(action=ScheduleActionStartWorkflow(
        f"Theirs{tag}", id=f"theirs-{tag}", task_queue=f"q-{tag}"),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
        state=ScheduleState(paused=True, note="theirs"))

    def create() -> bool:
        try:
            env.ops.run(lambda: env.ops.client.create_schedule(sid, schedule))
            return True
        except ScheduleAlreadyRunningError:
            return False

    wait_for(create, bool, 15.0, "their schedule's create")
