"""The ``Destination`` port over a real Temporal server.

It speaks the raw gRPC WorkflowService, not the SDK's high-level client, because the port needs
what the high-level client hides: the explicit request id, both id policies, the
``WorkflowExecutionAlreadyStartedFailure`` details and Describe's ``request_id_infos``.

The SDK is async and the port is sync, so each adapter owns a private event loop on a daemon
thread; every call is submitted to it and waited for with a deadline. What the port's words are
on the wire (policies, statuses, the server's errors) is temporal_wire.py's.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from datetime import timedelta
from typing import Any, Awaitable, Callable, Sequence, TypeVar, get_args

from temporalio.api.common.v1 import Payloads, WorkflowExecution, WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (DescribeNamespaceRequest,
                                               DescribeWorkflowExecutionRequest,
                                               GetClusterInfoRequest,
                                               RequestCancelWorkflowExecutionRequest,
                                               StartWorkflowExecutionRequest,
                                               TerminateWorkflowExecutionRequest)
from temporalio.client import Client
from temporalio.converter import default as default_converter
from temporalio.service import RPCError

from schedfence.domain.destination_id import DestinationId
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.ports import (DestinationNotFound, DestinationUnavailable,
                                     NamespaceNotServed, RunDescription, Settled,
                                     StartAccepted, StartWorkflow, StopKind)

from schedfence.infra.adapters.destination.action_proto import start_fields
from schedfence.infra.adapters.destination.temporal_connect import connect_client
from schedfence.infra.adapters.destination.temporal_gone import settle_deleted
from schedfence.infra.adapters.destination.temporal_schedule import create_schedule, settle_handover
from schedfence.infra.adapters.destination.temporal_watch import run_statuses
from schedfence.infra.adapters.destination.temporal_forward import TemporalScheduleHost
from schedfence.infra.adapters.destination.temporal_inventory import TemporalInventory
from schedfence.infra.pacing import AdaptiveLimit
from schedfence.infra.adapters.destination.temporal_wire import (cancel_request_id,
                                                                 create_request_id,
                                                                 describe_error,
                                                                 missing_namespace, policies,
                                                                 start_error, status_name,
                                                                 stop_error)

# The server refuses "temporal-sys-per-ns-tq" (INVALID_ARGUMENT "cannot use internal
# per-namespace task queue"): it is reserved for the server's own workers, so ours differs.
DEFAULT_TASK_QUEUE = "schedfence-destination"
DEFAULT_RPC_TIMEOUT = 5.0
MAX_STARTS_IN_FLIGHT = 50  # a worker batch's start calls (infra/engines/attempt.py CONCURRENCY)
SLOW_ANSWER = 0.75  # of the deadline: an answer slower than that lowers the start limit

T = TypeVar("T")
STOP_KINDS: tuple[str, ...] = get_args(StopKind)


class LoopThread:
    """An asyncio loop on a daemon thread, for sync callers of async code."""

    def __init__(self, name: str = "temporal-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, factory: Callable[[], Awaitable[T]], timeout: float) -> T:
        """Run ``factory()`` on the loop; give up after ``timeout`` s (concurrent TimeoutError)."""
        async def wrapper() -> T:
            return await factory()
        future = asyncio.run_coroutine_threadsafe(wrapper(), self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


class TemporalDestination(TemporalScheduleHost, TemporalInventory):
    """``domain.ports.ActionRunner`` on a Temporal server: ``namespace`` and any of
    ``namespaces`` (``("*",)``: every namespace). A call for a namespace it does not serve is
    ``NamespaceNotServed``: a command's configuration error (``invalid_argument``), a worker's
    back-off (another worker may serve it), never a park. ``tls``
    (``temporalio.service.TLSConfig``, or True for the system's roots) and ``api_key`` are
    handed to the connection and never shown."""

    def __init__(self, target: str, namespace: str = "default", *,
                 namespaces: tuple[str, ...] = (), tls: Any = False,
                 api_key: str | None = None,
                 task_queue: str = DEFAULT_TASK_QUEUE, rpc_timeout: float = DEFAULT_RPC_TIMEOUT,
                 identity: str = "schedfence") -> None:
        self.target, self.namespace, self.task_queue = target, namespace, task_queue
        self.namespaces = frozenset((namespace, *namespaces))
        self._tls, self._api_key = tls, api_key
        self.rpc_timeout, self.identity = rpc_timeout, identity
        self._loop: LoopThread | None = LoopThread(f"temporal-destination:{target}")
        self._client: Client | None = None
        self._connecting = asyncio.Lock()  # callers on several threads share one client
        self._converter = default_converter().payload_converter
        self._cluster_id: str | None = None  # GetClusterInfo's, read once when needed
        # How many start calls a worker's batches keep in flight (infra/pacing.py): every
        # call's answer time feeds it, so a server that slows down gets fewer calls before
        # they run out their deadline (an unknown outcome: the claim grace).
        self.pacer = AdaptiveLimit(MAX_STARTS_IN_FLIGHT, initial=4,
                                   slow_after=SLOW_ANSWER * rpc_timeout)

    def destination_identity(self, with_cluster: bool = False) -> DestinationId:
        """This server as domain/destination_id.py names it; ``with_cluster``: with the
        cluster's own id (one GetClusterInfo per adapter; ``DestinationUnavailable`` when it
        cannot be read)."""
        if with_cluster and self._cluster_id is None:
            resp = self._rpc("cluster info", "get_cluster_info", GetClusterInfoRequest(),
                             lambda exc: DestinationUnavailable(
                                 f"cluster info: {exc.status.name}: {exc.message}"))
            self._cluster_id = str(resp.cluster_id)
        served = ("*",) if "*" in self.namespaces else tuple(sorted(self.namespaces))
        return DestinationId("temporal", self.target, served, self._cluster_id)

    # -- plumbing ---------------------------------------------------------------------------
    async def _connected(self) -> Client:
        # Connect lazily and again after a failure, so a server that comes up later is used.
        async with self._connecting:
            if self._client is None:
                # DestinationNotReached on failure: no request of ours left this process.
                self._client = await connect_client(
                    self.target, self.namespace, identity=self.identity, tls=self._tls,
                    api_key=self._api_key, connect_timeout=self.rpc_timeout)
            return self._client

    def _rpc(self, what: str, method: str, rpc: Any,
             to_port_error: Callable[[RPCError], Exception]) -> Any:
        """One raw gRPC call under the deadline; server errors become the port's errors."""
        async def call(client: Client) -> Any:
            try:
                return await getattr(client.workflow_service, method)(
                    rpc, timeout=self._deadline)
            except RPCError as exc:
                raise to_port_error(exc) from exc
        return self._call(what, call)

    def _call(self, what: str, fn: Callable[[Client], Awaitable[T]]) -> T:
        if self._loop is None:
            raise DestinationUnavailable(f"{what}: the destination is closed")

        async def call() -> T:
            return await fn(await self._connected())
        began = time.monotonic()
        try:
            # The gRPC deadline is rpc_timeout; the extra second covers connect and scheduling.
            answer = self._loop.run(call, self.rpc_timeout + 1.0)
        except concurrent.futures.TimeoutError:
            self.pacer.observe(self.rpc_timeout, failed=True)
            raise DestinationUnavailable(f"{what}: no answer within {self.rpc_timeout}s") from None
        except DestinationUnavailable:  # no answer: a deadline the server ran out, or none
            self.pacer.observe(time.monotonic() - began, failed=True)
            raise
        except Exception:  # an answer all the same (not found, already started, refused)
            self.pacer.observe(time.monotonic() - began)
            raise
        self.pacer.observe(time.monotonic() - began)
        return answer

    def serves(self, namespace: str) -> bool:
        return "*" in self.namespaces or namespace in self.namespaces

    def _check_namespace(self, namespace: str) -> None:
        """Before any call: a namespace this destination does not serve is
        ``NamespaceNotServed``: a command refuses it (``invalid_argument``); a worker backs off
        (a worker that serves it moves it), never a refusal that would park. Nothing left
        this process, so it is ``DestinationNotReached``: a claim it cost is re-armed."""
        if not self.serves(namespace):
            raise NamespaceNotServed(f"this destination serves namespace(s) "
                                         f"{', '.join(sorted(self.namespaces))}, not "
                                         f"{namespace!r}")

    @property
    def _deadline(self) -> timedelta:
        return timedelta(seconds=self.rpc_timeout)

    # -- the port ---------------------------------------------------------------------------
    def start_workflow(self, request: StartWorkflow) -> StartAccepted:
        """StartWorkflowExecution; a start of the scheduler workflow type (a rollback's) is a
        Temporal Schedule instead (infra/adapters/destination/temporal_schedule.py), answered the same
        way: the server's own scheduler workflow runs at the id."""
        self._check_namespace(request.namespace)
        if request.workflow_type == SCHEDULER_WORKFLOW_TYPE:
            return create_schedule(self, request)
        reuse, conflict = policies(request.id_reuse_policy, request.id_conflict_policy)
        rpc = StartWorkflowExecutionRequest(
            namespace=request.namespace, workflow_id=request.workflow_id,
            identity=self.identity, request_id=request.request_id,
            workflow_id_reuse_policy=reuse, workflow_id_conflict_policy=conflict,
            **self._start_fields(request))
        resp = self._rpc("start", "start_workflow_execution", rpc, start_error)
        # The server sets ``started`` when the request id is the run's create id (a retry of
        # the start that created it answers True too), False for an attached id or
        # USE_EXISTING. A server too old to know the field leaves it False: never a false True.
        return StartAccepted(resp.run_id, resp.first_execution_run_id, status_name(resp.status),
                             started=resp.started)

    def _start_fields(self, request: StartWorkflow) -> dict[str, Any]:
        """A schedule action's start applies the whole action (its arguments, timeouts, retry
        policy, memo, search attributes, user metadata: action_proto.py, as the server's own
        starts do); any other start has one JSON argument."""
        if request.action is not None:
            return start_fields(request.action)
        return {"workflow_type": WorkflowType(name=request.workflow_type),
                "task_queue": TaskQueue(name=request.task_queue or self.task_queue),
                "input": Payloads(payloads=self._converter.to_payloads([request.input]))}

    def describe(self, namespace: str, workflow_id: str,
                 run_id: str | None = None) -> RunDescription:
        # Not NotFound: a namespace we do not serve says nothing about its workflows.
        self._check_namespace(namespace)
        rpc = DescribeWorkflowExecutionRequest(
            namespace=namespace,
            execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id or ""))
        resp = self._rpc("describe", "describe_workflow_execution", rpc, describe_error)
        info = resp.workflow_execution_info
        infos = resp.workflow_extended_info.request_id_infos
        return RunDescription(
            run_id=info.execution.run_id, first_execution_run_id=info.first_run_id,
            workflow_type=info.type.name, status=status_name(info.status),
            request_ids=frozenset(infos), create_request_id=create_request_id(infos))

    def run_statuses(self, namespace: str, workflow_ids: Sequence[str]) -> dict[str, str]:
        """``RunWatcher``: one visibility query per 100 ids (temporal_watch.py)."""
        self._check_namespace(namespace)
        return run_statuses(self, namespace, workflow_ids)

    def action_starts(self, namespace: str,
                      prefixes: Sequence[str] | None = None) -> list[str]:
        """``ActionListing``: the namespace's workflows as visibility lists them
        (temporal_listing.py)."""
        from schedfence.infra.adapters.destination.temporal_listing import action_starts
        self._check_namespace(namespace)
        return action_starts(self, namespace, prefixes)

    def retention_seconds(self, namespace: str) -> float:
        """DescribeNamespace's workflow execution retention (``RetentionReader``); any
        failure is unavailable (a missing namespace ``NamespaceNotFound``, one kind of it): it
        says nothing about runs."""
        self._check_namespace(namespace)
        resp = self._rpc("retention", "describe_namespace",
                         DescribeNamespaceRequest(namespace=namespace),
                         lambda exc: missing_namespace(exc, "describe namespace") or
                         DestinationUnavailable(
                             f"describe namespace: {exc.status.name}: {exc.message}"))
        return resp.config.workflow_execution_retention_ttl.ToTimedelta().total_seconds()

    def settle_handover(self, request: StartWorkflow, first_run_id: str) -> Settled:
        """After the receipt: the times at the handover's boundary (temporal_schedule.py)."""
        self._check_namespace(request.namespace)
        return settle_handover(self, request, first_run_id)

    def settle_deleted(self, request: StartWorkflow, first_run_id: str) -> Settled:
        """The settle of a schedule deleted since the receipt (temporal_gone.py)."""
        self._check_namespace(request.namespace)
        return settle_deleted(self, request, first_run_id)

    def stop_workflow(self, namespace: str, workflow_id: str, kind: StopKind,
                      reason: str = "") -> None:
        """RequestCancelWorkflowExecution (``kind`` "cancel") or TerminateWorkflowExecution on
        the current run of ``workflow_id``.

        Returning means the server accepted the stop, or had nothing to stop (no such workflow,
        or its current run closed): a repeated stop is a no-op. An accepted cancel only
        *asks*: the run stays running until its workflow code honours the request. Raises
        ``ValueError`` for a bad kind and ``DestinationUnavailable`` for a namespace not served,
        both before any call; ``InvalidStartRequest`` when the server refuses (e.g. an empty id);
        ``DestinationNotReached`` / ``DestinationUnavailable`` as for start (see ``stop_error``).
        """
        if kind not in STOP_KINDS:
            raise ValueError(f"kind must be one of {STOP_KINDS}, got {kind!r}")
        self._check_namespace(namespace)
        execution = WorkflowExecution(workflow_id=workflow_id)  # no run id: the current run
        rpc: Any
        if kind == "cancel":
            method = "request_cancel_workflow_execution"
            rpc = RequestCancelWorkflowExecutionRequest(
                namespace=namespace, workflow_execution=execution, identity=self.identity,
                request_id=cancel_request_id(namespace, workflow_id), reason=reason)
        else:
            method = "terminate_workflow_execution"
            rpc = TerminateWorkflowExecutionRequest(
                namespace=namespace, workflow_execution=execution, identity=self.identity,
                reason=reason)
        try:
            self._rpc(f"stop ({kind})", method, rpc, stop_error)
        except DestinationNotFound:
            return  # nothing running under this id: the stop is done

    def close(self) -> None:
        """Drop the client on its own loop, then stop the loop (idempotent)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return

        async def drop() -> None:
            self._client = None  # the bridge closes its connection when the client is freed
        try:
            loop.run(drop, 5.0)
        finally:
            loop.stop()

    def __enter__(self) -> TemporalDestination:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
