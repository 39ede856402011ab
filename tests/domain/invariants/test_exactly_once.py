"""The I14 verdict: both sides' starts together against what one scheduler would have owed."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schedfence.domain.invariants.exactly_once import Backfill, Owed, check_exactly_once
from schedfence.domain.source.spec import make_spec, times_between

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
SPEC = make_spec(intervals=[(60, 0)])
S = timedelta(seconds=1)
M = timedelta(minutes=1)
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


def test_a_time_two_backfills_cover_is_owed_once_per_backfill():
    owed = Owed(SPEC, T0, T0, backfills=((T0 - 3 * M, T0 - M), (T0 - 2 * M, T0 - M)))
    one = [(T0 - 3 * M, "backfill-1"), (T0 - 2 * M, "backfill-1"), (T0 - M, "backfill-1")]
    two = [(T0 - 2 * M, "backfill-2"), (T0 - M, "backfill-2")]
    assert check_exactly_once(owed, one, two).ok
    again = check_exactly_once(owed, one + [(T0 - M, "backfill-1")], two)
    assert again.twice == (T0 - M,) and again.first == ("twice", T0 - M)
    # A listing by workflow id counts runs per time: two runs of T0 - M are owed.
    assert check_exactly_once(owed, [], [t for t, _ in one + two]).ok


def test_the_limit_and_the_catch_up_window_owe_what_a_tick_would():
    down = Owed(SPEC, T0, T0 + 30 * M, catchup_window=timedelta(minutes=10),
                ticks=(T0 + 30 * M,))
    assert down.spec_times() == times_between(SPEC, T0 + 20 * M - S, T0 + 30 * M)
    limited = Owed(SPEC, T0, T0 + 30 * M, remaining=3)
    assert limited.spec_times() == [T0 + M, T0 + 2 * M, T0 + 3 * M]
    both = Owed(SPEC, T0, T0 + 30 * M, remaining=2, catchup_window=timedelta(minutes=10),
                ticks=(T0 + 30 * M,))
    assert both.spec_times() == [T0 + 20 * M, T0 + 21 * M]


def test_triggers_are_owed_at_their_instant_and_a_stray_is_named_first():
    owed = Owed(SPEC, T0, T0 + 2 * M, triggers=(T0 + 30 * S,))
    starts = [(T0 + M, "auto"), (T0 + 2 * M, "auto"), (T0 + 30 * S, "trigger")]
    assert check_exactly_once(owed, starts, []).ok
    stray = check_exactly_once(owed, starts + [(T0 + 10 * S, "trigger")], [])
    assert stray.first == ("unexpected", T0 + 10 * S)


def test_a_program_update_owes_the_old_spec_before_it_and_the_new_one_after():
    every_90 = make_spec(intervals=[(90, 0)])
    at = T0 + 5 * M + 30 * S
    owed = Owed(SPEC, T0, T0 + 10 * M, updates=((at, every_90),),
                backfills=(Backfill(T0 - 3 * M, T0 - M, "backfill-4", every_90),))
    assert owed.spec_times() == times_between(SPEC, T0, at) + \
        times_between(every_90, at, T0 + 10 * M)
    assert T0 + 4 * M + 30 * S not in owed.spec_times()  # a 90 s time before the update
    assert {t for t, o in owed.slots() if o == "backfill-4"} == \
        set(times_between(every_90, T0 - 3 * M - S, T0 - M))
    # The source's old mistake: the new spec's times from the old cursor on.
    wrong = [(t, "auto") for t in times_between(every_90, T0, T0 + 10 * M)]
    verdict = check_exactly_once(owed, wrong, [])
    assert verdict.unexpected[0] == T0 + M + 30 * S and T0 + M in verdict.missing
    gone = Owed(SPEC, T0, T0 + 10 * M, updates=((at, None),))  # deleted at ``at``
    assert gone.spec_times() == times_between(SPEC, T0, at)
