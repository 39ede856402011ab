"""Issue 10, items 3 and 4, as pure decisions: a start that never left the process proves that
nothing committed (the claim re-arms); a read that finds nothing while the one start may still
land parks nothing; the checker flags a park inside that window (L1)."""
from __future__ import annotations

from schedfence.domain.rollback import decide as d
from schedfence.domain.invariants.checker import check_history
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.ports import DestinationNotReached, DestinationUnavailable

from tests.domain.rollback.decision_givens import RID, W, claimed, names, run
from tests.domain.invariants.invariant_histories import index_of, numbered, scenario_parked_lost

M = Migration


def test_a_start_that_never_left_re_arms_the_claim():
    g = claimed()
    out = d.outcome_of_start(DestinationNotReached("tcp connect error: connection refused"))
    assert out.kind == "not_sent"
    facts, head = d.decide_start_outcome(g.state, out, 1, W)
    assert names(facts) == ["DestinationAnswered", "StartClaimRearmed"] and head is None
    assert facts[0][1]["proves_no_commit"] is True
    assert facts[1][1]["reason"] == "start_not_sent"
    after = g.then(facts).state
    assert (after.phase, after.claim_armed, after.no_commit_proven) == ("pending", True, True)
    assert d.next_step(after) == "claim_and_start"


def test_an_unknown_outcome_still_forbids_a_second_start():
    g = claimed()
    out = d.outcome_of_start(DestinationUnavailable("deadline exceeded"))
    facts, _ = d.decide_start_outcome(g.state, out, 1, W)
    assert names(facts) == ["DestinationAnswered"] and not facts[0][1]["proves_no_commit"]
    assert d.next_step(g.then(facts).state) == "reconcile"


def _absent(age: float | None, grace: float | None) -> d.ChainObservation:
    return d.ChainObservation(failure="no_current_run", claim_age=age, claim_grace=grace)


def test_absence_inside_the_grace_parks_nothing():
    assert d.decide_chain(claimed().state, _absent(0.009, 15.0), 2, W) == []


def test_absence_after_the_grace_parks_and_records_the_window():
    facts = d.decide_chain(claimed().state, _absent(20.0, 15.0), 2, W)
    assert names(facts) == ["ChainVerified", "MigrationParked"]
    assert (facts[0][1]["claim_age"], facts[0][1]["claim_grace"]) == (20.0, 15.0)


def test_our_chain_is_accepted_even_inside_the_grace():
    obs = d.ChainObservation(current_run_id="A", current_status="running", first_run_id="A",
                             head=run("A", ids=(RID,)), claim_age=0.01, claim_grace=15.0)
    assert names(d.decide_chain(claimed().state, obs, 2, W)) == ["ChainVerified",
                                                                 "OwnershipAccepted"]


def test_the_checker_flags_a_park_inside_the_recorded_grace():
    events, mid = scenario_parked_lost()
    i = index_of(events, M.ChainVerified)
    assert events[i].verdict in ("no_current_run", "head_missing")
    assert check_history(numbered(events)) == []
    events[i] = events[i].model_copy(update={"claim_age": 0.009, "claim_grace": 15.0})
    [v] = check_history(numbered(events))
    assert (v.invariant, v.migration_id) == ("L1", mid) and "0.009s" in v.message


def test_failover_reconcile_waits_while_a_start_from_before_the_failover_may_land():
    """Issue 10, item 3 after a failover: absence inside the grace parks nothing either."""
    state = claimed().state
    assert d.decide_failover_reconcile(state, _absent(0.5, 15.0), 2, 1, W) == []
    facts = d.decide_failover_reconcile(state, _absent(20.0, 15.0), 2, 1, W)
    assert names(facts) == ["FailoverReconciled", "ChainVerified", "MigrationParked"]
    assert facts[1][1]["claim_age"] == 20.0 and facts[2][1]["reason"] == "failover_unverified"
    ours = d.ChainObservation(current_run_id="A", current_status="running", first_run_id="A",
                              head=run("A", ids=(RID,)), claim_age=0.5, claim_grace=15.0)
    assert names(d.decide_failover_reconcile(state, ours, 2, 1, W))[-1] == "OwnershipAccepted"
