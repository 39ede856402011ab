"""Schedule specs: nominal times as a pure function of (spec, after), checked against Temporal's
documented interval examples, cron in zones with DST, and bad input refused by field."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.spec import jitter_of, make_spec, times_after, times_between

UTC = timezone.utc
DAY, HOUR, MINUTE = 86400, 3600, 60


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def first_after(spec, after: str) -> str:
    return next(times_after(spec, at(after))).isoformat().replace("+00:00", "Z")


# -- intervals: Temporal's documented examples (ScheduleIntervalSpec) ------------------------
def test_an_hourly_interval_is_on_the_hour_and_an_offset_moves_it():
    assert first_after(make_spec(intervals=[(HOUR, 0)]), "2026-12-03T07:33:52Z") == \
        "2026-12-03T08:00:00Z"
    assert first_after(make_spec(intervals=[(HOUR, 19 * MINUTE)]), "2026-12-03T07:33:52Z") == \
        "2026-12-03T08:19:00Z"


def test_a_28_day_interval_is_aligned_to_the_unix_epoch():
    # "An interval of 28 days with offset zero would match 2022-02-17T00:00:00Z (among other
    # times). The same interval with offset of 3 days, 5 hours, and 23 minutes would match
    # 2022-02-20T05:23:00Z instead."
    assert first_after(make_spec(intervals=[(28 * DAY, 0)]), "2022-02-16T00:00:00Z") == \
        "2022-02-17T00:00:00Z"
    offset = 3 * DAY + 5 * HOUR + 23 * MINUTE
    assert first_after(make_spec(intervals=[(28 * DAY, offset)]), "2022-02-19T00:00:00Z") == \
        "2022-02-20T05:23:00Z"


def test_intervals_ignore_the_time_zone():
    a = make_spec(intervals=[(5 * MINUTE, MINUTE)])
    b = make_spec(intervals=[(5 * MINUTE, MINUTE)], time_zone="Asia/Kolkata")
    after, until = at("2026-03-29T00:00:00Z"), at("2026-03-29T03:00:00Z")
    assert times_between(a, after, until) == times_between(b, after, until)


# -- cron ---------------------------------------------------------------------------------------
def test_cron_is_read_in_the_time_zone():
    spec = make_spec(cron=["0 9 * * *"], time_zone="America/New_York")
    assert first_after(spec, "2026-07-01T00:00:00Z") == "2026-07-01T13:00:00Z"  # EDT
    assert first_after(spec, "2026-12-01T00:00:00Z") == "2026-12-01T14:00:00Z"  # EST


def test_a_time_skipped_by_spring_forward_runs_at_the_first_instant_after_the_gap():
    spec = make_spec(cron=["30 2 * * *"], time_zone="Europe/Berlin")
    days = times_between(spec, at("2026-03-28T00:00:00Z"), at("2026-03-30T23:59:59Z"))
    assert [t.isoformat() for t in days] == ["2026-03-28T01:30:00+00:00",
                                             "2026-03-29T01:00:00+00:00",  # 03:00 CEST
                                             "2026-03-30T00:30:00+00:00"]


def test_fall_back_runs_a_fixed_time_once_and_a_wildcard_hour_in_both_offsets():
    fixed = make_spec(cron=["30 2 * * *"], time_zone="Europe/Berlin")
    assert len(times_between(fixed, at("2026-10-24T12:00:00Z"), at("2026-10-25T12:00:00Z"))) == 1
    hourly = make_spec(cron=["30 * * * *"], time_zone="Europe/Berlin")
    got = times_between(hourly, at("2026-10-25T00:00:00Z"), at("2026-10-25T02:00:00Z"))
    assert got == [at("2026-10-25T00:30:00Z"), at("2026-10-25T01:30:00Z")]  # 02:30 twice


def test_macros_and_entries_are_merged_without_repeats():
    spec = make_spec(cron=["@hourly", "0 */2 * * *"], intervals=[(HOUR, 0)])
    got = times_between(spec, at("2026-01-01T00:00:00Z"), at("2026-01-01T03:00:00Z"))
    assert got == [at(f"2026-01-01T0{h}:00:00Z") for h in (1, 2, 3)]


def test_start_and_end_bound_the_times_inclusively():
    spec = make_spec(intervals=[(HOUR, 0)], start_at=at("2026-01-01T02:00:00Z"),
                     end_at=at("2026-01-01T04:00:00Z"))
    got = times_between(spec, at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"))
    assert got == [at(f"2026-01-01T0{h}:00:00Z") for h in (2, 3, 4)]


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, field", [
    ({"cron": ["61 * * * *"]}, "cron"),
    ({"cron": ["@every 5m"]}, "cron"),
    ({"intervals": [(0, 0)]}, "interval"),
    ({"intervals": [(-5, 0)]}, "interval"),
    ({"intervals": [(60, 60)]}, "offset"),
    ({"time_zone": "Mars/Olympus"}, "time_zone"),
    ({"time_zone": "../../etc/passwd"}, "time_zone"),
    ({"start_at": at("2026-02-01T00:00:00Z"), "end_at": at("2026-01-01T00:00:00Z")}, "end"),
    ({"start_at": datetime(2026, 1, 1)}, "start"),
    ({"jitter": -1}, "jitter"),
])
def test_bad_specs_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(InvalidArgument) as refused:
        make_spec(**kwargs)
    assert refused.value.message.startswith(f"{field}: ")


def test_jitter_is_deterministic_and_below_the_bound():
    spec = make_spec(intervals=[(MINUTE, 0)], jitter=30)
    t = at("2026-01-01T00:01:00Z")
    assert jitter_of(spec, "ns/s", t) == jitter_of(spec, "ns/s", t)
    delays = {jitter_of(spec, "ns/s", t + timedelta(minutes=k)) for k in range(200)}
    assert all(timedelta(0) <= d < timedelta(seconds=30) for d in delays) and len(delays) > 10


# -- properties --------------------------------------------------------------------------------
specs = st.one_of(
    st.builds(lambda e, o: make_spec(intervals=[(e, o % e)]),
              st.integers(1, 3 * DAY), st.integers(0, 3 * DAY)),
    st.sampled_from([make_spec(cron=["*/7 * * * *"], time_zone="Europe/Berlin"),
                     make_spec(cron=["30 2 * * *"], time_zone="America/New_York"),
                     make_spec(cron=["0 0 29 2 *"]),
                     make_spec(cron=["15 1 * * 0"], intervals=[(5400, 60)],
                               time_zone="Europe/Berlin"),
                     make_spec(intervals=[(5400, 60)], time_zone="Australia/Lord_Howe")]))
instants = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1),
                        timezones=st.just(UTC))


@settings(max_examples=60, deadline=None)
@given(spec=specs, after=instants)
def test_times_strictly_increase_and_each_is_the_next_after_the_one_before(spec, after):
    times = list(zip(range(20), times_after(spec, after)))
    seq = [t for _, t in times]
    assert all(a < b for a, b in zip(seq, seq[1:])) and all(t > after for t in seq)
    for prev, t in zip(seq, seq[1:]):
        assert next(times_after(spec, prev)) == t  # none skipped, none repeated


def test_a_bare_cron_string_is_one_expression_not_its_letters():
    one = make_spec(cron="30 6 * * 1-5")
    assert one == make_spec(cron=["30 6 * * 1-5"])
    assert len(one.cron_expressions) == 1
