"""The three safety holes of issue 9, each as an interleaving: given / when / then.

1. A chain head proves ownership only by its *create* request id, never by an attached one.
2. A lagging standby, once promoted, never uses a claim the lost tail may have used: every
   migration from before the failover reconciles first and accepts only the chain head's
   create id; anything else parks ``failover_unverified`` (one chain per schedule, always).
3. A source is never (re-)created while a scheduler chain runs at its destination id.

Each failed on the release before issue 9 (the histories it recorded are kept in
``tests/replay/histories/older_release/hole*.json``; the checker flags them).
"""
from __future__ import annotations

from typing import Callable

import pytest

from schedfence.domain.errors import AlreadyExists, StandbyNotPromoted, Unavailable
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.ports import StartWorkflow
from schedfence.infra.adapters.replication.follower import replicate
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

from tests.replica_helpers import CopyAt
from tests.helpers import (NS, SID, WID, World, given, nothing_written, refused,  # noqa: F401
                           start_foreign, then, when, world)


def events(w: World, kind: str) -> list[dict]:
    return [e.data for e in w.service.history(NS, SID) if e.type.endswith("." + kind)]


# -- 1. an attached request id is no proof of creation --------------------------------------

@pytest.mark.parametrize("continued", [True, False], ids=["continued_as_new", "same_run"])
def test_a_foreign_run_with_our_id_attached_is_never_accepted(world, continued):
    w = world
    with given("a foreign run created by F, our R1 attached to it (USE_EXISTING + attach)"):
        w.service.create_schedule(NS, SID, notes="pre")
        start_foreign(w.dest, request_id="F")
        w.dest.attach_request_id(NS, WID, "R1")
        if continued:
            w.dest.continue_as_new(NS, WID)
    with when("we roll back with R1 and the worker runs"):
        w.service.rollback(NS, SID, "R1")
        w.service.run_until_idle()
    with then("the migration parks foreign_destination; the source stays, paused"):
        mig = w.service.migration(NS, SID)
        assert (mig.state, mig.park_reason) == ("parked", "foreign_destination")
        assert not w.service.schedule(NS, SID).closed
        [chain] = events(w, "ChainVerified")
        assert (chain["verdict"], chain["head_create_request_id"]) == ("foreign", "F")
        assert "R1" in chain["head_request_ids"]  # attached: seen, and not taken as proof
        assert w.service.verify() == []
        assert w.created(request_id="R1") == 0


def test_a_dedupe_on_our_own_create_id_is_accepted(world):
    """The other side of the rule: a lost response, then the same id again, is ours."""
    w = world
    w.service.create_schedule(NS, SID)
    w.service.rollback(NS, SID, "R1")
    w.dest.inject("start", "lose_response")
    w.service.run_until_idle()  # the answer was lost: reconcile-only, it backs off
    w.service.run_until_idle()  # the chain head's create id is ours
    mig = w.service.migration(NS, SID)
    assert mig.state == "completed" and w.created(request_id="R1") == 1
    assert w.service.verify() == []


# -- 2. failover: a lagging standby ----------------------------------------------------------

LAGS = {  # the crash-hook point of the active's worker where the standby's copy stops
    "before_claim": "claim.before_append", "after_claim": "start.before_call",
    "after_lost_answer": "answer.after_append", "after_receipt": "close.before_append",
}
FATES: dict[str, Callable[[SimulatedDestination], None]] = {
    "running": lambda d: None,
    "continued_as_new": lambda d: d.continue_as_new(NS, WID),
    "continued_then_terminated": lambda d: (d.continue_as_new(NS, WID), d.terminate(NS, WID)),
    "terminated": lambda d: d.terminate(NS, WID),
    "deleted": lambda d: d.delete(NS, WID),
}


@pytest.mark.parametrize("fate", FATES)
@pytest.mark.parametrize("lag", LAGS)
def test_a_promoted_lagging_standby_never_starts_a_second_chain(new_store_url, lag, fate):
    dest = SimulatedDestination()
    active_url, standby_url = new_store_url("active"), new_store_url("standby")
    copy = CopyAt(LAGS[lag], active_url, standby_url)
    with given(f"the active completed the rollback; the standby's copy stopped {lag}"):
        with open_service(active_url, dest, worker_id="active", claim_grace=0,
                          crash_hook=copy) as active:
            active.create_schedule(NS, SID, notes="pre")
            active.rollback(NS, SID, "R1")
            if lag == "after_lost_answer":
                dest.inject("start", "lose_response")
            active.run_until_idle()
            active.run_until_idle()  # after a lost answer: reconcile
            assert active.migration(NS, SID).state == "completed" and copy.done
        FATES[fate](dest)  # then the destination chain moves on
    with when("the standby is promoted and its worker runs"):
        with open_service(standby_url, dest, worker_id="standby", claim_grace=0) as standby:
            with pytest.raises(StandbyNotPromoted):
                standby.run_until_idle()  # not before the promotion
            assert standby.promote("oncall", "active lost") == 1
            standby.run_until_idle()
            mig, source = standby.migration(NS, SID), standby.schedule(NS, SID)
            assert standby.verify() == []
    with then("one chain, ever; completed on the head's create id, or parked for an operator"):
        assert dest.created_count(NS, WID) == 1 and len(dest.chains(NS, WID)) == 1
        if fate == "deleted" and lag != "after_receipt":
            assert (mig.state, mig.park_reason) == ("parked", "failover_unverified")
            assert not source.closed
        else:
            assert mig.state == "completed" and source.close_reason == "migrated"
            assert mig.destination_first_run_id == dest.chains(NS, WID)[0]


def test_a_rollback_that_never_started_needs_the_operators_confirmation(new_store_url):
    dest = SimulatedDestination()
    active_url, standby_url = new_store_url("active"), new_store_url("standby")
    with open_service(active_url, dest, worker_id="active") as active:
        active.create_schedule(NS, SID, notes="pre")
        active.rollback(NS, SID, "R1")  # the active dies before any worker ran
    replicate(active_url, standby_url)
    with open_service(standby_url, dest, worker_id="standby", claim_grace=0) as standby:
        standby.promote("oncall", "active lost")
        standby.run_until_idle()
        assert standby.migration(NS, SID).park_reason == "failover_unverified"
        assert dest.created_count(NS, WID) == 0  # nothing proves the lost tail did not start
        with pytest.raises(Exception, match="confirm"):
            standby.recover("rearm", NS, SID, actor="ann", reason="checked")
        with pytest.raises(Exception, match="resolve"):
            standby.abort(NS, SID, reason="r", actor="ann")
        standby.recover("rearm", NS, SID, actor="ann", reason="checked the server",
                        confirm_no_destination_run=True)
        standby.run_until_idle()
        assert standby.migration(NS, SID).state == "completed"
        assert dest.created_count(NS, WID) == 1 and standby.verify() == []


def test_once_an_operator_settled_it_the_next_rollback_of_the_source_just_runs(new_store_url):
    dest = SimulatedDestination()
    active_url, standby_url = new_store_url("active"), new_store_url("standby")
    with open_service(active_url, dest, worker_id="active") as active:
        active.create_schedule(NS, SID, notes="pre")
        active.rollback(NS, SID, "R1")
    replicate(active_url, standby_url)
    with open_service(standby_url, dest, worker_id="standby", claim_grace=0) as standby:
        standby.promote("oncall", "active lost")
        standby.run_until_idle()
        standby.recover("resolve", NS, SID, actor="ann", reason="nothing ran there",
                        resolution="source_kept")
        assert not standby.schedule(NS, SID).migration_pending
        standby.rollback(NS, SID, "R2")  # the incarnation's question is settled: no park
        standby.run_until_idle()
        assert standby.migration(NS, SID).state == "completed"
        assert dest.created_count(NS, WID) == 1 and standby.verify() == []


def test_a_rollback_re_issued_after_the_failover_reconciles_too(new_store_url):
    """The lost tail held the rollback itself: the re-issued one has the same derived id."""
    dest = SimulatedDestination()
    active_url, standby_url = new_store_url("active"), new_store_url("standby")
    with open_service(active_url, dest, worker_id="active", claim_grace=0) as active:
        active.create_schedule(NS, SID, notes="pre")
        replicate(active_url, standby_url)  # the standby has the schedule, not the rollback
        active.rollback(NS, SID)
        active.run_until_idle()
    dest.continue_as_new(NS, WID)
    dest.terminate(NS, WID)
    with open_service(standby_url, dest, worker_id="standby", claim_grace=0) as standby:
        standby.promote("oncall", "active lost")
        assert standby.rollback(NS, SID).outcome == "accepted"
        standby.run_until_idle()
        assert standby.migration(NS, SID).state == "completed"  # on the head's create id
        assert dest.created_count(NS, WID) == 1 and standby.verify() == []


# -- 3. re-creating a handed-over schedule ---------------------------------------------------

def test_re_creating_a_handed_over_schedule_is_refused_while_its_chain_runs(world):
    w = world
    with given("a completed rollback: the destination chain runs the schedule"):
        w.service.create_schedule(NS, SID)
        w.service.rollback(NS, SID, "R1")
        w.service.run_until_idle()
        [run] = w.runs()
    with when("the schedule is created again"), then("already_exists naming the chain"):
        with nothing_written(w.service), pytest.raises(AlreadyExists, match=run.run_id):
            w.service.create_schedule(NS, SID)
    with when("the destination cannot be asked"), then("unavailable, nothing written"):
        w.dest.inject("describe", "unavailable")
        with refused(w.service, Unavailable):
            w.service.create_schedule(NS, SID)
    with when("the chain has ended"), then("the new incarnation records what it saw"):
        w.dest.terminate(NS, WID)
        assert w.service.create_schedule(NS, SID).incarnation == 2
        created = [e.data for e in w.service.history(NS, SID)
                   if e.type.endswith("schedule.Created")]
        assert created[-1]["destination_check"]["current"]["status"] == "terminated"
        assert w.service.verify() == []


def test_anyones_running_scheduler_chain_blocks_a_create(world):
    w = world
    start_foreign(w.dest, workflow_type=SCHEDULER_WORKFLOW_TYPE)
    with refused(w.service, AlreadyExists):
        w.service.create_schedule(NS, SID)
    w.dest.start_workflow(StartWorkflow(NS, "elsewhere", "x", "user-workflow"))
    w.dest.terminate(NS, WID)
    w.service.create_schedule(NS, SID)  # a closed run owns nothing
