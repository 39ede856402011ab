"""The handoff's decisions over both aggregates: given the source's and the migration's events,
when a command or task step is decided, then it returns the events for both (one append), or
raises with nothing to write. No store, no destination: their answers are inputs."""
from __future__ import annotations

import uuid

import pytest

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import steps as h
from schedfence.domain.rollback.decide import ChainObservation, StartOutcome
from schedfence.domain.errors import (AlreadyExists, Closed, MigrationPending, RecoveryRefused,
                                      SentinelBlocked)
from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.ports import RunDescription
from schedfence.domain.rollback.recover import Look
from schedfence.domain.source.schedule import Schedule

M, S = Migration, Schedule
NS, SID = "default", "s1"
W = "w1"
FREE = {"workflow_id": f"temporal-sys-scheduler:{SID}", "current": None}


class World:
    """The two aggregates, built by deciding and applying changes as the application does."""

    def __init__(self, paused: bool = False, notes: str = "pre") -> None:
        self.source = Schedule.create(NS, SID, 1, paused, notes, FREE)
        self.migration: Migration | None = None

    def then(self, change: h.Change) -> World:
        changed = change.apply(self.source, self.migration)
        for aggregate in changed:
            if isinstance(aggregate, Migration):
                self.migration = aggregate
        return self

    @property
    def mig(self):  # the migration's state
        return self.migration.state if self.migration else None

    def rollback(self, rid: str | None = "R1", sentinel=FREE) -> h.Change:
        st = self.source.state
        rid, origin, mid = h.rollback_identity(NS, SID, st.incarnation, rid)
        same = self.mig if self.migration and self.migration.id == mid else None
        pending = self.mig if st.fence_migration_id else None
        return h.rollback(st, str(self.source.id), rid, origin, mid, same=same, pending=pending,
                          last=self.mig, sentinel=sentinel, epoch=0, actor="admin")


def types(facts) -> list[str]:
    return [f.event.__name__ for f in facts]


def run(run_id: str, creator: str, status: str = "running") -> RunDescription:
    return RunDescription(run_id, run_id, SCHEDULER_WORKFLOW_TYPE, status,
                          frozenset({creator}), creator)


def owned_head(rid: str = "R1") -> ChainObservation:
    head = run("run-1", rid)
    return ChainObservation(current_run_id="run-1", current_status="running",
                            first_run_id="run-1", head=head)


def claimed_world() -> World:
    w = World()
    w.then(w.rollback())
    return w.then(h.claim(w.source.state, w.mig, 1, W))


# -- rollback ----------------------------------------------------------------------------------
def test_an_accepted_rollback_fences_the_source_and_creates_the_migration_in_one_change():
    w = World(paused=False, notes="mine")
    change = w.rollback()
    assert change.outcome == "accepted"
    assert types(change.source) == ["FencedForMigration"]
    assert types(change.migration) == ["RequestIdAssigned"]
    created = change.migration[0].fields
    assert (created["request_id"], created["origin"], created["claim_armed"]) == \
        ("R1", "caller", True)
    assert (created["pre_paused"], created["pre_notes"]) == (False, "mine")  # I3: pre-state
    w.then(change)
    assert w.source.state.fence_request_id == "R1"
    assert str(w.migration.id) == change.migration_id == w.source.state.fence_migration_id


def test_a_retried_rollback_is_already_pending_and_writes_nothing():
    w = World()
    w.then(w.rollback())
    again = w.rollback()
    assert (again.outcome, again.empty) == ("already_pending", True)
    assert again.migration_id == str(w.migration.id)


def test_a_caller_less_rollback_derives_the_same_id_every_time():
    first = h.rollback_identity(NS, SID, 1, None)
    assert first == h.rollback_identity(NS, SID, 1, None)
    assert first[1] == "derived" and first != h.rollback_identity(NS, SID, 2, None)


def test_a_running_sentinel_refuses_the_rollback():
    w = World()
    sentinel = {"workflow_id": FREE["workflow_id"], "current": {
        "run_id": "d", "workflow_type": DUMMY_WORKFLOW_TYPE, "status": "running"}}
    with pytest.raises(SentinelBlocked):
        w.rollback(sentinel=sentinel)


def test_a_different_request_id_while_one_is_pending_is_refused():
    w = World()
    w.then(w.rollback("R1"))
    with pytest.raises(AlreadyExists):
        w.rollback("R2")


# -- the worker's steps ------------------------------------------------------------------------
def test_claim_needs_the_fence_to_hold_the_migrations_id():
    w = World()
    w.then(w.rollback())
    w.source.release_fence("R1", False, "pre")  # someone else's write released it
    with pytest.raises(MigrationPending):
        h.claim(w.source.state, w.mig, 1, W)


def test_the_answer_that_proves_creation_is_a_receipt_only_while_the_fence_holds():
    w = claimed_world()
    created = StartOutcome("created", "run-1", "run-1")
    change = h.answer(w.source.state, w.mig, created, 1, W)
    assert types(change.migration) == ["DestinationAnswered", "OwnershipAccepted"]
    assert change.receipt and not change.source
    w.source.release_fence("R1", False, "pre")
    with pytest.raises(MigrationPending):
        h.answer(w.source.state, w.mig, created, 1, W)


def test_no_answer_is_recorded_after_the_receipt_or_the_end():
    # A save whose reply was lost, retried into its own rows, once looked like a lost race:
    # the worker recorded the same answer again on top of its own receipt (I8).
    w = claimed_world()
    created = StartOutcome("created", "run-1", "run-1")
    w.then(h.answer(w.source.state, w.mig, created, 1, W))
    with pytest.raises(Closed, match="receipted and holds a receipt"):
        h.answer(w.source.state, w.mig, created, 1, W)
    w.then(h.close(w.source.state, w.mig, 1, W))
    with pytest.raises(Closed, match="completed"):
        h.answer(w.source.state, w.mig, created, 1, W)


def test_a_dedupe_names_the_chain_head_to_verify_and_accepts_nothing_yet():
    w = claimed_world()
    change = h.answer(w.source.state, w.mig, StartOutcome("deduplicated", "run-2", "run-1"), 1, W)
    assert types(change.migration) == ["DestinationAnswered"] and change.head == "run-1"


def test_chain_owned_by_our_create_id_is_a_receipt_and_close_writes_both_aggregates():
    w = claimed_world()
    w.then(h.chain(w.source.state, w.mig, owned_head(), 1, W))
    assert w.mig.receipt == "run-1"
    close = h.close(w.source.state, w.mig, 1, W)
    assert types(close.source) == ["ClosedByMigration"]
    assert types(close.migration) == ["SourceClosed"]
    w.then(close)
    assert w.source.state.closed and w.mig.phase == "completed"


def test_close_is_refused_when_the_fence_no_longer_holds_the_id():
    w = claimed_world()
    w.then(h.chain(w.source.state, w.mig, owned_head(), 1, W))
    w.source.close_for_migration("R1", "run-1")  # closed already (a racing worker)
    with pytest.raises(Closed):
        h.close(w.source.state, w.mig, 2, W)


def test_a_foreign_head_parks_and_never_touches_the_source():
    w = claimed_world()
    change = h.chain(w.source.state, w.mig, owned_head(rid="someone-else"), 1, W)
    assert types(change.migration) == ["ChainVerified", "MigrationParked"]
    assert not change.source


@pytest.mark.parametrize("age, grace, own, expected", [
    (1.0, 15.0, False, True),   # another worker's start may still land
    (20.0, 15.0, False, False),  # the grace has passed
    (1.0, 15.0, True, False),   # our own claim: its start call returned
    (1.0, 0.0, False, False),   # no grace configured
])
def test_the_claim_grace_is_a_rule_of_time_and_identity(age, grace, own, expected):
    assert h.claim_in_flight(age, grace, own) is expected


def test_a_claimed_migration_waits_while_another_workers_start_may_land():
    w = claimed_world()
    assert h.task_step(w.mig, 0, in_flight=True) == "wait"
    assert h.task_step(w.mig, 0, in_flight=False) == "reconcile"


def test_own_worker_threads_share_the_prefix():
    assert h.is_own_worker("host:1/3", "host:1/0", own_prefix="host:1")
    assert not h.is_own_worker("host:2/3", "host:1/0", own_prefix="host:1")
    assert h.is_own_worker("host:1/0", "host:1/0")


# -- abort and recovery ------------------------------------------------------------------------
def test_abort_before_any_start_restores_the_source_in_the_same_change():
    w = World(paused=False, notes="mine")
    w.then(w.rollback())
    change = h.abort(w.source.state, w.mig, "op", "changed my mind", 0)
    assert types(change.source) == ["FenceReleased"]
    assert types(change.migration) == ["MigrationAborted"]
    w.then(change)
    assert (w.source.state.paused, w.source.state.notes) == (False, "mine")
    assert w.source.state.fence_request_id is None and w.mig.phase == "aborted"


def test_abort_after_an_unproven_start_is_refused():
    w = claimed_world()
    with pytest.raises(RecoveryRefused):
        h.abort(w.source.state, w.mig, "op", "r", 0)


def test_no_open_migration_is_refused_by_every_operator_step():
    w = World()
    with pytest.raises(RecoveryRefused, match="no open migration"):
        h.abort(w.source.state, None, "op", "r", 0)
    with pytest.raises(RecoveryRefused, match="no open migration"):
        h.rearm_needs_look(w.source.state, None, False, 0)


def test_resolve_destination_owns_closes_the_source_with_the_named_chain():
    w = claimed_world()
    w.then(h.chain(w.source.state, w.mig, owned_head(rid="someone-else"), 1, W))  # parked
    look = Look(current=run("run-1", "someone-else"), named=run("run-1", "someone-else"))
    change = h.resolve(w.source.state, w.mig, "op", "checked", "destination_owns", "run-1",
                       look)
    assert types(change.source) == ["ClosedByMigration"]
    assert types(change.migration) == ["MigrationResolved", "SourceClosed"]
    w.then(change)
    assert w.source.state.closed and w.mig.phase == "completed"


def test_resolve_source_kept_restores_the_source():
    w = claimed_world()
    w.then(h.chain(w.source.state, w.mig, owned_head(rid="someone-else"), 1, W))
    change = h.resolve(w.source.state, w.mig, "op", "checked", "source_kept", None, Look())
    assert types(change.source) == ["FenceReleased"]
    assert types(change.migration) == ["MigrationResolved", "MigrationAborted"]


def test_a_change_applied_to_the_aggregates_is_what_the_decision_returned():
    w = World()
    change = w.rollback()
    w.then(change)
    assert [type(e).__name__ for e in w.source.collect_events()] == \
        ["Created", "FencedForMigration"]
    assert [type(e).__name__ for e in w.migration.collect_events()] == ["RequestIdAssigned"]
    assert uuid.UUID(change.migration_id) == w.migration.id


# -- the due-work class the index stores -------------------------------------------------------
def test_due_class_follows_next_step_for_each_phase():
    w = World()
    w.then(w.rollback())
    assert d.due(w.mig) == "now"  # pending, armed: claim and start
    w.then(h.claim(w.source.state, w.mig, 1, W))
    assert d.due(w.mig) == "now"  # claimed: reconcile
    foreign = h.answer(w.source.state, w.mig, StartOutcome("deduplicated", "run-2", "run-1"),
                       1, W)
    w.then(foreign).then(h.chain(w.source.state, w.mig, owned_head(rid="other"), 1, W))
    assert (w.mig.phase, w.mig.park_reason) == ("parked", "foreign_destination")
    # A dedupe proves nothing about commits: no automatic re-arm, so only a failover (which
    # reconciles) or an operator moves it on; the index must not offer it to workers now.
    assert not w.mig.no_commit_proven and d.due(w.mig) == "after_failover"
    assert d.next_step(w.mig, w.mig.epoch) == "idle"


def test_a_foreign_park_with_proof_of_no_commit_is_due_now_for_the_foreign_check():
    w = claimed_world()
    refused = StartOutcome("already_started", "run-9", "run-9", start_request_id="other")
    w.then(h.answer(w.source.state, w.mig, refused, 1, W))
    w.then(h.chain(w.source.state, w.mig, owned_head(rid="other"), 1, W))
    assert w.mig.no_commit_proven and w.mig.park_reason == "foreign_destination"
    assert d.due(w.mig) == "now" and d.next_step(w.mig, w.mig.epoch) == "check_foreign"


def test_closed_and_legacy_migrations_are_never_due_for_workers():
    w = World()
    w.then(w.rollback())
    w.then(h.abort(w.source.state, w.mig, "op", "r", 0))
    assert d.due(w.mig) == "closed"
    legacy = Migration.assign_request_id(
        uuid.UUID(int=9), namespace=NS, schedule_id=SID, source_id=str(w.source.id),
        incarnation=1, workflow_id="wf", request_id=None, origin="legacy", pre_paused=False,
        pre_notes="", claim_armed=False)
    assert legacy.state.phase == "legacy_pending" and d.due(legacy.state) == "operator"


# -- the source's own gates --------------------------------------------------------------------
def test_a_key_gets_a_new_incarnation_only_when_its_current_one_is_closed():
    from schedfence.domain.source.incarnation import check_creatable
    check_creatable(NS, SID, None)
    w = World()
    with pytest.raises(AlreadyExists, match="incarnation 1"):
        check_creatable(NS, SID, w.source.state)
    w.source.delete()
    check_creatable(NS, SID, w.source.state)


def test_an_unpromoted_standby_may_not_act():
    from schedfence.domain.errors import StandbyNotPromoted
    from schedfence.domain.failover import EpochState, check_active
    check_active({}, None)  # never a standby
    with pytest.raises(StandbyNotPromoted, match="copied up to f@7"):
        check_active({"f": 7}, None)
    promoted = EpochState(epoch=1, replicated={"f": 7})
    check_active({"f": 7}, promoted)  # promoted since its last copy
    with pytest.raises(StandbyNotPromoted):
        check_active({"f": 9}, promoted)  # copied again after the promotion
