"""On-call advice for schedules whose scheduler step keeps failing (infra/engines/
step_failures.py): each is put off, exponentially and capped, and shown here with its last
error until a step succeeds. Only the wording lives here; the facts are the due index's
(``ScheduleDue.failing``), and nothing is recorded."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class FailingScheduleItem:
    category: str  # always "step_failing"
    namespace: str
    schedule_id: str
    failures: int  # in a row; a successful step sets it back to 0
    last_error: str
    failed_at: str | None  # RFC 3339 UTC, the last failure (the scheduler's wall clock)
    next_look: str | None  # when a pass looks at it again (None: when it changes)
    actions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def failing_item(namespace: str, schedule_id: str, failures: int, last_error: str,
                 failed_at: str | None, next_look: str | None) -> FailingScheduleItem:
    key = f"{namespace} {schedule_id}"
    actions = [f"the scheduler's step failed {failures} time(s) in a row and is put off "
               f"(exponentially, at most a minute); its owed times wait, under its catch-up "
               f"window, as for a slow scheduler: fix the cause ({last_error[:200]})",
               f"see what it holds: schedfence schedule describe {key}",
               f"its events: schedfence history {key}"]
    return FailingScheduleItem("step_failing", namespace, schedule_id, failures, last_error,
                               failed_at, next_look, actions)


def failing_lines(items: list[FailingScheduleItem]) -> list[str]:
    """The text lines of ``schedfence oncall`` for them (none: no lines)."""
    if not items:
        return []
    lines = ["schedules whose scheduler step keeps failing (put off, retried):"]
    for i in items:
        lines += [f"{i.namespace}/{i.schedule_id} (failed {i.failures} in a row, last "
                  f"{i.failed_at or '-'}, next look {i.next_look or '-'}): {i.last_error}"]
        lines += [f"  - {a}" for a in i.actions[1:]]
    return lines
