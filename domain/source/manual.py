"""Changes a user makes to a running schedule, as pure decisions: update its program, trigger
one action now, backfill a range of past times.

Each checks the source is open and unfenced first (``migration_pending`` while a migration
holds the fence, ``closed`` after: nothing written), then its input (``invalid_argument``
naming the field), and returns the events to record.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

from schedfence.domain.source.action import nominal_text
from schedfence.domain.errors import AlreadyExists, ConflictTokenMismatch, InvalidArgument
from schedfence.domain.source.invoker import OVERLAPS
from schedfence.domain.model import Fact, Facts
from schedfence.domain.source.program import Program, program_of
from schedfence.domain.source.runs import ActionStartIssued, BackfillRequested, ProgramUpdated, Triggered
from schedfence.domain.source.state import check_mutable
from schedfence.domain.source.scheduling import tick
from schedfence.domain.source.spec import utc_time

if TYPE_CHECKING:
    from schedfence.domain.source.state import ScheduleState

MAX_BACKFILLS = 100  # in progress at once on one schedule


class Keep(Enum):
    """An update's "leave this part as it is" (None would mean: remove it)."""

    KEEP = "keep"


KEEP = Keep.KEEP


def merged(current: Program, **changes: Any) -> Program:
    """``current`` with the parts named in ``changes`` (spec, action, policies,
    remaining_actions) replaced; a part given as ``KEEP`` stays."""
    return replace(current, **{k: v for k, v in changes.items() if v is not KEEP})


def check_conflict_token(state: ScheduleState, version: int, token: int | None) -> None:
    """An update that names the conflict token it read (the schedule's version) applies only
    if nothing changed the schedule since, as Temporal's ``conflict_token``."""
    if token is not None and token != version:
        raise ConflictTokenMismatch(
            f"schedule {state.namespace}/{state.schedule_id} changed since conflict token "
            f"{token} (now {version}); read it again and decide again")


def update_program(state: ScheduleState, program: Program, now: datetime) -> Facts:
    """Replace what the schedule runs and when, at ``now``, as a scheduler that never stops
    would: the times that came due before it under the old program are the old program's,
    so the update first ticks at ``now`` (as a pause does: ``schedule.pause_facts``), and
    from ``now`` on ticks follow the new one (a schedule that had no spec starts at
    ``now``); buffered and running actions are kept."""
    check_mutable(state)
    program.check()
    if program == program_of(state):
        return []
    cursor = None if state.cursor or program.spec is None else nominal_text(now)
    ticked = tick(state, now, settle=True)
    return [*ticked, Fact(ProgramUpdated, dict(program.fields(), cursor=cursor,
                                                remaining_actions=_left(state, program, ticked)))]


def _left(state: ScheduleState, program: Program, ticked: Facts) -> int | None:
    """The limit after the update: one the update leaves as it stands goes on counting, so
    the spec starts of the update's own tick (issued just before it) are taken off it; one
    the update sets is what it says."""
    left = program.remaining_actions
    if left is None or left != state.remaining_actions:
        return left
    spent = sum(1 for f in ticked
                if f.event is ActionStartIssued and f.fields.get("origin") == "auto")
    return max(left - spent, 0)


def _overlap(state: ScheduleState, overlap: str | None) -> str:
    program = program_of(state)
    if program.action is None:
        raise InvalidArgument("action: the schedule has no action to run (create or update it "
                              "with a spec and an action first)")
    if overlap is None:
        return program.policies.overlap if program.policies else "skip"
    if overlap not in OVERLAPS:
        raise InvalidArgument(f"overlap: must be one of {', '.join(OVERLAPS)}, not {overlap!r}")
    return overlap


def trigger(state: ScheduleState, now: datetime, overlap: str | None = None) -> Facts:
    """One action at ``now`` (whole seconds), under ``overlap`` (default: the schedule's).
    Like Temporal's trigger it ignores pause and the limit. A second trigger in the same
    second would name the same action workflow, so it is refused (``already_exists``)."""
    check_mutable(state)
    policy = _overlap(state, overlap)
    nominal = nominal_text(now)
    taken = [*state.buffered, *state.issued, *state.recent_actions]
    if nominal == state.last_trigger or \
            any(t["origin"] == "trigger" and t["nominal"] == nominal for t in taken):
        raise AlreadyExists(f"schedule {state.namespace}/{state.schedule_id} was triggered at "
                            f"{nominal} already; triggers are one per second")
    return [Fact(Triggered, {"nominal": nominal, "overlap": policy})]


def backfill(state: ScheduleState, start: datetime | None, end: datetime | None,
             now: datetime, overlap: str | None = None) -> Facts:
    """Every nominal time of the spec in ``[start, end]``, under ``overlap`` (default: the
    schedule's), ignoring pause, the limit and the catch-up window, as Temporal's backfill.
    The backfill is named ``backfill-<n>``; its exclusive cursor starts just before
    ``start`` and is recorded with every step, so no time of it runs twice or never. A
    missing ``start`` or ``end`` is refused (``invalid_argument``)."""
    check_mutable(state)
    policy = _overlap(state, overlap)
    start, end = _ceil_second(utc_time("start", start)), utc_time("end", end)
    spec = program_of(state).spec
    if end < start:
        raise InvalidArgument("end: the backfill ends before it starts")
    if end > now:
        raise InvalidArgument(f"end: a backfill covers times already passed; {end.isoformat()} "
                              "is in the future")
    if spec is not None and spec.end_at is not None and end > spec.end_at:
        raise InvalidArgument(f"end: past the schedule's end time {spec.end_at.isoformat()}")
    if len(state.backfills) >= MAX_BACKFILLS:
        raise InvalidArgument(f"backfill: {MAX_BACKFILLS} backfills are in progress already")
    return [Fact(BackfillRequested, {
        "backfill_id": f"backfill-{state.backfill_count + 1}", "start": nominal_text(start),
        "end": nominal_text(end), "overlap": policy,
        "cursor": nominal_text(start - timedelta(seconds=1))})]


def _ceil_second(t: datetime) -> datetime:
    """The first whole second at or after ``t`` (nominal times are whole seconds)."""
    return t.replace(microsecond=0) + timedelta(seconds=1) if t.microsecond else t
