"""Tests for infra.simulator: start semantics and faults (persistence is in
test_simulator_persistence.py, the property test against a reference model in
test_simulator_model.py).

The semantics are those of docs/protocol.md, 'What the destination tells us'."""
from __future__ import annotations

from dataclasses import replace

import pytest

from schedfence.domain.ports import (AlreadyStarted, Destination, DestinationNotFound,
                                     DestinationUnavailable, InvalidStartRequest, StartWorkflow)
from schedfence.infra.adapters.destination.simulator import (FaultRates, InMemorySimState,
                                                    SimulatedDestination)

from tests.infra.adapters.destination.sim_requests import (CLOSED, INVALID_COMBOS, NS, REUSE,  # noqa: F401
                                                  VALID_COMBOS, WID, dest, last_outcome, req)


def test_implements_port(dest):
    assert isinstance(dest, Destination)


def test_first_start_creates_new_chain(dest):
    acc = dest.start_workflow(req("R1", input={"x": 1}))
    assert acc.first_execution_run_id == acc.run_id and acc.status == "running"
    d = dest.describe(NS, WID)
    assert (d.run_id, d.workflow_type, d.status) == (acc.run_id, "T", "running")
    assert d.request_ids == frozenset({"R1"})
    assert dest.created_count(NS, WID) == 1 and dest.created_count(NS, WID, "R1") == 1
    assert dest.chains(NS, WID) == [acc.run_id]
    assert last_outcome(dest) == "created"


@pytest.mark.parametrize("reuse,conflict", VALID_COMBOS)
def test_dedupe_running_run_under_every_policy(dest, reuse, conflict):
    first = dest.start_workflow(req("R1"))
    again = dest.start_workflow(req("R1", reuse, conflict, wtype="Other", input={"y": 2}))
    assert again == first
    assert dest.created_count(NS, WID) == 1 and len(dest.runs(NS, WID)) == 1
    assert dest.describe(NS, WID).workflow_type == "T"  # the retry's type is ignored
    assert last_outcome(dest) == "deduplicated"


@pytest.mark.parametrize("status", CLOSED)
@pytest.mark.parametrize("reuse,conflict", VALID_COMBOS)
def test_dedupe_closed_run_under_every_policy(dest, reuse, conflict, status):
    first = dest.start_workflow(req("R1"))
    dest.close(NS, WID, status)
    again = dest.start_workflow(req("R1", reuse, conflict, wtype="Other"))
    assert (again.run_id, again.first_execution_run_id, again.status) == (
        first.run_id, first.run_id, status)
    assert dest.created_count(NS, WID) == 1
    assert last_outcome(dest) == "deduplicated"


@pytest.mark.parametrize("reuse", ["allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate"])
def test_new_id_while_running_fails_with_details(dest, reuse):
    first = dest.start_workflow(req("R1"))
    with pytest.raises(AlreadyStarted) as exc:
        dest.start_workflow(req("R2", reuse, "fail"))
    e = exc.value
    assert (e.start_request_id, e.run_id, e.first_execution_run_id) == ("R1", first.run_id, first.run_id)
    assert dest.created_count(NS, WID) == 1 and last_outcome(dest) == "already_started"


def test_use_existing_returns_running_run_without_attaching(dest):
    first = dest.start_workflow(req("R1"))
    got = dest.start_workflow(req("R2", conflict="use_existing"))
    assert got == replace(first, started=False) and first.started is True
    assert dest.describe(NS, WID).request_ids == {"R1"}
    assert last_outcome(dest) == "use_existing"


@pytest.mark.parametrize("reuse,conflict", [("allow_duplicate", "terminate_existing"),
                                            ("allow_duplicate_failed_only", "terminate_existing"),
                                            ("terminate_if_running", "fail")])
def test_terminating_policies_end_running_run_and_start_new_chain(dest, reuse, conflict):
    first = dest.start_workflow(req("R1"))
    second = dest.start_workflow(req("R2", reuse, conflict))
    assert second.run_id != first.run_id and second.first_execution_run_id == second.run_id
    assert dest.describe(NS, WID, first.run_id).status == "terminated"
    assert dest.describe(NS, WID).run_id == second.run_id
    assert dest.chains(NS, WID) == [first.run_id, second.run_id]


@pytest.mark.parametrize("reuse", ["allow_duplicate", "terminate_if_running"])
def test_new_id_after_close_starts_new_chain(dest, reuse):
    first = dest.start_workflow(req("R1"))
    dest.complete(NS, WID)
    second = dest.start_workflow(req("R2", reuse))
    assert second.first_execution_run_id == second.run_id != first.run_id
    assert [r.run_id for r in dest.runs(NS, WID)] == [first.run_id, second.run_id]
    assert dest.created_count(NS, WID) == 2 == len(dest.chains(NS, WID))


def test_failed_only_after_completed_is_already_started(dest):
    first = dest.start_workflow(req("R1"))
    dest.complete(NS, WID)
    with pytest.raises(AlreadyStarted) as exc:
        dest.start_workflow(req("R2", "allow_duplicate_failed_only"))
    assert (exc.value.start_request_id, exc.value.run_id) == ("R1", first.run_id)
    assert dest.created_count(NS, WID) == 1


@pytest.mark.parametrize("status", ["failed", "canceled", "terminated", "timed_out"])
def test_failed_only_after_unsuccessful_close_starts_new_chain(dest, status):
    dest.start_workflow(req("R1"))
    dest.close(NS, WID, status)
    second = dest.start_workflow(req("R2", "allow_duplicate_failed_only"))
    assert second.first_execution_run_id == second.run_id and dest.created_count(NS, WID) == 2


def test_reject_duplicate_after_close_reports_closed_run(dest):
    first = dest.start_workflow(req("R1"))
    dest.close(NS, WID, "failed")
    with pytest.raises(AlreadyStarted) as exc:
        dest.start_workflow(req("R2", "reject_duplicate"))
    assert (exc.value.start_request_id, exc.value.run_id, exc.value.first_execution_run_id) == (
        "R1", first.run_id, first.run_id)


def test_continue_as_new_drops_original_request_id(dest):
    head = dest.start_workflow(req("R1", input={"n": 1}))
    new_run = dest.continue_as_new(NS, WID, {"n": 2})
    cur = dest.describe(NS, WID)
    assert (cur.run_id, cur.first_execution_run_id, cur.status) == (new_run, head.run_id, "running")
    (generated,) = cur.request_ids
    assert generated not in ("R1", "")
    old = dest.describe(NS, WID, head.run_id)
    assert old.status == "continued_as_new" and old.request_ids == {"R1"}
    with pytest.raises(AlreadyStarted) as exc:
        dest.start_workflow(req("R1"))
    e = exc.value
    assert (e.start_request_id, e.run_id, e.first_execution_run_id) == (generated, new_run, head.run_id)
    assert dest.created_count(NS, WID) == 1 and dest.chains(NS, WID) == [head.run_id]


def test_retry_after_continue_as_new_chain_closes_creates_new_chain(dest):
    head = dest.start_workflow(req("R1"))
    dest.continue_as_new(NS, WID)
    dest.continue_as_new(NS, WID)
    dest.complete(NS, WID)
    retry = dest.start_workflow(req("R1"))
    assert retry.first_execution_run_id == retry.run_id != head.run_id
    assert dest.created_count(NS, WID, "R1") == 2
    assert dest.chains(NS, WID) == [head.run_id, retry.run_id]


def test_empty_request_id_never_dedupes(dest):
    first = dest.start_workflow(req(""))
    generated = dest.describe(NS, WID).request_ids
    assert "" not in generated and len(generated) == 1
    with pytest.raises(AlreadyStarted) as exc:
        dest.start_workflow(req(""))
    assert {exc.value.start_request_id} == generated
    dest.complete(NS, WID)
    second = dest.start_workflow(req(""))
    assert second.run_id != first.run_id and dest.created_count(NS, WID) == 2


@pytest.mark.parametrize("reuse", REUSE)
def test_delete_current_run_frees_the_id(dest, reuse):
    first = dest.start_workflow(req("R1"))
    dest.complete(NS, WID)
    dest.delete(NS, WID)
    with pytest.raises(DestinationNotFound):
        dest.describe(NS, WID)
    with pytest.raises(DestinationNotFound):
        dest.describe(NS, WID, first.run_id)
    again = dest.start_workflow(req("R1", reuse))
    assert again.run_id != first.run_id and again.first_execution_run_id == again.run_id
    assert dest.chains(NS, WID) == [first.run_id, again.run_id]  # deleted chains still listed
    assert [r.run_id for r in dest.runs(NS, WID)] == [again.run_id]


def test_delete_running_run_terminates_it_and_old_runs_never_become_current(dest):
    a = dest.start_workflow(req("R1"))
    dest.complete(NS, WID)
    dest.start_workflow(req("R2"))
    dest.delete(NS, WID)
    with pytest.raises(DestinationNotFound):
        dest.describe(NS, WID)
    assert dest.describe(NS, WID, a.run_id).status == "completed"
    # R1 is on a non-current run, so it does not dedupe.
    assert dest.start_workflow(req("R1")).run_id != a.run_id


def test_delete_old_run_by_id_keeps_current(dest):
    a = dest.start_workflow(req("R1"))
    b = dest.continue_as_new(NS, WID)
    dest.delete(NS, WID, a.run_id)
    assert dest.describe(NS, WID).run_id == b
    with pytest.raises(DestinationNotFound):
        dest.describe(NS, WID, a.run_id)


def test_describe_current_by_id_and_not_found(dest):
    with pytest.raises(DestinationNotFound):
        dest.describe(NS, WID)
    a = dest.start_workflow(req("R1"))
    b = dest.continue_as_new(NS, WID)
    assert dest.describe(NS, WID).run_id == b
    assert dest.describe(NS, WID, a.run_id).run_id == a.run_id
    with pytest.raises(DestinationNotFound):
        dest.describe(NS, WID, "no-such-run")
    with pytest.raises(DestinationNotFound):
        dest.describe("other-ns", WID)


@pytest.mark.parametrize("reuse,conflict", [
    *INVALID_COMBOS, ("bogus", "fail"), ("allow_duplicate", "bogus"),
])
def test_invalid_policies_rejected_before_dedupe(dest, reuse, conflict):
    dest.start_workflow(req("R1"))
    with pytest.raises(InvalidStartRequest):
        dest.start_workflow(req("R1", reuse, conflict))
    assert dest.created_count(NS, WID) == 1 and last_outcome(dest) == "invalid"


def test_empty_workflow_id_is_invalid(dest):
    with pytest.raises(InvalidStartRequest):
        dest.start_workflow(req("R1", wid=""))
    assert dest.workflow_ids() == []


def test_lose_response_commits_then_raises(dest):
    dest.inject("start", "lose_response")
    with pytest.raises(DestinationUnavailable):
        dest.start_workflow(req("R1"))
    assert dest.created_count(NS, WID, "R1") == 1
    retry = dest.start_workflow(req("R1"))
    assert retry.run_id == dest.describe(NS, WID).run_id
    assert [o for _, o in dest.start_log()] == ["lost_response", "deduplicated"]


@pytest.mark.parametrize("fault,outcome", [("fail_before_commit", "failed_before_commit"),
                                           ("unavailable", "unavailable")])
def test_pre_commit_faults_commit_nothing(dest, fault, outcome):
    dest.inject("start", fault)
    with pytest.raises(DestinationUnavailable):
        dest.start_workflow(req("R1"))
    assert dest.created_count(NS, WID) == 0 and dest.workflow_ids() == []
    assert dest.start_log() == [(req("R1"), outcome)]
    assert dest.start_workflow(req("R1")).status == "running"


def test_scripted_faults_fire_fifo_and_per_op(dest):
    dest.inject("start", "unavailable", times=2)
    dest.inject("start", "lose_response")
    dest.inject("describe", "lose_response")
    for _ in range(3):
        with pytest.raises(DestinationUnavailable):
            dest.start_workflow(req("R1"))
    assert dest.start_workflow(req("R1")).status == "running"
    assert [o for _, o in dest.start_log()] == [
        "unavailable", "unavailable", "lost_response", "deduplicated"]
    with pytest.raises(DestinationUnavailable):
        dest.describe(NS, WID)
    assert dest.describe(NS, WID).request_ids == {"R1"}


def test_inject_rejects_unknown_op_or_fault(dest):
    with pytest.raises(ValueError):
        dest.inject("close", "unavailable")
    with pytest.raises(ValueError):
        dest.inject("start", "explode")


def _fault_trace(seed: int) -> list:
    d = SimulatedDestination(seed=seed, faults=FaultRates(0.2, 0.2, 0.2))
    trace = []
    for i in range(60):
        try:
            trace.append(d.start_workflow(req(f"R{i % 5}", wid=f"w{i % 3}")).run_id)
        except (DestinationUnavailable, AlreadyStarted) as e:
            trace.append(type(e).__name__)
        if i % 7 == 0 and d.runs(NS, f"w{i % 3}"):
            try:
                d.close(NS, f"w{i % 3}", "completed")
            except (ValueError, DestinationNotFound):
                trace.append("close-skipped")
    return trace + [o for _, o in d.start_log()]


def test_seeded_random_faults_are_reproducible():
    a, b = _fault_trace(7), _fault_trace(7)
    assert a == b
    assert {"lost_response", "failed_before_commit", "unavailable", "created"} <= set(a)
    assert _fault_trace(8) != a


def test_run_ids_deterministic_per_seed():
    def ids(seed):
        d = SimulatedDestination(seed=seed)
        first = d.start_workflow(req("R1")).run_id
        return [first, d.continue_as_new(NS, WID), *d.describe(NS, WID).request_ids]
    assert ids(3) == ids(3) and ids(3) != ids(4)
    assert len(set(ids(3))) == 3


def test_environment_operation_errors(dest):
    with pytest.raises(DestinationNotFound):
        dest.continue_as_new(NS, WID)
    with pytest.raises(DestinationNotFound):
        dest.close(NS, WID, "completed")
    with pytest.raises(DestinationNotFound):
        dest.delete(NS, WID)
    a = dest.start_workflow(req("R1"))
    with pytest.raises(ValueError):
        dest.close(NS, WID, "continued_as_new")
    dest.terminate(NS, WID)
    with pytest.raises(ValueError):
        dest.close(NS, WID, "completed", a.run_id)
    with pytest.raises(ValueError):
        dest.continue_as_new(NS, WID)
    assert dest.describe(NS, WID).status == "terminated"


def test_attached_request_id_dedupes(dest):
    a = dest.start_workflow(req("R1"))
    dest.attach_request_id(NS, WID, "R2")
    assert dest.start_workflow(req("R2")) == replace(a, started=False)  # attached: not ours
    assert dest.describe(NS, WID).request_ids == {"R1", "R2"}


def test_inspection_helpers(dest):
    dest.start_workflow(req("R1", wid="a"))
    dest.start_workflow(StartWorkflow("ns2", "b", "R1", "T"))
    with pytest.raises(AlreadyStarted):
        dest.start_workflow(req("R9", wid="a"))
    assert dest.workflow_ids() == [(NS, "a"), ("ns2", "b")]
    assert [o for _, o in dest.start_log(NS, "a")] == ["created", "already_started"]
    assert [r.namespace for r, _ in dest.start_log(namespace="ns2")] == ["ns2"]
    assert dest.created_count(NS, "a", "R9") == 0


def test_in_memory_state_rolls_back_failed_block():
    state = InMemorySimState()
    with state.transaction() as s:
        s["x"] = 1
    with pytest.raises(RuntimeError):
        with state.transaction() as s:
            s["x"] = 2
            raise RuntimeError
    with state.transaction() as s:
        assert s == {"x": 1}


def test_in_memory_state_without_rollback_shares_one_dict():
    state = InMemorySimState(rollback=False)
    with state.transaction() as s:
        s["x"] = 1
    with state.transaction() as again:
        assert again is s and again == {"x": 1}
    dest = SimulatedDestination(InMemorySimState(rollback=False))
    a = dest.start_workflow(req("R1"))
    assert dest.start_workflow(req("R1")) == a and dest.created_count(NS, WID) == 1
