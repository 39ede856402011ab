"""The pure decider, continued (see test_decisions.py): the chain-head verdict, the foreign
check, abort, and that every decision is deterministic and leaves its input alone."""
from __future__ import annotations

import copy

import pytest

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback.decide import ChainObservation, StartOutcome
from schedfence.domain.errors import RecoveryRefused
from schedfence.domain.rollback.aggregate import MigrationState, evolve_migration

from tests.domain.rollback.decision_givens import (RID, W, aborted, claimed, claimed_unknown, completed,
                                          names, parked_foreign, parked_foreign_unknown,
                                          parked_head_missing, parked_rejected, pending, rearmed,
                                          receipted, reclaimed, run, source)


# -- decide_chain ----------------------------------------------------------------------------
def _chain(obs: ChainObservation, given=claimed_unknown) -> tuple[d.Facts, MigrationState]:
    g = given()
    facts = d.decide_chain(g.state, obs, 2, W)
    return facts, g.then(facts).state


@pytest.mark.parametrize("current", ["A", "B"])  # the head itself, or a continued-as-new run
def test_chain_owned_accepts_via_head(current):
    obs = ChainObservation(current_run_id=current, current_status="running", first_run_id="A",
                           head=run("A", status="continued_as_new" if current == "B"
                                    else "running", ids=(RID, "attached")))
    facts, after = _chain(obs)
    assert names(facts) == ["ChainVerified", "OwnershipAccepted"]
    assert facts[0][1]["verdict"] == "owned"
    assert facts[0][1]["head_request_ids"] == sorted([RID, "attached"])
    assert facts[0][1]["head_create_request_id"] == RID
    assert facts[1][1]["evidence"] == "chain_head"
    assert (after.phase, after.receipt) == ("receipted", "A")


@pytest.mark.parametrize("head", [run("A", ids=("other",)),  # another create request id
                                  run("X", "A", ids=(RID,)),  # described run is not the head
                                  run("A", ids=("F", RID)),  # ours only attached to F's run
                                  run("A", ids=(RID,), creator="")],  # creator unknown
                         ids=["other_id", "not_the_head", "ours_attached", "creator_unknown"])
def test_chain_foreign_parks(head):
    obs = ChainObservation(current_run_id="B", current_status="running", first_run_id="A",
                           head=head)
    facts, after = _chain(obs)
    assert names(facts) == ["ChainVerified", "MigrationParked"]
    assert facts[0][1]["verdict"] == "foreign"
    assert (after.phase, after.park_reason, after.receipt) == ("parked",
                                                               "foreign_destination", None)


@pytest.mark.parametrize("failure,reason", [("head_missing", "head_missing"),
                                            ("no_current_run", "head_missing"),
                                            ("no_first_run_identity", "no_first_run_identity")])
def test_chain_without_surviving_proof_parks(failure, reason):
    facts, after = _chain(ChainObservation(failure=failure, current_run_id="B"))
    assert names(facts) == ["ChainVerified", "MigrationParked"]
    assert facts[0][1]["verdict"] == failure
    assert (after.phase, after.park_reason) == ("parked", reason)
    assert d.next_step(after) == "idle"  # never starts again on its own


def test_chain_unavailable_only_records_the_observation():
    facts, after = _chain(ChainObservation(failure="unavailable", detail="timeout"))
    assert names(facts) == ["ChainVerified"] and facts[0][1]["verdict"] == "unavailable"
    assert after.phase == "claimed" and d.next_step(after) == "reconcile"


# -- decide_foreign_check --------------------------------------------------------------------
def test_foreign_check_running_does_nothing():
    assert d.decide_foreign_check(parked_foreign().state, run("F", ids=("other",)), 2, W) == []


@pytest.mark.parametrize("current", [run("F", status="completed", ids=("other",)),
                                     run("F", status="terminated", ids=("other",)), None],
                         ids=["completed", "terminated", "gone"])
def test_foreign_check_closed_rearms(current):
    g = parked_foreign()
    facts = d.decide_foreign_check(g.state, current, 2, W)
    assert names(facts) == ["StartClaimRearmed"]
    assert facts[0][1]["reason"] == "foreign_run_closed" and facts[0][1]["actor"] == "worker"
    assert facts[0][1]["evidence"]["current_status"] == (current.status if current
                                                          else "no_current_run")
    after = g.then(facts).state
    assert (after.phase, after.claim_armed, after.park_reason) == ("pending", True, None)
    assert d.next_step(after) == "claim_and_start"


# -- decide_abort ----------------------------------------------------------------------------
@pytest.mark.parametrize("given", [pending, parked_foreign, parked_rejected, rearmed])
def test_abort_allowed_while_no_start_can_have_committed(given):
    g = given()
    facts = d.decide_abort(g.state, "ops", "cancel")
    assert names(facts) == ["MigrationAborted"]
    assert (facts[0][1]["restored_paused"], facts[0][1]["restored_notes"]) == (True, "pre")
    assert g.then(facts).state.phase == "aborted"


@pytest.mark.parametrize("given", [claimed, claimed_unknown, reclaimed, parked_foreign_unknown,
                                   parked_head_missing, receipted, completed, aborted])
def test_abort_refused_when_a_start_may_have_committed_or_closed(given):
    with pytest.raises(RecoveryRefused):
        d.decide_abort(given().state, "ops", "cancel")


# -- determinism -----------------------------------------------------------------------------
DECISIONS = {
    "rollback": lambda: d.rollback_gate(source(), RID, None, pending().state),
    "next_step": lambda: d.next_step(parked_foreign().state),
    "claim": lambda: d.claim_facts(pending().state, 1, W),
    "start_outcome": lambda: d.decide_start_outcome(
        claimed().state, StartOutcome("already_started", "B", "A", "x", "running"), 1, W),
    "chain": lambda: d.decide_chain(claimed_unknown().state, ChainObservation(
        current_run_id="B", first_run_id="A", head=run("A")), 2, W),
    "foreign_check": lambda: d.decide_foreign_check(parked_foreign().state, None, 2, W),
    "abort": lambda: d.decide_abort(parked_foreign().state, "ops", "cancel"),
    "close": lambda: d.close_facts(receipted().state, 1, W),
}


@pytest.mark.parametrize("name", list(DECISIONS))
def test_decisions_are_deterministic(name):
    assert DECISIONS[name]() == DECISIONS[name]()


@pytest.mark.parametrize("given", [pending, claimed_unknown, parked_foreign, receipted])
def test_decisions_do_not_mutate_their_input(given):
    state = given().state
    snapshot = copy.deepcopy(state)
    d.next_step(state)
    d.claim_facts(state, 1, W)
    d.decide_start_outcome(state, StartOutcome("created", "A", "A", status="running"), 1, W)
    d.decide_chain(state, ChainObservation(first_run_id="A", head=run("A")), 1, W)
    d.decide_foreign_check(state, None, 1, W)
    try:
        d.decide_abort(state, "ops", "cancel")
    except RecoveryRefused:
        pass
    d.close_facts(state, 1, W)
    assert state == snapshot


def test_reducer_is_deterministic_and_replays_to_the_same_state():
    g = rearmed()
    replayed = None
    for event in g.events:
        replayed = evolve_migration(replayed, event)
    assert replayed == g.state
    with pytest.raises(ValueError):  # nothing but a Created event may start a history
        evolve_migration(None, g.events[1])
