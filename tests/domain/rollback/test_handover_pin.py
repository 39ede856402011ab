"""A limited handover's pin (domain/rollback/handover.py): the spec's start is pinned at ``S`` before
the create, so the count the create sets is exact and the server's own starts never race the
settle."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.source.action import nominal_text
from schedfence.domain.rollback.handover import (GAP_MARGIN, PIN_LEAD, SECOND, clear_pin, pin_instant,
                                        pin_owed, pin_plan, pinned, pinned_start)
from schedfence.domain.source.spec import times_between
from tests.domain.rollback.handover_givens import handover

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=timezone.utc)


def test_only_a_limited_handover_is_pinned():
    assert pinned(handover(T0, 3)) and not pinned(handover(T0, None))


def test_the_pin_is_a_whole_second_past_the_calls_latency_and_the_clock_margin():
    lead = GAP_MARGIN + PIN_LEAD
    assert pin_instant(T0) == T0 + lead
    assert pin_instant(T0 + timedelta(milliseconds=1)) == T0 + lead + SECOND
    assert pin_instant(T0 + timedelta(milliseconds=999)) == T0 + lead + SECOND


def test_the_limit_before_the_pin_goes_to_the_patch_and_the_rest_to_the_server():
    h = handover(T0 - 3 * SECOND, 12)
    pin = T0 + 5 * SECOND
    plan = pin_plan(h, pin)
    owed = [T0 + i * SECOND for i in range(-2, 5)]  # (cursor, pin): 7 times
    assert pin_owed(h, pin) == owed
    assert [(r.start, r.end) for r in plan.backfills] == [(owed[0], owed[-1])]
    assert plan.remaining == 5 and plan.until == pin - SECOND and plan.trigger is None


def test_a_limit_the_times_before_the_pin_use_up_leaves_the_server_none():
    """The measured residual case (limit 3, source down 3 s): all three before the pin."""
    h = handover(T0 - 3 * SECOND, 3)
    plan = pin_plan(h, pin_instant(T0))
    assert pin_owed(h, pin_instant(T0)) == [T0 - 2 * SECOND, T0 - SECOND, T0]
    assert plan.remaining == 0


def test_buffered_spec_starts_go_first():
    h = handover(T0 - 3 * SECOND, 4, buffered=(
        {"nominal": nominal_text(T0 - 4 * SECOND), "origin": "auto", "overlap": "skip"},))
    assert pin_owed(h, T0 + 5 * SECOND) == [T0 - 2 * SECOND, T0 - SECOND, T0]
    assert pin_plan(h, T0 + 5 * SECOND).remaining == 0


@settings(max_examples=60, deadline=None)
@given(down=st.integers(0, 40), every=st.integers(1, 7), limit=st.integers(0, 30),
       lead=st.integers(1, 20))
def test_the_patch_and_the_servers_own_share_are_exactly_the_never_migrated_starts(
        down, every, limit, lead):
    """Owed before the pin, then the server's own spec times from the pin on (its start
    time), no more than the count the create set: together the first ``limit`` spec times
    after the cursor, each once, whatever the pin."""
    cursor = T0 - down * SECOND
    h = handover(cursor, limit, every=every)
    pin = T0 + lead * SECOND
    plan = pin_plan(h, pin)
    own = times_between(h.spec, pin - SECOND, pin + timedelta(hours=2))[:plan.remaining]
    never = times_between(h.spec, cursor, pin + timedelta(hours=2))[:limit]
    assert pin_owed(h, pin) + own == never


def test_the_spec_starts_at_the_pin_or_the_users_own_later_start():
    assert pinned_start(handover(T0, 3), T0 + 5 * SECOND) == T0 + 5 * SECOND
    later = T0 + timedelta(hours=1)
    assert pinned_start(handover(T0, 3, start_at=later), T0 + 5 * SECOND) == later
    early = T0 - timedelta(hours=1)
    assert pinned_start(handover(T0, 3, start_at=early), T0 + 5 * SECOND) == T0 + 5 * SECOND


def test_the_pin_is_cleared_once_with_the_count_the_describe_read():
    assert clear_pin(0, 5, standing=True) == 5  # the count read (own starts lowered it)
    assert clear_pin(0, 5, standing=False) is None  # cleared already: nothing written again
    assert clear_pin(2, 5, standing=True) == 3  # a slow create's late times come off it
    assert clear_pin(3, 1, standing=True) == 0  # and only there can it come out late
