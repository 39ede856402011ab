"""What the ``Destination`` port's words are on a Temporal server's wire, and back: the id
policies and run statuses as the server's enums, the server's failures as the port's errors
(``start_error``, ``describe_error``, ``stop_error``: a refusal, a missing namespace, a request
that never left this process, or an unknown outcome), and the request ids a cancel sends and a
Describe shows. Pure translations, no calls: temporal.py and its schedule modules make the calls.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.api.enums.v1 import (EventType, WorkflowExecutionStatus,
                                     WorkflowIdConflictPolicy, WorkflowIdReusePolicy)
from temporalio.api.errordetails.v1 import WorkflowExecutionAlreadyStartedFailure
from temporalio.service import RPCError, RPCStatusCode

from schedfence.domain.ports import (AlreadyStarted, DestinationNotFound, DestinationNotReached,
                                     DestinationUnavailable, InvalidStartRequest,
                                     NamespaceNotFound, RunStatus)

_REUSE = {
    "allow_duplicate": WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
    "allow_duplicate_failed_only":
        WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
    "reject_duplicate": WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
    "terminate_if_running": WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING,
}
_CONFLICT = {
    "fail": WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
    "use_existing": WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
    "terminate_existing": WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING,
}
_S = WorkflowExecutionStatus
_STATUS: dict[int, RunStatus] = {
    _S.WORKFLOW_EXECUTION_STATUS_RUNNING: "running",
    # A paused workflow is still open: it holds the id exactly like a running one.
    _S.WORKFLOW_EXECUTION_STATUS_PAUSED: "running",
    _S.WORKFLOW_EXECUTION_STATUS_COMPLETED: "completed",
    _S.WORKFLOW_EXECUTION_STATUS_FAILED: "failed",
    _S.WORKFLOW_EXECUTION_STATUS_CANCELED: "canceled",
    _S.WORKFLOW_EXECUTION_STATUS_TERMINATED: "terminated",
    _S.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW: "continued_as_new",
    _S.WORKFLOW_EXECUTION_STATUS_TIMED_OUT: "timed_out",
}
# Codes that prove the server refused the start before doing anything. Everything else
# (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, INTERNAL, UNKNOWN, RESOURCE_EXHAUSTED, ...) may
# hide a commit, so it is "outcome unknown".
_REFUSALS = {RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.PERMISSION_DENIED,
             RPCStatusCode.UNAUTHENTICATED, RPCStatusCode.FAILED_PRECONDITION,
             RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.NOT_FOUND}


def policies(reuse: str, conflict: str) -> tuple[WorkflowIdReusePolicy.ValueType,
                                                 WorkflowIdConflictPolicy.ValueType]:
    """The server's enums for the port's policy names.

    TERMINATE_IF_RUNNING predates conflict policies and the server refuses it beside any
    explicit one, FAIL included; the port spells "no conflict policy" as its default, "fail",
    so that pair is sent as UNSPECIFIED (whose server default is FAIL).
    """
    try:
        reuse_enum, conflict_enum = _REUSE[reuse], _CONFLICT[conflict]
    except KeyError as exc:
        raise InvalidStartRequest(f"unknown id policy {exc.args[0]!r}") from None
    if reuse == "terminate_if_running" and conflict == "fail":
        conflict_enum = WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED
    return reuse_enum, conflict_enum


def status_name(status: int) -> RunStatus:
    try:
        return _STATUS[status]
    except KeyError:
        raise DestinationUnavailable(f"server reported an unknown run status {status}") from None


def already_started_details(exc: RPCError) -> WorkflowExecutionAlreadyStartedFailure | None:
    for detail in exc.grpc_status.details:
        failure = WorkflowExecutionAlreadyStartedFailure()
        if detail.Is(failure.DESCRIPTOR):
            detail.Unpack(failure)
            return failure
    return None


def _has_detail(exc: RPCError, name: str) -> bool:
    return any(d.type_url.endswith("." + name) for d in exc.grpc_status.details)


# What the bridge says when the channel could not (re)connect: the request never left this
# process (measured on a dev server killed under a connected client, and on a bad host name).
_NOT_SENT = ("tcp connect error", "dns error", "error trying to connect")


def missing_namespace(exc: RPCError, call: str) -> NamespaceNotFound | None:
    """NOT_FOUND for the namespace itself (the server's NamespaceNotFoundFailure), not for a
    workflow or schedule in it."""
    if exc.status == RPCStatusCode.NOT_FOUND and _has_detail(exc, "NamespaceNotFoundFailure"):
        return NamespaceNotFound(f"{call}: NOT_FOUND: {exc.message}")
    return None


def never_sent(exc: RPCError) -> bool:
    """UNAVAILABLE because no connection could be made: nothing reached the server."""
    return exc.status == RPCStatusCode.UNAVAILABLE and any(m in exc.message for m in _NOT_SENT)


def start_error(exc: RPCError) -> Exception:
    """The port's error for a failed StartWorkflowExecution."""
    if never_sent(exc):
        return DestinationNotReached(f"start not sent: {exc.status.name}: {exc.message}")
    if exc.status == RPCStatusCode.ALREADY_EXISTS:
        failure = already_started_details(exc)
        if failure is not None:
            return AlreadyStarted(failure.start_request_id, failure.run_id,
                                  failure.first_execution_run_id)
    if exc.status in _REFUSALS:
        return InvalidStartRequest(f"{exc.status.name}: {exc.message}")
    return DestinationUnavailable(f"start: {exc.status.name}: {exc.message}")


def describe_error(exc: RPCError) -> Exception:
    """The port's error for a failed Describe.

    Only a *workflow* NOT_FOUND means "no such run"; a missing namespace says nothing about the
    workflow, so it is ``NamespaceNotFound``, a kind of unavailable (a worker retries; a command
    answers ``not_found``), never "free to start". A run id that is not a uuid
    cannot name a run, which the server reports as INVALID_ARGUMENT "Invalid RunId".
    """
    if (missing := missing_namespace(exc, "describe")) is not None:
        return missing
    if exc.status == RPCStatusCode.NOT_FOUND:
        return DestinationNotFound(exc.message)
    if exc.status == RPCStatusCode.INVALID_ARGUMENT and "RunId" in exc.message:
        return DestinationNotFound(exc.message)
    if never_sent(exc):
        return DestinationNotReached(f"describe not sent: {exc.status.name}: {exc.message}")
    return DestinationUnavailable(f"describe: {exc.status.name}: {exc.message}")


def stop_error(exc: RPCError) -> Exception:
    """The port's error for a failed cancel or terminate; ``DestinationNotFound`` means
    "nothing to stop", which ``stop_workflow`` turns into a quiet return.

    A *workflow* NOT_FOUND is either no such workflow ("workflow not found for ID") or a closed
    current run ("workflow execution already completed", what a terminate of a closed run
    gets). A missing namespace is ``NamespaceNotFound``, as for describe. Other codes that prove a
    refusal are ``InvalidStartRequest``; everything else is an unknown outcome.
    """
    if (missing := missing_namespace(exc, "stop")) is not None:
        return missing
    if exc.status == RPCStatusCode.NOT_FOUND:
        return DestinationNotFound(exc.message)
    if never_sent(exc):
        return DestinationNotReached(f"stop not sent: {exc.status.name}: {exc.message}")
    if exc.status in _REFUSALS:  # NOT_FOUND among them: answered above
        return InvalidStartRequest(f"stop refused: {exc.status.name}: {exc.message}")
    return DestinationUnavailable(f"stop: {exc.status.name}: {exc.message}")


def cancel_request_id(namespace: str, workflow_id: str) -> str:
    """The same request id for every cancel of ``workflow_id``, so the server dedupes a retry.

    Measured on a dev server: a run takes any number of cancels (same id or not), and an id
    used on an earlier run is still accepted by the next run of the id.
    """
    return str(uuid.uuid5(uuid.NAMESPACE_URL,
                          "schedfence/cancel/" + json.dumps([namespace, workflow_id])))


def create_request_id(request_id_infos: Any) -> str:
    """The request id recorded with the run's STARTED event, "" unless exactly one says so.

    Ids attached later (USE_EXISTING + attach_request_id) carry the event type
    WORKFLOW_EXECUTION_OPTIONS_UPDATED and prove nothing about who created the run.
    """
    created = [rid for rid, info in request_id_infos.items()
               if info.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED]
    return created[0] if len(created) == 1 else ""
