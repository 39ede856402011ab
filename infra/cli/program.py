"""Parsing ``schedule create``'s spec, action and policy options into the domain's checked
values (domain/spec.py, domain/action.py). Every refusal is ``invalid_argument`` naming the
option, and nothing is written."""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from schedfence.domain.action import make_action, make_policies
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.spec import make_spec

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d{1,12})([smhd]?)$")


def duration(text: str, option: str) -> int:
    """``30s``, ``5m``, ``2h``, ``1d`` or plain seconds."""
    found = _DURATION.match(text.strip())
    if found is None:
        raise InvalidArgument(f"{option}: {text!r} is not a duration (30s, 5m, 2h, 1d or "
                              "seconds)")
    return int(found.group(1)) * UNITS[found.group(2) or "s"]


def moment(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{option}: {text!r} is not an RFC 3339 time") from None


def interval(text: str) -> tuple[int, int]:
    every, _, offset = text.partition("/")
    return duration(every, "interval"), duration(offset, "offset") if offset else 0


def parse_program(schedule_id: str, *, intervals: tuple[str, ...], crons: tuple[str, ...],
                  time_zone: str, start_at: str | None, end_at: str | None, jitter: str,
                  overlap: str, catchup_window: str, workflow_type: str | None,
                  task_queue: str | None, action_workflow_id: str | None,
                  input_json: str | None, limit: int | None) -> dict[str, Any]:
    """The keyword arguments of ``MigrationService.create_schedule`` for these options."""
    runs = bool(intervals or crons)
    if not runs:
        if workflow_type or task_queue or input_json is not None or limit is not None:
            raise InvalidArgument("spec: an action needs --interval or --cron")
        return {}
    spec = make_spec(intervals=[interval(i) for i in intervals], cron=list(crons),
                     start_at=moment(start_at, "start"), end_at=moment(end_at, "end"),
                     jitter=duration(jitter, "jitter"), time_zone=time_zone)
    if not workflow_type or not task_queue:
        raise InvalidArgument("action: --workflow-type and --task-queue are required with a "
                              "spec")
    try:
        value = None if input_json is None else json.loads(input_json)
    except ValueError as exc:
        raise InvalidArgument(f"input: not JSON ({exc.msg} at {exc.pos})") from None
    action = make_action(workflow_type=workflow_type, task_queue=task_queue,
                         workflow_id=action_workflow_id or schedule_id, input=value)
    policies = make_policies(overlap=overlap,
                             catchup_window=duration(catchup_window, "catchup_window"))
    return {"spec": spec, "action": action, "policies": policies, "limit": limit}
