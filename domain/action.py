"""What a schedule does at a nominal time, and how it may overlap itself: Temporal's
``ScheduleActionStartWorkflow`` and ``SchedulePolicy``, and the deterministic names of one
action's workflow and start request.

The action workflow id is the server's own naming, measured on a Temporal dev server (1.32):
``<action workflow id>-<nominal time as RFC 3339 in UTC, whole seconds, Z>``. The request id is
a function of (namespace, schedule id, nominal time, origin), so a start retried after a lost
answer, a crash or a failover is deduplicated by the destination instead of running twice.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any
from uuid import uuid5


from .errors import InvalidArgument
from .ids import SCHEDFENCE_NAMESPACE
from .invoker import OVERLAPS, Overlap
from .model import Immutable
from .text import validate_text

DEFAULT_CATCHUP_WINDOW = 365 * 86400  # seconds, Temporal's default (one year)
MIN_CATCHUP_WINDOW = 10  # seconds, Temporal's minimum
MAX_INPUT_BYTES = 256 * 1024


class StartWorkflowAction(Immutable):
    """Start ``workflow_type`` on ``task_queue`` with ``input``; ``workflow_id`` is the prefix of
    every action workflow's id. ``memo`` and ``search_attributes`` are kept opaque."""

    workflow_type: str
    task_queue: str
    workflow_id: str
    input: Any = None
    memo: dict[str, Any] = {}
    search_attributes: dict[str, Any] = {}


class SchedulePolicies(Immutable):
    overlap: Overlap = "skip"
    catchup_window: int = DEFAULT_CATCHUP_WINDOW  # seconds
    pause_on_failure: bool = False


def make_action(*, workflow_type: str, task_queue: str, workflow_id: str,
                input: Any = None, memo: dict[str, Any] | None = None,
                search_attributes: dict[str, Any] | None = None) -> StartWorkflowAction:
    """A checked action; every refusal is ``invalid_argument`` naming the field. ``memo`` and
    ``search_attributes`` are JSON objects kept as given (opaque to the scheduler)."""
    for field, value in (("workflow_type", workflow_type), ("task_queue", task_queue),
                         ("workflow_id", workflow_id)):
        validate_text(field, value, max_length=500, identifier=True)
    _json("input", input)
    for field, doc in (("memo", memo), ("search_attributes", search_attributes)):
        if doc is not None and not isinstance(doc, dict):
            raise InvalidArgument(f"{field}: must be a JSON object")
        _json(field, doc)
    return StartWorkflowAction(workflow_type=workflow_type, task_queue=task_queue,
                               workflow_id=workflow_id, input=input, memo=memo or {},
                               search_attributes=search_attributes or {})


def _json(field: str, value: Any) -> None:
    try:
        size = len(json.dumps(value).encode())
    except (TypeError, ValueError):
        raise InvalidArgument(f"{field}: must be JSON") from None
    if size > MAX_INPUT_BYTES:
        raise InvalidArgument(f"{field}: {size} bytes of JSON, more than {MAX_INPUT_BYTES}")


def make_policies(*, overlap: str = "skip", catchup_window: int = DEFAULT_CATCHUP_WINDOW,
                  pause_on_failure: bool = False) -> SchedulePolicies:
    if overlap not in OVERLAPS:
        raise InvalidArgument(f"overlap: must be one of {', '.join(OVERLAPS)}, not {overlap!r}")
    if isinstance(catchup_window, bool) or not isinstance(catchup_window, int) or \
            not MIN_CATCHUP_WINDOW <= catchup_window <= 100 * DEFAULT_CATCHUP_WINDOW:
        raise InvalidArgument(f"catchup_window: must be a whole number of seconds from "
                              f"{MIN_CATCHUP_WINDOW} to {100 * DEFAULT_CATCHUP_WINDOW}")
    return SchedulePolicies(overlap=overlap, catchup_window=catchup_window,  # type: ignore[arg-type]
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
