"""``stop_workflow`` on a real Temporal server, and where the simulator agrees with it.

The workflows here run on a task queue no worker polls, so a run stays running until it is
stopped, and a cancel stays a mere request. Measured on the dev server these tests start:

- terminate of a running run closes it "terminated"; of a closed run, NOT_FOUND "workflow
  execution already completed"; of an id never used, NOT_FOUND "workflow not found for ID";
- cancel of a running run records the request (Describe's ``cancel_requested``) and leaves it
  running; another cancel, same request id or not, is accepted; a cancel of a closed run is
  accepted and changes nothing.

``stop_workflow`` makes all of these return None. The error mapping (``stop_error``) is tested
without a server at the end.
"""
from __future__ import annotations

import uuid

import pytest
from temporalio.api.errordetails.v1 import NamespaceNotFoundFailure, NotFoundFailure
from temporalio.service import RPCStatusCode

from schedfence.domain.ports import (DestinationNotFound, DestinationNotReached,
                                     DestinationUnavailable, InvalidStartRequest, NamespaceNotFound,
                                     StartWorkflow)
from schedfence.infra.adapters.destination.temporal import TemporalDestination
from schedfence.infra.adapters.destination.temporal_wire import cancel_request_id, stop_error
from tests.contract.temporal_env import NS, TemporalEnv
from tests.contract.worlds import rid
from tests.infra.adapters.destination.test_temporal_adapter import rpc_error
from tests.temporal_server import free_port

WORKFLOW_TYPE = "schedfence-stop-contract"
NO_WORKER_QUEUE = "schedfence-stop-contract-no-worker"


def start(dest, wid: str, reuse: str = "allow_duplicate") -> str:
    """A plain run nobody works on; its run id."""
    return dest.start_workflow(StartWorkflow(NS, wid, rid(), WORKFLOW_TYPE, {},
                                             id_reuse_policy=reuse,
                                             task_queue=NO_WORKER_QUEUE)).run_id


def cancel_requested(env: TemporalEnv, wid: str, run_id: str) -> bool:
    raw = env.ops.describe(wid, run_id).raw_description
    return raw.workflow_extended_info.cancel_requested


# -- both worlds ---------------------------------------------------------------------------
def test_terminate_closes_the_current_run_and_a_second_is_a_no_op(world, wid):
    run = start(world.dest, wid)
    assert world.dest.stop_workflow(NS, wid, "terminate", reason="overlap") is None
    d = world.dest.describe(NS, wid)
    assert (d.run_id, d.status) == (run, "terminated")
    world.dest.stop_workflow(NS, wid, "terminate")
    world.dest.stop_workflow(NS, wid, "cancel")
    assert world.dest.describe(NS, wid).status == "terminated"


@pytest.mark.parametrize("kind", ["cancel", "terminate"])
def test_a_stop_of_a_workflow_id_never_used_is_a_no_op(world, wid, kind):
    assert world.dest.stop_workflow(NS, wid, kind) is None
    with pytest.raises(DestinationNotFound):
        world.dest.describe(NS, wid)  # and it created nothing


@pytest.mark.parametrize("kind", ["cancel", "terminate"])
def test_a_run_closed_by_someone_else_keeps_its_status(world, wid, kind):
    start(world.dest, wid)
    world.terminate(wid)
    world.dest.stop_workflow(NS, wid, kind)
    assert world.dest.describe(NS, wid).status == "terminated"


def test_a_stop_hits_the_current_run_not_an_earlier_one(world, wid):
    first = start(world.dest, wid)
    world.dest.stop_workflow(NS, wid, "terminate")
    second = start(world.dest, wid)
    assert second != first
    assert world.dest.describe(NS, wid).status == "running"
    world.dest.stop_workflow(NS, wid, "terminate")
    assert world.dest.describe(NS, wid, second).status == "terminated"


@pytest.mark.parametrize("kind", ["", "kill", "TERMINATE"])
def test_a_bad_kind_is_a_value_error_and_stops_nothing(world, wid, kind):
    start(world.dest, wid)
    with pytest.raises(ValueError):
        world.dest.stop_workflow(NS, wid, kind)
    assert world.dest.describe(NS, wid).status == "running"
    world.dest.stop_workflow(NS, wid, "terminate")  # leave nothing running behind


def test_an_empty_workflow_id_is_refused(world):
    with pytest.raises(InvalidStartRequest):
        world.dest.stop_workflow(NS, "", "terminate")


# -- the server only -----------------------------------------------------------------------
def test_a_cancel_is_requested_the_run_stays_running_and_a_terminate_still_works(
        temporal_env, wid):
    dest = temporal_env.destination
    run = start(dest, wid)
    assert dest.stop_workflow(NS, wid, "cancel", reason="overlap") is None
    # No worker runs the workflow code, so nothing honours the request: still running.
    assert dest.describe(NS, wid).status == "running"
    assert cancel_requested(temporal_env, wid, run)
    dest.stop_workflow(NS, wid, "cancel")  # asked again each pass: no error
    dest.stop_workflow(NS, wid, "terminate")
    assert dest.describe(NS, wid).status == "terminated"


def test_the_cancel_request_id_of_an_earlier_run_does_not_block_the_next(temporal_env, wid):
    dest = temporal_env.destination
    start(dest, wid)
    dest.stop_workflow(NS, wid, "cancel")
    dest.stop_workflow(NS, wid, "terminate")
    second = start(dest, wid)
    dest.stop_workflow(NS, wid, "cancel")  # the same request id as on the first run
    assert cancel_requested(temporal_env, wid, second)
    dest.stop_workflow(NS, wid, "terminate")


def test_a_namespace_not_served_is_unavailable_without_asking_the_server(temporal_env, wid):
    with pytest.raises(DestinationUnavailable, match="not 'elsewhere'"):
        temporal_env.destination.stop_workflow("elsewhere", wid, "terminate")


@pytest.mark.parametrize("kind", ["cancel", "terminate"])
def test_a_server_that_is_down_is_not_reached(kind):
    dest = TemporalDestination(f"127.0.0.1:{free_port()}", rpc_timeout=2)
    try:
        with pytest.raises(DestinationNotReached):
            dest.stop_workflow(NS, "w", kind)
    finally:
        dest.close()


def test_a_closed_adapter_is_unavailable():
    dest = TemporalDestination(f"127.0.0.1:{free_port()}")
    dest.close()
    with pytest.raises(DestinationUnavailable):
        dest.stop_workflow(NS, "w", "terminate")


# -- error mapping (pure) ------------------------------------------------------------------
@pytest.mark.parametrize("error,expected", [
    # No such workflow, or its current run closed: nothing to stop (stop_workflow returns).
    (rpc_error(RPCStatusCode.NOT_FOUND, "workflow not found for ID: w", NotFoundFailure()),
     DestinationNotFound),
    (rpc_error(RPCStatusCode.NOT_FOUND, "workflow execution already completed",
               NotFoundFailure()), DestinationNotFound),
    # A missing namespace (a DestinationUnavailable, so a worker backs off) says nothing about the workflow: retry.
    (rpc_error(RPCStatusCode.NOT_FOUND, "Namespace x is not found.",
               NamespaceNotFoundFailure(namespace="x")), NamespaceNotFound),
    (rpc_error(RPCStatusCode.UNAVAILABLE, "tcp connect error"), DestinationNotReached),
    (rpc_error(RPCStatusCode.UNAVAILABLE, "connection reset by peer"), DestinationUnavailable),
    (rpc_error(RPCStatusCode.DEADLINE_EXCEEDED), DestinationUnavailable),
    (rpc_error(RPCStatusCode.INTERNAL), DestinationUnavailable),
    (rpc_error(RPCStatusCode.RESOURCE_EXHAUSTED), DestinationUnavailable),
    (rpc_error(RPCStatusCode.INVALID_ARGUMENT, "WorkflowId is not set on request."),
     InvalidStartRequest),
    (rpc_error(RPCStatusCode.PERMISSION_DENIED), InvalidStartRequest),
])
def test_stop_errors(error, expected):
    assert type(stop_error(error)) is expected


def test_the_cancel_request_id_is_stable_per_workflow_id():
    assert cancel_request_id(NS, "a") == cancel_request_id(NS, "a")
    assert uuid.UUID(cancel_request_id(NS, "a"))
    assert len({cancel_request_id(NS, "a"), cancel_request_id(NS, "b"),
                cancel_request_id("other", "a"), cancel_request_id("a/b", "c"),
                cancel_request_id("a", "b/c")}) == 5
