"""The pure decider, with no store and no destination: given a migration state folded from
events with ``evolve_migration``, when a decision is asked, then it returns these facts.

The phases, rollback, next step, claim and the start's outcome; the chain, the foreign
check, abort and determinism are in test_decisions_chain.py."""
from __future__ import annotations

import pytest

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback.decide import StartOutcome
from schedfence.domain.errors import AlreadyExists, Closed
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.ports import (AlreadyStarted, DestinationUnavailable, InvalidStartRequest,
                                     StartAccepted)

from tests.domain.rollback.decision_givens import (CLOSED_STATUSES, RID, W, WID, aborted, assigned, claimed,
                                          claimed_unknown, completed, legacy, names,
                                          parked_foreign, parked_foreign_unknown,
                                          parked_head_missing, parked_rejected, pending, rearmed,
                                          receipted, reclaimed, source)


# -- folding sanity: the givens are the phases they claim to be -------------------------------
@pytest.mark.parametrize("given,phase", [
    (pending, "pending"), (claimed, "claimed"), (claimed_unknown, "claimed"),
    (receipted, "receipted"), (completed, "completed"), (parked_foreign, "parked"),
    (parked_head_missing, "parked"), (parked_rejected, "parked"), (rearmed, "pending"),
    (reclaimed, "claimed"), (aborted, "aborted"), (legacy, "legacy_pending"),
])
def test_folded_phase(given, phase):
    assert given().state.phase == phase


# -- rollback_gate -------------------------------------------------------------------------
def test_rollback_accepts_when_nothing_pending():
    assert d.rollback_gate(source(), RID, None, None) == "accept"


def test_rollback_same_id_pending_is_idempotent():
    g = pending()
    assert d.rollback_gate(source(), RID, g.state, g.state) == "already_pending"


def test_rollback_other_id_pending_already_exists():
    with pytest.raises(AlreadyExists, match="R1"):
        d.rollback_gate(source(), "R2", None, pending().state)


def test_rollback_legacy_pending_already_exists():
    with pytest.raises(AlreadyExists, match="legacy"):
        d.rollback_gate(source(), RID, None, legacy().state)


@pytest.mark.parametrize("closed", [False, True])
def test_rollback_same_id_completed_is_idempotent_even_on_closed_source(closed):
    st = source(closed=closed, close_reason="migrated" if closed else "")
    assert d.rollback_gate(st, RID, completed().state, None) == "already_completed"


@pytest.mark.parametrize("reason", ["deleted", "migrated"])
def test_rollback_closed_source_without_completed_same_id_is_closed(reason):
    with pytest.raises(Closed):
        d.rollback_gate(source(closed=True, close_reason=reason), "R2", None, None)
    with pytest.raises(Closed):  # an aborted migration with this id is no completion
        d.rollback_gate(source(closed=True, close_reason=reason), RID, aborted().state, None)


def test_rollback_reusing_an_aborted_id_already_exists():
    with pytest.raises(AlreadyExists, match="new request id"):
        d.rollback_gate(source(), RID, aborted().state, None)


# -- next_step -------------------------------------------------------------------------------
@pytest.mark.parametrize("given,step", [
    (pending, "claim_and_start"),
    (rearmed, "claim_and_start"),
    (claimed, "reconcile"),
    (claimed_unknown, "reconcile"),
    (reclaimed, "reconcile"),
    (receipted, "close"),
    (completed, "drop"),
    (aborted, "drop"),
    (legacy, "fail_closed"),
    (parked_foreign, "check_foreign"),
    (parked_foreign_unknown, "idle"),  # the lost answer proves nothing: never re-armed
    (parked_head_missing, "idle"),
    (parked_rejected, "idle"),
])
def test_next_step_per_phase(given, step):
    assert d.next_step(given().state) == step


def test_next_step_without_durable_id_fails_closed():
    assert d.next_step(assigned(request_id="").state) == "fail_closed"


def test_next_step_never_starts_on_an_unarmed_claim():
    assert d.next_step(assigned(claim_armed=False).state) not in ("claim_and_start", "close")


# -- claim and start request -----------------------------------------------------------------
def test_claim_facts_consume_then_issue_with_durable_id_and_pre_state():
    g = pending()
    facts = d.claim_facts(g.state, 3, W)
    assert names(facts) == ["StartClaimConsumed", "DestinationStartIssued"]
    issued = facts[1][1]
    assert issued["request_id"] == RID and (issued["attempt"], issued["worker"]) == (3, W)
    assert (issued["id_reuse_policy"], issued["id_conflict_policy"]) == ("allow_duplicate",
                                                                         "fail")
    assert (issued["input"]["paused"], issued["input"]["notes"]) == (True, "pre")
    after = g.then(facts).state
    assert (after.phase, after.claim_armed, after.starts_issued, after.no_commit_proven) == (
        "claimed", False, 1, False)
    req = d.start_request(after)
    assert (req.request_id, req.workflow_id, req.workflow_type) == (RID, WID,
                                                                    SCHEDULER_WORKFLOW_TYPE)


# -- outcome_of_start ------------------------------------------------------------------------
@pytest.mark.parametrize("ans,kind", [
    (StartAccepted("A", "A", "running", started=True), "created"),
    # Not started for us: our id was attached, or the destination did not say.
    (StartAccepted("A", "A", "running", started=False), "deduplicated"),
    (StartAccepted("A", "A", "running"), "deduplicated"),
    *[(StartAccepted("A", "A", s), "deduplicated") for s in CLOSED_STATUSES],
    (AlreadyStarted("other", "F", "F0"), "already_started"),
    (DestinationUnavailable("timeout"), "unavailable"),
    (InvalidStartRequest("bad policy"), "rejected"),
])
def test_outcome_of_start_classifies_answers(ans, kind):
    out = d.outcome_of_start(ans)
    assert out.kind == kind
    if isinstance(ans, AlreadyStarted):
        assert (out.start_request_id, out.run_id, out.first_execution_run_id) == (
            "other", "F", "F0")


# -- decide_start_outcome --------------------------------------------------------------------
def test_start_created_accepts():
    g = claimed()
    facts, head = d.decide_start_outcome(g.state, d.outcome_of_start(
        StartAccepted("A", "A", "running", started=True)), 1, W)
    assert names(facts) == ["DestinationAnswered", "OwnershipAccepted"] and head is None
    assert facts[0][1]["proves_no_commit"] is False
    assert facts[1][1] == dict(request_id=RID, attempt=1, worker=W,
                               destination_first_run_id="A", evidence="start_created")
    assert g.then(facts).state.receipt == "A"


@pytest.mark.parametrize("status", ("running",) + CLOSED_STATUSES)
def test_a_start_that_did_not_create_for_us_is_verified_at_the_chain_head(status):
    """Our id may merely be attached to the run the destination returned (USE_EXISTING +
    attach): no receipt on that alone, the chain head's create id decides."""
    g = claimed()
    facts, head = d.decide_start_outcome(g.state, d.outcome_of_start(
        StartAccepted("A2", "A", status, started=False)), 1, W)
    assert names(facts) == ["DestinationAnswered"] and head == "A"  # the head, not the run
    assert facts[0][1]["kind"] == "deduplicated" and not facts[0][1]["proves_no_commit"]
    assert g.then(facts).state.phase == "claimed"


@pytest.mark.parametrize("first", ["A", ""])
def test_start_already_started_same_id_accepts(first):
    g = claimed()
    out = StartOutcome("already_started", "A", first, RID, "running")
    facts, head = d.decide_start_outcome(g.state, out, 1, W)
    assert names(facts) == ["DestinationAnswered", "OwnershipAccepted"] and head is None
    assert facts[1][1]["evidence"] == "already_started_same_id"
    assert facts[1][1]["destination_first_run_id"] == "A"


def test_start_already_started_other_id_returns_head_to_verify():
    g = claimed()
    out = StartOutcome("already_started", "B", "A", "server-uuid", "running")
    facts, head = d.decide_start_outcome(g.state, out, 1, W)
    assert names(facts) == ["DestinationAnswered"] and head == "A"
    assert facts[0][1]["proves_no_commit"] is True
    after = g.then(facts).state
    assert (after.phase, after.receipt, after.no_commit_proven) == ("claimed", None, True)


def test_start_unavailable_leaves_claim_consumed_and_unproven():
    g = claimed()
    facts, head = d.decide_start_outcome(g.state, StartOutcome("unavailable"), 1, W)
    assert names(facts) == ["DestinationAnswered"] and head is None
    assert facts[0][1]["proves_no_commit"] is False
    after = g.then(facts).state
    assert (after.phase, after.claim_armed, after.no_commit_proven) == ("claimed", False, False)
    assert d.next_step(after) == "reconcile"


def test_start_rejected_parks_with_proof_of_no_commit():
    g = claimed()
    out = d.outcome_of_start(InvalidStartRequest("bad policy"))
    facts, head = d.decide_start_outcome(g.state, out, 1, W)
    assert names(facts) == ["DestinationAnswered", "MigrationParked"] and head is None
    assert facts[0][1]["proves_no_commit"] is True
    assert facts[1][1]["reason"] == "start_rejected"
    after = g.then(facts).state
    assert (after.phase, after.park_reason, after.no_commit_proven) == ("parked",
                                                                        "start_rejected", True)


def test_the_start_outcome_is_the_recorded_answer_field_for_field() -> None:
    # One idea, one field list: the outcome is what DestinationAnswered records of the answer
    # (the event adds the step's context and its own verdict, proves_no_commit).
    from dataclasses import fields

    from schedfence.domain.rollback.aggregate import Migration
    recorded = list(Migration.DestinationAnswered.model_fields)
    context = ["originator_id", "originator_version", "timestamp", "request_id", "attempt",
               "worker"]
    assert [f.name for f in fields(StartOutcome)] == \
        [n for n in recorded if n not in context and n != "proves_no_commit"]
