"""One real Temporal dev server per test session, with the destination worker running on it.

The server is started on a free port and stopped by pid; the workers are the real
``schedfence destination-worker`` command (sentinels) and the contract suite's test-only
workflow (tests/contract/chain_workflow.py), each in a subprocess. ``ServerOps`` does, through the
server, what the simulator's environment operations do (complete, terminate, continue-as-new)
and lists what the server holds, so tests never judge the server by our own records.

The ``temporal_env`` fixture may be imported by several test modules; the environment is
reference-counted, so there is still one server per session. In CI (``CI=true``) a server that
cannot start fails the tests; elsewhere they are skipped with the reason.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest

from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE, WORKFLOW_ID_PREFIX
from schedfence.infra.adapters.destination.temporal import (DEFAULT_TASK_QUEUE, LoopThread,
                                                   TemporalDestination)
from tests.contract.chain_workflow import CHAIN_QUEUE
from tests.temporal_server import (DevServer, ServerError, die_with_parent, start_dev_server,
                                   temporal_binary)

NS = "default"
WORKER_READY_TIMEOUT = 30.0
T = TypeVar("T")


@dataclass(frozen=True)
class ListedRun:
    run_id: str
    first_run_id: str
    status: str
    workflow_type: str


class ServerOps:
    """Test-side client operations on the server, run on a private loop thread."""

    def __init__(self, target: str) -> None:
        from temporalio.client import Client
        self._loop = LoopThread("temporal-test-ops")
        self.client = self._loop.run(lambda: Client.connect(target, namespace=NS), 10.0)

    def run(self, factory: Callable[[], Any], timeout: float = 10.0) -> Any:
        return self._loop.run(factory, timeout)

    def close(self) -> None:
        async def drop() -> None:
            self.client = None
        self._loop.run(drop, 5.0)
        self._loop.stop()

    def handle(self, workflow_id: str, run_id: str | None = None) -> Any:
        return self.client.get_workflow_handle(workflow_id, run_id=run_id)

    def start(self, workflow_type: str, workflow_id: str, arg: Any = None) -> str:
        """Start a workflow with an SDK-generated request id (a foreign starter); its run id."""
        args = [] if arg is None else [arg]
        handle = self.run(lambda: self.client.start_workflow(
            workflow_type, args=args, id=workflow_id, task_queue=DEFAULT_TASK_QUEUE))
        return handle.result_run_id

    def start_dummy(self, workflow_id: str, sleep_seconds: float) -> str:
        return self.start(DUMMY_WORKFLOW_TYPE, workflow_id, {"sleep_seconds": sleep_seconds})

    def create_schedule(self, schedule_id: str, notes: str = "foreign",
                        request_id: str | None = None) -> str:
        """A Temporal Schedule created by someone else (its own request id, random unless
        given); the run id of the server's scheduler workflow that runs it."""
        from temporalio.api.schedule.v1 import Schedule, ScheduleSpec, ScheduleState
        from temporalio.api.workflowservice.v1 import CreateScheduleRequest
        rpc = CreateScheduleRequest(
            namespace=NS, schedule_id=schedule_id, identity="someone-else",
            request_id=request_id or str(uuid.uuid4()),
            schedule=Schedule(spec=ScheduleSpec(), state=ScheduleState(notes=notes, paused=True)))
        self.run(lambda: self.client.workflow_service.create_schedule(rpc))
        return self.describe(f"{WORKFLOW_ID_PREFIX}{schedule_id}").run_id

    def describe_schedule(self, schedule_id: str) -> Any:
        """The server's raw DescribeScheduleResponse (the SDK's own describe refuses a
        schedule with no action, which a pause-and-notes schedule is)."""
        from temporalio.api.workflowservice.v1 import DescribeScheduleRequest
        rpc = DescribeScheduleRequest(namespace=NS, schedule_id=schedule_id)
        return self.run(lambda: self.client.workflow_service.describe_schedule(rpc))

    def delete_schedule(self, schedule_id: str) -> None:
        self.run(lambda: self.client.get_schedule_handle(schedule_id).delete())

    def start_attaching(self, workflow_id: str, request_id: str, workflow_type: str, arg: Any,
                        conflict: int | None = None, task_queue: str = CHAIN_QUEUE) -> Any:
        """A raw StartWorkflowExecution with ``on_conflict_options.attach_request_id`` set and
        conflict policy USE_EXISTING unless ``conflict`` says otherwise; the raw response.

        The SDK's high-level client hides both, so this speaks to the WorkflowService directly.
        """
        from temporalio.api.common.v1 import WorkflowType
        from temporalio.api.enums.v1 import WorkflowIdConflictPolicy
        from temporalio.api.taskqueue.v1 import TaskQueue
        from temporalio.api.workflow.v1 import OnConflictOptions
        from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
        if conflict is None:
            conflict = WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
        rpc = StartWorkflowExecutionRequest(
            namespace=NS, workflow_id=workflow_id, workflow_type=WorkflowType(name=workflow_type),
            task_queue=TaskQueue(name=task_queue),
            input=self.client.data_converter.payload_converter.to_payloads_wrapper([arg]),
            identity="contract-test", request_id=request_id,
            workflow_id_conflict_policy=conflict,
            on_conflict_options=OnConflictOptions(attach_request_id=True))
        return self.run(lambda: self.client.workflow_service.start_workflow_execution(rpc))

    def signal(self, workflow_id: str, name: str, *args: Any) -> None:
        self.run(lambda: self.handle(workflow_id).signal(name, *args))

    def terminate(self, workflow_id: str) -> None:
        self.run(lambda: self.handle(workflow_id).terminate(reason="test"))

    def describe(self, workflow_id: str, run_id: str | None = None) -> Any:
        return self.run(lambda: self.handle(workflow_id, run_id).describe())

    def list_runs(self, workflow_id: str) -> list[ListedRun]:
        """Every run the server's visibility store holds for ``workflow_id``, oldest first."""
        async def listing() -> list[ListedRun]:
            runs = []
            async for wf in self.client.list_workflows(listing_query(workflow_id)):
                # The dev server's visibility leaves first_run_id empty: Describe has it.
                described = await self.handle(workflow_id, wf.run_id).describe()
                runs.append(ListedRun(wf.run_id, described.raw_description
                                      .workflow_execution_info.first_run_id,
                                      wf.status.name.lower(), wf.workflow_type))
            return runs[::-1]
        return self.run(listing)

    def chains(self, workflow_id: str, runs: int, timeout: float = 10.0) -> dict[str, list]:
        """First run id → its runs, once visibility shows ``runs`` runs (it lags a little)."""
        listed = wait_for(lambda: self.list_runs(workflow_id), lambda r: len(r) >= runs,
                          timeout, f"{runs} runs listed at {workflow_id}")
        found: dict[str, list] = {}
        for run in listed:
            found.setdefault(run.first_run_id, []).append(run)
        return found


def schedule_cli(env: TemporalEnv, *args: str) -> str:
    """``temporal schedule ARGS`` against the session's server, as an operator runs it; its
    standard output (a failing command fails the test)."""
    done = subprocess.run([temporal_binary(), "schedule", *args, "--address",
                           env.server.target, "--namespace", NS], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def listing_query(workflow_id: str) -> str:
    """A visibility query for every run at ``workflow_id``. The server hides its scheduler
    workflows from a plain listing (they carry TemporalNamespaceDivision); sentinels and
    others at the same id are in the default division."""
    return (f'WorkflowId = "{workflow_id}" AND (TemporalNamespaceDivision IS NULL OR '
            f'TemporalNamespaceDivision = "TemporalScheduler")')


def wait_for(read: Callable[[], T], ok: Callable[[T], bool], timeout: float,
             what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {value!r}")
        time.sleep(0.02)


@dataclass
class TemporalEnv:
    server: DevServer
    worker: subprocess.Popen
    chain_worker: subprocess.Popen
    ops: ServerOps
    destination: TemporalDestination

    @property
    def url(self) -> str:
        return f"temporal://{self.server.target}/{NS}"

    def close(self) -> None:
        self.destination.close()
        self.ops.close()
        stop_process(self.worker)
        stop_process(self.chain_worker)
        self.server.stop()


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
    return proc.returncode


def _start_worker(argv: list[str], what: str) -> tuple[subprocess.Popen, str]:
    """A worker subprocess; returns once it printed its first line."""
    # stderr goes to a file: SDK warnings must never fill a pipe nobody reads.
    errors = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True,
                            cwd=Path(__file__).resolve().parents[2], preexec_fn=die_with_parent)
    ready, _, _ = select.select([proc.stdout], [], [], WORKER_READY_TIMEOUT)
    line = proc.stdout.readline() if ready else ""  # "" also when it exited (EOF)
    if not line:
        stop_process(proc)
        errors.seek(0)
        raise ServerError(f"{what} exited {proc.returncode}: {errors.read()}")
    return proc, line


def start_destination_worker(url: str, *extra: str) -> tuple[subprocess.Popen, dict]:
    """``schedfence destination-worker --json``; returns once it printed its started line."""
    proc, line = _start_worker(
        [sys.executable, "-m", "schedfence.infra.cli", "--destination", url, "destination-worker",
         "--json", *extra], "destination worker")
    return proc, json.loads(line)


def _open_env() -> TemporalEnv:
    server = start_dev_server(Path(tempfile.mkdtemp(prefix="schedfence-temporal-")))
    workers: list[subprocess.Popen] = []
    try:
        workers.append(start_destination_worker(f"temporal://{server.target}/{NS}")[0])
        workers.append(_start_worker([sys.executable, "-m", "tests.contract.chain_workflow",
                                      server.target], "chain worker")[0])
    except BaseException:
        for proc in workers:
            stop_process(proc)
        server.stop()
        raise
    return TemporalEnv(server, workers[0], workers[1], ServerOps(server.target),
                       TemporalDestination(server.target, NS))


_env: TemporalEnv | None = None
_failure: str | None = None
_users = 0


def acquire() -> TemporalEnv:
    global _env, _failure, _users
    if _env is None and _failure is None:
        try:
            _env = _open_env()
        except (ServerError, OSError) as exc:
            _failure = f"no Temporal dev server: {exc}"
    if _env is None:
        if os.environ.get("CI") == "true":
            pytest.fail(_failure)
        pytest.skip(_failure)
    _users += 1
    return _env


def release() -> None:
    global _env, _users
    _users -= 1
    if _users == 0 and _env is not None:
        _env.close()
        _env = None


@pytest.fixture(scope="session")
def temporal_env() -> Any:
    env = acquire()
    yield env
    release()
