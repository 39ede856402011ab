"""Forward migration on a real Temporal dev server: a schedule every 2 s runs on the source,
is handed to a real Temporal Schedule, runs there, is taken back by a forward migration (the
server's schedule fenced, read, deleted), runs on the source again; the action workflows the
server lists are every owed nominal time exactly once (I14)."""
from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.forward.aggregate import forward_marker
from schedfence.domain.ports import DestinationNotFound
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env, wait_for  # noqa: F401
from tests.e2e.test_temporal_handover_e2e import SPEC, listed, run_source


def test_a_schedule_goes_to_temporal_and_back_running_each_time_once(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    sid, wtype, prefix = f"forward-{tag}", f"Report{tag}", f"act-{tag}"
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e") as svc:
        svc.create_schedule(NS, sid, notes="nightly", spec=SPEC,
                            action=make_action(workflow_type=wtype, task_queue=f"q-{tag}",
                                               workflow_id=prefix),
                            policies=make_policies(overlap="allow_all"))
        first = parse_nominal(svc.load.source(NS, sid).state.cursor)
        run_source(svc, 4)
        svc.rollback(NS, sid, f"R-{tag}")
        svc.run_until_idle(retry_for=10.0)
        assert svc.migration(NS, sid).state == "completed"
        time.sleep(6)  # the server runs it
        assert svc.forward(NS, sid, f"F-{tag}").outcome == "accepted"
        svc.run_until_idle(retry_for=20.0)
        st = svc.forward_state(NS, sid, f"F-{tag}")
        assert st.phase == "completed", st
        with pytest.raises(DestinationNotFound):
            temporal_env.destination.describe_schedule(NS, sid)
        source = svc.load.source(NS, sid).state
        assert (source.incarnation, source.paused, source.notes) == (2, False, "nightly")
        assert source.notes != forward_marker(f"F-{tag}")
        run_source(svc, 6)
        assert svc.verify() == []
    until = datetime.now(timezone.utc) - timedelta(seconds=3)
    ids = listed(temporal_env, wtype)  # both sides start action workflows on the server
    assert len(ids) == len(set(ids))
    on_server = [parse_nominal(w.removeprefix(f"{prefix}-")) for w in ids]
    verdict = check_exactly_once(Owed(SPEC, first, until), [], [t for t in on_server
                                                                  if t <= until])
    assert verdict.ok, verdict.describe()


def on_server(svc, env: TemporalEnv, tag: str) -> str:
    """A schedule every 2 s handed to a real Temporal Schedule; its id."""
    sid = f"race-{tag}"
    svc.create_schedule(NS, sid, notes="theirs before", spec=SPEC,
                        action=make_action(workflow_type=f"Race{tag}", task_queue=f"q-{tag}",
                                           workflow_id=f"race-{tag}"),
                        policies=make_policies(overlap="allow_all"))
    svc.rollback(NS, sid, f"R-{tag}")
    svc.run_until_idle(retry_for=10.0)
    assert svc.migration(NS, sid).state == "completed"
    return sid


def operator_update(env: TemporalEnv, sid: str, notes: str) -> None:
    """Someone else's UpdateSchedule on the server (the conflict token moves)."""
    from temporalio.api.workflowservice.v1 import UpdateScheduleRequest
    desc = env.ops.describe_schedule(sid)
    schedule = desc.schedule
    schedule.state.notes = notes
    env.ops.run(lambda: env.ops.client.workflow_service.update_schedule(UpdateScheduleRequest(
        namespace=NS, schedule_id=sid, schedule=schedule, identity="operator",
        request_id=str(uuid.uuid4()))))
    wait_for(lambda: env.ops.describe_schedule(sid).schedule.state.notes,
             lambda n: n == notes, 10.0, "the operator's update applied")


def test_an_update_by_someone_else_during_the_fence_is_re_read_not_lost(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    """The token moves between our reading and our UpdateSchedule: the fence is re-issued
    with a fresh reading, and the source ends with the operator's notes."""
    tag = uuid.uuid4().hex[:8]
    moved = [False]

    def hook(point: str) -> None:
        if point == "forward.fence.before_call" and not moved[0]:
            moved[0] = True
            operator_update(temporal_env, sid, "changed by an operator")
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e", crash_hook=hook) as svc:
        sid = on_server(svc, temporal_env, tag)
        svc.forward(NS, sid, f"F-{tag}")
        svc.run_until_idle(retry_for=20.0)
        st = svc.forward_state(NS, sid, f"F-{tag}")
        assert (st.phase, st.fence_issues, st.pre_notes) == (
            "completed", 2, "changed by an operator"), st
        assert svc.load.source(NS, sid).state.notes == "changed by an operator"
        assert svc.verify() == []


def test_a_delete_racing_the_handoff_parks_and_the_source_stays_dormant(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]

    def hook(point: str) -> None:
        if point == "forward.create.after_append":
            temporal_env.ops.delete_schedule(sid)
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e", crash_hook=hook) as svc:
        sid = on_server(svc, temporal_env, tag)
        svc.forward(NS, sid, f"F-{tag}")
        wait_for(lambda: (svc.run_until_idle(retry_for=5.0),
                          svc.forward_state(NS, sid, f"F-{tag}").phase)[1],
                 lambda phase: phase == "parked", 30.0, "the forward migration parked")
        st = svc.forward_state(NS, sid, f"F-{tag}")
        assert st.park_reason == "deleted_elsewhere", st
        source = svc.load.source(NS, sid).state
        assert source.migration_pending and source.paused  # dormant: it takes no action
        svc.run_scheduler()
        assert svc.load.source(NS, sid).state.issued == []
        assert svc.verify() == []
