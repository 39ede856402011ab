"""A user's changes to a running schedule, as given / when / then: update, trigger and
backfill; manual starts ignore pause and the limit; a backfill works from a durable exclusive
cursor in bounded steps; every change is refused while fenced, and bad input names its field.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.source import manual
from schedfence.domain.source.action import make_action, make_policies, nominal_text, parse_nominal
from schedfence.domain.errors import AlreadyExists, Closed, InvalidArgument, MigrationPending
from schedfence.domain.source.program import Program, program_of
from schedfence.domain.source.runs import ProgramUpdated, TimesProcessed
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.scheduling import MAX_BUFFER, tick
from schedfence.domain.source.spec import make_spec, times_between

NS, SID = "ns", "s"
T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)


def schedule(overlap: str = "allow_all", limit: int | None = None,
             paused: bool = False) -> Schedule:
    program = Program(make_spec(intervals=[(60, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="act"),
                      make_policies(overlap=overlap), limit)
    return Schedule.create(NS, SID, 1, paused, "", None, 0, program)


def now_of(s: Schedule) -> datetime:
    return parse_nominal(s.state.cursor)


def origins(s: Schedule) -> list[str]:
    return [i["origin"] for i in s.state.issued]


def test_a_trigger_starts_once_now_even_when_paused_or_out_of_actions():
    s = schedule(limit=0, paused=True)
    now = now_of(s) + timedelta(seconds=5)
    s.record(manual.trigger(s.state, now))
    s.record(tick(s.state, now))
    assert origins(s) == ["trigger"] and s.state.remaining_actions == 0
    assert s.state.issued[0]["workflow_id"] == f"act-{nominal_text(now)}"
    with pytest.raises(AlreadyExists):  # the same second would name the same workflow
        manual.trigger(s.state, now)


def test_a_backfill_starts_every_time_in_its_range_once_inclusive_of_both_ends():
    s = schedule()
    now = now_of(s)
    start = now.replace(second=0) - timedelta(hours=2)  # on a nominal time: included
    end = start + timedelta(hours=1)  # on one too: included
    s.record(manual.backfill(s.state, start, end, now))
    assert s.state.backfills[0]["backfill_id"] == "backfill-1"
    s.record(tick(s.state, now))
    expected = [nominal_text(t) for t in times_between(make_spec(intervals=[(60, 0)]),
                                                       start - timedelta(seconds=1), end)]
    assert [i["nominal"] for i in s.state.issued] == expected and len(expected) == 61
    assert expected[0] == nominal_text(start) and expected[-1] == nominal_text(end)
    assert set(origins(s)) == {"backfill-1"} and s.state.backfills == []  # done
    assert tick(s.state, now) == []


def test_a_long_backfill_moves_in_bounded_steps_from_its_recorded_cursor():
    s = schedule(overlap="buffer_all")
    now = now_of(s)
    s.record(manual.backfill(s.state, now - timedelta(days=2), now - timedelta(days=1), now))
    s.record(tick(s.state, now))
    assert len(s.state.buffered) + len(s.state.issued) <= MAX_BUFFER
    cursor = s.state.backfills[0]["cursor"]
    assert parse_nominal(cursor) < now - timedelta(days=1)  # more to come, from the cursor
    [step] = [e for e in s.collect_events() if type(e).__name__ == "BackfillProcessed"]
    assert step.cursor == cursor and step.due[-1] == cursor and not step.done


def test_backfill_input_is_checked_and_names_the_field():
    s = schedule()
    now = now_of(s)
    for start, end, field in [(now - timedelta(hours=1), now - timedelta(hours=2), "end"),
                              (now - timedelta(hours=1), now + timedelta(hours=1), "end"),
                              (now.replace(tzinfo=None), now, "start")]:
        with pytest.raises(InvalidArgument, match=f"^{field}:"):
            manual.backfill(s.state, start, end, now)
    with pytest.raises(InvalidArgument, match="^overlap:"):
        manual.backfill(s.state, now - timedelta(hours=1), now, now, overlap="sometimes")


def test_a_backfill_past_the_schedules_end_is_refused():
    s = schedule()
    now = now_of(s)
    ended = Program(make_spec(intervals=[(60, 0)], end_at=now - timedelta(hours=3)),
                    program_of(s.state).action)
    s.record(manual.update_program(s.state, ended, now))
    with pytest.raises(InvalidArgument, match="^end: past the schedule's end"):
        manual.backfill(s.state, now - timedelta(hours=4), now - timedelta(hours=2), now)


def test_an_update_ticks_at_its_instant_then_replaces_the_program():
    """The times due before the update are the old program's (the machine's finding: the
    new spec was applied from the old cursor); from the update on, the new one's."""
    s = schedule()
    now = now_of(s) + timedelta(minutes=5)
    old = program_of(s.state)
    due = times_between(old.spec, parse_nominal(s.state.cursor), now)
    new = manual.merged(old, policies=make_policies(overlap="skip"),
                        spec=make_spec(intervals=[(90, 0)]))
    facts = manual.update_program(s.state, new, now)
    assert [f.event for f in facts][0] is TimesProcessed and \
        [f.event for f in facts][-1] is ProgramUpdated
    s.record(facts)
    assert program_of(s.state).policies.overlap == "skip" and s.state.cursor == nominal_text(now)
    assert [parse_nominal(i["nominal"]) for i in s.state.issued] == due and len(due) == 5
    assert manual.update_program(s.state, new, now) == []  # no change, no event


def test_an_update_that_keeps_the_limit_keeps_counting_the_ticks_starts():
    """The soak's finding (limit 2, 98 s down, an update to every 45 s, a pass): the update's
    tick started the last two times the limit allowed, then ``ProgramUpdated`` wrote back the
    count read before that tick (2), so the next pass started a time a never-migrated
    schedule would not. A limit the update leaves as it stands goes on counting; a limit the
    update sets is what it says from the update on."""
    s = schedule(limit=2)
    now = now_of(s) + timedelta(minutes=5)
    kept = manual.merged(program_of(s.state), spec=make_spec(intervals=[(45, 0)]))
    s.record(manual.update_program(s.state, kept, now))
    assert len(s.state.issued) == 2 and s.state.remaining_actions == 0
    s.record(tick(s.state, now + timedelta(minutes=5)))
    assert len(s.state.issued) == 2  # the limit ran out before the update: nothing more
    reset = manual.merged(program_of(s.state), spec=make_spec(intervals=[(60, 0)]),
                          remaining_actions=1)
    s.record(manual.update_program(s.state, reset, now + timedelta(minutes=6)))
    assert s.state.remaining_actions == 1


def test_a_schedule_of_old_gains_a_program_and_starts_at_the_update():
    s = Schedule.create(NS, SID, 1, False, "")
    new = Program(make_spec(intervals=[(60, 0)]),
                  make_action(workflow_type="W", task_queue="q", workflow_id="act"))
    s.record(manual.update_program(s.state, new, T0))
    assert s.state.cursor == nominal_text(T0)
    with pytest.raises(InvalidArgument, match="^action:"):
        manual.update_program(s.state, manual.merged(new, action=None), T0)


@pytest.mark.parametrize("change", [
    lambda st, now: manual.trigger(st, now),
    lambda st, now: manual.backfill(st, now - timedelta(hours=1), now, now),
    lambda st, now: manual.update_program(st, Program(), now),
])
def test_every_change_is_refused_while_fenced_and_after_the_close(change):
    s = schedule()
    now = now_of(s)
    s.fence_for_migration("R1", uuid.uuid4())
    with pytest.raises(MigrationPending):
        change(s.state, now)
    s.close_for_migration("R1", "run-1")
    with pytest.raises(Closed):
        change(s.state, now)


def test_a_trigger_needs_an_action():
    with pytest.raises(InvalidArgument, match="^action:"):
        manual.trigger(Schedule.create(NS, SID, 1, False, "").state, T0)
