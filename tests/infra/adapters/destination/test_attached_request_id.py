"""Unit tests of the create/attached request id split and ``StartAccepted.started``.

The adapter half checks how ``TemporalDestination`` maps the server's answers (crafted protos,
no server); the simulator half checks ``SimulatedDestination``'s model of attaching. The
semantics both share are pinned against a real server in tests/contract/test_attach_contract.py.
"""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.api.workflow.v1 import RequestIdInfo
from temporalio.api.workflowservice.v1 import (DescribeWorkflowExecutionResponse,
                                               StartWorkflowExecutionResponse)

from schedfence.domain.ports import (AlreadyStarted, DestinationUnavailable, RunDescription,
                                     StartWorkflow)
from schedfence.infra.adapters.destination.simulator import SimulatedDestination, SqlSimState
from schedfence.infra.adapters.destination.temporal import TemporalDestination
from schedfence.infra.adapters.destination.temporal_wire import create_request_id

NS, WID = "default", "temporal-sys-scheduler:s1"
STARTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
UPDATED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED


def infos(**by_id: int) -> dict[str, RequestIdInfo]:
    return {rid: RequestIdInfo(event_type=et, event_id=1) for rid, et in by_id.items()}


# -- the adapter ---------------------------------------------------------------------------
@pytest.mark.parametrize("given_infos,expected", [
    (infos(F=STARTED, R1=UPDATED), "F"),
    (infos(R1=UPDATED, F=STARTED, R2=UPDATED), "F"),
    (infos(R1=UPDATED), ""),  # no STARTED entry: unknown, never an attached id
    (infos(A=STARTED, B=STARTED), ""),  # two claimants: unknown
    ({}, ""),
])
def test_create_request_id_is_the_one_started_entry(given_infos, expected):
    assert create_request_id(given_infos) == expected


class CannedDestination(TemporalDestination):
    """The adapter with its gRPC call replaced by a canned response."""

    def __init__(self, response: Any) -> None:
        super().__init__("127.0.0.1:1")
        self.response = response

    def _rpc(self, what, method, rpc, to_port_error):
        return self.response


def describe_response(by_id: dict[str, RequestIdInfo]) -> DescribeWorkflowExecutionResponse:
    resp = DescribeWorkflowExecutionResponse()
    info = resp.workflow_execution_info
    info.execution.run_id, info.first_run_id, info.type.name = "run-b", "run-a", "T"
    info.status = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
    for rid, value in by_id.items():
        resp.workflow_extended_info.request_id_infos[rid].CopyFrom(value)
    return resp


def test_adapter_describe_splits_the_create_id_from_attached_ids():
    with CannedDestination(describe_response(infos(R1=UPDATED, F=STARTED))) as dest:
        d = dest.describe(NS, WID)
    assert d == RunDescription("run-b", "run-a", "T", "running", frozenset({"F", "R1"}), "F")
    assert d.attached_request_ids == {"R1"}


def test_adapter_describe_without_a_started_entry_says_unknown():
    with CannedDestination(describe_response(infos(R1=UPDATED))) as dest:
        d = dest.describe(NS, WID)
    assert (d.create_request_id, d.request_ids) == ("", {"R1"})


@pytest.mark.parametrize("started", [True, False])
def test_adapter_start_reports_the_servers_started_flag(started):
    resp = StartWorkflowExecutionResponse(
        run_id="r", first_execution_run_id="r", started=started,
        status=WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING)
    with CannedDestination(resp) as dest:
        got = dest.start_workflow(StartWorkflow(NS, WID, "R1", "T"))
    assert (got.run_id, got.status, got.started) == ("r", "running", started)


# -- the simulator -------------------------------------------------------------------------
def req(request_id: str, conflict: str = "use_existing", reuse: str = "allow_duplicate",
        wid: str = WID) -> StartWorkflow:
    return StartWorkflow(NS, wid, request_id, "T", {}, reuse, conflict)


@pytest.fixture
def dest() -> SimulatedDestination:
    return SimulatedDestination()


def test_sim_attach_records_the_id_and_logs_it(dest):
    a = dest.start_workflow(req("F", "fail"))
    got = dest.start_workflow_attaching(req("R1"))
    assert (got.run_id, got.started) == (a.run_id, False)
    d = dest.describe(NS, WID)
    assert (d.create_request_id, d.request_ids, d.attached_request_ids) == ("F", {"F", "R1"},
                                                                            {"R1"})
    assert [o for _, o in dest.start_log()] == ["created", "use_existing_attached"]
    assert dest.start_workflow(req("R1", "fail")).started is False  # dedupes, attached
    assert dest.start_workflow(req("F", "fail")).started is True  # dedupes, created it
    assert dest.created_count(NS, WID) == 1


def test_sim_attach_flag_does_nothing_without_a_running_run_or_use_existing(dest):
    assert dest.start_workflow_attaching(req("F")).started is True  # nothing to attach to
    with pytest.raises(AlreadyStarted):
        dest.start_workflow_attaching(req("R1", "fail"))
    assert dest.describe(NS, WID).request_ids == {"F"}
    dest.complete(NS, WID)
    fresh = dest.start_workflow_attaching(req("R2"))
    assert fresh.started is True and fresh.first_execution_run_id == fresh.run_id
    assert dest.describe(NS, WID).create_request_id == "R2"


def test_sim_continue_as_new_keeps_attached_ids_on_the_old_run(dest):
    a = dest.start_workflow(req("F", "fail"))
    dest.start_workflow_attaching(req("R1"))
    b = dest.continue_as_new(NS, WID)
    cur, head = dest.describe(NS, WID), dest.describe(NS, WID, a.run_id)
    assert cur.run_id == b and cur.create_request_id not in ("", "F", "R1")
    assert (cur.request_ids, cur.attached_request_ids) == ({cur.create_request_id}, set())
    assert (head.create_request_id, head.attached_request_ids) == ("F", {"R1"})


def test_sim_attach_follows_faults_lost_responses_still_attach(dest):
    dest.start_workflow(req("F", "fail"))
    dest.inject("start", "fail_before_commit")
    with pytest.raises(DestinationUnavailable):
        dest.start_workflow_attaching(req("R1"))
    assert dest.describe(NS, WID).request_ids == {"F"}
    dest.inject("start", "lose_response")
    with pytest.raises(DestinationUnavailable):
        dest.start_workflow_attaching(req("R1"))
    assert dest.describe(NS, WID).attached_request_ids == {"R1"}


def test_sim_environment_attach_is_not_a_create(dest):
    a = dest.start_workflow(req("F", "fail"))
    dest.attach_request_id(NS, WID, "R1")
    d = dest.describe(NS, WID)
    assert (d.create_request_id, d.attached_request_ids) == ("F", {"R1"})
    assert dest.start_workflow(req("R1", "fail")).started is False
    assert dest.describe(NS, WID, a.run_id) == d


def test_sim_attach_persists_in_a_sql_state(file_store_url):
    one = SimulatedDestination(SqlSimState(file_store_url))
    one.start_workflow(req("F", "fail"))
    one.start_workflow_attaching(req("R1"))
    two = SimulatedDestination(SqlSimState(file_store_url))
    d = two.describe(NS, WID)
    assert (d.create_request_id, d.attached_request_ids) == ("F", {"R1"})
    assert two.start_workflow(req("R1", "fail")).started is False


# A small reference model of the current run: (create id, attached ids, running).
POOL = ("a", "b", "c")
OPS = st.lists(st.one_of(
    st.tuples(st.just("start"), st.sampled_from(POOL), st.sampled_from(["fail", "use_existing"]),
              st.booleans()),
    st.tuples(st.just("can")), st.tuples(st.just("close"))), max_size=30)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_sim_started_and_create_id_match_a_reference_model(ops):
    d, cur = SimulatedDestination(), None
    for op in ops:
        if op[0] == "can" or op[0] == "close":
            if cur is None or not cur[2]:
                continue
            if op[0] == "close":
                d.complete(NS, WID)
                cur = (cur[0], cur[1], False)
            else:
                d.continue_as_new(NS, WID)
                cur = (d.describe(NS, WID).create_request_id, frozenset(), True)
                assert cur[0] not in POOL
            continue
        _, rid, conflict, attach = op
        call = d.start_workflow_attaching if attach else d.start_workflow
        known = cur is not None and rid in {cur[0], *cur[1]}
        if not known and cur is not None and cur[2] and conflict == "fail":
            with pytest.raises(AlreadyStarted) as info:
                call(req(rid, conflict))
            assert info.value.start_request_id == cur[0]
            continue
        got = call(req(rid, conflict))
        if known:
            assert got.started is (rid == cur[0])
        elif cur is not None and cur[2]:  # use_existing on a running run
            assert got.started is False
            if attach:
                cur = (cur[0], cur[1] | {rid}, True)
        else:
            assert got.started is True
            cur = (rid, frozenset(), True)
        desc = d.describe(NS, WID)
        assert (desc.create_request_id, desc.attached_request_ids) == (cur[0], cur[1])
