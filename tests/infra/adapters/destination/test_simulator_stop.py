"""The simulator's ``stop_workflow``: cancel and terminate close the current run at once, and a
stop with nothing running is a no-op (the semantics of ``domain.ports.ActionRunner``)."""
from __future__ import annotations

import pytest

from schedfence.domain.ports import (ActionRunner, DestinationUnavailable, InvalidStartRequest)
from schedfence.infra.adapters.destination.simulator import (FaultRates, SimulatedDestination,
                                                    SqlSimState)

from tests.infra.adapters.destination.sim_requests import NS, WID, dest, req  # noqa: F401

STATUS = {"cancel": "canceled", "terminate": "terminated"}
KINDS = list(STATUS)


def test_implements_the_action_runner_port(dest):
    assert isinstance(dest, ActionRunner)


@pytest.mark.parametrize("kind", KINDS)
def test_a_stop_closes_the_running_current_run_with_its_status(dest, kind):
    run = dest.start_workflow(req("R1")).run_id
    assert dest.stop_workflow(NS, WID, kind, reason="overlap") is None
    d = dest.describe(NS, WID)
    assert (d.run_id, d.status) == (run, STATUS[kind])
    assert dest.created_count(NS, WID) == 1  # a stop never starts anything


@pytest.mark.parametrize("first", KINDS)
@pytest.mark.parametrize("second", KINDS)
def test_a_second_stop_of_a_closed_run_is_a_no_op(dest, first, second):
    dest.start_workflow(req("R1"))
    dest.stop_workflow(NS, WID, first)
    dest.stop_workflow(NS, WID, second)
    assert dest.describe(NS, WID).status == STATUS[first]


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_closed_otherwise_keeps_its_status(dest, kind):
    dest.start_workflow(req("R1"))
    dest.complete(NS, WID)
    dest.stop_workflow(NS, WID, kind)
    assert dest.describe(NS, WID).status == "completed"


@pytest.mark.parametrize("kind", KINDS)
def test_a_stop_of_an_unknown_or_deleted_workflow_is_a_no_op(dest, kind):
    dest.stop_workflow(NS, "never-started", kind)
    dest.start_workflow(req("R1"))
    dest.delete(NS, WID)
    dest.stop_workflow(NS, WID, kind)
    assert dest.runs(NS, WID) == [] and dest.workflow_ids() == [(NS, WID)]


def test_only_the_named_workflow_is_stopped(dest):
    dest.start_workflow(req("R1"))
    dest.start_workflow(req("R2", wid="other"))
    dest.stop_workflow(NS, WID, "terminate")
    assert dest.describe(NS, "other").status == "running"
    dest.stop_workflow("another-namespace", "other", "terminate")
    assert dest.describe(NS, "other").status == "running"


@pytest.mark.parametrize("kind", ["", "kill", "Cancel", None])
def test_a_bad_kind_is_a_value_error_before_anything_happens(dest, kind):
    dest.start_workflow(req("R1"))
    dest.inject("stop_workflow", "unavailable")
    with pytest.raises(ValueError):
        dest.stop_workflow(NS, WID, kind)
    assert dest.describe(NS, WID).status == "running"
    with pytest.raises(DestinationUnavailable):  # the scripted fault was not consumed
        dest.stop_workflow(NS, WID, "cancel")


def test_an_empty_workflow_id_is_refused(dest):
    with pytest.raises(InvalidStartRequest):
        dest.stop_workflow(NS, "", "terminate")


@pytest.mark.parametrize("fault", ["unavailable", "fail_before_commit"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_fault_before_commit_is_unavailable_and_changes_nothing(dest, fault, kind):
    dest.start_workflow(req("R1"))
    dest.inject("stop_workflow", fault)
    with pytest.raises(DestinationUnavailable):
        dest.stop_workflow(NS, WID, kind)
    assert dest.describe(NS, WID).status == "running"
    dest.stop_workflow(NS, WID, kind)  # the retry goes through
    assert dest.describe(NS, WID).status == STATUS[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_a_lost_response_is_unavailable_but_the_stop_happened(dest, kind):
    dest.start_workflow(req("R1"))
    dest.inject("stop_workflow", "lose_response")
    with pytest.raises(DestinationUnavailable):
        dest.stop_workflow(NS, WID, kind)
    assert dest.describe(NS, WID).status == STATUS[kind]
    dest.stop_workflow(NS, WID, kind)  # the retry is a no-op
    assert dest.describe(NS, WID).status == STATUS[kind]


def test_a_lost_response_on_nothing_to_stop_is_still_unavailable(dest):
    dest.inject("stop_workflow", "lose_response")
    with pytest.raises(DestinationUnavailable):
        dest.stop_workflow(NS, "never-started", "terminate")


def test_stop_faults_are_scripted_per_op(dest):
    dest.start_workflow(req("R1"))
    dest.inject("stop_workflow", "unavailable")
    assert dest.describe(NS, WID).status == "running"  # describe takes no stop fault
    dest.start_workflow(req("R1"))  # nor does start (a dedupe)
    with pytest.raises(DestinationUnavailable):
        dest.stop_workflow(NS, WID, "terminate")


def test_seeded_random_faults_apply_to_stops():
    d = SimulatedDestination(seed=3, faults=FaultRates(unavailable=1.0))
    with pytest.raises(DestinationUnavailable):
        d.stop_workflow(NS, WID, "cancel")


@pytest.mark.parametrize("kind", KINDS)
def test_after_continue_as_new_the_stop_hits_the_current_run(dest, kind):
    head = dest.start_workflow(req("R1")).run_id
    current = dest.continue_as_new(NS, WID)
    dest.stop_workflow(NS, WID, kind)
    assert dest.describe(NS, WID, head).status == "continued_as_new"
    d = dest.describe(NS, WID)
    assert (d.run_id, d.first_execution_run_id, d.status) == (current, head, STATUS[kind])


def test_a_stop_then_a_new_start_stops_only_the_new_run_next_time(dest):
    first = dest.start_workflow(req("R1")).run_id
    dest.stop_workflow(NS, WID, "cancel")
    second = dest.start_workflow(req("R2")).run_id
    dest.stop_workflow(NS, WID, "terminate")
    assert dest.describe(NS, WID, first).status == "canceled"
    assert dest.describe(NS, WID, second).status == "terminated"


def test_stops_are_not_in_the_start_log(dest):
    dest.start_workflow(req("R1"))
    dest.stop_workflow(NS, WID, "terminate")
    assert [o for _, o in dest.start_log()] == ["created"]


def test_a_stop_persists_in_a_sql_state(tmp_path):
    url = f"sqlite:///{tmp_path / 'sim.db'}"
    state = SqlSimState(url)
    SimulatedDestination(state).start_workflow(req("R1"))
    SimulatedDestination(state).stop_workflow(NS, WID, "cancel")
    state.dispose()
    reopened = SqlSimState(url)
    try:
        assert SimulatedDestination(reopened).describe(NS, WID).status == "canceled"
    finally:
        reopened.dispose()
