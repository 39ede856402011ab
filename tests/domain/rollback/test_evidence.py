"""Issue 27, item 11: absence inside the namespace's retention as proof that a start whose
outcome was unknown committed nothing (F16). The pure rule: re-arm only when
DescribeWorkflowExecution showed no run at all at the workflow id, the start's answer was a
transport failure or was never recorded (a crash), the claim grace has passed and the claim is
younger than the retention less a margin; each condition failing parks as before. The
checker flags a re-arm whose recorded observation does not satisfy the rule (I9)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import evidence as rt
from schedfence.domain.invariants.checker import check_history
from schedfence.domain.rollback.aggregate import Migration

from tests.domain.rollback.decision_givens import (W, Given, answer, claimed, claimed_unknown, names,
                                          parked_head_missing)
from tests.domain.invariants.invariant_histories import numbered

M = Migration
T0 = datetime(2026, 12, 5, 6, 0, tzinfo=timezone.utc)
DAY = 86400.0


def _reading(claim_answer: str = "unavailable", claim_age: float = 120.0,
             retention: float = DAY, margin: float = 3600.0,
             claim_at: datetime = T0) -> rt.RetentionReading:
    return rt.RetentionReading(claim_at + timedelta(seconds=claim_age), retention,
                               rt.ClaimRecord(claim_at, claim_answer), margin)


def _absent(reading: rt.RetentionReading | None = None, step_age: float = 30.0,
            grace: float = 15.0, failure: str = "no_current_run") -> d.ChainObservation:
    return d.ChainObservation(failure=failure, detail="no current run", claim_age=step_age,
                              claim_grace=grace,
                              retention=_reading() if reading is None else reading)


def _decide(obs: d.ChainObservation, given=claimed_unknown) -> tuple[d.Facts, Given]:
    g = given()
    facts = d.decide_chain(g.state, obs, 2, W)
    return facts, g.then(facts)


@pytest.mark.parametrize("given,kind", [(claimed_unknown, "unavailable"), (claimed, "none")],
                         ids=["transport_failure", "crash_before_the_answer"])
def test_no_run_at_all_inside_retention_re_arms_with_its_observation(given, kind):
    facts, g = _decide(_absent(_reading(kind)), given)
    assert names(facts) == ["StartClaimRearmed"]
    fields = facts[0].fields
    assert (fields["actor"], fields["reason"]) == ("worker", rt.REARM_REASON)
    seen = fields["absence"]
    assert (seen.source, seen.run_found, seen.answer) == (rt.DESCRIBE, False, kind)
    assert (seen.claim_age, seen.step_age, seen.claim_grace) == (120.0, 30.0, 15.0)
    assert (seen.retention_seconds, seen.margin_seconds) == (DAY, 3600.0)
    assert seen.observed_at == T0 + timedelta(seconds=120)
    after = g.state
    assert (after.phase, after.claim_armed, after.no_commit_proven) == ("pending", True, True)
    assert d.next_step(after) == "claim_and_start"


def _parks(obs: d.ChainObservation, given=claimed_unknown, why: str = "") -> None:
    facts, g = _decide(obs, given)
    assert names(facts) == ["ChainVerified", "MigrationParked"], facts
    assert (g.state.phase, g.state.park_reason) == ("parked", "head_missing")
    assert g.state.claim_armed is False and not g.state.no_commit_proven
    assert why in facts[1].fields["detail"], facts[1].fields["detail"]


@pytest.mark.parametrize("obs,why", [
    (_absent(_reading(claim_age=DAY - 3600.0)), "not younger than retention"),
    (_absent(_reading(claim_age=DAY + 60)), "not younger than retention"),
    (_absent(_reading(retention=3000.0)), "leaves nothing after the"),
    (_absent(_reading(margin=0.0)), "leaves nothing after the"),
    (_absent(grace=0.0), "no claim grace"),
    (_absent(_reading(claim_age=-5.0)), "not younger than retention"),
], ids=["claim_at_retention_less_margin", "claim_older_than_retention",
        "retention_shorter_than_margin", "no_margin", "no_grace", "claim_in_the_future"])
def test_each_failed_condition_parks_as_before(obs, why):
    _parks(obs, why=why)


def test_a_definite_answer_since_the_claim_parks():
    """The log says the start was answered (a run came back): absence proves nothing."""
    for kind in ("created", "deduplicated", "already_started", "rejected", "not_sent"):
        _parks(_absent(_reading(kind)), why=f"{kind!r}")


def test_no_retention_reading_parks():
    _parks(d.ChainObservation(failure="no_current_run", claim_age=30.0, claim_grace=15.0),
           why="retention was not read")


def test_a_run_at_the_id_whose_head_is_gone_parks():
    """Something is at the workflow id (its first run gone): that is no absence."""
    facts, g = _decide(_absent(failure="head_missing"))
    assert names(facts) == ["ChainVerified", "MigrationParked"]
    assert g.state.park_reason == "head_missing"


def test_inside_the_grace_nothing_is_decided_yet():
    assert _decide(_absent(step_age=5.0))[0] == []


def test_the_state_must_be_a_claim_with_only_its_own_start_unproven():
    claim = rt.ClaimRecord(T0)
    assert rt.state_refusal("claimed", 1, False, claim) is None
    assert "2 starts are unproven" in rt.state_refusal("claimed", 2, False, claim)
    assert "not claimed" in rt.state_refusal("parked", 1, False, claim)
    assert "unverified" in rt.state_refusal("parked", 1, True, claim)
    assert "no claim" in rt.state_refusal("claimed", 1, False, None)
    parked = parked_head_missing().state  # a park stays for an operator
    assert rt.absence_proof(parked.phase, parked.unproven_starts, parked.unverified,
                            _reading(), 30.0, 15.0)[0] is None


def test_a_visibility_read_or_a_found_run_is_no_proof():
    good = rt.AbsenceObserved(observed_at=T0, answer="none", claim_age=10, step_age=20,
                              claim_grace=15, retention_seconds=DAY)
    assert rt.refusal(good) is None
    assert "a run" in rt.refusal(good.model_copy(update={"run_found": True}))
    assert "not DescribeWorkflowExecution" in rt.refusal(
        good.model_copy(update={"source": "list_workflow_executions"}))


# -- the checker (I9) ------------------------------------------------------------------------
def _re_armed(given=claimed_unknown, **change) -> list:
    """A history re-armed on absence by the decision, with its observation then edited."""
    g = given()
    claim = next(e for e in g.events if isinstance(e, M.StartClaimConsumed))
    kind = "none" if given is claimed else "unavailable"
    obs = _absent(_reading(kind, claim_at=claim.timestamp), step_age=0.0, grace=0.0)
    obs = d.ChainObservation(**{**vars(obs), "claim_age": 20.0, "claim_grace": 15.0})
    facts = d.decide_chain(g.state, obs, 2, W)
    assert names(facts) == ["StartClaimRearmed"]
    if change:
        absence = facts[0].fields["absence"].model_copy(update=change)
        facts = [facts[0]._replace(fields={**facts[0].fields, "absence": absence})]
    g.then(facts)
    g.then(d.claim_facts(g.state, 3, W))  # and the claim is used again, once
    return g.events


def test_the_checker_accepts_a_re_arm_that_satisfies_the_rule():
    assert check_history(numbered(_re_armed())) == []
    assert check_history(numbered(_re_armed(claimed))) == []


@pytest.mark.parametrize("change,why", [
    ({"claim_age": DAY}, "not younger than retention"),
    ({"answer": "created"}, "'created'"),
    ({"answer": "none"}, "the log holds 'unavailable'"),
    ({"step_age": 5.0}, "inside the 15s claim grace"),
    ({"step_age": 10_000.0}, "since the last step; the log's"),
    ({"claim_age": 1.0, "observed_at": T0 + timedelta(days=3)}, "the log's is"),
    ({"run_found": True}, "a run (open or closed)"),
    ({"margin_seconds": 0.0}, "leaves nothing"),
    ({"source": "list_workflow_executions"}, "not DescribeWorkflowExecution"),
], ids=["claim_too_old", "definite_answer", "answer_not_the_logs", "inside_grace",
        "step_age_overstated", "claim_age_understated", "run_found", "no_margin",
        "visibility"])
def test_the_checker_flags_a_re_arm_whose_observation_proves_nothing(change, why):
    violations = check_history(numbered(_re_armed(**change)))
    assert [v.invariant for v in violations] == ["I9"], violations
    assert why in violations[0].message, violations[0].message


def test_the_checker_flags_a_re_arm_on_absence_of_a_parked_migration():
    g = parked_head_missing()
    claim = next(e for e in g.events if isinstance(e, M.StartClaimConsumed))
    absence = rt.AbsenceObserved(observed_at=claim.timestamp + timedelta(seconds=60),
                                 answer="unavailable", claim_age=60, step_age=30,
                                 claim_grace=15, retention_seconds=DAY)
    g.then([d.Fact(M.StartClaimRearmed, {"request_id": g.state.request_id, "actor": "worker",
                                         "reason": rt.REARM_REASON, "absence": absence})])
    violations = check_history(numbered(g.events))
    assert [v.invariant for v in violations] == ["I9"]
    assert "not claimed" in violations[0].message


def test_an_old_re_arm_reads_as_v1_without_an_observation():
    v1 = {"request_id": "R1", "actor": "worker", "reason": "foreign_run_closed"}
    M.StartClaimRearmed.upcast_v1_v2(v1)
    assert v1["absence"] is None and M.StartClaimRearmed.class_version == 2
