"""A schedule's action (domain.action.StartWorkflowAction) as Temporal's protobuf fields, and
back: pure functions, every field carried both ways.

- ``new_workflow_info``: the Schedule's ``NewWorkflowExecutionInfo`` (the server's starts);
- ``start_fields``: the same fields for a ``StartWorkflowExecutionRequest`` (the source's own
  starts), so both sides start the action's workflows alike;
- ``action_back``: the source's action from a Schedule's, every payload kept whole (metadata
  and bytes), timeouts, retry policy, memo, typed search attributes, user metadata. A field
  the source cannot carry (a header, a priority, a versioning override, a cron schedule, a
  reuse policy, a duration that is not whole seconds) is refused (``invalid_argument``
  naming it), so a forward migration parks ``unsupported_schedule`` before any fence instead
  of dropping it.
"""
from __future__ import annotations

from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from temporalio.api.common.v1 import (Memo, Payload, Payloads, RetryPolicy, SearchAttributes,
                                      WorkflowType)
from temporalio.api.sdk.v1 import UserMetadata
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo

from schedfence.domain.source import action as da
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.payload import Payload as DomainPayload

TIMEOUTS = {"workflow_execution_timeout": "execution_timeout",
            "workflow_run_timeout": "run_timeout", "workflow_task_timeout": "task_timeout"}
# NewWorkflowExecutionInfo's fields the source carries; any other one set is refused.
CARRIED = frozenset({"workflow_id", "workflow_type", "task_queue", "input", "retry_policy",
                     "memo", "search_attributes", "user_metadata", *TIMEOUTS})


def payload(p: DomainPayload) -> Payload:
    return Payload(metadata=p.metadata_bytes(), data=p.data_bytes())


def payload_back(p: Payload) -> DomainPayload:
    return DomainPayload.of(dict(p.metadata), p.data)


def _duration(seconds: int | None) -> Duration | None:
    return None if seconds is None else Duration(seconds=seconds)


def _retry(r: da.RetryPolicy) -> RetryPolicy:
    return RetryPolicy(initial_interval=_duration(r.initial_interval),
                       backoff_coefficient=r.backoff_coefficient,
                       maximum_interval=_duration(r.maximum_interval),
                       maximum_attempts=r.maximum_attempts,
                       non_retryable_error_types=list(r.non_retryable_error_types))


def start_fields(action: da.StartWorkflowAction) -> dict[str, Any]:
    """The fields a start of ``action`` sets, common to ``NewWorkflowExecutionInfo`` and
    ``StartWorkflowExecutionRequest`` (unset and empty ones left out, as Temporal's own
    clients leave them: the server's defaults)."""
    fields: dict[str, Any] = {"workflow_type": WorkflowType(name=action.workflow_type),
                              "task_queue": TaskQueue(name=action.task_queue)}
    if action.inputs:
        fields["input"] = Payloads(payloads=[payload(p) for p in action.inputs])
    if action.memo:
        fields["memo"] = Memo(fields={k: payload(v) for k, v in action.memo.items()})
    if action.search_attributes:
        fields["search_attributes"] = SearchAttributes(indexed_fields={
            k: payload(v) for k, v in action.search_attributes.items()})
    for proto_name, name in TIMEOUTS.items():
        if getattr(action, name) is not None:
            fields[proto_name] = _duration(getattr(action, name))
    if action.retry_policy is not None:
        fields["retry_policy"] = _retry(action.retry_policy)
    if action.summary is not None or action.details is not None:
        fields["user_metadata"] = UserMetadata(
            summary=None if action.summary is None else payload(action.summary),
            details=None if action.details is None else payload(action.details))
    return fields


def new_workflow_info(action: da.StartWorkflowAction) -> NewWorkflowExecutionInfo:
    return NewWorkflowExecutionInfo(workflow_id=action.workflow_id, **start_fields(action))


def _seconds(field: str, d: Duration) -> int | None:
    if d.nanos:
        raise InvalidArgument(f"action.{field}: {d.seconds}s and {d.nanos}ns is not whole "
                              "seconds, and the source keeps whole seconds")
    return d.seconds or None


def _retry_back(r: RetryPolicy) -> da.RetryPolicy:
    return da.RetryPolicy(
        initial_interval=_seconds("retry_policy.initial_interval", r.initial_interval),
        backoff_coefficient=r.backoff_coefficient,
        maximum_interval=_seconds("retry_policy.maximum_interval", r.maximum_interval),
        maximum_attempts=r.maximum_attempts,
        non_retryable_error_types=tuple(r.non_retryable_error_types))


def _check_carried(start: NewWorkflowExecutionInfo) -> None:
    for field, value in start.ListFields():
        if field.name in CARRIED or (isinstance(value, Message) and value == type(value)()):
            continue
        raise InvalidArgument(f"action.{field.name}: set on the Temporal schedule, and the "
                              "source cannot carry it")


def action_back(start: NewWorkflowExecutionInfo) -> da.StartWorkflowAction:
    """The source's action for a Schedule's ``start_workflow`` (the inverse of
    ``new_workflow_info``); ``invalid_argument`` naming a field the source cannot carry."""
    _check_carried(start)
    meta = start.user_metadata
    return da.StartWorkflowAction(
        workflow_type=start.workflow_type.name, task_queue=start.task_queue.name,
        workflow_id=start.workflow_id,
        inputs=tuple(payload_back(p) for p in start.input.payloads),
        memo={k: payload_back(v) for k, v in start.memo.fields.items()},
        search_attributes={k: payload_back(v)
                           for k, v in start.search_attributes.indexed_fields.items()},
        **{name: _seconds(proto_name, getattr(start, proto_name))
           for proto_name, name in TIMEOUTS.items()},
        retry_policy=_retry_back(start.retry_policy) if start.HasField("retry_policy")
        else None,
        summary=payload_back(meta.summary) if meta.HasField("summary") else None,
        details=payload_back(meta.details) if meta.HasField("details") else None)
