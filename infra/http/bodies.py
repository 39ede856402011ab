"""The request bodies, and how a body's program becomes the domain's checked values.

Each field states its own rules in the schema (infra/http/fields.py: lengths, patterns,
ranges, enumerations, strict types), so a body the schema takes is refused only for what
depends on the state or on several fields together (docs/operators.md, "The HTTP API").
A body that does not fit its schema (a missing key, a wrong JSON type, an unknown field, a
value out of its range) is refused with 422 and the same error shape; the domain checks every
value again, as on the CLI and the Python API (``invalid_argument``, 400). A program's JSON is
the shape ``schedule describe`` returns (``spec``, ``action``, ``policies``), so a read can be
sent back.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schedfence.domain.source.action import DEFAULT_CATCHUP_WINDOW, make_action, make_policies
from schedfence.domain.bounds import bounded_time
from schedfence.domain.direction import Side
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.job import MAX_SELECTED_IDS
from schedfence.domain.source.spec import MAX_ENTRIES, make_spec
from schedfence.infra.http.fields import (Attempts, BlockedRounds, BlockedWait, CatchupWindow,
                                          Cron, Every, Flag, Id, Limit, Name, NotesText,
                                          Overlap, Rate, Reason, Seconds, Time, Whole, Zone)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Key(Body):
    namespace: Id
    schedule_id: Id


class Interval(Body):
    every: Every
    offset: Seconds = 0


class Spec(Body):
    intervals: list[Interval] = Field(default_factory=list, max_length=MAX_ENTRIES)
    cron_expressions: list[Cron] = Field(default_factory=list, max_length=MAX_ENTRIES)
    time_zone: Zone = "UTC"
    start_at: Time | None = None
    end_at: Time | None = None
    jitter: Seconds = 0


class Action(Body):
    workflow_type: Name
    task_queue: Name
    workflow_id: Name | None = Field(None, description="Prefix of each action workflow's id "
                                                       "(default: the schedule id).")
    input: Any = None
    memo: dict[str, Any] | None = None
    search_attributes: dict[str, Any] | None = None


class Policies(Body):
    overlap: Overlap = "skip"
    catchup_window: CatchupWindow = DEFAULT_CATCHUP_WINDOW
    pause_on_failure: Flag = False


class CreateSchedule(Key):
    paused: Flag = False
    notes: NotesText = ""
    spec: Spec | None = None
    action: Action | None = None
    policies: Policies | None = None
    limit: Limit | None = Field(None, description="Take at most this many more actions.")


class UpdateSchedule(Key):
    """A part that is absent is kept; ``null`` removes it (``spec``, ``action``, ``policies``,
    ``limit``: unlimited)."""

    spec: Spec | None = None
    action: Action | None = None
    policies: Policies | None = None
    limit: Limit | None = None
    conflict_token: Whole | None = Field(None, description="Apply only if the schedule is "
                                                           "still at this token (from "
                                                           "describe).")


class Notes(Key):
    notes: NotesText


class Trigger(Key):
    overlap: Overlap | None = None


class Backfill(Key):
    start: Time = Field(description="First time of the range (RFC 3339 with a zone).")
    end: Time = Field(description="Last time of the range (included; not in the future).")
    overlap: Overlap | None = None


class Rollback(Key):
    request_id: Id | None = Field(None, description=(
        "Idempotency key (or the Idempotency-Key header); derived when both are absent."))


class Abort(Key):
    reason: Reason


class Recover(Key):
    reason: Reason
    request_id: Id | None = Field(None, description="adopt: the new id.")
    confirm_no_destination_run: Flag = False
    resolution: Literal["source_kept", "destination_owns"] | None = None
    first_run_id: Id | None = None


class Drain(Body):
    max_attempts: Attempts | None = None
    retry_for: float = Field(0.0, strict=True, ge=0, le=30, description=(
        "Seconds a migration that backs off is retried before it counts as blocked."))


class Promote(Body):
    reason: Reason


# -- a body's program as the domain's values -----------------------------------------------------
def moment(value: datetime | None, field: str) -> datetime | None:
    """A body's time within the domain's bounds (domain/bounds.py); None stays None."""
    return None if value is None else bounded_time(field, value)


def spec_of(spec: Spec) -> Any:
    return make_spec(intervals=[(i.every, i.offset) for i in spec.intervals],
                     cron=list(spec.cron_expressions), start_at=moment(spec.start_at, "start_at"),
                     end_at=moment(spec.end_at, "end_at"), jitter=spec.jitter,
                     time_zone=spec.time_zone)


def action_of(action: Action, schedule_id: str) -> Any:
    return make_action(workflow_type=action.workflow_type, task_queue=action.task_queue,
                       workflow_id=action.workflow_id or schedule_id, input=action.input,
                       memo=action.memo, search_attributes=action.search_attributes)


def policies_of(policies: Policies | None) -> Any:
    return make_policies(**(policies or Policies()).model_dump())


def create_program(body: CreateSchedule) -> dict[str, Any]:
    """``MigrationService.create_schedule``'s program keywords; the domain checks the whole
    (a spec and an action together, or neither: a pause-and-notes schedule). With a spec,
    absent policies are Temporal's defaults, as on the CLI."""
    runs = body.spec is not None
    return {"spec": spec_of(body.spec) if body.spec is not None else None,
            "action": action_of(body.action, body.schedule_id) if body.action else None,
            "policies": policies_of(body.policies) if runs or body.policies else None,
            "limit": body.limit}


def update_program(body: UpdateSchedule) -> dict[str, Any]:
    """``update_schedule``'s keywords for the parts present in the body."""
    given = body.model_fields_set
    changes: dict[str, Any] = {}
    if "spec" in given:
        changes["spec"] = None if body.spec is None else spec_of(body.spec)
    if "action" in given:
        changes["action"] = None if body.action is None else action_of(body.action,
                                                                        body.schedule_id)
    if "policies" in given:
        changes["policies"] = None if body.policies is None else policies_of(body.policies)
    if "limit" in given:
        changes["limit"] = body.limit
    if not changes:
        raise InvalidArgument("update: nothing to change (give spec, action, policies or "
                              "limit)")
    return changes


class Forward(Key):
    request_id: Id | None = Field(None, description=(
        "Idempotency key (or the Idempotency-Key header); derived from the Temporal "
        "schedule's conflict token when both are absent."))


class ForwardStep(Key):
    request_id: Id


class ForwardAbort(ForwardStep):
    reason: Reason


class Migrate(Body):
    """``schedfence migrate --no-wait``: the job requests its selection's migrations page by
    page, then asks its blocked schedules again in rounds (the call answers after them);
    workers (``worker/drain``, ``schedfence worker``) drive them."""

    namespace: Id
    to: Side
    job_id: Id
    schedule_ids: list[Id] | None = Field(None, max_length=MAX_SELECTED_IDS)
    match: Id | None = Field(None, description="A glob on the schedule id (* ? [..]).")
    rate: Rate | None = None
    dry_run: Flag = False
    blocked_rounds: BlockedRounds = 3
    blocked_wait: BlockedWait = 2.0


class CancelJob(Body):
    job_id: Id
    reason: Reason | Literal[""] = ""
