"""The generator across daylight-saving transitions: cron strings read in a zone with DST, over
windows that straddle 2026's spring-forward and fall-back, and intervals in any zone.

The transition instants are computed from the pinned zone data (``spec.zone``), never typed in.
The DST rules checked are the ones this project documents (domain/source/spec.py and docs/protocol.md,
"Schedules"): Debian cron's, as cronsim implements them. An expression whose minute and hour
fields are both fixed (no leading ``*``) is a *fixed-time* job; any other is a *wildcard* job.

- A fixed time that spring-forward skips runs once, at the first instant after the gap; a fixed
  time that fall-back repeats runs once, at its first occurrence.
- A wildcard job matches the wall clock literally: the times of a skipped hour do not exist, so
  they are not run, and a repeated hour runs in both offsets.

Temporal's own rule is different, and these tests do not pretend otherwise: its ScheduleSpec
``timezone_name`` doc says "Calendar spec matching is based on literal matching of the clock time
with no special handling of DST: if you write a calendar spec that fires at 2:30am and specify a
time zone that follows DST, that action will not be triggered on the day that has no 2:30am.
Similarly, an action that fires at 1:30am will be triggered twice on the day that has two
1:30s." The project lists DST among its deliberate differences from Temporal.
"""
from __future__ import annotations

import functools
from datetime import datetime, time, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.generator import generate
from schedfence.domain.source.spec import make_spec, times_after, times_between, zone

UTC = timezone.utc
HOUR, DAY = 3600, 86400
DST_ZONES = ("America/New_York", "Europe/Berlin", "Australia/Lord_Howe")
LONG_AGO = timedelta(days=365)  # the generator's default catch-up window: nothing is too late


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- the zone's own transitions ------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def transitions(name: str, year: int = 2026) -> tuple[tuple[datetime, timedelta, timedelta], ...]:
    """(instant, offset before, offset after) of each UTC-offset change of ``name`` in ``year``:
    the instant is the first second at which the new offset applies."""
    tz = zone(name)
    offset = lambda t: t.astimezone(tz).utcoffset()  # noqa: E731
    found = []
    t, step = datetime(year, 1, 1, tzinfo=UTC), timedelta(minutes=15)
    while t.year == year:
        before, after = offset(t), offset(t + step)
        if before != after:
            lo, hi = t, t + step  # offset(lo) == before, offset(hi) == after
            while hi - lo > timedelta(seconds=1):
                mid = lo + timedelta(seconds=(hi - lo).total_seconds() // 2)
                lo, hi = (mid, hi) if offset(mid) == before else (lo, mid)
            found.append((hi, before, after))
        t += step
    return tuple(found)


def spring(name: str) -> datetime:
    return next(t for t, before, after in transitions(name) if after > before)


def fall(name: str) -> datetime:
    return next(t for t, before, after in transitions(name) if after < before)


CRON_ZONES = ("America/New_York", "Europe/Berlin")  # Lord Howe: cron refused (half-hour DST)
ALL_TRANSITIONS = [(z, t) for z in DST_ZONES for t, _, _ in transitions(z)]
CRON_TRANSITIONS = [(z, t) for z in CRON_ZONES for t, _, _ in transitions(z)]


def test_the_2026_transitions_are_read_from_the_zone_data():
    assert {z: (spring(z), fall(z)) for z in DST_ZONES} == {
        "America/New_York": (at("2026-03-08T07:00:00Z"), at("2026-11-01T06:00:00Z")),
        "Europe/Berlin": (at("2026-03-29T01:00:00Z"), at("2026-10-25T01:00:00Z")),
        "Australia/Lord_Howe": (at("2026-10-03T15:30:00Z"), at("2026-04-04T15:00:00Z")),
    }
    assert all(len(transitions(z)) == 2 for z in DST_ZONES)
    shifts = {z: abs(a - b) for z in DST_ZONES for _, b, a in transitions(z)}
    assert shifts["Australia/Lord_Howe"] == timedelta(minutes=30)


# -- the documented rule, as an independent oracle -----------------------------------------------
def _field(text: str, top: int) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        part, _, step = part.partition("/")
        lo, hi = (0, top) if part == "*" else (int(part.split("-")[0]), int(part.split("-")[-1]))
        values |= set(range(lo, hi + 1, int(step or 1)))
    return values


def documented_times(expression: str, tz_name: str, after: datetime,
                     until: datetime) -> list[datetime]:
    """The nominal times in ``(after, until]`` of ``M H * * *`` read in ``tz_name`` by the
    documented rule (module docstring), computed from the wall clock, not from cronsim."""
    minute, hour, *rest = expression.split()
    assert rest == ["*", "*", "*"], "the oracle knows minute and hour fields only"
    fixed = not minute.startswith("*") and not hour.startswith("*")
    tz = zone(tz_name)
    found: set[datetime] = set()
    day = (after.astimezone(tz) - timedelta(days=1)).date()
    while day <= (until.astimezone(tz) + timedelta(days=1)).date():
        for h in sorted(_field(hour, 23)):
            for m in sorted(_field(minute, 59)):
                wall = datetime.combine(day, time(h, m))
                real = sorted({w.astimezone(UTC) for w in (wall.replace(tzinfo=tz, fold=0),
                                                          wall.replace(tzinfo=tz, fold=1))
                               if w.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall})
                if real:
                    found |= {real[0]} if fixed else set(real)
                elif fixed:  # skipped by spring-forward: the first instant after the gap
                    found.add(max(t for t, _, _ in transitions(tz_name, day.year)
                                  if t <= wall.replace(tzinfo=tz, fold=0).astimezone(UTC)))
        day += timedelta(days=1)
    return sorted(t for t in found if after < t <= until)


def test_the_oracle_reads_the_documented_examples():
    # test_spec.py's Berlin examples, and one wildcard job through each kind of transition
    assert documented_times("30 2 * * *", "Europe/Berlin", at("2026-03-28T00:00:00Z"),
                            at("2026-03-30T23:59:59Z")) == \
        [at("2026-03-28T01:30:00Z"), at("2026-03-29T01:00:00Z"), at("2026-03-30T00:30:00Z")]
    assert documented_times("30 * * * *", "Europe/Berlin", at("2026-10-25T00:00:00Z"),
                            at("2026-10-25T02:00:00Z")) == \
        [at("2026-10-25T00:30:00Z"), at("2026-10-25T01:30:00Z")]
    assert documented_times("30 * * * *", "America/New_York", at("2026-03-08T05:00:00Z"),
                            at("2026-03-08T08:00:00Z")) == \
        [at("2026-03-08T05:30:00Z"), at("2026-03-08T06:30:00Z"), at("2026-03-08T07:30:00Z")]


# -- ticking -----------------------------------------------------------------------------------
def drain(spec, cursor, now, catchup=LONG_AGO):
    """Tick at ``now`` until the cursor reaches it (a tick processes at most MAX_PER_TICK).
    Returns (starts, skipped, cursor); every returned cursor is checked not to move back."""
    starts, skipped = [], []
    for _ in range(10_000):
        out = generate(spec, cursor, now, catchup_window=catchup)
        assert out.cursor >= cursor, f"the cursor moved back from {cursor} to {out.cursor}"
        starts += out.starts
        skipped += out.skipped
        if out.cursor == cursor or out.cursor >= now:
            return starts, skipped, out.cursor
        cursor = out.cursor
    raise AssertionError("the ticks at one instant never reached it")


def tick_through(spec, start, ticks, catchup=LONG_AGO):
    """Tick at each of ``ticks`` in turn from the cursor ``start``; every processed time."""
    cursor, processed = start, []
    for now in ticks:
        starts, skipped, cursor = drain(spec, cursor, now, catchup)
        processed += sorted([*starts, *(t for t, _ in skipped)])
    return processed


# Fixed-time jobs whose hours (1, 2) fall in the skipped or repeated hour of the three zones,
# and wildcard jobs; all of them ``M H * * *`` (or a macro of that form) for the oracle.
CRONS = ("*/15 * * * *", "0 * * * *", "30 * * * *", "@hourly", "@daily", "0 */2 * * *",
         "30 1 * * *", "30 2 * * *", "45 1 * * *", "15 2 * * *", "15,45 1,2 * * *",
         "0 1-3 * * *", "*/20 2 * * *")
EXPANDED = {"@hourly": "0 * * * *", "@daily": "0 0 * * *"}


@st.composite
def dst_windows(draw):
    """(zone, window start, tick instants): a window around one of the zone's 2026 transitions,
    with ticks clustered near the transition (where the repeated or skipped hour is)."""
    tz_name, transition = draw(st.sampled_from(CRON_TRANSITIONS))
    near = st.integers(-3 * HOUR, 3 * HOUR)
    offset = st.one_of(near, st.integers(-30 * HOUR, 30 * HOUR))
    start = transition + timedelta(seconds=draw(offset))
    ticks = draw(st.lists(offset, min_size=1, max_size=8))
    ticks = sorted({t for t in (transition + timedelta(seconds=s) for s in ticks) if t > start})
    return tz_name, start, ticks or [start + timedelta(hours=6)]


@settings(max_examples=400, deadline=None)
@given(window=dst_windows(), cron=st.sampled_from(CRONS))
def test_any_split_of_a_dst_window_processes_each_cron_time_once(window, cron):
    tz_name, start, ticks = window
    spec = make_spec(cron=[cron], time_zone=tz_name)
    processed = tick_through(spec, start, ticks)
    one_tick = tick_through(spec, start, ticks[-1:])
    assert all(a < b for a, b in zip(processed, processed[1:])), "repeated or out of order"
    assert all(start < t <= ticks[-1] for t in processed), "a time outside the ticked window"
    assert processed == one_tick == times_between(spec, start, ticks[-1])


@settings(max_examples=400, deadline=None)
@given(window=dst_windows(), cron=st.sampled_from(CRONS))
def test_cron_times_across_a_transition_follow_the_documented_dst_rule(window, cron):
    tz_name, start, ticks = window
    spec = make_spec(cron=[cron], time_zone=tz_name)
    assert times_between(spec, start, ticks[-1]) == \
        documented_times(EXPANDED.get(cron, cron), tz_name, start, ticks[-1])


@pytest.mark.parametrize("tz_name, transition", CRON_TRANSITIONS,
                         ids=[f"{z}-{t:%m%d}" for z, t in CRON_TRANSITIONS])
def test_ticking_every_ten_minutes_through_a_transition_processes_each_time_once(tz_name,
                                                                                  transition):
    """Deterministic companion of the split property: a tick every 10 minutes for 4 hours either
    side of the transition, so a tick lands inside the skipped or repeated hour."""
    start = transition - timedelta(hours=4)
    ticks = [start + timedelta(minutes=10 * k) for k in range(1, 49)]
    wrong = {}
    for cron in CRONS:
        spec = make_spec(cron=[cron], time_zone=tz_name)
        try:
            processed = tick_through(spec, start, ticks)
        except AssertionError as exc:  # the cursor moved back
            wrong[cron] = str(exc)
            continue
        expected = documented_times(EXPANDED.get(cron, cron), tz_name, start, ticks[-1])
        if processed != expected:
            wrong[cron] = {"processed n times": {f"{t:%H:%MZ}": processed.count(t)
                                                 for t in processed if processed.count(t) > 1},
                           "unexpected": [f"{t:%H:%MZ}" for t in processed if t not in expected],
                           "missing": [f"{t:%H:%MZ}" for t in expected if t not in processed]}
    assert wrong == {}


# -- given/then: the concrete DST days of 2026 ---------------------------------------------------
def test_ny_spring_forward_a_daily_0230_runs_at_0300_edt():
    """2026-03-08 has no 02:30 in New York (02:00 EST -> 03:00 EDT). Documented rule (Debian
    cron, cronsim): the fixed time runs once, at 03:00 EDT = 07:00Z. Temporal would not run it
    at all that day ("will not be triggered on the day that has no 2:30am")."""
    spec = make_spec(cron=["30 2 * * *"], time_zone="America/New_York")
    got = times_between(spec, at("2026-03-07T00:00:00Z"), at("2026-03-10T00:00:00Z"))
    assert got == [at("2026-03-07T07:30:00Z"),   # 02:30 EST
                   at("2026-03-08T07:00:00Z"),   # 03:00 EDT, the first instant after the gap
                   at("2026-03-09T06:30:00Z")]   # 02:30 EDT
    ticked = tick_through(spec, at("2026-03-08T05:00:00Z"),
                          [at("2026-03-08T06:59:59Z"), at("2026-03-08T07:00:00Z"),
                           at("2026-03-08T09:00:00Z")])
    assert ticked == [at("2026-03-08T07:00:00Z")]


def test_ny_fall_back_a_daily_0130_runs_once_at_the_first_0130():
    """2026-11-01 has two 01:30s in New York (05:30Z EDT, 06:30Z EST). Documented rule: a fixed
    time runs once, at its first occurrence. Temporal would run it twice ("will be triggered
    twice on the day that has two 1:30s")."""
    spec = make_spec(cron=["30 1 * * *"], time_zone="America/New_York")
    got = times_between(spec, at("2026-10-31T12:00:00Z"), at("2026-11-01T12:00:00Z"))
    assert got == [at("2026-11-01T05:30:00Z")]


def test_a_cursor_in_the_repeated_hour_names_no_time_before_it():
    """times_after's contract: every time is strictly after ``after``. 06:10Z is 01:10 EST, the
    second pass through New York's 01:00-02:00 on 2026-11-01; the next 01:30 is the next day."""
    spec = make_spec(cron=["30 1 * * *"], time_zone="America/New_York")
    assert next(times_after(spec, at("2026-11-01T06:10:00Z"))) == at("2026-11-02T06:30:00Z")


def test_a_tick_in_the_repeated_hour_does_not_start_the_0130_run_again():
    """The scheduler ticks at 01:10 EST (06:10Z), after 01:30 EDT (05:30Z) was started, then
    again at noon: the 01:30 run is started exactly once, as one tick at noon would."""
    spec = make_spec(cron=["30 1 * * *"], time_zone="America/New_York")
    first = generate(spec, at("2026-11-01T05:00:00Z"), at("2026-11-01T06:10:00Z"))
    second = generate(spec, first.cursor, at("2026-11-01T12:00:00Z"))
    assert first.starts == (at("2026-11-01T05:30:00Z"),)
    assert second.starts == ()


def test_a_bounded_tick_in_the_repeated_hour_never_moves_the_cursor_back():
    spec = make_spec(cron=["30 1 * * *"], time_zone="America/New_York")
    cursor = at("2026-11-01T06:10:00Z")
    out = generate(spec, cursor, at("2026-11-03T12:00:00Z"), max_times=1)
    assert out.cursor >= cursor and all(t > cursor for t in out.processed)


@pytest.mark.parametrize("tz_name", ["America/New_York", "Europe/Berlin"])
@pytest.mark.parametrize("which", [spring, fall])
def test_hourly_cron_across_a_transition_is_every_utc_hour_exactly_once(tz_name, which):
    """With whole-hour offsets, ``0 * * * *`` through either transition runs on every UTC hour,
    none twice and none missing, whatever the ticks."""
    spec = make_spec(cron=["0 * * * *"], time_zone=tz_name)
    transition = which(tz_name)
    start, end = transition - timedelta(hours=6), transition + timedelta(hours=6)
    ticks = [start + timedelta(minutes=25 * k) for k in range(1, 29)] + [end]
    processed = tick_through(spec, start, ticks)
    assert processed == [start + timedelta(hours=k) for k in range(1, 13)]


@pytest.mark.parametrize("tz_name", ["Australia/Lord_Howe", "Asia/Pyongyang",
                                     "Pacific/Norfolk"])
def test_cron_strings_in_a_zone_that_shifts_by_less_than_an_hour_are_refused(tz_name):
    """Lord Howe moves its clocks by 30 minutes (02:00 LHST -> 02:30 LHDT at
    2026-10-03T15:30Z); the cron library steps through a shift in whole hours and drops times
    that exist there (``0 */2 * * *`` on 2026-04-05 missed 02:00 LHST, ``30 * * * *`` the
    second 01:30) or depends on where the ticks fall. Refused, naming the field, rather than
    silently losing times; intervals there are fine (absolute time)."""
    with pytest.raises(InvalidArgument) as refused:
        make_spec(cron=["0 */2 * * *"], time_zone=tz_name)
    assert refused.value.message.startswith("time_zone: ")
    assert make_spec(intervals=[(3600, 0)], time_zone=tz_name).time_zone == tz_name


def test_six_field_cron_strings_are_refused():
    """spec.py and docs/protocol.md: a cron string has five fields or is a macro. cronsim would
    read a sixth field as *leading seconds*, where Temporal's six fields end with a *year*:
    ``30 2 * * * *`` is 02:30 daily to Temporal, and hh:02:30 every hour to cronsim."""
    for text in ("0 30 2 * * *", "30 2 * * * *"):
        with pytest.raises(InvalidArgument) as refused:
            make_spec(cron=[text], time_zone="America/New_York")
        assert refused.value.message.startswith("cron: ")


# -- catch-up window across a transition ---------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(window=dst_windows(), cron=st.sampled_from(CRONS), late=st.integers(0, 2 * DAY),
       seconds=st.integers(0, 2 * DAY))
def test_a_late_tick_skips_exactly_the_times_older_than_the_catchup_window(window, cron, late,
                                                                          seconds):
    tz_name, start, ticks = window
    spec = make_spec(cron=[cron], time_zone=tz_name)
    w = timedelta(seconds=seconds)
    cursor, started, skipped = start, [], []
    for now in [*ticks, ticks[-1] + timedelta(seconds=late)]:  # the last tick is late
        expected = times_between(spec, cursor, now)
        starts, skips, new_cursor = drain(spec, cursor, now, catchup=w)
        assert all(reason == "catchup_window" for _, reason in skips)
        assert [t for t, _ in skips] == [t for t in expected if t < now - w]
        assert starts == [t for t in expected if t >= now - w]
        started += starts
        skipped += [t for t, _ in skips]
        cursor = new_cursor
    assert sorted(started + skipped) == times_between(spec, start, cursor)
    assert len(set(started + skipped)) == len(started) + len(skipped)


def test_catchup_counts_the_times_dropped_across_fall_back():
    """Hourly in New York from 00:00 EDT: the scheduler was down through fall-back and ticks at
    08:00Z with a 2-hour window. 05:00Z (01:00 EDT) and 06:00Z (01:00 EST) are distinct times;
    the first is 3 hours late and dropped, the second exactly 2 hours late and started."""
    spec = make_spec(cron=["0 * * * *"], time_zone="America/New_York")
    out = generate(spec, at("2026-11-01T04:00:00Z"), at("2026-11-01T08:00:00Z"),
                   catchup_window=timedelta(hours=2))
    assert out.skipped == ((at("2026-11-01T05:00:00Z"), "catchup_window"),)
    assert out.starts == (at("2026-11-01T06:00:00Z"), at("2026-11-01T07:00:00Z"),
                          at("2026-11-01T08:00:00Z"))


# -- intervals are zone-independent -------------------------------------------------------------
INTERVAL_ZONES = ("UTC", *DST_ZONES, "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns",
                  "Pacific/Chatham")


@settings(max_examples=100, deadline=None)
@given(every=st.one_of(st.integers(1, 900), st.integers(900, 2 * DAY)), phase=st.integers(0, DAY),
       tz_name=st.sampled_from(INTERVAL_ZONES), around=st.sampled_from(ALL_TRANSITIONS),
       before=st.integers(0, 2 * DAY), after=st.integers(1, 2 * DAY),
       splits=st.lists(st.integers(0, 4 * DAY), max_size=5))
def test_intervals_name_the_same_epoch_aligned_instants_in_every_zone(every, phase, tz_name,
                                                                      around, before, after,
                                                                      splits):
    offset = phase % every
    start = around[1] - timedelta(seconds=before)
    end = start + timedelta(seconds=min(before + after, every * 400))
    zoned = make_spec(intervals=[(every, offset)], time_zone=tz_name)
    utc = make_spec(intervals=[(every, offset)])
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first = int((start - epoch).total_seconds() - offset) // every + 1
    arithmetic = []
    while (t := epoch + timedelta(seconds=(first + len(arithmetic)) * every + offset)) <= end:
        arithmetic.append(t)
    assert times_between(zoned, start, end) == times_between(utc, start, end) == arithmetic
    ticks = sorted({start + timedelta(seconds=s) for s in splits if 0 < s} | {end})
    ticks = [t for t in ticks if t <= end]
    assert tick_through(zoned, start, ticks) == arithmetic
