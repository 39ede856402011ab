"""The handover's boundary rule: the times between the gap backfill and the destination's
first instant, never one the source already answered for."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from schedfence.domain.source.action import make_action, make_policies, nominal_text
from schedfence.domain.rollback.handover import (GAP_MARGIN, boundary_gap, destination_slots,
                                        destination_starts, handover_of, patch_plan)
from schedfence.domain.source.program import Program
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import make_spec

M = datetime(2026, 12, 4, 9, 19, tzinfo=timezone.utc)  # a nominal time (every minute)
S = timedelta(seconds=1)


def handover(cursor: datetime, paused: bool = False, catchup: int | None = None,
             limit: int | None = None):
    policies = None if catchup is None else make_policies(catchup_window=catchup)
    program = Program(make_spec(intervals=[(60, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="a"),
                      policies, limit)
    state = replace(ScheduleState("ns", "s", 1, paused, ""), **program.fields(),
                    cursor=nominal_text(cursor))
    return handover_of(state, paused, "")


def test_a_time_between_the_gap_and_the_create_is_the_boundarys():
    h = handover(M - timedelta(minutes=3))
    assert boundary_gap(h, M + S - GAP_MARGIN, M + S) == [M]


def test_a_time_the_source_answered_for_is_never_the_boundarys():
    h = handover(M + S)  # the source ticked at M + 1 s: M is its
    assert boundary_gap(h, M + S - GAP_MARGIN, M + S) == []


def test_the_destinations_record_is_the_patch_the_boundary_and_its_own_times():
    h = handover(M - timedelta(minutes=3))
    created = M + S
    starts = destination_starts(h, created, [M], M + timedelta(minutes=2))
    assert starts == [M - timedelta(minutes=2), M - timedelta(minutes=1), M,
                      M + timedelta(minutes=1), M + timedelta(minutes=2)]



def test_a_paused_schedules_handover_starts_nothing_of_its_spec():
    """Issue 27 item 1: the gap and the boundary are the spec's times, and a paused schedule
    starts none (the old plan backfilled the gap: a Temporal backfill ignores pause)."""
    h = handover(M - timedelta(minutes=3), paused=True)
    plan = patch_plan(h, M - GAP_MARGIN)
    assert plan.backfills == ()
    assert boundary_gap(h, M + S - GAP_MARGIN, M + S) == []
    assert destination_starts(h, M + S, [], M + timedelta(minutes=2)) == []


def test_the_handover_honours_the_catch_up_window():
    """Issue 27 item 3: with a 10-minute window and the source down for 30 minutes, only the
    times inside the window at the handover start (a tick at that instant would skip the
    rest, reason catchup_window)."""
    h = handover(M - timedelta(minutes=30), catchup=600)
    until = M + S - GAP_MARGIN  # M - 1 s
    gap = patch_plan(h, until).backfills[-1]
    assert (gap.start, gap.end) == (M - timedelta(minutes=10), until)  # 9 min 59 s old
    assert destination_starts(h, M + S, [M], M) == [M - timedelta(minutes=n)
                                                     for n in range(10, -1, -1)]


def test_the_handover_honours_the_action_limit():
    """Issue 27 item 2: the gap starts no more than the limit leaves, the server's own count
    is what is left after it, and a used-up limit hands over nothing to start."""
    h = handover(M - timedelta(minutes=30), limit=3)
    plan = patch_plan(h, M - GAP_MARGIN)
    gap = plan.backfills[-1]
    assert (gap.start, gap.end, plan.remaining) == (M - timedelta(minutes=29),
                                                    M - timedelta(minutes=27), 0)
    assert len(destination_starts(h, M + S, [], M + timedelta(hours=1))) == 3
    used = handover(M - timedelta(minutes=30), limit=0)
    assert patch_plan(used, M - GAP_MARGIN).backfills == ()
    assert destination_starts(used, M + S, [], M + timedelta(hours=1)) == []
    some = handover(M - timedelta(minutes=2), limit=5)  # one in the gap, M in the boundary
    assert patch_plan(some, M + S - GAP_MARGIN).remaining == 4
    assert boundary_gap(some, M + S - GAP_MARGIN, M + S) == [M]
    assert destination_starts(some, M + S, [M], M + timedelta(hours=1)) == [
        M + timedelta(minutes=n) for n in (-1, 0, 1, 2, 3)]


def test_two_backfills_of_one_range_are_handed_over_once_each():
    """Issue 27 item 4: two backfills of the same range are two starts of each time, per
    origin, as the source would make them (they collide on the action workflow id while the
    first runs); the handover carries each (time, origin) once, never a time twice for one
    origin."""
    h = handover(M - timedelta(minutes=1))
    backfills = tuple({"backfill_id": f"backfill-{n}", "start": nominal_text(M - timedelta(minutes=12)),
                       "end": nominal_text(M - timedelta(minutes=4)), "overlap": "skip",
                       "cursor": nominal_text(M - timedelta(minutes=12) - S)} for n in (1, 2))
    h = h.model_copy(update={"backfills": backfills})
    slots = destination_slots(h, M + S, [], M + S)
    assert len(slots) == len(set(slots))
    assert Counter(t for t, _ in slots if t < M - timedelta(minutes=1)) == {
        M - timedelta(minutes=n): 2 for n in range(4, 13)}


def test_a_rollback_of_what_the_destination_cannot_carry_is_refused_before_the_fence():
    import uuid

    import pytest

    from schedfence.domain.rollback import steps as handoff
    from schedfence.domain.errors import InvalidArgument
    two = [{"nominal": nominal_text(M), "origin": "trigger", "overlap": "skip"},
           {"nominal": nominal_text(M + S), "origin": "trigger", "overlap": "skip"}]
    program = Program(make_spec(intervals=[(60, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="a"))
    source = replace(ScheduleState("ns", "s", 1, False, ""), **program.fields(),
                     cursor=nominal_text(M), buffered=two)
    with pytest.raises(InvalidArgument, match="^buffered:"):
        handoff.rollback(source, "src", "R1", "caller", uuid.uuid4(), same=None, pending=None,
                         last=None, sentinel={"workflow_id": "w", "current": None}, epoch=0,
                         actor="")


def test_a_new_incarnation_carries_its_keys_cursor_backfills_and_trigger():
    """A host whose clock runs behind re-creates a key: its first cursor is the dead
    incarnation's, not its own earlier now, and backfill and trigger names go on."""
    from schedfence.domain.source.incarnation import carried_over
    program = Program(make_spec(intervals=[(60, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="a"))
    dead = replace(ScheduleState("ns", "s", 1, False, ""), **program.fields(),
                   cursor=nominal_text(M), backfill_count=3, last_trigger=nominal_text(M - S))
    assert carried_over(program, M - 5 * S, dead) == {
        "cursor": nominal_text(M), "backfill_count": 3, "last_trigger": nominal_text(M - S)}
    assert carried_over(program, M + 5 * S, None)["cursor"] == nominal_text(M + 5 * S)
    assert carried_over(None, M, dead)["cursor"] is None  # no spec: no cursor


def test_a_fixed_hour_a_clock_change_skips_or_repeats_is_refused_before_the_fence():
    """Where the two schedulers differ by nature: at 02:30 in New York the source runs the
    spring-forward day's time at 03:00 and the autumn's once, Temporal's scheduler never and
    twice. Such a handover is refused naming ``cron``; a wildcard hour, another hour and UTC
    are the same on both and go ahead."""
    import pytest

    from schedfence.domain.errors import InvalidArgument
    from schedfence.domain.source.spec import dst_hours

    assert dst_hours("America/New_York") == {1, 2} and dst_hours("Europe/Berlin") == {2}
    assert dst_hours("UTC") == frozenset()

    def with_cron(cron: str, zone: str):
        program = Program(make_spec(cron=[cron], time_zone=zone),
                          make_action(workflow_type="W", task_queue="q", workflow_id="a"))
        state = replace(ScheduleState("ns", "s", 1, False, ""), **program.fields(),
                        cursor=nominal_text(M))
        return handover_of(state, False, "")

    for cron in ("30 2 * * *", "0 1-3 * * *", "15 0,2 * * 1"):
        with pytest.raises(InvalidArgument, match="^cron: .*America/New_York"):
            patch_plan(with_cron(cron, "America/New_York"), M)
    for cron, zone in (("30 2 * * *", "UTC"), ("30 4 * * *", "America/New_York"),
                       ("30 * * * *", "America/New_York"), ("0 */2 * * *", "Europe/Berlin")):
        assert patch_plan(with_cron(cron, zone), M).until == M


def test_a_paused_schedules_waiting_spec_starts_are_refused_before_the_fence():
    """Spec starts buffered behind an overlap wait for the unpause on a paused source; a
    Temporal backfill would start them at once, and a paused Temporal Schedule cannot hold
    them, so the handover is refused naming ``buffered`` (triggers and backfills, which run
    while paused, still go)."""
    import pytest

    from schedfence.domain.errors import InvalidArgument
    h = handover(M - timedelta(minutes=3), paused=True)
    auto = {"nominal": nominal_text(M - timedelta(minutes=4)), "origin": "auto",
            "overlap": "buffer_one"}
    with pytest.raises(InvalidArgument, match="^buffered: 1 of the spec's starts wait"):
        patch_plan(h.model_copy(update={"buffered": (auto,)}), M)
    manual = dict(auto, origin="backfill-1")
    assert patch_plan(h.model_copy(update={"buffered": (manual,)}), M).backfills


def test_a_limited_settle_takes_the_boundary_off_the_count_it_read_until_an_update_applied():
    """Before any update only the server's own starts lowered the create's count (each also
    moved the conflict token the update carries), so the count read less the boundary is
    exact for that describe; once an update applied there is nothing to write, however often
    the settle runs; never below zero; no boundary, no write."""
    from schedfence.domain.rollback.handover import LimitView, limit_settle
    assert limit_settle(2, LimitView(remaining=5, updated=False)) == 3
    assert limit_settle(2, LimitView(remaining=4, updated=False)) == 2  # one own start since
    assert limit_settle(2, LimitView(remaining=3, updated=True)) is None  # settled already
    assert limit_settle(2, LimitView(remaining=1, updated=True)) is None  # and used since
    assert limit_settle(3, LimitView(remaining=1, updated=False)) == 0
    assert limit_settle(0, LimitView(remaining=5, updated=False)) is None

