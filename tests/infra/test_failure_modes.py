"""The rollback failure modes F1–F11 of docs/protocol.md, each as an interleaving of admin,
worker, crash and destination steps, checked against the protocol's rules (the migration's
events and the simulator)."""
from __future__ import annotations

import uuid

import pytest

from schedfence.domain.errors import (AlreadyExists, Closed, MigrationPending, RecoveryRefused,
                                      SentinelBlocked, Unavailable)
from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE, derive_request_id
from schedfence.domain.schedule import MIGRATION_NOTE
from tests.helpers import (NS, SID, WID, Crash, World, given, new_world, nothing_written,
                           plant_legacy, refused, start_foreign, then, when, world)

__all__ = ["world"]  # the fixture, imported for pytest

CREATED_PATH = ["RequestIdAssigned", "StartClaimConsumed", "DestinationStartIssued",
                "DestinationAnswered", "OwnershipAccepted", "SourceClosed"]
CLAIM = ["RequestIdAssigned", "StartClaimConsumed", "DestinationStartIssued"]
FOREIGN_PARK = CLAIM + ["DestinationAnswered", "ChainVerified", "MigrationParked"]


def accepted(w: World, request_id: str | None = "R1", notes: str = "pre", paused: bool = False):
    w.service.create_schedule(NS, SID, paused=paused, notes=notes)
    return w.service.rollback(NS, SID, request_id)


def assert_source_kept(w: World) -> None:
    """Parked: the source is neither closed nor released; its schedule still exists."""
    view = w.service.schedule(NS, SID)
    assert (view.closed, view.migration_pending, view.paused, view.notes) == (
        False, True, True, MIGRATION_NOTE)
    assert [s.schedule_id for s in w.service.list_schedules()] == [SID]


def assert_closed_by_migration(w: World) -> None:
    view = w.service.schedule(NS, SID)
    assert (view.closed, view.close_reason, view.migration_pending) == (True, "migrated", False)
    assert w.service.migration(NS, SID).state == "completed"


def verdicts(w: World) -> list[str]:
    return [e.data["verdict"] for e in w.migration_entries() if e.type.endswith("ChainVerified")]


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


# -- F6 continue-as-new before the receipt ---------------------------------------------------
@pytest.mark.parametrize("continued_run_closed", [False, True])
def test_f6_owned_chain_continued_as_new_is_accepted_via_head(world, continued_run_closed):
    w = world
    with given("a committed start with lost response, then the run continues-as-new"):
        accepted(w)
        w.dest.inject("start", "lose_response")
        w.service.run_until_idle()
        w.dest.continue_as_new(NS, WID)
        if continued_run_closed:
            w.dest.complete(NS, WID)
    with when("the worker reconciles"):
        w.service.run_until_idle()
    with then("the chain head's request id is ours: accepted and closed, no new chain"):
        assert w.migration_events() == CLAIM + ["DestinationAnswered", "ChainVerified",
                                                "OwnershipAccepted", "SourceClosed"]
        assert verdicts(w) == ["owned"]
        head = w.chains()[0]
        assert w.service.migration(NS, SID).destination_first_run_id == head
        assert len(w.chains()) == 1 and w.created() == 1 and len(w.runs()) == 2
        assert w.start_outcomes() == ["lost_response"]
        assert_closed_by_migration(w)
    assert w.service.verify() == []


def test_f6_foreign_chain_continued_as_new_parks(world):
    w = world
    with given("a foreign chain at the id that has continued-as-new"):
        accepted(w)
        foreign = start_foreign(w.dest, workflow_type=SCHEDULER_WORKFLOW_TYPE)
        w.dest.continue_as_new(NS, WID)
    with when("the worker runs"):
        w.service.run_until_idle()
    with then("the head was not started by us: parked foreign_destination"):
        assert w.migration_events() == FOREIGN_PARK
        chain = [e.data for e in w.migration_entries() if e.type.endswith("ChainVerified")]
        assert chain[0]["first_run_id"] == foreign.run_id
        assert chain[0]["head_request_ids"] == ["foreign-request"]
        assert w.service.migration(NS, SID).park_reason == "foreign_destination"
        assert_source_kept(w)
        assert w.created() == 1  # only the foreign one
    assert w.service.verify() == []


def test_retention_deleted_head_parks_head_missing(world):
    w = world
    with given("a committed start with lost response, continue-as-new, then the head deleted"):
        accepted(w)
        w.dest.inject("start", "lose_response")
        w.service.run_until_idle()
        head = w.chains()[0]
        w.dest.continue_as_new(NS, WID)
        w.dest.delete(NS, WID, run_id=head)
    with when("the worker reconciles, and runs again"):
        w.service.run_until_idle()
        with nothing_written(w.service):
            w.service.run_until_idle()
    with then("no proof survives: parked head_missing, source kept, nothing restarted"):
        assert w.migration_events() == CLAIM + ["DestinationAnswered", "ChainVerified",
                                                "MigrationParked"]
        assert verdicts(w) == ["head_missing"]
        assert w.service.migration(NS, SID).park_reason == "head_missing"
        assert_source_kept(w)
        assert w.start_outcomes() == ["lost_response"] and w.created() == 1
        with refused(w.service, RecoveryRefused):
            w.service.abort(NS, SID, "operator", "ops")
    assert w.service.verify() == []


# -- F7 concurrent different id --------------------------------------------------------------
def test_f7_different_id_while_pending_already_exists(world):
    w = world
    with given("a rollback R1 pending"):
        accepted(w)
    with then("R2 is refused with nothing written, R1 again is idempotent"):
        with refused(w.service, AlreadyExists):
            w.service.rollback(NS, SID, "R2")
        with refused(w.service, AlreadyExists):
            w.service.rollback(NS, SID)  # the derived id is another id too
        with nothing_written(w.service):
            assert w.service.rollback(NS, SID, "R1").outcome == "already_pending"
    with when("the worker runs"):
        w.service.run_until_idle()
    with then("R1 completes alone"):
        assert w.migration_events() == CREATED_PATH
        assert w.start_outcomes() == ["created"]
    assert w.service.verify() == []


@pytest.mark.parametrize("b_id", ["RB", "RA"], ids=["different_id", "same_id"])
def test_f7_two_services_on_one_store_race(file_store_url, b_id):
    store = file_store_url  # a SQLite file or a PostgreSQL schema, shared by both services
    a = new_world(store, worker_id="a")
    b = new_world(store, dest=a.dest, worker_id="b")
    try:
        with given("a schedule, and service B reads it before A's rollback RA lands"):
            a.service.create_schedule(NS, SID)
            b.hooks.once("rollback.before_append",
                         lambda: a.service.rollback(NS, SID, "RA"))
        with when(f"B appends its own rollback {b_id}"):
            if b_id == "RA":
                assert b.service.rollback(NS, SID, b_id).outcome == "already_pending"
            else:
                with pytest.raises(AlreadyExists):
                    b.service.rollback(NS, SID, b_id)
        with then("B's append lost and it decided again on A's fence: one migration, RA"):
            assert b.migration_events() == ["RequestIdAssigned"]
            assert b.service.migration(NS, SID).request_id == "RA"
            assert b.service.event_count() == a.service.event_count()
        with when("both workers run"):
            b.service.run_until_idle()
            a.service.run_until_idle()
        with then("one start, one chain"):
            assert a.migration_events() == CREATED_PATH and a.start_outcomes() == ["created"]
        assert a.service.verify() == [] and b.service.verify() == []
    finally:
        a.service.close()
        b.service.close()


# -- F8 legacy identity-less pending migration -----------------------------------------------
def test_f8_legacy_pending_fails_closed(world):
    w = world
    with given("an identity-less pending migration written by an older release"):
        w.service.create_schedule(NS, SID, notes="pre")
        plant_legacy(w.service)
    with when("workers attempt it"):
        with nothing_written(w.service):
            assert w.service.run_until_idle() >= 1
            w.service.run_until_idle()
    with then("nothing was written and the destination was never called"):
        assert w.dest.start_log() == []
        assert w.hooks.seen("start.") == [] and w.hooks.seen("describe.") == []
        assert w.service.migration(NS, SID).state == "legacy_pending"
        assert w.migration_events() == ["RequestIdAssigned"]  # the v1 record, upcast
        assert w.migration_entries()[0].data["request_id"] is None
    with then("no rollback may adopt it, whatever the id"):
        for rid in ("R1", None):
            with refused(w.service, AlreadyExists):
                w.service.rollback(NS, SID, rid)
    assert w.service.verify() == []


# -- F9 abort / restore ----------------------------------------------------------------------
@pytest.mark.parametrize("unknown", ["lose_response", "crash_after_call"])
def test_f9_abort_refused_after_unknown_start(world, unknown):
    w = world
    with given(f"a consumed claim whose start answer is unknown ({unknown})"):
        accepted(w)
        if unknown == "lose_response":
            w.dest.inject("start", "lose_response")
            w.service.run_until_idle()
            assert w.migration_events() == CLAIM + ["DestinationAnswered"]
        else:
            w.hooks.crash_once("start.after_call")
            with pytest.raises(Crash):
                w.service.run_until_idle()
            assert w.migration_events() == CLAIM
    with then("abort is refused with nothing written: two owners are worse than a pause"):
        with refused(w.service, RecoveryRefused):
            w.service.abort(NS, SID, "operator gave up", "ops")
        assert_source_kept(w)
    with when("the worker reconciles"):
        w.service.run_until_idle()
    with then("the committed start is ours: closed, one chain"):
        assert_closed_by_migration(w)
        assert w.created() == 1
    assert w.service.verify() == []


def test_f9_abort_before_any_claim_restores_source(world):
    w = world
    with given("a paused schedule with notes, and an accepted rollback not yet attempted"):
        accepted(w, notes="keep me", paused=True)
    with when("an operator aborts"):
        view = w.service.abort(NS, SID, "changed my mind", "ops")
    with then("the migration is aborted and the source regains its pre-migration state"):
        assert view.state == "aborted"
        assert w.migration_events() == ["RequestIdAssigned", "MigrationAborted"]
        s = w.service.schedule(NS, SID)
        assert (s.paused, s.notes, s.closed, s.migration_pending) == (True, "keep me", False,
                                                                      False)
    with when("the worker runs afterwards"):
        with nothing_written(w.service):
            w.service.run_until_idle()
    with then("nothing was started, and the source is mutable again"):
        assert w.dest.start_log() == []
        assert w.service.update_schedule(NS, SID, paused=False).paused is False
    assert w.service.verify() == []


def test_f9_abort_after_foreign_already_started_is_allowed(world):
    w = world
    with given("a migration parked after AlreadyStarted from a foreign run"):
        accepted(w, notes="pre")
        start_foreign(w.dest)
        w.service.run_until_idle()
        assert w.service.migration(NS, SID).park_reason == "foreign_destination"
    with when("an operator aborts"):
        w.service.abort(NS, SID, "foreign owner keeps the id", "ops")
    with then("allowed: AlreadyStarted proved no commit; source restored"):
        assert w.migration_events() == FOREIGN_PARK + ["MigrationAborted"]
        s = w.service.schedule(NS, SID)
        assert (s.paused, s.notes, s.migration_pending) == (False, "pre", False)
        assert w.created() == 1  # only the foreign run
    assert w.service.verify() == []


def test_f9_abort_racing_a_worker_claim_prevents_the_start(world):
    """I10: the claim append rechecks against a concurrent abort (version conflict)."""
    w = world
    with given("the worker has read the armed claim; an operator aborts before it appends"):
        mid = uuid.UUID(accepted(w).migration_id)
        w.hooks.once("claim.before_append",
                     lambda: w.service.abort(NS, SID, "abort wins", "ops"))
    with when("the worker appends its claim"):
        w.service.worker.attempt(mid)
    with then("the claim is lost, the destination is never called"):
        assert w.migration_events() == ["RequestIdAssigned", "MigrationAborted"]
        assert w.dest.start_log() == [] and w.hooks.seen("start.") == []
    assert w.service.verify() == []


# -- F10 the source executes nothing while a migration is open -------------------------------
MUTATIONS = [dict(paused=False), dict(paused=True), dict(notes="changed"), dict(delete=True)]


@pytest.mark.parametrize("stage", ["pending", "claimed", "parked", "receipted"])
@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: ",".join(m))
def test_f10_source_mutations_refused_while_open(world, stage, mutation):
    w = world
    with given(f"a migration that is {stage}"):
        accepted(w)
        if stage == "claimed":
            w.dest.inject("start", "lose_response")
            w.service.run_until_idle()
        elif stage == "parked":
            start_foreign(w.dest)
            w.service.run_until_idle()
        elif stage == "receipted":
            w.hooks.crash_once("close.before_append")
            with pytest.raises(Crash):
                w.service.run_until_idle()
        assert w.service.migration(NS, SID).state == stage
    with then("every source mutation is migration_pending with nothing written"):
        with refused(w.service, MigrationPending):
            w.service.update_schedule(NS, SID, **mutation)
        with refused(w.service, AlreadyExists):
            w.service.create_schedule(NS, SID)
        assert_source_kept(w)
    assert w.service.verify() == []


# -- F11 retry after completion --------------------------------------------------------------
@pytest.mark.parametrize("request_id", ["R1", None])
def test_f11_retry_after_completion_is_idempotent(world, request_id):
    w = world
    with given("a completed rollback"):
        first = accepted(w, request_id=request_id)
        w.service.run_until_idle()
        assert_closed_by_migration(w)
    with when("the same request is retried (same id, or omitted again)"):
        with nothing_written(w.service):
            again = w.service.rollback(NS, SID, request_id)
    with then("already_completed, same migration, no new start"):
        assert (again.outcome, again.request_id, again.migration_id) == (
            "already_completed", first.request_id, first.migration_id)
        assert w.start_outcomes() == ["created"]
    with then("a different id after completion is closed, with nothing written"):
        with refused(w.service, Closed):
            w.service.rollback(NS, SID, "another")
    with then("a duplicate task delivery after close is dropped"):
        with nothing_written(w.service):
            w.service.worker.attempt(uuid.UUID(first.migration_id))
        assert w.migration_events() == CREATED_PATH
    assert w.service.verify() == []
