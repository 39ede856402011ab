"""When the scheduler's pass must look at a schedule next (domain/source/scheduling.py, ``due``):
a pure function of the schedule's state, so the due index can be kept from the log."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.program import Program
from schedfence.domain.source.schedule import Schedule, ScheduleState
from schedfence.domain.ports import StartAccepted
from schedfence.domain.source.scheduling import WATCH_EVERY, Due, due, start_answered, tick
from schedfence.domain.source.spec import make_spec

T0 = datetime(2026, 12, 5, 7, 0, 30, tzinfo=timezone.utc)
AT_ONCE = datetime(1970, 1, 1, tzinfo=timezone.utc)


def hourly() -> ScheduleState:
    program = Program(make_spec(intervals=[(3600, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="act"),
                      make_policies(overlap="buffer_one"))
    return Schedule.create("ns", "s", 1, False, "", None, 0, program, now=T0).state


def test_the_next_spec_time_after_the_cursor_paused_or_not():
    st = hourly()
    assert due(st) == Due(T0.replace(hour=8, second=0), False)
    assert due(replace(st, paused=True)).at == T0.replace(hour=8, second=0)


def test_a_schedule_without_a_program_or_held_by_a_fence_is_not_due():
    assert due(Schedule.create("ns", "s", 1, False, "", None, 0).state) == Due(None, False)
    fenced = replace(hourly(), fence_migration_id="m")
    assert due(fenced) == Due(None, False)
    assert due(replace(fenced, running=["act-1"])) == Due(None, True)  # still watched


def test_starts_in_flight_are_due_at_their_retry_time_or_at_once():
    st = replace(hourly(), issued=[{"workflow_id": "a", "retry_at": "2026-12-05T07:00:40Z"}])
    assert due(st).at == T0 + timedelta(seconds=10)
    assert due(replace(st, issued=[{"workflow_id": "a"}])).at == AT_ONCE


def test_backfills_a_waiting_buffer_and_a_stop_are_due_at_once_running_actions_are_watched():
    st = hourly()
    assert due(replace(st, backfills=[{"backfill_id": "backfill-1"}])).at == AT_ONCE
    waiting = replace(st, buffered=[{"nominal": "2026-12-05T07:00:00Z"}])
    assert due(waiting).at == AT_ONCE
    behind_a_run = replace(waiting, running=["act-1"])  # each pass looks for the close it awaits
    assert due(behind_a_run) == Due(AT_ONCE, True)
    running = replace(st, running=["act-1"])
    assert due(running) == Due(T0.replace(hour=8, second=0), True)
    assert due(replace(running, stopping=["act-1"])) == Due(AT_ONCE, True)


def test_running_actions_are_looked_at_within_the_watch_interval_not_every_pass():
    running = replace(hourly(), running=["act-1"])
    assert due(running).next_look(T0) == T0 + WATCH_EVERY  # before the spec's 08:00
    assert due(running).next_look(T0, timedelta(hours=2)) == T0.replace(hour=8, second=0)
    assert due(hourly()).next_look(T0) == T0.replace(hour=8, second=0)  # nothing to watch
    fenced = replace(running, fence_migration_id="m")
    assert due(fenced).next_look(T0) == T0 + WATCH_EVERY  # a run's close is still recorded
    assert due(replace(running, stopping=["act-1"])).next_look(T0) == AT_ONCE


def test_a_tick_at_the_due_time_issues_a_start_due_at_once_then_the_following_time():
    source = Schedule.create("ns", "s", 1, False, "", None, 0, Program(
        make_spec(intervals=[(3600, 0)]),
        make_action(workflow_type="W", task_queue="q", workflow_id="act"),
        make_policies(overlap="allow_all")), now=T0)
    at = due(source.state).at
    assert at == T0.replace(hour=8, second=0)
    assert tick(source.state, at - timedelta(seconds=1)) == []
    source.record(tick(source.state, at))
    assert due(source.state).at == AT_ONCE  # the start is recorded, not yet sent
    [issued] = source.state.issued
    source.record(start_answered(source.state, issued, StartAccepted(run_id="r1", first_execution_run_id="r1", status="running"), at))
    assert due(source.state) == Due(at + timedelta(hours=1), True)
