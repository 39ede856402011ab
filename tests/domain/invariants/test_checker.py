"""The invariant checker catches what it claims (docs/protocol.md, 'Invariants').

Each test takes a real, clean history written by the service, corrupts it the way a buggy
implementation would, and asserts the checker names exactly the broken invariant, the
migration, and the log positions of the offending events. Clean histories give nothing.
Here: clean histories, I2, I3, I4, I6 and I8; I9, I10, I1, I7, I11 and I13 are in
test_invariants_fence_and_restore.py, issue 9's rules in test_invariants_fences.py.
"""
from __future__ import annotations

from typing import Any

import pytest

from schedfence.domain.invariants.checker import check_history

from tests.domain.invariants.invariant_histories import (M, SCENARIOS, index_of, numbered, only, pos,
                                              scenario_chain_head, scenario_created,
                                              scenario_legacy, scenario_parked_lost,
                                              scenario_rearm)


# -- clean histories -------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_clean_scenarios_have_no_violation(name):
    events, _ = SCENARIOS[name]()
    assert check_history(numbered(events)) == []


def test_all_scenarios_in_one_log_have_no_violation():
    log: list[Any] = []
    for name in sorted(SCENARIOS):
        log += SCENARIOS[name]()[0]
    assert check_history(numbered(log)) == []


# -- corruptions -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["created", "chain_head", "rearm"])
def test_i2_close_without_receipt(name):
    events, mid = SCENARIOS[name]()
    del events[index_of(events, M.OwnershipAccepted)]
    closed = index_of(events, M.SourceClosed)
    v = only(check_history(numbered(events)), "I2")
    assert (v.migration_id, v.positions) == (mid, (pos(closed),))


def test_i2_receipt_from_a_start_answer_that_is_not_ours():
    """AlreadyStarted with another start request id does not prove ownership."""
    events, mid = scenario_created()
    i = index_of(events, M.DestinationAnswered)
    events[i] = events[i].model_copy(update={"kind": "already_started",
                                             "start_request_id": "someone-else"})
    v = only(check_history(numbered(events)), "I2")
    assert (v.migration_id, v.positions) == (mid, (pos(i), pos(index_of(
        events, M.OwnershipAccepted))))


def test_i3_start_with_another_request_id():
    events, mid = scenario_created()
    i = index_of(events, M.DestinationStartIssued)
    events[i] = events[i].model_copy(update={"request_id": "random-per-attempt"})
    v = only(check_history(numbered(events)), "I3")
    created = index_of(events, M.RequestIdAssigned)
    assert (v.migration_id, v.positions) == (mid, (pos(created), pos(i)))


def test_i4_second_claim_and_start_without_rearm():
    events, mid = scenario_parked_lost()
    claim, start = index_of(events, M.StartClaimConsumed), index_of(events,
                                                                   M.DestinationStartIssued)
    parked = index_of(events, M.MigrationParked)
    version = events[parked].originator_version
    again = [events[claim].model_copy(update={"originator_version": version + 1}),
             events[start].model_copy(update={"originator_version": version + 2})]
    events[parked + 1:parked + 1] = again
    v = only(check_history(numbered(events)), "I4")
    assert (v.migration_id, v.positions) == (mid, (pos(parked + 1),))


def test_i4_start_issued_without_claim_directly_before():
    events, mid = scenario_parked_lost()
    start = index_of(events, M.DestinationStartIssued)
    parked = index_of(events, M.MigrationParked)
    events.insert(parked + 1, events[start])
    v = only(check_history(numbered(events)), "I4")
    assert (v.migration_id, v.positions) == (mid, (pos(parked), pos(parked + 1)))


def test_i4_rearm_dropped_makes_second_claim_illegal():
    events, mid = scenario_rearm()
    del events[index_of(events, M.StartClaimRearmed)]
    second_claim = index_of(events, M.StartClaimConsumed, nth=1)
    v = only(check_history(numbered(events)), "I4")
    assert (v.migration_id, v.positions) == (mid, (pos(second_claim),))


def test_i4_second_created_answer():
    events, mid = scenario_rearm()
    first = index_of(events, M.DestinationAnswered)
    second = index_of(events, M.DestinationAnswered, nth=1)
    assert events[second].kind == "created"
    # The first start (refused by the foreign run) claims to have created a chain as well.
    events[first] = events[first].model_copy(update={
        "kind": "created", "start_request_id": "", "proves_no_commit": False})
    violations = check_history(numbered(events))
    i4 = [v for v in violations if v.invariant == "I4"]
    assert [(v.migration_id, v.positions) for v in i4] == [(mid, (pos(first), pos(second)))]
    # Without the no-commit proof the re-arm itself is illegal too (I9); once our chain was
    # seen, the re-arm, claim, start and second creation all resurrect it (I5).
    assert sorted(set(v.invariant for v in violations)) == ["I4", "I5", "I9"]


def test_i6_identity_less_migration_issues_a_start():
    events, mid = scenario_legacy()
    created = index_of(events, M.RequestIdAssigned)
    base = events[created]
    ctx = dict(originator_id=base.originator_id, timestamp=base.timestamp, request_id=None,
               attempt=1, worker="old-binary")
    start = M.DestinationStartIssued(
        originator_version=2, workflow_id=base.workflow_id, workflow_type="t",
        id_reuse_policy="allow_duplicate", id_conflict_policy="fail",
        input={"paused": base.pre_paused, "notes": base.pre_notes}, **ctx)
    events.insert(created + 1, start)
    violations = check_history(numbered(events))
    i6 = [v for v in violations if v.invariant == "I6"]
    assert [(v.migration_id, v.positions) for v in i6] == [(mid, (pos(created),
                                                                  pos(created + 1)))]
    # A start with no claim before it also breaks the strong form of I4.
    assert sorted(v.invariant for v in violations) == ["I4", "I6"]


def test_i6_identity_less_migration_closes_the_source():
    events, mid = scenario_legacy()
    created = index_of(events, M.RequestIdAssigned)
    base = events[created]
    close = M.SourceClosed(originator_id=base.originator_id, originator_version=2,
                           timestamp=base.timestamp, request_id=None,
                           destination_first_run_id="guess")
    events.append(close)
    violations = check_history(numbered(events))
    i6 = [v for v in violations if v.invariant == "I6"]
    assert [(v.migration_id, v.positions) for v in i6] == [(mid, (pos(created), len(events)))]
    # No receipt (I2), and the source never closed with it (I10).
    assert sorted(v.invariant for v in violations) == ["I10", "I2", "I6"]


def test_i8_event_after_source_closed():
    events, mid = scenario_created()
    closed = index_of(events, M.SourceClosed)
    receipt = index_of(events, M.OwnershipAccepted)
    late = M.ChainVerified(originator_id=events[closed].originator_id,
                           originator_version=events[closed].originator_version + 1,
                           timestamp=events[closed].timestamp,
                           request_id=events[closed].request_id, verdict="foreign")
    events.append(late)
    violations = check_history(numbered(events))
    assert {v.invariant for v in violations} == {"I8"}
    assert {(v.migration_id, v.positions) for v in violations} == {
        (mid, (len(events),)), (mid, (pos(receipt), len(events)))}


def test_i8_receipt_rewritten():
    events, mid = scenario_chain_head()
    receipt = index_of(events, M.OwnershipAccepted)
    second = events[receipt].model_copy(update={
        "originator_version": events[receipt].originator_version + 1,
        "destination_first_run_id": "another-chain"})
    events.insert(receipt + 1, second)
    violations = check_history(numbered(events))
    i8 = [v for v in violations if v.invariant == "I8"]
    assert [(v.migration_id, v.positions) for v in i8] == [(mid, (pos(receipt),
                                                                  pos(receipt + 1)))]
