"""What the destination's readings show of the chain at a workflow id (domain/rollback/
observe.py): each describe's answer (a run, none, or no answer) as the observation
``decide_chain`` judges, and when the chain head must be read next."""
from __future__ import annotations

from schedfence.domain.ports import DestinationUnavailable, RunDescription
from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import observe as ob
from tests.domain.rollback import decision_givens as g


def test_no_answer_is_unavailable_with_its_detail() -> None:
    obs = ob.observe_current(g.WID, DestinationUnavailable("timeout"))
    assert obs == d.ChainObservation(failure="unavailable", detail="timeout")


def test_no_run_is_no_current_run() -> None:
    obs = ob.observe_current(g.WID, None)
    assert obs == d.ChainObservation(failure="no_current_run",
                                     detail=f"no current run at {g.WID}")


def test_a_run_without_its_first_run_id_names_no_head() -> None:
    current = RunDescription("B", "", "W", "running", frozenset({g.RID}), g.RID)
    obs = ob.observe_current(g.WID, current)
    assert obs == d.ChainObservation(failure="no_first_run_identity", current_run_id="B",
                                     current_status="running")


def test_a_run_that_is_its_own_first_run_is_the_head() -> None:
    current = g.run("A", status="completed")
    obs = ob.observe_current(g.WID, current)
    assert obs == d.ChainObservation(current_run_id="A", current_status="completed",
                                     first_run_id="A", head=current)


def test_a_later_run_of_the_chain_sends_the_reader_to_the_head() -> None:
    assert ob.observe_current(g.WID, g.run("B", "A")) is None


def test_an_empty_head_name_is_never_read() -> None:
    assert not ob.head_to_read("") and ob.head_to_read("A")
    obs = ob.observe_head("", "B", "running", g.run("A"))  # a reading given is ignored
    assert obs == d.ChainObservation(failure="no_first_run_identity", current_run_id="B",
                                     current_status="running", first_run_id="")


def test_the_head_unanswered_is_unavailable_and_keeps_what_was_seen() -> None:
    obs = ob.observe_head("A", "B", "running", DestinationUnavailable("503"))
    assert obs == d.ChainObservation(failure="unavailable", detail="503", current_run_id="B",
                                     current_status="running", first_run_id="A")


def test_the_head_gone_is_head_missing() -> None:
    obs = ob.observe_head("A", "B", "running", None)
    assert obs.failure == "head_missing" and obs.head is None
    assert obs.detail == "first run A is gone (retention or delete)"
    assert (obs.current_run_id, obs.first_run_id) == ("B", "A")


def test_the_head_read_is_judged_by_decide_chain() -> None:
    ours = ob.observe_head("A", "B", "running", g.run("A"))
    assert ours == d.ChainObservation(current_run_id="B", current_status="running",
                                      first_run_id="A", head=g.run("A"))
    st = g.claimed_unknown().state
    assert g.names(d.decide_chain(st, ours, 2, g.W)) == ["ChainVerified", "OwnershipAccepted"]
    foreign = ob.observe_head("A", "B", "running", g.run("A", ids=("other",)))
    assert g.names(d.decide_chain(st, foreign, 2, g.W)) == ["ChainVerified", "MigrationParked"]


def test_absence_and_an_unknown_answer_decide_differently() -> None:
    st = g.claimed_unknown().state
    gone = ob.observe_current(g.WID, None)
    assert gone is not None
    assert g.names(d.decide_chain(st, gone, 2, g.W)) == ["ChainVerified", "MigrationParked"]
    down = ob.observe_current(g.WID, DestinationUnavailable("x"))
    assert down is not None
    assert g.names(d.decide_chain(st, down, 2, g.W)) == ["ChainVerified"]
