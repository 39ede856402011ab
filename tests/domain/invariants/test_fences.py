"""The checker's rules for issue 9's holes, over real histories edited one event at a time:
I12 (the sentinel check's observation), I16 (no claim used across a failover before
reconciling), I1 (no source over a running destination chain), I13 (create id, not attached),
and I4 across two copies of one store (the lost tail's second chain)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from uuid import uuid4

from schedfence.domain.failover import StoreEpoch
from schedfence.domain.ids import (DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE,
                                   destination_workflow_id)
from schedfence.domain.invariants.checker import check_histories, check_history
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.schedule import Schedule
from tests.replay import corpus
from tests.domain.invariants.invariant_histories import (index_of, numbered, only, pos, scenario_created,
                                              scenario_rearm)

M, S = Migration, Schedule
RUNNING = {"run_id": "run-x", "first_execution_run_id": "run-x", "status": "running",
           "create_request_id": "someone"}


def _older(name: str) -> list[tuple[int, Any]]:
    return corpus.decode(corpus.load(corpus.HISTORIES / "older_release" / name)["events"])


def test_i12_a_rollback_accepted_over_a_running_dummy():
    events, mid = scenario_created()
    i = index_of(events, M.RequestIdAssigned)
    check = {"workflow_id": events[i].workflow_id,
             "current": dict(RUNNING, workflow_type=DUMMY_WORKFLOW_TYPE)}
    events[i] = events[i].model_copy(update={"sentinel_check": check})
    v = only(check_history(numbered(events)), "I12")
    assert (v.migration_id, v.positions) == (mid, (pos(i),))


def test_i12_a_closed_dummy_or_nothing_is_fine():
    events, _ = scenario_created()
    i = index_of(events, M.RequestIdAssigned)
    assert events[i].sentinel_check == {"workflow_id": events[i].workflow_id, "current": None}
    closed = dict(RUNNING, workflow_type=DUMMY_WORKFLOW_TYPE, status="completed")
    events[i] = events[i].model_copy(update={"sentinel_check": {"current": closed}})
    assert check_history(numbered(events)) == []


def _failover_before(events: list[Any], i: int) -> list[Any]:
    """A promotion recorded just before event ``i``."""
    store = StoreEpoch.start()
    store.record_failover("ann", "active lost", {})
    recorded = store.collect_events()
    return events[:i] + recorded + events[i:]


def test_i16_a_claim_used_after_a_failover_without_reconciling():
    events, mid = scenario_created()
    claim = index_of(events, M.StartClaimConsumed)
    events = _failover_before(events, claim)
    violations = check_history(numbered(events))
    i16 = [v for v in violations if v.invariant == "I16"]
    # The claim and the start it allowed (positions shift by the two epoch events).
    assert [v.positions for v in i16] == [(pos(claim + 1), pos(claim + 2)),
                                          (pos(claim + 1), pos(claim + 3))]
    assert {v.migration_id for v in i16} == {mid}


def test_i16_a_foreign_rearm_after_a_failover_without_reconciling():
    events, mid = scenario_rearm()
    rearm = index_of(events, M.StartClaimRearmed)
    events = _failover_before(events, rearm)
    assert "I16" in {v.invariant for v in check_history(numbered(events))}


def test_i16_a_failover_after_the_receipt_changes_nothing():
    events, _ = scenario_created()
    close = index_of(events, S.ClosedByMigration)
    assert check_history(numbered(_failover_before(events, close))) == []


def test_i1_a_source_created_over_a_running_scheduler_chain():
    events, _ = scenario_created()
    i = index_of(events, S.Created)
    check = {"workflow_id": destination_workflow_id(events[i].schedule_id),
             "current": dict(RUNNING, workflow_type=SCHEDULER_WORKFLOW_TYPE)}
    events[i] = events[i].model_copy(update={"destination_check": check})
    assert only(check_history(numbered(events)), "I1").positions == (pos(i),)


def test_i1_a_re_create_after_a_handover_that_never_looked():
    events, _ = scenario_created()
    created = events[index_of(events, S.Created)]
    again = created.model_copy(update={
        "originator_id": uuid4(), "incarnation": 2, "destination_check": None,
        "timestamp": datetime.now(timezone.utc)})
    assert only(check_history(numbered(events + [again])), "I1").positions[-1] == \
        len(events) + 1


def test_the_older_release_histories_of_the_holes_are_flagged():
    assert {v.invariant for v in check_history(
        _older("hole1_attached_request_id.json"))} == {"I13"}
    assert {v.invariant for v in check_history(
        _older("hole3_recreate_over_running_chain.json"))} == {"I1"}
    active = _older("hole2_failover_active.json")
    standby = _older("hole2_failover_standby.json")
    assert check_history(active) == [] and check_history(standby) == []  # each alone: clean
    both = check_histories([active, standby])
    assert both[0] == [] and [v.invariant for v in both[1]] == ["I4"]
    assert "2 destination chains" in both[1][0].message


def test_i0_a_deleted_event_is_a_version_gap_named_by_aggregate():
    events, mid = scenario_created()
    i = index_of(events, M.DestinationStartIssued)
    deleted = events[i]
    del events[i]
    violations = check_history(list(enumerate(events, start=1)))  # positions as stored
    gaps = [v for v in violations if v.invariant == "I0"]
    assert [v.migration_id for v in gaps] == [mid]
    assert f"versions {deleted.originator_version}..{deleted.originator_version} missing" \
        in gaps[0].message and str(deleted.originator_id) in gaps[0].message


def test_i0_a_fence_whose_migration_is_gone():
    events, mid = scenario_created()
    events = events[:index_of(events, M.RequestIdAssigned)]  # the migration row was lost
    violations = check_history(list(enumerate(events, start=1)))
    assert [(v.invariant, v.migration_id) for v in violations] == [("I0", mid)]
    assert "which the log does not hold" in violations[0].message
