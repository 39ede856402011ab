"""When the scheduler's pass must look at a schedule next (domain/source/scheduling.py, ``due``):
a pure function of the schedule's state, so the due index can be kept from the log."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.program import Program
from schedfence.domain.source.schedule import Schedule, ScheduleState
from schedfence.domain.ports import StartAccepted
from schedfence.domain.source.scheduling import (WATCH_EVERY, WATCH_LAZILY, Due, closes_decide,
                                                 due, lazy_phase, start_answered, tick,
                                                 watch_now)
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
    assert due(running).next_look(T0, T0 + timedelta(hours=2)) == T0.replace(hour=8, second=0)
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
    assert due(source.state) == Due(at + timedelta(hours=1), True, WATCH_LAZILY,
                                    lazy_phase(source.state))  # allow_all: watched lazily


def every_minute(**policies) -> ScheduleState:
    program = Program(make_spec(intervals=[(60, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="act"),
                      make_policies(**policies))
    return replace(Schedule.create("ns", "s", 1, False, "", None, 0, program, now=T0).state,
                   running=["act-1"])


def test_a_close_decides_unless_every_start_goes_ahead_whatever_runs_and_nothing_pauses():
    assert not closes_decide(every_minute(overlap="allow_all"))
    assert closes_decide(every_minute(overlap="allow_all", pause_on_failure=True))
    for overlap in ("skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other"):
        assert closes_decide(every_minute(overlap=overlap)), overlap
    free = every_minute(overlap="allow_all")
    trigger = {"nominal": "2026-12-05T07:00:31Z", "origin": "trigger", "overlap": "skip"}
    assert closes_decide(replace(free, buffered=[trigger]))  # a waiting start of its own
    backfill = {"backfill_id": "backfill-1", "overlap": "buffer_all"}
    assert closes_decide(replace(free, backfills=[backfill]))
    assert not closes_decide(replace(free, buffered=[dict(trigger, overlap="allow_all")]))
    assert closes_decide(replace(free, stopping=["act-1"]))


def test_a_look_watches_first_where_a_close_decides_else_once_a_lazy_interval():
    free, skip = every_minute(overlap="allow_all"), every_minute(overlap="skip")
    assert watch_now(skip, T0, T0) and watch_now(skip, T0, None)  # every look
    assert watch_now(free, T0, None)  # not known when it last did: now
    assert not watch_now(replace(skip, running=[]), T0, None)  # nothing runs
    assert due(skip) == Due(due(skip).at, True)  # a second after each look
    assert due(skip).next_look(T0 + timedelta(seconds=4), T0 + timedelta(seconds=4)) == \
        T0 + timedelta(seconds=4) + WATCH_EVERY
    # Lazily: the first look in each of its WATCH_LAZILY windows, the next look due then.
    lazy = due(free)
    assert (lazy.every, lazy.phase) == (WATCH_LAZILY, lazy_phase(free))
    # the look of its own: the end of the window after the one it watched in
    boundary = lazy.next_look(T0 + timedelta(seconds=1), T0) - WATCH_LAZILY
    assert T0 < boundary <= T0 + WATCH_LAZILY
    assert (boundary - datetime(1970, 1, 1, tzinfo=timezone.utc) - lazy.phase) % \
        WATCH_LAZILY == timedelta(0)
    assert not watch_now(free, boundary - timedelta(microseconds=1), T0)
    assert watch_now(free, boundary, T0)  # a look in the next window watches
    assert lazy.next_look(boundary, boundary) == boundary + 2 * WATCH_LAZILY
    # A watch that went unanswered (the runner down) is asked again later, not at every pass.
    later = T0 + timedelta(minutes=5)  # (no time of its own before then: ``at`` None)
    assert later < replace(lazy, at=None).next_look(later, T0) <= later + WATCH_LAZILY
    assert replace(due(skip), at=None).next_look(later, T0) == later + WATCH_EVERY


def test_a_fleet_s_lazy_watches_spread_over_the_interval():
    """Schedules watched together (a fleet made at once) watch next at different times."""
    phases = {lazy_phase(replace(every_minute(overlap="allow_all"), schedule_id=f"s{i}"))
              for i in range(1000)}
    assert len(phases) > 900 and all(timedelta(0) <= p < WATCH_LAZILY for p in phases)
    assert max(phases) - min(phases) > WATCH_LAZILY * 0.9


def test_a_tick_that_did_not_watch_decides_nothing_once_a_close_can_change_its_decision():
    """The look chose not to watch (allow_all), then the schedule changed before its tick
    was saved (a trigger under skip, a race lost and the schedule reloaded): its running
    list may be stale, so the tick waits for the next look, which watches first."""
    free = every_minute(overlap="allow_all")
    at = T0.replace(second=0) + timedelta(minutes=1)
    assert tick(free, at, watched=False)  # no close can change it: it ticks
    trigger = {"nominal": "2026-12-05T07:00:31Z", "origin": "trigger", "overlap": "skip"}
    changed = replace(free, buffered=[trigger])
    assert tick(changed, at, watched=False) == []
    assert due(changed).at == AT_ONCE  # looked at again at once, watching
    assert tick(changed, at, watched=True)
