"""The I14 verdict: both sides' starts together against what one scheduler would have owed."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schedfence.domain.exactly_once import Owed, check_exactly_once
from schedfence.domain.spec import make_spec, times_between

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
SPEC = make_spec(intervals=[(60, 0)])
S = timedelta(seconds=1)
OWED = Owed(SPEC, T0, T0 + timedelta(minutes=10),
            backfills=((T0 - timedelta(hours=1), T0 - timedelta(minutes=58)),))


def test_a_handoff_that_splits_the_times_between_the_sides_is_exactly_once():
    auto = times_between(SPEC, T0, T0 + timedelta(minutes=10))
    backfill = [T0 - timedelta(hours=1) + timedelta(minutes=k) for k in range(3)]
    verdict = check_exactly_once(OWED, auto[:4] + backfill[:1], auto[4:] + backfill[1:])
    assert verdict.ok and verdict.describe() == "exactly once"


def test_a_time_on_both_sides_a_lost_one_and_a_stray_one_are_each_named():
    auto = times_between(SPEC, T0, T0 + timedelta(minutes=10))
    backfill = [T0 - timedelta(hours=1) + timedelta(minutes=k) for k in range(3)]
    stray = T0 - timedelta(minutes=30)
    verdict = check_exactly_once(OWED, auto[:5] + backfill, auto[4:-1] + [stray])
    assert verdict.twice == (auto[4],) and verdict.missing == (auto[-1],)
    assert verdict.unexpected == (stray,) and not verdict.ok


def test_paused_stretches_owe_nothing():
    paused = Owed(SPEC, T0, T0 + timedelta(minutes=10),
                  paused=((T0 + timedelta(minutes=2), T0 + timedelta(minutes=5)),))
    owed = paused.times()
    assert T0 + timedelta(minutes=3) not in owed and T0 + timedelta(minutes=6) in owed
    assert len(owed) == 7
