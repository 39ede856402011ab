"""A handover document of a running schedule, for the domain's handover tests."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from schedfence.domain.source.action import make_action, nominal_text
from schedfence.domain.rollback.handover import Handover, handover_of
from schedfence.domain.source.program import Program
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import make_spec


def handover(cursor: datetime, limit: int | None = None, *, every: int = 1,
             start_at: datetime | None = None, paused: bool = False,
             buffered: tuple = ()) -> Handover:
    """What a schedule every ``every`` s, its cursor at ``cursor``, hands over."""
    program = Program(make_spec(intervals=[(every, 0)], start_at=start_at),
                      make_action(workflow_type="W", task_queue="q", workflow_id="a"),
                      None, limit)
    state = replace(ScheduleState("ns", "s", 1, paused, ""), **program.fields(),
                    cursor=nominal_text(cursor), buffered=buffered)
    return handover_of(state, paused, "")
