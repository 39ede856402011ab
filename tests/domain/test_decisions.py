"""The pure decider, with no store and no destination: given a migration state folded from
events with ``evolve_migration``, when a decision is asked, then it returns these facts."""
from __future__ import annotations

import copy
import uuid
from dataclasses import replace

import pytest

from schedfence.domain import decisions as d
from schedfence.domain.decisions import ChainObservation, StartOutcome
from schedfence.domain.errors import AlreadyExists, Closed, RecoveryRefused
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.migration import Migration, MigrationState, evolve_migration
from schedfence.domain.ports import (AlreadyStarted, DestinationUnavailable, InvalidStartRequest,
                                     RunDescription, StartAccepted)
from schedfence.domain.schedule import ScheduleState

M = Migration
NS, SID, WID, RID = "default", "s1", "temporal-sys-scheduler:s1", "R1"
MID = uuid.UUID(int=1)
SOURCE_ID = str(uuid.UUID(int=2))
W = "w1"
CLOSED_STATUSES = ("completed", "failed", "canceled", "terminated", "timed_out")


# -- given: states folded from events --------------------------------------------------------
class Given:
    """A migration's event history and the state ``evolve_migration`` folds from it."""

    def __init__(self, created: M.Created) -> None:
        self.events = [created]
        self.state = evolve_migration(None, created)

    def then(self, facts: d.Facts) -> Given:
        """Append decided facts as events (validating them) and fold them in."""
        for cls, fields in facts:
            event = cls(originator_id=MID, originator_version=len(self.events) + 1, **fields)
            self.events.append(event)
            self.state = evolve_migration(self.state, event)
        return self


def assigned(**over) -> Given:
    fields = dict(namespace=NS, schedule_id=SID, source_id=SOURCE_ID, incarnation=1,
                  workflow_id=WID, request_id=RID, origin="caller", pre_paused=True,
                  pre_notes="pre", claim_armed=True, actor="admin")
    fields.update(over)
    return Given(M.RequestIdAssigned(originator_id=MID, originator_version=1,
                                     originator_topic=M.TOPIC, **fields))


def legacy() -> Given:
    """An older release's v1 RequestIdAssigned (no request id), upcast as the codec does."""
    v1 = dict(originator_id=MID, originator_version=1, originator_topic=M.TOPIC, namespace=NS,
              schedule_id=SID, source_id=SOURCE_ID, incarnation=1, workflow_id=WID,
              pre_paused=False, pre_notes="legacy")
    M.RequestIdAssigned.upcast_v1_v2(v1)
    return Given(M.RequestIdAssigned(**v1))


def run(run_id: str, first: str | None = None, *, status: str = "running",
        ids: tuple[str, ...] = (RID,), wtype: str = SCHEDULER_WORKFLOW_TYPE,
        creator: str | None = None) -> RunDescription:
    """A run whose create request id is ``creator`` (default: the first of ``ids``); the
    other ids are attached."""
    return RunDescription(run_id, first or run_id, wtype, status, frozenset(ids),
                          ids[0] if creator is None else creator)


def answer(g: Given, out: StartOutcome) -> Given:
    facts, _ = d.decide_start_outcome(g.state, out, 1, W)
    return g.then(facts)


def pending() -> Given:
    return assigned()


def claimed() -> Given:
    g = pending()
    return g.then(d.claim_facts(g.state, 1, W))


def claimed_unknown() -> Given:
    return answer(claimed(), StartOutcome("unavailable", detail="timeout"))


def receipted() -> Given:
    return answer(claimed(), StartOutcome("created", "A", "A", status="running"))


def completed() -> Given:
    g = receipted()
    return g.then(d.close_facts(g.state, 1, W))


def parked_foreign() -> Given:
    """AlreadyStarted by a foreign run, then the chain head verified foreign."""
    g = answer(claimed(), StartOutcome("already_started", "F", "F", "other", "running"))
    obs = ChainObservation(current_run_id="F", current_status="running", first_run_id="F",
                           head=run("F", ids=("other",)))
    return g.then(d.decide_chain(g.state, obs, 1, W))


def parked_foreign_unknown() -> Given:
    """The answer was lost; reconcile then found a foreign chain."""
    g = claimed_unknown()
    obs = ChainObservation(current_run_id="F", current_status="running", first_run_id="F",
                           head=run("F", ids=("other",)))
    return g.then(d.decide_chain(g.state, obs, 2, W))


def parked_head_missing() -> Given:
    g = claimed_unknown()
    obs = ChainObservation(failure="head_missing", current_run_id="B", first_run_id="A")
    return g.then(d.decide_chain(g.state, obs, 2, W))


def parked_rejected() -> Given:
    return answer(claimed(), StartOutcome("rejected", detail="InvalidStartRequest: bad"))


def rearmed() -> Given:
    g = parked_foreign()
    return g.then(d.decide_foreign_check(g.state, run("F", status="completed"), 2, W))


def reclaimed() -> Given:
    g = rearmed()
    return g.then(d.claim_facts(g.state, 3, W))


def aborted() -> Given:
    g = pending()
    return g.then(d.decide_abort(g.state, "ops", "cancel"))


def names(facts: d.Facts) -> list[str]:
    return [cls.__name__ for cls, _ in facts]


def source(**over) -> ScheduleState:
    return replace(ScheduleState(NS, SID, 1, paused=False, notes="pre"), **over)


# -- folding sanity: the givens are the phases they claim to be -------------------------------
@pytest.mark.parametrize("given,phase", [
    (pending, "pending"), (claimed, "claimed"), (claimed_unknown, "claimed"),
    (receipted, "receipted"), (completed, "completed"), (parked_foreign, "parked"),
    (parked_head_missing, "parked"), (parked_rejected, "parked"), (rearmed, "pending"),
    (reclaimed, "claimed"), (aborted, "aborted"), (legacy, "legacy_pending"),
])
def test_folded_phase(given, phase):
    assert given().state.phase == phase


# -- decide_rollback -------------------------------------------------------------------------
def test_rollback_accepts_when_nothing_pending():
    assert d.decide_rollback(source(), RID, None, None) == "accept"


def test_rollback_same_id_pending_is_idempotent():
    g = pending()
    assert d.decide_rollback(source(), RID, g.state, g.state) == "already_pending"


def test_rollback_other_id_pending_already_exists():
    with pytest.raises(AlreadyExists, match="R1"):
        d.decide_rollback(source(), "R2", None, pending().state)


def test_rollback_legacy_pending_already_exists():
    with pytest.raises(AlreadyExists, match="legacy"):
        d.decide_rollback(source(), RID, None, legacy().state)


@pytest.mark.parametrize("closed", [False, True])
def test_rollback_same_id_completed_is_idempotent_even_on_closed_source(closed):
    st = source(closed=closed, close_reason="migrated" if closed else "")
    assert d.decide_rollback(st, RID, completed().state, None) == "already_completed"


@pytest.mark.parametrize("reason", ["deleted", "migrated"])
def test_rollback_closed_source_without_completed_same_id_is_closed(reason):
    with pytest.raises(Closed):
        d.decide_rollback(source(closed=True, close_reason=reason), "R2", None, None)
    with pytest.raises(Closed):  # an aborted migration with this id is no completion
        d.decide_rollback(source(closed=True, close_reason=reason), RID, aborted().state, None)


def test_rollback_reusing_an_aborted_id_already_exists():
    with pytest.raises(AlreadyExists, match="new request id"):
        d.decide_rollback(source(), RID, aborted().state, None)


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
    "rollback": lambda: d.decide_rollback(source(), RID, None, pending().state),
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
