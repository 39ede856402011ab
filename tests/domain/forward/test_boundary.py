"""The forward boundary (domain/forward/boundary.py): the cursor handed to the source is the
last time the Temporal side was seen to have started, never when it applied the pause.

Given a schedule every second whose server began at ``CREATED`` and applied our pause at
``APPLIED`` (after nominal time T = 10:00:20, which its scheduler had buffered but dropped when
the pause came in the same workflow task), the source must start T (issue 27, item 5)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schedfence.domain.source.action import nominal_text
from schedfence.domain.forward.boundary import (PROBE_LIMIT, boundary_cursor, observation,
                                                probe_plan, started_times)
from schedfence.domain.source.spec import make_spec

EVERY_SECOND = make_spec(intervals=[(1, 0)])
CREATED = datetime(2026, 12, 5, 10, 0, 0, 400000, tzinfo=timezone.utc)
APPLIED = datetime(2026, 12, 5, 10, 0, 20, 700000, tzinfo=timezone.utc)


def at(second: int) -> datetime:
    return datetime(2026, 12, 5, 10, 0, second, tzinfo=timezone.utc)


def read(recent: list[datetime], started: set[datetime], running: tuple[str, ...] = (),
         created: datetime = CREATED, applied: datetime = APPLIED) -> dict:
    """The observation a host makes: probe newest first until a time was started."""
    floor, candidates = probe_plan(EVERY_SECOND, "act", created, applied,
                                   [nominal_text(t) for t in recent], list(running))
    probed = []
    for t in candidates:
        probed.append((t, t in started))
        if t in started:
            break
    return observation(created, applied, floor, probed)


def test_a_time_due_before_the_pause_but_dropped_by_it_is_the_sources():
    started = {at(s) for s in range(1, 20)}  # 10:00:20 buffered, dropped when paused
    boundary = read([at(s) for s in range(10, 20)], started)
    assert boundary["probed"] == [["2026-12-05T10:00:21Z", False],
                                  ["2026-12-05T10:00:20Z", False]]
    assert boundary_cursor(boundary, pre_paused=False) == "2026-12-05T10:00:19Z"


def test_a_start_the_recent_actions_do_not_show_yet_is_found_by_its_workflow_id():
    started = {at(s) for s in range(1, 21)}
    boundary = read([at(s) for s in range(9, 19)], started)  # 19 and 20 not listed
    assert boundary_cursor(boundary, pre_paused=False) == "2026-12-05T10:00:20Z"
    assert boundary["probed"][-1] == ["2026-12-05T10:00:20Z", True]  # newest first, stops


def test_running_action_workflows_count_and_manual_starts_at_other_times_do_not():
    trigger = at(19) + timedelta(milliseconds=500)  # a trigger: not a spec time
    assert started_times(EVERY_SECOND, "act", [nominal_text(at(5)), trigger.isoformat()],
                         ["act-2026-12-05T10:00:18Z", "other-2026-12-05T10:00:19Z",
                          "act-not-a-time"]) == [at(5), at(18)]
    boundary = read([at(5)], {at(s) for s in range(1, 19)}, ("act-2026-12-05T10:00:18Z",))
    assert boundary["floor"] == "2026-12-05T10:00:18Z"
    assert boundary_cursor(boundary, pre_paused=False) == "2026-12-05T10:00:18Z"


def test_nothing_started_since_the_server_began_leaves_every_time_after_it_to_the_source():
    boundary = read([], set())
    assert boundary["floor"] == CREATED.isoformat().replace("+00:00", "Z")
    assert len(boundary["probed"]) == 21  # 10:00:01 .. 10:00:21, none started
    assert boundary_cursor(boundary, pre_paused=False) == "2026-12-05T10:00:00Z"


def test_a_schedule_paused_before_the_fence_skipped_its_times_up_to_the_fence():
    boundary = read([at(3)], {at(s) for s in range(1, 4)})
    assert boundary_cursor(boundary, pre_paused=True) == "2026-12-05T10:00:20Z"


def test_probes_are_bounded_and_the_floor_rises_over_times_left_unchecked():
    applied = CREATED + timedelta(minutes=5)
    boundary = read([], set(), applied=applied)
    assert len(boundary["probed"]) == PROBE_LIMIT
    oldest_probed = boundary["probed"][-1][0]
    assert boundary_cursor(boundary, pre_paused=False) == boundary["floor"] < oldest_probed


def test_a_server_that_began_long_ago_and_started_nothing_is_read_in_a_bounded_window():
    created = APPLIED - timedelta(days=400)  # a floor 34 million seconds back
    floor, candidates = probe_plan(EVERY_SECOND, "act", created, APPLIED, [], [])
    assert len(candidates) == PROBE_LIMIT and candidates[0] == at(21)
    assert floor == candidates[-1] - timedelta(seconds=1)
