"""Forward migrations repeated on a real Temporal dev server, a schedule every second (issue 27,
items 5 and 8).

Item 5: the forward boundary is what the server started, never when it applied the pause. The
fence can land after a nominal time T but before the server's scheduler started T (it then
drops T: a paused schedule starts nothing it had buffered); the source must start T. Twenty
forwards in a row, each at another phase of the second, and every time of each is started
exactly once on one side or the other (I14), none lost, none twice.

Item 8: a forward without a request id derives one from the Temporal Schedule it takes over,
so a round trip that creates a new Temporal Schedule (whose conflict token starts again at 1)
is a new forward, not the last one's ``already_completed``. Three round trips, no ids given.
"""
from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.forward.aggregate import ForwardMigration
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.ports import DestinationNotFound
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401
from tests.e2e.test_temporal_handover_e2e import listed, run_source

EVERY_SECOND = make_spec(intervals=[(1, 0)])
FORWARDS = 20
ROUND_TRIPS = 3


def new_schedule(svc, sid: str, wtype: str, tag: str) -> datetime:
    """A schedule every second on the source, actions ``<sid>-<time>``; its first cursor."""
    svc.create_schedule(NS, sid, notes="every second", spec=EVERY_SECOND,
                        action=make_action(workflow_type=wtype, task_queue=f"q-{tag}",
                                           workflow_id=sid),
                        policies=make_policies(overlap="allow_all"))
    return parse_nominal(svc.load.source(NS, sid).state.cursor)


def rollback(svc, sid: str, request_id: str | None = None) -> None:
    assert svc.rollback(NS, sid, request_id).outcome == "accepted"
    svc.run_until_idle(retry_for=10.0)
    assert svc.migration(NS, sid).state == "completed"


def forward(svc, sid: str, request_id: str | None = None) -> str:
    """A forward migration asked and drained to completion; its request id."""
    answer = svc.forward(NS, sid, request_id)
    assert answer.outcome == "accepted", answer
    svc.run_until_idle(retry_for=20.0)
    st = svc.forward_state(NS, sid, answer.request_id)
    assert st.phase == "completed", st
    return answer.request_id


def recorded(svc, event_class: type) -> list:
    return [svc.app.mapper.to_domain_event(n)
            for n in svc.app.notifications((event_class.TOPIC,))]


def verdicts(env: TemporalEnv, wtype: str,
             windows: dict[str, tuple[datetime, datetime]]) -> dict[str, str]:
    """Each schedule's I14 verdict over its window ``(after, until]`` from what the server
    lists (both sides start their actions on it); only the failing ones."""
    time.sleep(2)  # visibility lags a little
    starts: dict[str, list[datetime]] = {sid: [] for sid in windows}
    for wid in listed(env, wtype):
        sid, _, nominal = wid.rpartition("-20")
        starts[sid].append(parse_nominal("20" + nominal))
    bad = {}
    for sid, (after, until) in windows.items():
        verdict = check_exactly_once(Owed(EVERY_SECOND, after, until), [],
                                     [t for t in starts[sid] if after < t <= until])
        if not verdict.ok:
            bad[sid] = verdict.describe()
    return bad


def test_twenty_forwards_at_one_second_lose_no_time_and_run_none_twice(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    """Each schedule goes to Temporal (a rollback), runs there, comes back (the forward under
    test) and runs on the source; the window checked starts after the rollback settled, so
    it holds the server's own times, the forward's boundary and the source's times."""
    tag = uuid.uuid4().hex[:8]
    wtype, windows = f"Every{tag}", {}
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e") as svc:
        for i in range(FORWARDS):
            sid = f"fb{i}-{tag}"
            new_schedule(svc, sid, wtype, tag)
            rollback(svc, sid, f"R-{sid}")
            after = datetime.now(timezone.utc).replace(microsecond=0)
            time.sleep(1.0 + (i * 0.37) % 1.0)  # the fence lands at another phase each time
            forward(svc, sid, f"F-{sid}")
            windows[sid] = (after, run_source(svc, 1.5))
            svc.update_schedule(NS, sid, paused=True)  # the window ends: no more starts
        assert svc.verify() == []
    assert verdicts(temporal_env, wtype, windows) == {}


def test_three_round_trips_without_request_ids_each_forward_is_new(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    """Every rollback creates a new Temporal Schedule (conflict token 1 again); each forward
    asked without an id is a new migration, and completes."""
    tag = uuid.uuid4().hex[:8]
    sid, wtype = f"rt-{tag}", f"Trip{tag}"
    forwards: list[str] = []
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e") as svc:
        first = new_schedule(svc, sid, wtype, tag)
        for n in range(ROUND_TRIPS):
            rollback(svc, sid)
            time.sleep(1.5)
            scheduler = temporal_env.destination.describe(NS, destination_workflow_id(sid))
            forwards.append(forward(svc, sid))
            requested = [e for e in recorded(svc, ForwardMigration.ForwardRequested)
                         if e.request_id == forwards[-1]]  # it names the schedule taken over
            assert requested[0].schedule_identity == scheduler.first_execution_run_id
            with pytest.raises(DestinationNotFound):
                temporal_env.destination.describe_schedule(NS, sid)
            source = svc.load.source(NS, sid).state
            assert (source.incarnation, source.closed, source.paused) == (n + 2, False, False)
            until = run_source(svc, 1.5)
        svc.update_schedule(NS, sid, paused=True)
        assert len(set(forwards)) == ROUND_TRIPS
        assert svc.verify() == []
    assert verdicts(temporal_env, wtype, {sid: (first, until)}) == {}
