"""The request bodies, and how a body's program becomes the domain's checked values.

Fields are typed loosely where the domain has the rules (ids, notes, seconds, times): its
``invalid_argument`` (400) names the field, the same refusal as on the CLI and the Python API.
A body that does not fit its schema at all (a missing key, a wrong JSON type, an unknown
field) is refused with 422 and the same error shape. A program's JSON is the shape
``schedule describe`` returns (``spec``, ``action``, ``policies``), so a read can be sent back.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schedfence.domain.action import DEFAULT_CATCHUP_WINDOW, make_action, make_policies
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.spec import make_spec

MAX_TEXT = 20_000  # characters of any one string field (the domain's own limits are lower)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Key(Body):
    namespace: str = Field(max_length=MAX_TEXT)
    schedule_id: str = Field(max_length=MAX_TEXT)


class Interval(Body):
    every: int
    offset: int = 0


class Spec(Body):
    intervals: list[Interval] = Field(default_factory=list, max_length=100)
    cron_expressions: list[str] = Field(default_factory=list, max_length=100)
    time_zone: str = "UTC"
    start_at: str | None = None
    end_at: str | None = None
    jitter: int = 0


class Action(Body):
    workflow_type: str
    task_queue: str
    workflow_id: str | None = Field(None, description="Prefix of each action workflow's id "
                                                      "(default: the schedule id).")
    input: Any = None
    memo: dict[str, Any] | None = None
    search_attributes: dict[str, Any] | None = None


class Policies(Body):
    overlap: str = "skip"
    catchup_window: int = DEFAULT_CATCHUP_WINDOW
    pause_on_failure: bool = False


class CreateSchedule(Key):
    paused: bool = False
    notes: str = Field("", max_length=MAX_TEXT)
    spec: Spec | None = None
    action: Action | None = None
    policies: Policies | None = None
    limit: int | None = Field(None, description="Take at most this many more actions.")


class UpdateSchedule(Key):
    """A part that is absent is kept; ``null`` removes it (``spec``, ``action``, ``policies``,
    ``limit``: unlimited)."""

    spec: Spec | None = None
    action: Action | None = None
    policies: Policies | None = None
    limit: int | None = None
    conflict_token: int | None = Field(None, description="Apply only if the schedule is still "
                                                         "at this token (from describe).")


class Notes(Key):
    notes: str = Field(max_length=MAX_TEXT)


class Trigger(Key):
    overlap: str | None = None


class Backfill(Key):
    start: str = Field(description="First time of the range (RFC 3339 with a zone).")
    end: str = Field(description="Last time of the range (included; not in the future).")
    overlap: str | None = None


class Rollback(Key):
    request_id: str | None = Field(None, max_length=MAX_TEXT, description=(
        "Idempotency key (or the Idempotency-Key header); derived when both are absent."))


class Abort(Key):
    reason: str = Field(max_length=MAX_TEXT)


class Recover(Key):
    reason: str = Field(max_length=MAX_TEXT)
    request_id: str | None = Field(None, max_length=MAX_TEXT, description="adopt: the new id.")
    confirm_no_destination_run: bool = False
    resolution: Literal["source_kept", "destination_owns"] | None = None
    first_run_id: str | None = Field(None, max_length=MAX_TEXT)


class Drain(Body):
    max_attempts: int | None = Field(None, ge=1, le=10_000)
    retry_for: float = Field(0.0, ge=0, le=30, description="Seconds a migration that backs off "
                                                           "is retried before it counts as "
                                                           "blocked.")


class Promote(Body):
    reason: str = Field(max_length=MAX_TEXT)


# -- a body's program as the domain's values -----------------------------------------------------
def moment(text: str | None, field: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{field}: not an RFC 3339 time") from None


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
    request_id: str | None = Field(None, max_length=MAX_TEXT, description=(
        "Idempotency key (or the Idempotency-Key header); derived from the Temporal "
        "schedule's conflict token when both are absent."))


class ForwardStep(Key):
    request_id: str = Field(max_length=MAX_TEXT)


class ForwardAbort(ForwardStep):
    reason: str = Field(max_length=MAX_TEXT)


class Migrate(Body):
    """``schedfence migrate --no-wait``: the job requests its selection's migrations page by
    page; workers (``worker/drain``, ``schedfence worker``) drive them."""

    namespace: str = Field(max_length=MAX_TEXT)
    to: Literal["workflow", "source"]
    job_id: str = Field(max_length=MAX_TEXT)
    schedule_ids: list[str] | None = Field(None, max_length=10_000)
    match: str | None = Field(None, max_length=MAX_TEXT)
    rate: float | None = Field(None, gt=0, le=10_000, description="Requests a second.")
    dry_run: bool = False


class CancelJob(Body):
    job_id: str = Field(max_length=MAX_TEXT)
    reason: str = Field("", max_length=MAX_TEXT)
