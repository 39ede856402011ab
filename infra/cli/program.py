"""Parsing ``schedule create``'s spec, action and policy options into the domain's checked
values (domain/source/spec.py, domain/source/action.py). Every refusal is ``invalid_argument`` naming the
option, and nothing is written."""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from schedfence.domain.source.action import StartWorkflowAction, make_action, make_policies
from schedfence.domain.bounds import MAX_JSON_DEPTH, parse_time
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.spec import make_spec

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
    """``--start``/``--end``: an RFC 3339 time within the domain's bounds (domain/bounds.py)."""
    return parse_time(text, option)


def interval(text: str) -> tuple[int, int]:
    every, _, offset = text.partition("/")
    return duration(every, "interval"), duration(offset, "offset") if offset else 0


def parse_spec(*, intervals: tuple[str, ...], crons: tuple[str, ...], time_zone: str | None,
               start_at: str | None, end_at: str | None, jitter: str | None) -> Any:
    """A spec from its options, or None when neither --interval nor --cron is given (then
    none of its other options may be)."""
    if not (intervals or crons):
        given = [o for o, v in (("tz", time_zone), ("start", start_at), ("end", end_at),
                                ("jitter", jitter)) if v is not None]
        if given:
            raise InvalidArgument(f"{given[0]}: applies to a spec; give --interval or --cron")
        return None
    return make_spec(intervals=[interval(i) for i in intervals], cron=list(crons),
                     start_at=moment(start_at, "start"), end_at=moment(end_at, "end"),
                     jitter=duration(jitter or "0", "jitter"), time_zone=time_zone or "UTC")


def parse_input(input_json: str) -> Any:
    """``--input``: one JSON value. A number too long to convert or nesting deeper than the
    parser's recursion is refused here; make_action bounds the rest (domain/bounds.py)."""
    try:
        return json.loads(input_json)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"input: not JSON ({exc.msg} at {exc.pos})") from None
    except (ValueError, RecursionError):
        raise InvalidArgument("input: not JSON within the bounds (a number of more than 4300 "
                              f"digits, or nested deeper than {MAX_JSON_DEPTH} levels)") from None


def parse_program(schedule_id: str, *, intervals: tuple[str, ...], crons: tuple[str, ...],
                  time_zone: str | None, start_at: str | None, end_at: str | None,
                  jitter: str | None, overlap: str | None, catchup_window: str | None,
                  pause_on_failure: bool | None, workflow_type: str | None,
                  task_queue: str | None, action_workflow_id: str | None,
                  input_json: str | None, limit: int | None) -> dict[str, Any]:
    """The keyword arguments of ``MigrationService.create_schedule`` for these options."""
    spec = parse_spec(intervals=intervals, crons=crons, time_zone=time_zone,
                      start_at=start_at, end_at=end_at, jitter=jitter)
    if spec is None:
        if workflow_type or task_queue or input_json is not None or limit is not None:
            raise InvalidArgument("spec: an action needs --interval or --cron")
        return {}
    if not workflow_type or not task_queue:
        raise InvalidArgument("action: --workflow-type and --task-queue are required with a "
                              "spec")
    action = make_action(workflow_type=workflow_type, task_queue=task_queue,
                         workflow_id=action_workflow_id or schedule_id,
                         input=None if input_json is None else parse_input(input_json))
    return {"spec": spec, "action": action, "limit": limit,
            "policies": parse_policies(None, overlap, catchup_window, pause_on_failure)}


def parse_policies(current: dict[str, Any] | None, overlap: str | None,
                   catchup_window: str | None, pause_on_failure: bool | None) -> Any:
    """Policies: the options given, the rest as ``current`` (or Temporal's defaults)."""
    base = make_policies().model_dump() if current is None else dict(current)
    if overlap is not None:
        base["overlap"] = overlap
    if catchup_window is not None:
        base["catchup_window"] = duration(catchup_window, "catchup_window")
    if pause_on_failure is not None:
        base["pause_on_failure"] = pause_on_failure
    return make_policies(**base)


def updated_action(current: dict[str, Any] | None, schedule_id: str,
                   given: dict[str, Any]) -> StartWorkflowAction:
    """The action with the options given replaced, every other field of it kept as it is
    (payloads, timeouts, retry policy, memo, search attributes, user metadata)."""
    if current is None:
        return make_action(**{"workflow_id": schedule_id, **given})
    old = StartWorkflowAction.model_validate(current)
    kept = {name: getattr(old, name) for name in StartWorkflowAction.model_fields}
    if "input" in given:
        del kept["inputs"]
    return make_action(**{**kept, **given})


def parse_update(current: dict[str, Any], **options: Any) -> dict[str, Any]:
    """``schedule update``: the parts of the program to replace (``MigrationService.
    update_schedule``'s keywords); a part whose options are all absent is kept. The action
    and the policies change field by field over ``current`` (the schedule's view)."""
    changes: dict[str, Any] = {}
    spec = parse_spec(**{k: options[k] for k in ("intervals", "crons", "time_zone",
                                                 "start_at", "end_at", "jitter")})
    if spec is not None:
        changes["spec"] = spec
    fields = {"workflow_type": options["workflow_type"], "task_queue": options["task_queue"],
              "workflow_id": options["action_workflow_id"]}
    if options["input_json"] is not None:
        fields["input"] = parse_input(options["input_json"])
    given = {k: v for k, v in fields.items() if v is not None}
    if given:
        if current.get("action") is None and not {"workflow_type", "task_queue"} <= set(given):
            raise InvalidArgument("action: --workflow-type and --task-queue are required for "
                                  "a schedule without an action")
        changes["action"] = updated_action(current.get("action"), current["schedule_id"], given)
    policy = (options["overlap"], options["catchup_window"], options["pause_on_failure"])
    if any(v is not None for v in policy):
        changes["policies"] = parse_policies(current.get("policies"), *policy)
    if options["no_limit"]:
        changes["limit"] = None
    elif options["limit"] is not None:
        changes["limit"] = options["limit"]
    if not changes:
        raise InvalidArgument("update: nothing to change (give a spec, action, policy or "
                              "limit option)")
    return changes
