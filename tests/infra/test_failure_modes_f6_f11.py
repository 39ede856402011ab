"""The rollback failure modes F6–F11 of docs/protocol.md (F1–F5 are in test_failure_modes.py):
continue-as-new before the receipt, a concurrent different id, a legacy identity-less
migration, abort and restore, a source that executes nothing while a migration is open,
and a retry after completion."""
from __future__ import annotations

import uuid

import pytest

from schedfence.domain.errors import AlreadyExists, Closed, MigrationPending, RecoveryRefused
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE

from tests.helpers import (NS, SID, WID, Crash, given, new_world, nothing_written, plant_legacy,
                           refused, start_foreign, then, when, world)
from tests.infra.failure_mode_steps import (CLAIM, CREATED_PATH, FOREIGN_PARK, accepted,
                                            assert_closed_by_migration, assert_source_kept,
                                            verdicts)

__all__ = ["world"]  # the fixture, imported for pytest


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
