"""A Temporal Schedule deleted between the receipt and the settle, in the simulator: the
worker crashes before the settle, the schedule's user deletes it, and the drain starts each
owed boundary time before the delete once, as a plain workflow at ``<prefix>-<time>``
(domain/rollback/handover_gone.py); a second drain starts nothing more. A deleted schedule whose
scheduler workflow is past retention parks ``deleted_unsettled``, the source still fenced."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.rollback import decide as d
from schedfence.domain.source.action import make_action, make_policies, nominal_text, parse_nominal
from schedfence.domain.errors import RecoveryRefused
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from tests.helpers import Crash

NS, SID = "ns", "s"
SPEC = make_spec(intervals=[(1, 0)])
WID = destination_workflow_id(SID)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


def crash_at(point: str):
    armed = [True]

    def hook(where: str) -> None:
        if armed[0] and where == point:
            armed[0] = False
            raise Crash(where)
    return hook


def received_then_crashed(store_url: str, clock: Clock,
                          dest: SimulatedDestination) -> tuple[datetime, datetime]:
    """A rollback whose worker crashed after the receipt, before the settle; its create time
    and the source's last start."""
    with open_service(store_url, dest, worker_id="w1",
                      crash_hook=crash_at("settle.before_call")) as svc:
        svc.create_schedule(NS, SID, spec=SPEC, action=make_action(
            workflow_type="W", task_queue="q", workflow_id="act"),
            policies=make_policies(overlap="allow_all"))
        first = parse_nominal(svc.load.source(NS, SID).state.cursor)
        svc.run_scheduler(now=first + timedelta(seconds=3))
        first += timedelta(seconds=3)  # the source's last start
        clock.now = first + timedelta(seconds=10, milliseconds=500)
        assert svc.rollback(NS, SID, "R1").outcome == "accepted"
        try:
            svc.run_until_idle(retry_for=0)
        except Crash:
            pass
        assert svc.migration(NS, SID).state == "receipted"
        assert svc.schedule(NS, SID).migration_pending  # the source is still fenced
        assert action_runs(dest, first) == {}  # none after the source's last start yet
    return clock.now, first


def action_runs(dest: SimulatedDestination, after: datetime) -> dict[str, int]:
    """Every action workflow id in the simulator of a time after ``after`` (the source's own
    starts run there too), with how many runs a start created there."""
    return {wid: dest.created_count(NS, wid) for ns, wid in dest.workflow_ids()
            if ns == NS and wid.startswith("act-") and
            parse_nominal(wid.removeprefix("act-")) > after}


def test_a_drain_starts_the_boundary_times_before_the_delete_once(file_store_url):
    clock = Clock()
    dest = SimulatedDestination(clock=clock)
    created, last = received_then_crashed(file_store_url, clock, dest)
    clock.now = created + timedelta(seconds=3)
    dest.delete_schedule(NS, SID)  # the user deletes the Temporal Schedule
    boundary = [created - timedelta(seconds=1, milliseconds=500),
                created - timedelta(milliseconds=500)]  # (created - 2 s, created]
    with open_service(file_store_url, dest, worker_id="w2", claim_grace=0.0) as svc:
        svc.run_until_idle(retry_for=2.0)
        assert svc.migration(NS, SID).state == "completed"
        assert svc.verify() == []
        settled = [e for e in svc.history(NS, SID) if e.type.endswith("BoundarySettled")]
        assert [e.data["started"] for e in settled] == [[nominal_text(t) for t in boundary]]
        assert parse_nominal(settled[0].data["deleted_at"]) == clock.now
        assert action_runs(dest, last) == {f"act-{nominal_text(t)}": 1 for t in boundary}
        for t in boundary:  # the handover's whole action, under the migration's derived id
            (req, outcome), = dest.start_log(NS, f"act-{nominal_text(t)}")
            assert outcome == "created" and req.action is not None
            assert req.action.workflow_type == "W" and req.action.task_queue == "q"
        mig = svc.load.migration(svc.migration(NS, SID).migration_id)
        again = dest.settle_deleted(d.start_request(mig.state), mig.state.receipt)
        svc.run_until_idle(retry_for=0)  # a second drain: nothing left to do
    assert again.started == [nominal_text(t) for t in boundary]  # ours, deduplicated
    assert action_runs(dest, last) == {f"act-{nominal_text(t)}": 1 for t in boundary}


def test_a_deleted_schedule_past_retention_parks_with_the_source_fenced(file_store_url):
    clock = Clock()
    dest = SimulatedDestination(clock=clock)
    _, last = received_then_crashed(file_store_url, clock, dest)
    clock.now += timedelta(seconds=3)
    dest.delete_schedule(NS, SID)
    dest.delete(NS, WID)  # retention removes the closed scheduler workflow
    with open_service(file_store_url, dest, worker_id="w2", claim_grace=0.0) as svc:
        svc.run_until_idle(retry_for=0)
        view = svc.migration(NS, SID)
        assert (view.state, view.park_reason) == ("parked", "deleted_unsettled")
        assert svc.schedule(NS, SID).migration_pending
        assert action_runs(dest, last) == {}
        svc.run_until_idle(retry_for=0)  # nothing moves it but an operator
        assert svc.migration(NS, SID).state == "parked"
        assert svc.verify() == []
        with pytest.raises(RecoveryRefused):  # the destination took it: never kept, re-armed
            svc.recover("resolve", NS, SID, actor="oncall", reason="r",
                        resolution="source_kept")
        with pytest.raises(RecoveryRefused):
            svc.recover("rearm", NS, SID, actor="oncall", reason="r")
        assert svc.migration(NS, SID).state == "parked"
        svc.recover("resolve", NS, SID, actor="oncall", reason="owed times started by hand",
                    resolution="destination_owns",
                    first_run_id=view.destination_first_run_id)
        assert svc.migration(NS, SID).state == "completed"
        assert svc.verify() == []
