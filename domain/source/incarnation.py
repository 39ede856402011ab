"""A key's incarnations: when a new one may begin, what it carries over from the one before,
and which migration a key's status shows (pure rules over ``ScheduleState``)."""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

from schedfence.domain.source.action import nominal_text, parse_nominal
from schedfence.domain.errors import AlreadyExists
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.source.program import Program

if TYPE_CHECKING:
    from schedfence.domain.source.state import ScheduleState


def carried_over(program: Program | None, now: datetime | None,
                 previous: ScheduleState | None) -> dict[str, Any]:
    """What a new incarnation's ``Created`` carries so the key never starts a (time,
    origin) twice: its first cursor (``now``, but not before the previous incarnation's:
    a host whose clock runs behind would otherwise process its last times again), the
    backfill count and the last trigger."""
    cursor = nominal_text(now) if now is not None else None
    if previous is not None and previous.cursor is not None and cursor is not None:
        cursor = max(cursor, previous.cursor, key=parse_nominal)
    return {"cursor": cursor if program is not None and program.spec is not None else None,
            "backfill_count": previous.backfill_count if previous else 0,
            "last_trigger": previous.last_trigger if previous else None}


def check_creatable(namespace: str, schedule_id: str, current: ScheduleState | None) -> None:
    """A key gets a new incarnation only when it has none, or its current one is closed."""
    if current is not None and not current.closed:
        raise AlreadyExists(f"schedule {namespace}/{schedule_id} exists "
                            f"(incarnation {current.incarnation})")


def latest_migration_id(sources: Iterable[ScheduleState | None]) -> str | None:
    """The migration a key's status shows: the open one, else the most recent, from its
    incarnations' states newest first (a missing state is skipped)."""
    for state in sources:
        found = state and (state.fence_migration_id or state.last_migration_id)
        if found:
            return found
    return None


def destination_running(check: dict[str, Any] | None) -> dict[str, Any] | None:
    """The running scheduler run (ours or anyone's) a recorded destination check saw."""
    current = (check or {}).get("current")
    if isinstance(current, dict) and current.get("status") == "running" and \
            current.get("workflow_type") == SCHEDULER_WORKFLOW_TYPE:
        return current
    return None


def check_destination_free(namespace: str, schedule_id: str, check: dict[str, Any]) -> None:
    """Single owner (I1): a source incarnation may not begin while a scheduler chain runs at
    the schedule's destination workflow id: ours after a handover, or anyone's. (Any other
    workflow there owns nothing; a rollback's start meets it as a foreign run.)"""
    running = destination_running(check)
    if running is not None:
        raise AlreadyExists(
            f"schedule {namespace}/{schedule_id} is owned at the destination: run "
            f"{running.get('run_id')} ({running.get('workflow_type')}) is running at "
            f"{check.get('workflow_id')}; it must end before the source may run it again")
