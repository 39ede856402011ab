"""The handover's boundary rule: the times between the gap backfill and the destination's
first instant, never one the source already answered for."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from schedfence.domain.action import make_action, nominal_text
from schedfence.domain.handover import (GAP_MARGIN, boundary_gap, destination_starts,
                                        handover_of)
from schedfence.domain.program import Program
from schedfence.domain.schedule import ScheduleState
from schedfence.domain.spec import make_spec

M = datetime(2026, 12, 4, 9, 19, tzinfo=timezone.utc)  # a nominal time (every minute)
S = timedelta(seconds=1)


def handover(cursor: datetime, paused: bool = False):
    program = Program(make_spec(intervals=[(60, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="a"))
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
    paused = destination_starts(handover(M - timedelta(minutes=3), paused=True), created, [M],
                                M + timedelta(minutes=2))
    assert paused == [M - timedelta(minutes=2), M - timedelta(minutes=1), M]


def test_a_rollback_of_what_the_destination_cannot_carry_is_refused_before_the_fence():
    import uuid

    import pytest

    from schedfence.domain import handoff
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
