"""Which schedules the scheduler's pass looks at (domain/source/scheduling.py, ``scheduled``):
one with a spec to tick, or actions still running to watch close; not one with neither."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.source.program import Program
from schedfence.domain.source.schedule import Schedule, ScheduleState
from schedfence.domain.source.scheduling import scheduled, tick
from schedfence.domain.source.spec import make_spec

NS, SID = "ns", "s"


def plain() -> ScheduleState:
    """A pause-and-notes schedule: no program, nothing running."""
    return Schedule.create(NS, SID, 1, False, "", None, 0).state


def programmed() -> ScheduleState:
    program = Program(make_spec(intervals=[(10, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="act"),
                      make_policies(overlap="skip"))
    return Schedule.create(NS, SID, 1, False, "", None, 0, program).state


def test_a_schedule_with_no_program_is_skipped() -> None:
    st = plain()
    assert st.spec is None and not st.running
    assert not scheduled(st)


def test_a_schedule_with_a_spec_is_looked_at() -> None:
    assert scheduled(programmed())


def test_runs_still_going_are_watched_after_the_spec_is_removed() -> None:
    assert scheduled(replace(plain(), running=["act-1"]))


def test_a_closed_or_fenced_schedule_with_a_spec_is_still_looked_at() -> None:
    """The pass looks; the decisions (tick) are what refuse to act on it (I1)."""
    assert tick(programmed(), later(programmed())) != []  # open: times became due
    for st in (replace(programmed(), closed=True),
               replace(programmed(), fence_migration_id="m", fence_request_id="R1")):
        assert scheduled(st)
        assert tick(st, later(st)) == []


def later(st: ScheduleState) -> datetime:
    assert st.cursor is not None
    return parse_nominal(st.cursor) + timedelta(seconds=100)


def test_a_spec_without_runs_and_runs_without_a_spec_are_each_enough() -> None:
    assert scheduled(replace(programmed(), running=[]))
    assert not scheduled(replace(plain(), running=[]))
