"""An idle pass writes nothing (domain/source/scheduling.py, ``tick``): a tick in which no
nominal time passed, nothing starts and the buffer stays as it was records no event, and a
schedule ticked that way decides exactly what one whose every pass moved its cursor to
``now`` decides (the behaviour before: a ``TimesProcessed`` per schedule per pass)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import example, given, settings
from hypothesis import strategies as st

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.manual import merged, update_program
from schedfence.domain.source.program import Program, program_of
from schedfence.domain.source.runs import ActionStartIssued, TimesProcessed
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.scheduling import tick
from schedfence.domain.source.spec import make_spec

UTC = timezone.utc
T0 = datetime(2026, 12, 5, 7, 0, tzinfo=UTC)


def schedule(every: int, offset: int, window: int, remaining: int | None) -> Schedule:
    program = Program(make_spec(intervals=[(every, offset % every)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="act"),
                      make_policies(overlap="allow_all", catchup_window=window),
                      remaining)
    return Schedule.create("ns", "s", 1, False, "", None, 0, program, now=T0)


def test_a_pass_with_nothing_due_records_nothing():
    source = schedule(every=3600, offset=0, window=60, remaining=None)
    for seconds in (1, 30, 600, 3599):
        assert tick(source.state, T0 + timedelta(seconds=seconds)) == []
    due = tick(source.state, T0 + timedelta(seconds=3600))
    assert [f.event for f in due] == [TimesProcessed, ActionStartIssued]


def test_a_paused_schedule_records_only_when_a_time_passes():
    source = schedule(every=3600, offset=0, window=60, remaining=None)
    source.set_paused(True, T0 + timedelta(seconds=5))
    assert tick(source.state, T0 + timedelta(seconds=3599)) == []
    passed = tick(source.state, T0 + timedelta(seconds=3601))
    assert [f.event for f in passed] == [TimesProcessed] and passed[0].fields["due"] == []


def run(source: Schedule, passes: list[tuple[int, str]], settle: bool) -> tuple[list, int]:
    """Each pass at T0 + seconds: a tick (``settle``: the cursor moves to now even when idle),
    a pause, an unpause, or an update to a spec every 7 s. The starts issued, in order, and
    the events recorded."""
    issued, events = [], 0
    for seconds, what in passes:
        now = T0 + timedelta(seconds=seconds)
        if what == "tick":
            facts = tick(source.state, now, settle=settle)
            source.record(facts)
            issued += [f.fields["nominal"] for f in facts if f.event is ActionStartIssued]
            events += len(facts)
        elif what == "respec":
            program = merged(program_of(source.state), spec=make_spec(intervals=[(7, 0)]))
            facts = update_program(source.state, program, now)
            source.record(facts)
            issued += [f.fields["nominal"] for f in facts if f.event is ActionStartIssued]
        elif (what == "pause") != source.state.paused:
            source.set_paused(what == "pause", now)
    return issued, events


@settings(max_examples=150, deadline=None)
@given(every=st.integers(1, 900), offset=st.integers(0, 899),
       window=st.integers(10, 3000), remaining=st.one_of(st.none(), st.integers(0, 20)),
       steps=st.lists(st.tuples(st.integers(0, 400),
                                st.sampled_from(["tick", "tick", "tick", "pause", "unpause",
                                                 "respec"])),
                      min_size=1, max_size=25))
@example(every=60, offset=0, window=10, remaining=None,
         steps=[(30, "pause"), (40, "tick"), (0, "unpause"), (100, "tick")])
@example(every=600, offset=0, window=3000, remaining=None,
         steps=[(30, "tick"), (300, "respec"), (10, "tick")])
def test_idle_passes_decide_what_passes_that_wrote_the_cursor_decided(
        every, offset, window, remaining, steps):
    passes, at = [], 0
    for gap, what in steps:
        at += gap
        passes.append((at, what))
    new_issued, new_events = run(schedule(every, offset, window, remaining), passes, False)
    old_issued, old_events = run(schedule(every, offset, window, remaining), passes, True)
    assert new_issued == old_issued
    assert new_events <= old_events
