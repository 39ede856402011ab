"""The two worlds every contract test runs in, and the helpers the contract modules share.

A world has ``dest`` (the ``Destination`` under test) and does, through that world, what the
environment does to a workflow id: complete, terminate, continue-as-new, and a start that
attaches its request id (USE_EXISTING + ``on_conflict_options.attach_request_id``), which the
port cannot send. ``SimWorld`` uses the simulator's environment operations; ``ServerWorld``
uses a test-only workflow (tests/contract/chain_workflow.py: signals) and the server
(terminate, raw StartWorkflowExecution). The scheduler workflow type is not used here: on a
server its start is a CreateSchedule (tests/contract/test_temporal_schedule_create.py).
"""
from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import WorkflowIdConflictPolicy

from schedfence.domain.ports import AlreadyStarted, RunDescription, StartAccepted, StartWorkflow
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.destination.temporal_wire import start_error, status_name
from tests.contract.chain_workflow import (CHAIN_QUEUE, CHAIN_WORKFLOW_TYPE, COMPLETE_SIGNAL,
                                           FORCE_CAN_SIGNAL)
from tests.contract.temporal_env import NS, TemporalEnv, wait_for

INPUT = {"contract": True}
_CONFLICT = {"fail": WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
             "use_existing": WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}


class SimWorld:
    def __init__(self) -> None:
        self.dest = SimulatedDestination()

    def complete(self, wid: str) -> None:
        self.dest.complete(NS, wid)

    def terminate(self, wid: str) -> None:
        self.dest.terminate(NS, wid)

    def continue_as_new(self, wid: str) -> str:
        return self.dest.continue_as_new(NS, wid)

    def start_attaching(self, wid: str, request_id: str,
                        conflict: str = "use_existing") -> StartAccepted:
        return self.dest.start_workflow_attaching(StartWorkflow(
            NS, wid, request_id, CHAIN_WORKFLOW_TYPE, INPUT, id_conflict_policy=conflict,
            task_queue=CHAIN_QUEUE))


class ServerWorld:
    """The same operations, done by the test workflow (signals) or the server."""

    def __init__(self, env: TemporalEnv) -> None:
        self.dest, self.ops = env.destination, env.ops

    def _await_status(self, wid: str, run_id: str, status: str) -> None:
        wait_for(lambda: self.dest.describe(NS, wid, run_id).status, lambda s: s == status,
                 10.0, f"run {run_id} {status}")

    def complete(self, wid: str) -> None:
        run = self.dest.describe(NS, wid).run_id
        self.ops.signal(wid, COMPLETE_SIGNAL)
        self._await_status(wid, run, "completed")

    def terminate(self, wid: str) -> None:
        run = self.dest.describe(NS, wid).run_id
        self.ops.terminate(wid)
        self._await_status(wid, run, "terminated")

    def continue_as_new(self, wid: str) -> str:
        before = self.dest.describe(NS, wid).run_id
        self.ops.signal(wid, FORCE_CAN_SIGNAL)
        self._await_status(wid, before, "continued_as_new")
        return self.dest.describe(NS, wid).run_id

    def start_attaching(self, wid: str, request_id: str,
                        conflict: str = "use_existing") -> StartAccepted:
        from temporalio.service import RPCError
        try:
            resp = self.ops.start_attaching(wid, request_id, CHAIN_WORKFLOW_TYPE, INPUT,
                                            _CONFLICT[conflict])
        except RPCError as exc:
            raise start_error(exc) from exc
        return StartAccepted(resp.run_id, resp.first_execution_run_id,
                             status_name(resp.status), resp.started)


def make_world(request: pytest.FixtureRequest) -> Any:
    if request.param == "simulated":
        return SimWorld()
    return ServerWorld(request.getfixturevalue("temporal_env"))


def new_wid() -> str:
    return f"contract-{uuid.uuid4().hex}"


def rid() -> str:
    return str(uuid.uuid4())


def start(world: Any, wid: str, request_id: str, reuse: str = "allow_duplicate",
          conflict: str = "fail", workflow_type: str = CHAIN_WORKFLOW_TYPE,
          input: dict | None = None) -> StartAccepted:
    return world.dest.start_workflow(StartWorkflow(
        NS, wid, request_id, workflow_type, INPUT if input is None else input,
        id_reuse_policy=reuse, id_conflict_policy=conflict, task_queue=CHAIN_QUEUE))


def describe(world: Any, wid: str, run_id: str | None = None) -> RunDescription:
    return world.dest.describe(NS, wid, run_id)


def already_started(world: Any, wid: str, request_id: str, **kw: Any) -> AlreadyStarted:
    with pytest.raises(AlreadyStarted) as info:
        start(world, wid, request_id, **kw)
    return info.value
