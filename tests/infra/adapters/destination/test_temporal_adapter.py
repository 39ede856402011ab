"""The Temporal adapter's edges: error mapping, deadlines, a server that is down or restarts,
namespaces, the destination URL. The semantics it shares with the simulator are in
tests/contract."""
from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest
from google.protobuf.any_pb2 import Any as AnyProto
from temporalio.api.common.v1 import GrpcStatus
from temporalio.api.errordetails.v1 import (NamespaceNotFoundFailure, NotFoundFailure,
                                            WorkflowExecutionAlreadyStartedFailure)
from temporalio.service import RPCError, RPCStatusCode

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.ports import (AlreadyStarted, DestinationNotFound, DestinationNotReached,
                                     DestinationUnavailable, InvalidStartRequest, NamespaceNotFound,
                                     StartWorkflow)
from schedfence.infra.adapters.destination.choose import parse_destination
from schedfence.infra.adapters.destination.temporal import TemporalDestination
from schedfence.infra.adapters.destination.temporal_wire import (describe_error, policies,
                                                                 start_error)
from tests.temporal_server import free_port, start_dev_server
from tests.contract.temporal_env import NS, temporal_env  # noqa: F401


def rpc_error(code: RPCStatusCode, message: str = "boom", *details) -> RPCError:
    packed = []
    for detail in details:
        any_ = AnyProto()
        any_.Pack(detail)
        packed.append(any_)
    raw = GrpcStatus(code=int(code), message=message, details=packed).SerializeToString()
    return RPCError(message, code, raw)


def request(wid: str, request_id: str = "r1", namespace: str = NS) -> StartWorkflow:
    return StartWorkflow(namespace, wid, request_id, SCHEDULER_WORKFLOW_TYPE,
                         {"namespace": NS, "schedule_id": "a", "incarnation": 1,
                          "paused": True, "notes": ""})


# -- error mapping (pure) ------------------------------------------------------------------
def test_already_exists_with_details_is_already_started_with_its_ids():
    err = start_error(rpc_error(RPCStatusCode.ALREADY_EXISTS, "running",
                                WorkflowExecutionAlreadyStartedFailure(
                                    start_request_id="theirs", run_id="run-b",
                                    first_execution_run_id="run-a")))
    assert isinstance(err, AlreadyStarted)
    assert (err.start_request_id, err.run_id, err.first_execution_run_id) == (
        "theirs", "run-b", "run-a")


@pytest.mark.parametrize("code,expected", [
    (RPCStatusCode.UNAVAILABLE, DestinationUnavailable),
    (RPCStatusCode.DEADLINE_EXCEEDED, DestinationUnavailable),
    (RPCStatusCode.CANCELLED, DestinationUnavailable),
    (RPCStatusCode.INTERNAL, DestinationUnavailable),
    (RPCStatusCode.RESOURCE_EXHAUSTED, DestinationUnavailable),
    (RPCStatusCode.ALREADY_EXISTS, DestinationUnavailable),  # without details: unknown
    (RPCStatusCode.INVALID_ARGUMENT, InvalidStartRequest),
    (RPCStatusCode.NOT_FOUND, InvalidStartRequest),  # e.g. no such namespace
    (RPCStatusCode.PERMISSION_DENIED, InvalidStartRequest),
])
def test_start_errors_are_unknown_outcomes_unless_the_server_proved_a_refusal(code, expected):
    assert type(start_error(rpc_error(code))) is expected


@pytest.mark.parametrize("message,expected", [
    # What the bridge said when the server was down or the name did not resolve: the
    # request never left this process, so nothing committed.
    ("tcp connect error", DestinationNotReached),
    ("dns error: failed to lookup address information", DestinationNotReached),
    ("error trying to connect: connection refused", DestinationNotReached),
    # A transport failure after the request may have gone out is an unknown outcome.
    ("transport error", DestinationUnavailable),
    ("connection reset by peer", DestinationUnavailable),
])
def test_only_a_start_that_never_connected_is_known_not_sent(message, expected):
    assert type(start_error(rpc_error(RPCStatusCode.UNAVAILABLE, message))) is expected


@pytest.mark.parametrize("error,expected", [
    (rpc_error(RPCStatusCode.NOT_FOUND, "workflow not found", NotFoundFailure()),
     DestinationNotFound),
    (rpc_error(RPCStatusCode.INVALID_ARGUMENT, "Invalid RunId."), DestinationNotFound),
    # A missing namespace (a DestinationUnavailable, so a worker backs off) says nothing about the workflow: never "free to start".
    (rpc_error(RPCStatusCode.NOT_FOUND, "Namespace x is not found.",
               NamespaceNotFoundFailure(namespace="x")), NamespaceNotFound),
    (rpc_error(RPCStatusCode.UNAVAILABLE, "tcp connect error"), DestinationNotReached),
    (rpc_error(RPCStatusCode.DEADLINE_EXCEEDED), DestinationUnavailable),
    (rpc_error(RPCStatusCode.INVALID_ARGUMENT, "WorkflowId is not set"),
     DestinationUnavailable),
])
def test_describe_errors(error, expected):
    assert type(describe_error(error)) is expected


def test_terminate_if_running_is_sent_without_a_conflict_policy():
    from temporalio.api.enums.v1 import WorkflowIdConflictPolicy as C
    assert policies("terminate_if_running", "fail")[1] == C.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED
    assert policies("allow_duplicate", "fail")[1] == C.WORKFLOW_ID_CONFLICT_POLICY_FAIL
    with pytest.raises(InvalidStartRequest):
        policies("allow_duplicate", "sometimes")


# -- the destination URL -------------------------------------------------------------------
@pytest.mark.parametrize("url,expected", [
    ("temporal://127.0.0.1:7233/default", ("127.0.0.1:7233", "default")),
    ("temporal://localhost:7000", ("localhost:7000", "default")),
    ("temporal://[::1]:7233/payments", ("[::1]:7233", "payments")),
])
def test_destination_urls(url, expected):
    assert parse_destination(url) == expected


@pytest.mark.parametrize("url", ["http://h:1/ns", "temporal://h/ns", "temporal://h:x/ns",
                                 "temporal://:7233/ns", "temporal://h:1/ns?tls=2",
                                 "temporal://h:1/ns?api_key=secret", "temporal://h:1/a,*",
                                 "temporal://h:1/ns?cert=/nonexistent&key=/nonexistent",
                                 "temporal://h:1/ns?tls=1&tls=1", "temporal://h:1/a,,b"])
def test_bad_destination_urls_are_invalid_arguments(url):
    with pytest.raises(InvalidArgument) as info:
        parse_destination(url)
    assert "secret" not in str(info.value) or "api_key" in url  # named, never a value echoed


def test_several_namespaces_tls_files_and_the_label(tmp_path):
    from schedfence.infra.adapters.destination.choose import parse_temporal, tls_config
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    spec = parse_temporal(f"temporal://h:7233/default,payments?ca={ca}&server_name=tmprl")
    assert (spec.target, spec.namespaces, spec.namespace) == ("h:7233", ("default", "payments"),
                                                              "default")
    assert spec.label == "temporal://h:7233/default,payments (TLS)"
    config = tls_config(spec.tls)
    assert (config.server_root_ca_cert, config.domain) == (ca.read_bytes(), "tmprl")
    assert tls_config(parse_temporal("temporal://h:1/*?tls=0").tls) is False
    assert parse_temporal("temporal://h:1/*").namespaces == ("*",)


# -- deadlines and connection loss ---------------------------------------------------------
def test_a_server_that_is_down_is_unavailable_for_both_calls():
    dest = TemporalDestination(f"127.0.0.1:{free_port()}", rpc_timeout=2)
    try:
        with pytest.raises(DestinationUnavailable):
            dest.start_workflow(request("temporal-sys-scheduler:w"))
        with pytest.raises(DestinationUnavailable):
            dest.describe(NS, "w")
    finally:
        dest.close()


def test_a_server_that_never_answers_hits_the_deadline():
    with socket.socket() as silent:  # accepts TCP connections, never speaks gRPC
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        dest = TemporalDestination(f"127.0.0.1:{silent.getsockname()[1]}", rpc_timeout=0.5)
        try:
            started = time.monotonic()
            with pytest.raises(DestinationUnavailable):
                dest.describe(NS, "w")
            assert time.monotonic() - started < 5
        finally:
            dest.close()


def test_a_closed_adapter_refuses_calls_and_closes_twice(temporal_env):
    dest = TemporalDestination(temporal_env.server.target)
    with pytest.raises(DestinationNotFound):
        dest.describe(NS, f"never-{uuid.uuid4().hex}")  # connected and answering
    dest.close()
    dest.close()
    with pytest.raises(DestinationUnavailable):
        dest.describe(NS, "w")


def test_a_namespace_not_served_is_unavailable_never_a_refusal(temporal_env):
    """A worker for one namespace meeting another's migration backs off (another worker may
    serve it); a refusal would park it as start_rejected."""
    with pytest.raises(DestinationUnavailable):
        temporal_env.destination.start_workflow(request("temporal-sys-scheduler:w",
                                                        namespace="elsewhere"))
    with pytest.raises(DestinationUnavailable):
        temporal_env.destination.describe("elsewhere", "w")


def test_dedupe_survives_a_server_restart_and_the_adapter_reconnects(tmp_path: Path):
    server = start_dev_server(tmp_path)
    dest = TemporalDestination(server.target, rpc_timeout=2)
    try:
        wid = f"temporal-sys-scheduler:restart-{uuid.uuid4().hex}"  # a CreateSchedule
        first = dest.start_workflow(request(wid))
        server.stop()
        with pytest.raises(DestinationUnavailable):
            dest.start_workflow(request(wid))
        server = start_dev_server(tmp_path, port=server.port)  # same port, same db file
        again = dest.start_workflow(request(wid))
        assert (again.run_id, again.first_execution_run_id) == (first.run_id, first.run_id)
    finally:
        dest.close()
        server.stop()


def test_a_scheduler_start_outside_the_scheduler_ids_is_refused_before_any_call():
    dest = TemporalDestination(f"127.0.0.1:{free_port()}", rpc_timeout=1)
    try:
        with pytest.raises(InvalidStartRequest, match="temporal-sys-scheduler:"):
            dest.start_workflow(request("not-a-schedule"))
    finally:
        dest.close()


def test_concurrent_duplicate_starts_from_several_threads_create_one_run(temporal_env):
    from concurrent.futures import ThreadPoolExecutor
    wid = f"temporal-sys-scheduler:threads-{uuid.uuid4().hex}"
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: temporal_env.destination.start_workflow(
            request(wid, "same-id")), range(16)))
    assert len({a.run_id for a in answers}) == 1
    assert len(temporal_env.ops.chains(wid, 1)[answers[0].run_id]) == 1
