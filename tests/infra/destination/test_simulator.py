"""Tests for infra.simulator: start semantics, faults and persistence.

The semantics are those of docs/protocol.md, 'What the destination tells us'."""
from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.ports import (
    AlreadyStarted,
    Destination,
    DestinationNotFound,
    DestinationUnavailable,
    InvalidStartRequest,
    StartWorkflow,
)
from schedfence.infra.destination.simulator import (FaultRates, InMemorySimState,
                                                    SimulatedDestination, SqlSimState)

NS, WID = "default", "temporal-sys-scheduler:s1"
REUSE = ("allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate", "terminate_if_running")
CONFLICT = ("fail", "use_existing", "terminate_existing")
# A real server refuses these pairs (tests/contract); the simulator must too.
INVALID_COMBOS = [("terminate_if_running", "use_existing"),
                  ("terminate_if_running", "terminate_existing"),
                  ("reject_duplicate", "terminate_existing")]
VALID_COMBOS = [combo for combo in itertools.product(REUSE, CONFLICT) if combo not in INVALID_COMBOS]
CLOSED = ("completed", "failed", "canceled", "terminated", "timed_out")
REPO = Path(__file__).resolve().parents[3]


def req(request_id, reuse="allow_duplicate", conflict="fail", *, wid=WID, wtype="T", input=None):
    return StartWorkflow(NS, wid, request_id, wtype, input or {}, reuse, conflict)


@pytest.fixture
def dest() -> SimulatedDestination:
    return SimulatedDestination()


def last_outcome(d: SimulatedDestination) -> str:
    return d.start_log()[-1][1]


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


# --- persistence ------------------------------------------------------------------------------

def test_sql_state_shared_between_instances(file_store_url):
    url = file_store_url  # a SQLite file or a PostgreSQL schema (tests/conftest.py)
    one, two = SimulatedDestination(SqlSimState(url)), SimulatedDestination(SqlSimState(url))
    a = one.start_workflow(req("R1", input={"k": [1, 2]}))
    assert two.describe(NS, WID) == one.describe(NS, WID)
    assert two.start_workflow(req("R1")) == a  # dedupe across instances
    b = two.continue_as_new(NS, WID)
    with pytest.raises(AlreadyStarted) as exc:
        one.start_workflow(req("R1"))
    assert (exc.value.run_id, exc.value.first_execution_run_id) == (b, a.run_id)
    reopened = SimulatedDestination(SqlSimState(url))
    assert [r.run_id for r in reopened.runs(NS, WID)] == [a.run_id, b]
    assert [o for _, o in reopened.start_log()] == ["created", "deduplicated", "already_started"]
    assert reopened.start_log()[0][0] == req("R1", input={"k": [1, 2]})


def test_sql_state_rejects_memory_url():
    for url in ("sqlite://", "sqlite:///:memory:"):
        with pytest.raises(ValueError, match="InMemorySimState"):
            SqlSimState(url)


WORKER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from schedfence.domain.ports import AlreadyStarted, StartWorkflow
    from schedfence.infra.destination.simulator import SimulatedDestination, SqlSimState
    d = SimulatedDestination(SqlSimState(sys.argv[2]))
    for k in range(int(sys.argv[4])):
        d.start_workflow(StartWorkflow("default", f"{sys.argv[3]}-{k}", "R", "T"))
        d.start_workflow(StartWorkflow("default", "shared", "same", "T"))
""")


def test_sql_state_serialises_concurrent_processes(file_store_url):
    url = file_store_url  # a SQLite file or a PostgreSQL schema (tests/conftest.py)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(REPO), url, f"p{i}", "15"])
             for i in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    d = SimulatedDestination(SqlSimState(url))
    assert len(d.workflow_ids()) == 3 * 15 + 1  # no lost updates
    assert d.created_count(NS, "shared") == 1  # one run, all other starts deduplicated
    outcomes = [o for r, o in d.start_log(NS, "shared")]
    assert len(outcomes) == 45 and outcomes.count("created") == 1
    run_ids = [d.describe(NS, wid).run_id for _, wid in d.workflow_ids()]
    assert len(set(run_ids)) == len(run_ids)


# --- property tests against a reference model -------------------------------------------------

POOL = ("r1", "r2", "r3", "")
ops = st.lists(st.one_of(
    st.tuples(st.just("start"), st.sampled_from(POOL), st.sampled_from(REUSE), st.sampled_from(CONFLICT)),
    st.tuples(st.just("can")),
    st.tuples(st.just("close"), st.sampled_from(CLOSED)),
    st.tuples(st.just("delete")),
), max_size=40)


def expected_start(cur, rid, reuse, conflict):
    """A model of the start semantics; ``cur`` is None or {ids, running, status, head}."""
    if (reuse, conflict) in INVALID_COMBOS:
        return "invalid"
    if cur and rid in cur["ids"]:
        return "deduplicated"
    if cur and cur["running"]:
        if conflict == "terminate_existing" or reuse == "terminate_if_running":
            return "created"
        return "use_existing" if conflict == "use_existing" else "already_started"
    if cur and (reuse == "reject_duplicate"
                or (reuse == "allow_duplicate_failed_only" and cur["status"] == "completed")):
        return "already_started"
    return "created"


def apply_start(d, heads, cur, rid, reuse, conflict):
    expected = expected_start(cur, rid, reuse, conflict)
    before = d.created_count(NS, WID)
    try:
        acc = d.start_workflow(req(rid, reuse, conflict))
    except (AlreadyStarted, InvalidStartRequest):
        acc = None
    assert last_outcome(d) == expected
    created = d.created_count(NS, WID) - before
    assert created == (expected == "created")
    if cur and rid in cur["ids"]:
        assert created == 0
        assert expected == "invalid" or acc.run_id == d.describe(NS, WID).run_id
    if cur and cur["running"] and conflict == "fail" and reuse != "terminate_if_running":
        assert created == 0
    if expected == "created":
        assert acc.first_execution_run_id == acc.run_id
        heads[acc.run_id] = acc.run_id
        return {"ids": {rid} - {""}, "running": True, "status": "running", "head": acc.run_id}
    return cur


def apply_env(d, heads, cur, op):
    if op[0] == "can":
        if cur is None or not cur["running"]:
            with pytest.raises(DestinationNotFound if cur is None else ValueError):
                d.continue_as_new(NS, WID)
            return cur
        heads[d.continue_as_new(NS, WID)] = cur["head"]
        assert d.describe(NS, WID).first_execution_run_id == cur["head"]
        return {**cur, "ids": set()}  # the new run's id is server-generated, never in POOL
    if op[0] == "close":
        if cur is None or not cur["running"]:
            with pytest.raises(DestinationNotFound if cur is None else ValueError):
                d.close(NS, WID, op[1])
            return cur
        d.close(NS, WID, op[1])
        return {**cur, "running": False, "status": op[1]}
    if cur is None:
        with pytest.raises(DestinationNotFound):
            d.delete(NS, WID)
    else:
        d.delete(NS, WID)
    return None


@settings(max_examples=300, deadline=None)
@given(ops)
def test_start_semantics_match_reference_model(sequence):
    d, cur = SimulatedDestination(), None
    heads: dict[str, str] = {}  # run id -> chain head the model expects
    for op in sequence:
        cur = apply_start(d, heads, cur, *op[1:]) if op[0] == "start" else apply_env(d, heads, cur, op)
        assert d.created_count(NS, WID) == len(d.chains(NS, WID))
    assert {r.run_id: r.first_execution_run_id for r in d.runs(NS, WID)}.items() <= heads.items()


def test_in_memory_state_without_rollback_shares_one_dict():
    state = InMemorySimState(rollback=False)
    with state.transaction() as s:
        s["x"] = 1
    with state.transaction() as again:
        assert again is s and again == {"x": 1}
    dest = SimulatedDestination(InMemorySimState(rollback=False))
    a = dest.start_workflow(req("R1"))
    assert dest.start_workflow(req("R1")) == a and dest.created_count(NS, WID) == 1
