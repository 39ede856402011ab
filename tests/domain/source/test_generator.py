"""The generator decision: (spec, cursor, now) → the due nominal times, started or skipped with a
reason; any split of the time axis into ticks processes the same times, each once."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.source.generator import generate
from schedfence.domain.source.spec import make_spec, times_between

UTC = timezone.utc
T0 = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)
EVERY_2S = make_spec(intervals=[(2, 0)])


def test_due_times_are_started_and_the_cursor_moves_to_now():
    out = generate(EVERY_2S, T0, T0 + timedelta(seconds=7))
    assert out.starts == tuple(T0 + timedelta(seconds=s) for s in (2, 4, 6))
    assert out.skipped == () and out.cursor == T0 + timedelta(seconds=7)


def test_nothing_is_due_at_or_before_the_cursor():
    assert generate(EVERY_2S, T0, T0).starts == ()
    assert generate(EVERY_2S, T0, T0 - timedelta(hours=1)).cursor == T0


def test_paused_times_pass_without_a_record_and_are_not_caught_up():
    paused = generate(EVERY_2S, T0, T0 + timedelta(minutes=1), paused=True)
    assert paused.processed == [] and paused.cursor == T0 + timedelta(minutes=1)
    resumed = generate(EVERY_2S, paused.cursor, T0 + timedelta(minutes=1, seconds=3))
    assert resumed.starts == (T0 + timedelta(minutes=1, seconds=2),)


def test_remaining_actions_limit_starts_and_the_rest_are_skipped_as_limit():
    out = generate(EVERY_2S, T0, T0 + timedelta(seconds=10), remaining=2)
    assert len(out.starts) == 2
    assert [r for _, r in out.skipped] == ["limit"] * 3


def test_times_older_than_the_catchup_window_are_skipped_as_such():
    out = generate(make_spec(intervals=[(60, 0)]), T0, T0 + timedelta(minutes=10),
                   catchup_window=timedelta(minutes=3))
    assert [t.minute for t in out.starts] == [7, 8, 9, 10]
    assert [(t.minute, r) for t, r in out.skipped] == \
        [(m, "catchup_window") for m in range(1, 7)]


def test_a_long_outage_is_processed_in_bounded_ticks_that_resume_at_the_cursor():
    now = T0 + timedelta(seconds=50)
    first = generate(EVERY_2S, T0, now, max_times=10)
    assert len(first.processed) == 10 and first.cursor == first.processed[-1]
    second = generate(EVERY_2S, first.cursor, now, max_times=100)
    assert first.processed + second.processed == times_between(EVERY_2S, T0, now)


def test_end_time_stops_generation():
    spec = make_spec(intervals=[(2, 0)], end_at=T0 + timedelta(seconds=4))
    assert len(generate(spec, T0, T0 + timedelta(hours=1)).starts) == 2


def drain(spec, cursor, now, remaining, catchup):
    """Tick at ``now`` until the cursor reaches it (a tick processes at most MAX_PER_TICK)."""
    processed, starts = [], []
    while True:
        out = generate(spec, cursor, now, remaining=remaining, catchup_window=catchup)
        processed += out.processed
        starts += out.starts
        remaining = None if remaining is None else remaining - len(out.starts)
        if out.cursor == cursor or out.cursor >= now:
            return processed, starts, out.cursor, remaining
        cursor = out.cursor


@settings(max_examples=80, deadline=None)
@given(seconds=st.lists(st.integers(0, 4000), min_size=1, max_size=8),
       every=st.integers(1, 600), offset=st.integers(0, 599),
       window=st.one_of(st.none(), st.integers(1, 3000)),
       remaining=st.one_of(st.none(), st.integers(0, 50)))
def test_any_split_of_the_time_axis_processes_each_time_once(seconds, every, offset, window,
                                                              remaining):
    spec = make_spec(intervals=[(every, offset % every)])
    ticks = sorted(T0 + timedelta(seconds=s) for s in seconds)
    catchup = timedelta(seconds=window) if window else timedelta(days=365)
    cursor, left, processed, starts = T0, remaining, [], []
    for now in ticks:
        done, started, cursor, left = drain(spec, cursor, now, left, catchup)
        processed += done
        starts += started
    one_processed, one_starts, _, _ = drain(spec, T0, ticks[-1], remaining, catchup)
    assert processed == one_processed == times_between(spec, T0, ticks[-1])
    assert all(a < b for a, b in zip(processed, processed[1:]))
    if window is None:  # without a catch-up limit the ticks start exactly the same times
        assert starts == one_starts
    if remaining is not None:
        assert len(starts) <= remaining
