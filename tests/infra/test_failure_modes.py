"""The rollback failure modes F1–F11 of docs/protocol.md, each as an interleaving of admin,
worker, crash and destination steps, checked against the protocol's rules (the migration's
events and the simulator). F1–F5 (and a crash at every boundary) here; F6–F11 in
test_failure_modes_f6_f11.py."""
from __future__ import annotations

import uuid

import pytest

from schedfence.domain.errors import (MigrationPending, RecoveryRefused, SentinelBlocked,
                                      Unavailable)
from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE, derive_request_id

from tests.helpers import (NS, SID, WID, Crash, given, nothing_written, refused, start_foreign,
                           then, when, world)
from tests.infra.failure_mode_steps import (CLAIM, CREATED_PATH, FOREIGN_PARK, accepted,
                                            assert_closed_by_migration, assert_source_kept,
                                            verdicts)

__all__ = ["world"]  # the fixture, imported for pytest


# -- F1 foreign destination ------------------------------------------------------------------
@pytest.mark.parametrize("foreign_type", ["user-workflow", SCHEDULER_WORKFLOW_TYPE,
                                          DUMMY_WORKFLOW_TYPE])
def test_f1_foreign_destination_parks_then_rearms_once_it_closes(world, foreign_type):
    w = world
    with given("a schedule and a rollback accepted while the destination id is free"):
        accepted(w)
    with given("a foreign run starts at the id after the gate (a dummy that raced it, too)"):
        foreign = start_foreign(w.dest, workflow_type=foreign_type)
    with when("the worker runs"):
        w.service.run_until_idle()
    with then("the migration parks as foreign_destination and the source is kept"):
        assert w.migration_events() == FOREIGN_PARK
        assert verdicts(w) == ["foreign"]
        m = w.service.migration(NS, SID)
        assert (m.state, m.park_reason, m.claim_armed) == ("parked", "foreign_destination", False)
        assert_source_kept(w)
        assert w.start_outcomes() == ["already_started"]
        assert [(r.run_id, r.status) for r in w.runs()] == [(foreign.run_id, "running")]
    with when("a further pass runs while the foreign run is still running"):
        with nothing_written(w.service):
            w.service.run_until_idle()
    with when("the foreign run closes and the worker runs again"):
        w.dest.complete(NS, WID)
        w.service.run_until_idle()
    with then("the claim is re-armed and one new chain of ours completes the rollback"):
        assert w.migration_events() == FOREIGN_PARK + ["StartClaimRearmed"] + CREATED_PATH[1:]
        assert_closed_by_migration(w)
        assert w.start_outcomes() == ["already_started", "created"]
        assert len(w.chains()) == 2 and w.created(request_id="R1") == 1
        assert w.service.migration(NS, SID).destination_first_run_id == w.chains()[1]
    assert w.service.verify() == []


def test_f1_foreign_destination_with_lost_answer_is_never_rearmed(world):
    w = world
    with given("a foreign running workflow at the id, and the start's answer is lost"):
        accepted(w)
        start_foreign(w.dest)
        w.dest.inject("start", "lose_response")
    with when("the worker runs twice (start, then reconcile)"):
        w.service.run_until_idle()
        w.service.run_until_idle()
    with then("it parks foreign: the lost answer proves nothing, so it stays parked"):
        assert w.migration_events() == CLAIM + ["DestinationAnswered", "ChainVerified",
                                                "MigrationParked"]
        assert w.service.migration(NS, SID).park_reason == "foreign_destination"
    with when("the foreign run closes and the worker runs again"):
        w.dest.complete(NS, WID)
        with nothing_written(w.service):
            w.service.run_until_idle()
    with then("no re-arm, no second start, source kept"):
        assert w.start_outcomes() == ["lost_response"]
        assert_source_kept(w)
        with refused(w.service, RecoveryRefused):
            w.service.abort(NS, SID, "operator", "ops")
    assert w.service.verify() == []


# -- F2 source-close failure + destination closure -------------------------------------------
def test_f2_close_crash_then_destination_terminated_closes_from_receipt(world):
    w = world
    with given("a rollback whose worker crashes right before the source close append"):
        accepted(w)
        w.hooks.crash_once("close.before_append")
        with pytest.raises(Crash):
            w.service.run_until_idle()
        assert w.migration_events() == CREATED_PATH[:-1]
    with when("a user delete is refused on the source and the destination run is terminated"):
        with refused(w.service, MigrationPending):
            w.service.update_schedule(NS, SID, delete=True)
        w.dest.terminate(NS, WID)
        w.service.run_until_idle()
    with then("the worker closes from the receipt and never starts a second chain"):
        assert w.migration_events() == CREATED_PATH
        assert_closed_by_migration(w)
        assert w.start_outcomes() == ["created"] and w.created() == 1
        assert [r.status for r in w.runs()] == ["terminated"]
        assert w.hooks.seen("start.before_call") == ["start.before_call"]
    assert w.service.verify() == []


def test_f2_answer_crash_then_destination_terminated_reconciles_via_chain_head(world):
    w = world
    with given("the start commits but the worker crashes before recording the answer"):
        accepted(w)
        w.hooks.crash_once("answer.before_append")
        with pytest.raises(Crash):
            w.service.run_until_idle()
        assert w.migration_events() == CLAIM
    with when("the destination run is terminated and the worker retries"):
        w.dest.terminate(NS, WID)
        w.service.run_until_idle()
    with then("reconcile finds our terminated run as chain head, accepts and closes"):
        assert w.migration_events() == CLAIM + ["ChainVerified", "OwnershipAccepted",
                                                "SourceClosed"]
        assert verdicts(w) == ["owned"]
        evidence = [e.data["evidence"] for e in w.migration_entries()
                    if e.type.endswith("OwnershipAccepted")]
        assert evidence == ["chain_head"]
        assert_closed_by_migration(w)
        assert w.start_outcomes() == ["created"] and w.created() == 1
    assert w.service.verify() == []


# -- F3 committed start, lost response -------------------------------------------------------
def test_f3_lost_start_response_is_accepted_by_reconcile(world):
    w = world
    with given("a rollback whose start commits but the response is lost"):
        accepted(w)
        w.dest.inject("start", "lose_response")
    with when("the worker runs, backs off, and runs again"):
        w.service.run_until_idle()
        assert w.service.migration(NS, SID).state == "claimed"
        w.service.run_until_idle()
    with then("exactly one chain, accepted as owned by reconcile, source closed"):
        assert w.migration_events() == CLAIM + ["DestinationAnswered", "ChainVerified",
                                                "OwnershipAccepted", "SourceClosed"]
        assert verdicts(w) == ["owned"]
        assert w.start_outcomes() == ["lost_response"]
        assert w.created() == 1 and len(w.chains()) == 1
        assert_closed_by_migration(w)
    assert w.service.verify() == []


CRASH_POINTS = {
    # point: (final state, our starts in the destination's log)
    "claim.before_append": ("completed", ["created"]),
    "claim.after_append": ("parked", []),
    "start.before_call": ("parked", []),
    "start.after_call": ("completed", ["created"]),
    "answer.before_append": ("completed", ["created"]),
    "answer.after_append": ("completed", ["created"]),
    "close.before_append": ("completed", ["created"]),
    "close.after_append": ("completed", ["created"]),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_crash_at_every_worker_boundary_never_starts_twice(world, point):
    """Every retry boundary: whatever the crash point, at most one start and one chain.

    A consumed claim with no start behind it cannot be told apart from a committed start
    whose run was deleted, so it parks head_missing (quarantine) instead of starting."""
    w = world
    state, starts = CRASH_POINTS[point]
    with given(f"an accepted rollback whose worker crashes once at {point}"):
        accepted(w)
        w.hooks.crash_once(point)
    with when("the worker runs, crashes, and runs again"):
        with pytest.raises(Crash):
            w.service.run_until_idle()
        w.service.run_until_idle()
    with then(f"the migration is {state} with {len(starts)} start(s)"):
        m = w.service.migration(NS, SID)
        assert m.state == state and m.starts_issued == 1
        assert w.start_outcomes() == starts and w.created() == len(starts)
        if state == "parked":
            assert m.park_reason == "head_missing"
            assert_source_kept(w)
            with refused(w.service, RecoveryRefused):
                w.service.abort(NS, SID, "operator", "ops")
        else:
            assert_closed_by_migration(w)
    assert w.service.verify() == []


@pytest.mark.parametrize("point", ["rollback.before_append", "rollback.after_append"])
def test_admin_crash_around_the_rollback_append(world, point):
    w = world
    with given(f"the admin request crashes at {point}"):
        w.service.create_schedule(NS, SID)
        w.hooks.crash_once(point)
        with pytest.raises(Crash):
            w.service.rollback(NS, SID, "R1")
    with when("the caller retries with the same id"):
        retry = w.service.rollback(NS, SID, "R1")
    with then("before the append nothing was written; after it, the retry is idempotent"):
        expected = "accepted" if point == "rollback.before_append" else "already_pending"
        assert retry.outcome == expected
        assert w.migration_events() == ["RequestIdAssigned"]
    assert w.service.verify() == []


def test_claim_races_between_two_workers_yield_one_start(world):
    """The claim is checked against concurrent workers (version conflict)."""
    w = world
    with given("worker B has read the armed claim, then worker A runs the whole rollback"):
        mid = uuid.UUID(accepted(w).migration_id)
        w.hooks.once("claim.before_append", lambda: w.service.worker.attempt(mid))
    with when("worker B appends its claim"):
        w.service.worker.attempt(mid)
    with then("B's claim loses the race: one start, one chain, completed"):
        assert w.hooks.seen("claim.") == ["claim.before_append", "claim.before_append",
                                          "claim.after_append"]  # B's append never landed
        assert w.migration_events() == CREATED_PATH
        assert w.start_outcomes() == ["created"]
    assert w.service.verify() == []


# -- F4 sentinel gate ------------------------------------------------------------------------
@pytest.mark.parametrize("close", ["complete", "terminate"])
def test_f4_closed_dummy_does_not_block(world, close):
    w = world
    with given(f"a dummy sentinel at the id that has been {close}d"):
        start_foreign(w.dest, workflow_type=DUMMY_WORKFLOW_TYPE, request_id="create-req")
        getattr(w.dest, close)(NS, WID)
    with when("rollback is requested and the worker runs"):
        assert accepted(w).outcome == "accepted"
        w.service.run_until_idle()
    with then("a new chain of ours is created and the source closes"):
        assert w.migration_events() == CREATED_PATH
        assert w.start_outcomes() == ["created"] and len(w.chains()) == 2
        assert_closed_by_migration(w)
    assert w.service.verify() == []


def test_f4_running_dummy_blocks_and_writes_nothing(world):
    w = world
    with given("a running dummy sentinel at the id"):
        w.service.create_schedule(NS, SID, notes="pre")
        start_foreign(w.dest, workflow_type=DUMMY_WORKFLOW_TYPE, request_id="create-req")
    with then("rollback is sentinel_blocked (retryable) with nothing written"):
        with refused(w.service, SentinelBlocked):
            w.service.rollback(NS, SID, "R1")
        assert SentinelBlocked.retryable
        view = w.service.schedule(NS, SID)
        assert (view.paused, view.notes, view.migration_pending) == (False, "pre", False)
    with when("the dummy completes"):
        w.dest.complete(NS, WID)
    with then("the same request is accepted"):
        assert w.service.rollback(NS, SID, "R1").outcome == "accepted"
    assert w.service.verify() == []


def test_f4_destination_unavailable_during_gate_writes_nothing(world):
    w = world
    with given("a schedule, and the destination's describe is unavailable"):
        w.service.create_schedule(NS, SID)
        w.dest.inject("describe", "unavailable")
    with then("rollback answers unavailable (retryable) and writes nothing"):
        with refused(w.service, Unavailable):
            w.service.rollback(NS, SID, "R1")
        assert Unavailable.retryable and not w.service.schedule(NS, SID).migration_pending
        assert w.dest.start_log() == []
    assert w.service.verify() == []


# -- F5 stable fallback id -------------------------------------------------------------------
def test_f5_omitted_id_retry_is_idempotent_and_incarnation_scoped(world):
    w = world
    with given("a rollback with the id omitted, whose response the caller lost"):
        first = accepted(w, request_id=None)
    with then("the id is derived from the incarnation"):
        assert (first.outcome, first.request_id_origin) == ("accepted", "derived")
        assert first.request_id == derive_request_id(NS, SID, 1)
    with when("the caller retries without an id"):
        with nothing_written(w.service):
            again = w.service.rollback(NS, SID)
    with then("it is the same migration, already pending"):
        assert (again.outcome, again.request_id, again.migration_id) == (
            "already_pending", first.request_id, first.migration_id)
    with given("the rollback completes, its chain later terminates, and the key is recreated"):
        w.service.run_until_idle()
        w.dest.terminate(NS, WID)
        assert w.service.create_schedule(NS, SID).incarnation == 2
    with when("the new incarnation is rolled back without an id"):
        second = w.service.rollback(NS, SID)
        w.service.run_until_idle()
    with then("it derives a different id, so the old chain's dedupe cannot close it"):
        assert second.outcome == "accepted"
        assert second.request_id == derive_request_id(NS, SID, 2) != first.request_id
        assert w.start_outcomes() == ["created", "created"] and len(w.chains()) == 2
        assert w.created(request_id=second.request_id) == 1
        assert w.migration_events(migration_id=second.migration_id) == CREATED_PATH
    assert w.service.verify() == []
