"""Exactly once across the handoff (I14), in the simulator, under faults: a schedule runs on
the source (time compressed through the injectable clocks) with a finished backfill and one
in progress, and is rolled back while the worker crashes at every boundary of the handoff
(before and after the claim's append, the start call, the answer's append, the boundary
settle, the close), or the start's answer is lost or unknown, or the settle is unavailable, or
the destination's chain continues as new before the receipt; the admin call is retried and
another worker takes over. The source's starts and the destination's record, together, are exactly what one
scheduler that never migrated would have started: none twice, none lost, nothing else."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from tests.helpers import Crash

NS, SID = "ns", "s"
SPEC = make_spec(intervals=[(60, 0)])
POINTS = ("claim.before_append", "claim.after_append", "start.before_call",
          "start.after_call", "answer.before_append", "settle.before_call",
          "settle.after_call", "close.before_append")

NO_START = ("claim.after_append", "start.before_call")


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def crash_once(point: str | None):
    armed = [point is not None]

    def hook(where: str) -> None:
        if armed[0] and where == point:
            armed[0] = False
            raise Crash(where)
    return hook


def handoff(store_url: str, point: str | None, fault: tuple[str, str] | None,
            continue_as_new: bool = False) -> None:
    clock = Clock()
    dest = SimulatedDestination(clock=clock)
    with open_service(store_url, dest, worker_id="w1", crash_hook=crash_once(point)) as svc:
        svc.create_schedule(NS, SID, spec=SPEC, action=make_action(
            workflow_type="W", task_queue="q", workflow_id="act"),
            policies=make_policies(overlap="allow_all"))
        first = parse_nominal(svc.load.source(NS, SID).state.cursor)
        done = (first - timedelta(hours=2), first - timedelta(hours=1))
        pending = (first - timedelta(minutes=30), first - timedelta(minutes=20))
        svc.backfill_schedule(NS, SID, *done, now=first)
        for minutes in (1, 2, 3):
            svc.run_scheduler(now=first + timedelta(minutes=minutes))
        svc.backfill_schedule(NS, SID, *pending, now=first)  # in progress at the fence
        # The destination is created 1 s after a time that is due and not yet ticked: that time
        # falls between the gap backfill (ending 2 s before the create) and the destination's
        # own first time, so only the boundary's settle starts it.
        clock.now = (first + timedelta(minutes=4)).replace(second=0, microsecond=0) + \
            timedelta(seconds=1)
        assert svc.rollback(NS, SID, "R1").outcome == "accepted"
        assert svc.rollback(NS, SID, "R1").outcome == "already_pending"  # a retried admin call
        if fault:
            dest.inject(*fault)
        try:
            svc.run_until_idle(retry_for=0)
        except Crash:
            pass
    if continue_as_new:  # the destination's chain moves on before the receipt
        dest.continue_as_new(NS, destination_workflow_id(SID))
    with open_service(store_url, dest, worker_id="w2", claim_grace=0.0) as svc:
        svc.run_until_idle(retry_for=2.0)
        if svc.migration(NS, SID).park_reason == "head_missing":  # a claim with no start made
            assert point in NO_START or fault == ("start", "unavailable")  # the protocol parks
            assert dest.created_count(NS, destination_workflow_id(SID)) == 0  # and an operator
            svc.recover("resolve", NS, SID, actor="oncall",  # checks the server, keeps the
                        reason="nothing ran there", resolution="source_kept")  # source
            svc.run_scheduler(now=clock.now)  # which catches up on the times it was fenced
            assert svc.rollback(NS, SID, "R2").outcome == "accepted"  # and hands over again
            svc.run_until_idle(retry_for=2.0)
        assert svc.migration(NS, SID).state == "completed"
        assert svc.verify() == []
        source = [parse_nominal(e.data["nominal"]) for e in svc.history(NS, SID)
                  if e.type.endswith("ActionStartIssued")]
    clock.now += timedelta(minutes=10)
    destination = dest.schedule_starts(NS, destination_workflow_id(SID))
    verdict = check_exactly_once(Owed(SPEC, first, clock.now, backfills=(done, pending)),
                                 source, destination)
    assert verdict.ok, verdict.describe()
    assert source and destination  # both sides took part


@pytest.mark.parametrize("point", [None, *POINTS])
def test_a_crash_at_any_boundary_of_the_handoff_leaves_every_time_started_once(file_store_url,
                                                                               point):
    handoff(file_store_url, point, None)


@pytest.mark.parametrize("fault", [("start", "lose_response"), ("start", "unavailable"),
                                   ("settle", "unavailable")])
def test_a_lost_or_unknown_answer_leaves_every_time_started_once(file_store_url, fault):
    handoff(file_store_url, None, fault)


def test_a_continue_as_new_before_the_receipt_leaves_every_time_started_once(file_store_url):
    handoff(file_store_url, "start.after_call", None, continue_as_new=True)


def test_the_boundary_settle_is_recorded_once_after_the_receipt_and_a_second_is_flagged():
    from schedfence.domain.rollback.aggregate import Migration
    from tests.helpers import MEMORY
    dest = SimulatedDestination()
    with open_service(MEMORY, dest, worker_id="w1") as svc:
        svc.create_schedule(NS, SID, spec=SPEC, action=make_action(
            workflow_type="W", task_queue="q", workflow_id="act"))
        svc.rollback(NS, SID, "R1")
        svc.run_until_idle()
        kinds = [e.type.rsplit(".", 1)[-1] for e in svc.history(NS, SID)]
        assert kinds[-4:] == ["OwnershipAccepted", "BoundarySettled", "ClosedByMigration",
                              "SourceClosed"]
        m = svc.app.repository.get(__import__("uuid").UUID(svc.migration(NS, SID).migration_id))
        m.record([(Migration.BoundarySettled, {"request_id": "R1", "started": []})])
        svc.app.save(m)
        assert [v.invariant for v in svc.verify()] == ["I8", "I8"]  # after completion; twice


def test_a_schedule_deleted_after_the_receipt_is_settled_from_its_closed_chain():
    """The settle reads the deleted schedule's closed scheduler workflow and starts what it
    owed before the delete (tests/infra/engines/test_settle_deleted.py); the source closes."""
    from tests.helpers import MEMORY
    dest = SimulatedDestination()
    with open_service(MEMORY, dest, worker_id="w1",
                      crash_hook=crash_once("settle.before_call")) as svc:
        svc.create_schedule(NS, SID, spec=SPEC, action=make_action(
            workflow_type="W", task_queue="q", workflow_id="act"))
        svc.rollback(NS, SID, "R1")
        with pytest.raises(Crash):
            svc.run_until_idle()
        dest.delete_schedule(NS, SID)  # someone deleted the new schedule
        svc.run_until_idle()
        assert svc.migration(NS, SID).state == "completed"
        [settle] = [e for e in svc.history(NS, SID) if e.type.endswith("BoundarySettled")]
        assert settle.data["deleted_at"] and "deleted" in settle.data["detail"]
        assert svc.verify() == []
