"""What a schedule does at a nominal time, and how it may overlap itself: Temporal's
``ScheduleActionStartWorkflow`` and ``SchedulePolicy``, and the deterministic names of one
action's workflow and start request.

The action workflow id is the server's own naming, measured on a Temporal dev server (1.32):
``<action workflow id>-<nominal time as RFC 3339 in UTC, whole seconds, Z>``. The request id is
a function of (namespace, schedule id, nominal time, origin), so a start retried after a lost
answer, a crash or a failover is deduplicated by the destination instead of running twice.
"""
from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from typing import Any
from uuid import uuid5

from pydantic import ValidationError, model_validator

from schedfence.domain.bounds import MAX_JSON_BYTES, check_json
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import MAX_DESTINATION_ID_BYTES, SCHEDFENCE_NAMESPACE
from schedfence.domain.source.invoker import OVERLAPS as OVERLAPS  # re-exported: the API reads them here
from schedfence.domain.source.invoker import Overlap
from schedfence.domain.model import Immutable
from schedfence.domain.source.payload import Payload, json_payload
from schedfence.domain.text import validate_text

DEFAULT_CATCHUP_WINDOW = 365 * 86400  # seconds, Temporal's default (one year)
MIN_CATCHUP_WINDOW = 10  # seconds, Temporal's minimum
MAX_DURATION = 100 * DEFAULT_CATCHUP_WINDOW  # seconds: timeouts, intervals, catch-up window
MAX_INPUT_BYTES = MAX_JSON_BYTES
# What Temporal's server refuses in an action, whatever its configuration (measured on a dev
# server, 1.32: tests/contract/test_server_accepts.py). Names are counted in UTF-8 bytes; the
# server appends ``-<RFC 3339>`` (21 bytes) to the action's workflow id before its check.
APPENDED_BYTES = len("-2026-01-01T00:00:00Z")
MAX_NAME_BYTES = {"workflow_type": MAX_DESTINATION_ID_BYTES,
                  "task_queue": MAX_DESTINATION_ID_BYTES,
                  "workflow_id": MAX_DESTINATION_ID_BYTES - APPENDED_BYTES}
RESERVED_TASK_QUEUE_PREFIX = "/_sys/"
PER_NAMESPACE_TASK_QUEUE = "temporal-sys-per-ns-tq"
# The workflow ids of Temporal's own workflows: a Temporal Schedule's scheduler workflow is
# ``temporal-sys-scheduler:<schedule id>`` (domain/ids.py), so an action workflow id of
# ``temporal-sys-scheduler:x`` starts runs at ``temporal-sys-scheduler:x-<time>``, the id of
# schedule ``x-<time>``'s chain after its rollback. No action may name one.
RESERVED_WORKFLOW_ID_PREFIX = "temporal-sys-"
MAX_ATTEMPTS = 2**31 - 1  # an int32 on the wire
MAX_NAME_LENGTH = 500  # characters of a workflow type, task queue or action workflow id
SYSTEM_SEARCH_ATTRIBUTES = frozenset({
    "WorkflowId", "RunId", "WorkflowType", "StartTime", "ExecutionTime", "CloseTime",
    "ExecutionStatus", "TaskQueue", "HistoryLength", "HistorySizeBytes", "ExecutionDuration",
    "StateTransitionCount", "ParentWorkflowId", "ParentRunId", "RootWorkflowId", "RootRunId",
    "TemporalWorkerDeploymentVersion", "TemporalWorkflowVersioningBehavior",
    "TemporalWorkerDeployment"})


class RetryPolicy(Immutable):
    """Temporal's ``RetryPolicy`` for the action's workflows: intervals in whole seconds (None
    and 0: the server's default), ``maximum_attempts`` 0: unlimited."""

    initial_interval: int | None = None
    backoff_coefficient: float = 0.0
    maximum_interval: int | None = None
    maximum_attempts: int = 0
    non_retryable_error_types: tuple[str, ...] = ()


class StartWorkflowAction(Immutable):
    """Start ``workflow_type`` on ``task_queue`` with ``inputs`` (its arguments, each payload
    kept whole: domain/source/payload.py); ``workflow_id`` is the prefix of every action workflow's
    id. ``memo``, ``search_attributes`` (each payload with its ``type`` metadata: typed) and the
    user metadata (``summary``, ``details``) are carried as given. Timeouts are whole seconds,
    None where unset. Every field is applied by every start, the source's and the server's.

    Its document v2 keeps payloads whole; v1 had one JSON ``input`` and JSON ``memo``
    and ``search_attributes`` values, and is upcast by ``upcast_action_v1_v2`` (the events that
    carry an action call it from their own ``upcast`` hooks)."""

    workflow_type: str
    task_queue: str
    workflow_id: str
    inputs: tuple[Payload, ...] = ()
    memo: dict[str, Payload] = {}
    search_attributes: dict[str, Payload] = {}
    execution_timeout: int | None = None  # seconds
    run_timeout: int | None = None  # seconds
    task_timeout: int | None = None  # seconds
    retry_policy: RetryPolicy | None = None
    summary: Payload | None = None
    details: Payload | None = None

    @model_validator(mode="before")
    @classmethod
    def _v1_document(cls, data: Any) -> Any:
        """A v1 document read outside an event (a simulator's run of an older release, say)
        is upcast the same way the events' hooks do."""
        if isinstance(data, dict) and "input" in data:
            data = copy.deepcopy(data)
            upcast_action_v1_v2(data)
        return data


def upcast_action_v1_v2(doc: dict[str, Any] | None) -> None:
    """A v1 action document (one JSON ``input``, JSON memo and search attributes) as v2, in
    place: each JSON value becomes the payload the v1 code sent for it (Temporal's default
    converter: a v1 action without input started its workflows with one null argument, and
    still does), no timeouts, no retry policy, no user metadata. A v2 document is left as is."""
    if doc is None or "input" not in doc:
        return
    doc["inputs"] = [json_payload(doc.pop("input")).model_dump(mode="json")]
    for name in ("memo", "search_attributes"):
        doc[name] = {k: json_payload(v).model_dump(mode="json")
                     for k, v in (doc.get(name) or {}).items()}


def upcast_handover_v1_v2(doc: dict[str, Any] | None) -> None:
    """A handover document whose action is v1 (domain/rollback/handover.py), in place."""
    if doc is not None:
        upcast_action_v1_v2(doc.get("action"))


class SchedulePolicies(Immutable):
    overlap: Overlap = "skip"
    catchup_window: int = DEFAULT_CATCHUP_WINDOW  # seconds
    pause_on_failure: bool = False


def make_action(*, workflow_type: str, task_queue: str, workflow_id: str,
                input: Any = None, memo: dict[str, Any] | None = None,
                search_attributes: dict[str, Any] | None = None,
                **carried: Any) -> StartWorkflowAction:
    """A checked action; every refusal is ``invalid_argument`` naming the field. ``input`` is
    one JSON argument (None: no argument); ``memo`` and ``search_attributes`` are JSON objects
    (each value a ``Payload`` kept as given, or JSON made one). ``carried``: any other field of
    ``StartWorkflowAction`` as it is kept (``inputs`` instead of ``input``, timeouts, retry
    policy, user metadata)."""
    for field, value in (("workflow_type", workflow_type), ("task_queue", task_queue),
                         ("workflow_id", workflow_id)):
        validate_text(field, value, max_length=MAX_NAME_LENGTH, identifier=True)
    _json("input", input)
    if input is not None and "inputs" in carried:
        raise InvalidArgument("input: one JSON argument, or inputs (payloads), not both")
    fields: dict[str, Any] = {"inputs": () if input is None else (json_payload(input),)}
    for field, doc in (("memo", memo), ("search_attributes", search_attributes)):
        if doc is not None and not isinstance(doc, dict):
            raise InvalidArgument(f"{field}: must be a JSON object")
        _json(field, {k: v for k, v in (doc or {}).items() if not isinstance(v, Payload)})
        fields[field] = {k: v if isinstance(v, Payload) else json_payload(v)
                         for k, v in (doc or {}).items()}
    fields.update(carried)
    try:
        action = StartWorkflowAction(workflow_type=workflow_type, task_queue=task_queue,
                                     workflow_id=workflow_id, **fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidArgument(f"{where}: {first['msg']}") from None
    check_action(action)
    return action


def check_action(action: StartWorkflowAction) -> StartWorkflowAction:
    """What the source can start as given, and Temporal's server takes: names within its
    limits, timeouts and intervals not negative, a retry policy it accepts, no system search
    attribute, payloads within ``MAX_INPUT_BYTES`` in all (``invalid_argument`` naming the
    field)."""
    _check_names(action)
    for name in ("execution_timeout", "run_timeout", "task_timeout"):
        _seconds(name, getattr(action, name))
    if action.retry_policy is not None:
        _check_retry(action.retry_policy)
    system = sorted(SYSTEM_SEARCH_ATTRIBUTES & set(action.search_attributes))
    if system:
        raise InvalidArgument(f"search_attributes: {system[0]} is a system search attribute "
                              "(Temporal's server sets it; a workflow may not)")
    carried = [*action.inputs, *action.memo.values(), *action.search_attributes.values(),
               *(p for p in (action.summary, action.details) if p is not None)]
    size = sum(p.size() for p in carried)
    if size > MAX_INPUT_BYTES:
        raise InvalidArgument(f"inputs: {size} bytes of payloads, more than {MAX_INPUT_BYTES}")
    return action


# A JSON search attribute value of each registered type, as the server reads it.
_SEARCH_VALUE = {
    "Keyword": lambda v: isinstance(v, str), "Text": lambda v: isinstance(v, str),
    "Datetime": lambda v: isinstance(v, str), "Bool": lambda v: isinstance(v, bool),
    "Int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "Double": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "KeywordList": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)}


def check_registered(action: StartWorkflowAction, registered: dict[str, str]) -> None:
    """The action's search attributes against those the destination's namespace registered
    (name -> type, e.g. ``Keyword``): an unknown name, another declared type or a JSON value
    not of the type is refused (``invalid_argument`` naming ``search_attributes``), as the
    server would refuse the create after the fence. Encodings other than JSON pass."""
    for name, p in sorted(action.search_attributes.items()):
        kind = registered.get(name)
        if kind is None:
            raise InvalidArgument(f"search_attributes: {name} is not registered in the "
                                  "destination's namespace (temporal operator "
                                  "search-attribute create)")
        meta = p.metadata_bytes()
        declared = meta.get("type", kind.encode()).decode("utf-8", "replace")
        if declared != kind:
            raise InvalidArgument(f"search_attributes: {name} is {kind} in the destination's "
                                  f"namespace, not {declared}")
        if meta.get("encoding") == b"json/plain":
            try:
                value = json.loads(p.data_bytes())
            except ValueError:
                value = None
            if not _SEARCH_VALUE.get(kind, lambda v: True)(value):
                raise InvalidArgument(f"search_attributes: {name} takes a {kind} value")


def _check_names(action: StartWorkflowAction) -> None:
    for field, limit in MAX_NAME_BYTES.items():
        size = len(getattr(action, field).encode("utf-8"))
        if size > limit:
            why = " (it gets -<RFC 3339 time> appended)" if field == "workflow_id" else ""
            raise InvalidArgument(f"{field}: {size} bytes in UTF-8; Temporal takes at most "
                                  f"{limit}{why}")
    if action.workflow_id.startswith(RESERVED_WORKFLOW_ID_PREFIX):
        raise InvalidArgument(f"workflow_id: reserved by Temporal's server for its own "
                              f"workflows ({RESERVED_WORKFLOW_ID_PREFIX}...)")
    queue = action.task_queue
    if queue == PER_NAMESPACE_TASK_QUEUE or queue.startswith(RESERVED_TASK_QUEUE_PREFIX):
        raise InvalidArgument(f"task_queue: reserved by Temporal's server "
                              f"({PER_NAMESPACE_TASK_QUEUE}, {RESERVED_TASK_QUEUE_PREFIX}...)")


def _check_retry(retry: RetryPolicy) -> None:
    """Temporal's own rules for a retry policy (0 or None: the server's default)."""
    _seconds("retry_policy.initial_interval", retry.initial_interval)
    _seconds("retry_policy.maximum_interval", retry.maximum_interval)
    b = retry.backoff_coefficient
    if not (b == 0 or 1 <= b < float("inf")):
        raise InvalidArgument("retry_policy.backoff_coefficient: must be 0 (the default) or a "
                              "finite number from 1")
    if not 0 <= retry.maximum_attempts <= MAX_ATTEMPTS:
        raise InvalidArgument(f"retry_policy.maximum_attempts: must be from 0 (unlimited) to "
                              f"{MAX_ATTEMPTS}")
    if retry.maximum_interval and retry.initial_interval and \
            retry.maximum_interval < retry.initial_interval:
        raise InvalidArgument("retry_policy.maximum_interval: must not be less than the "
                              "initial interval")


def _seconds(field: str, value: int | None) -> None:
    if value is not None and not 0 <= value <= MAX_DURATION:
        raise InvalidArgument(f"{field}: must be whole seconds from 0 to 100 years")


def _json(field: str, value: Any) -> None:
    check_json(field, value, MAX_INPUT_BYTES)


def make_policies(*, overlap: Overlap = "skip", catchup_window: int = DEFAULT_CATCHUP_WINDOW,
                  pause_on_failure: bool = False) -> SchedulePolicies:
    if overlap not in OVERLAPS:
        raise InvalidArgument(f"overlap: must be one of {', '.join(OVERLAPS)}, not {overlap!r}")
    if isinstance(catchup_window, bool) or not isinstance(catchup_window, int) or \
            not MIN_CATCHUP_WINDOW <= catchup_window <= MAX_DURATION:
        raise InvalidArgument(f"catchup_window: must be a whole number of seconds from "
                              f"{MIN_CATCHUP_WINDOW} to {MAX_DURATION}")
    return SchedulePolicies(overlap=overlap, catchup_window=catchup_window,
                            pause_on_failure=bool(pause_on_failure))


def nominal_text(nominal: datetime) -> str:
    """RFC 3339 in UTC, whole seconds, ``Z``: ``2026-12-03T07:33:52Z``."""
    return nominal.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_nominal(text: str) -> datetime:
    """The instant ``nominal_text`` wrote (events and state keep times as that text)."""
    return datetime.fromisoformat(text)


def action_workflow_id(action: StartWorkflowAction, nominal: datetime) -> str:
    return f"{action.workflow_id}-{nominal_text(nominal)}"


def action_request_id(namespace: str, schedule_id: str, nominal: datetime,
                      origin: str = "auto") -> str:
    """The start's request id: the same for every attempt at this (schedule, time, origin)."""
    return str(uuid5(SCHEDFENCE_NAMESPACE,
                     json.dumps(["action", namespace, schedule_id, nominal_text(nominal),
                                 origin])))
