"""A Temporal Schedule's structured calendar read back as the source's cron string.

The calendars below are the forms dev server 1.32 stored for each cron string (measured with
``temporal schedule create --cron`` and ``describe -o json``): the cron string read back says
the same; a calendar no cron string says the same for is refused naming why."""
from __future__ import annotations

import pytest
from temporalio.api.schedule.v1 import CalendarSpec, Range, ScheduleSpec, StructuredCalendarSpec

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.spec import cron_fields
from schedfence.infra.adapters.destination.calendar_cron import calendar_cron, calendar_crons


def R(start: int = 0, end: int = 0, step: int = 1) -> Range:
    return Range(start=start, end=end, step=step)


ALL_DOM, ALL_MONTH, ALL_DOW = [R(1, 31)], [R(1, 12)], [R(0, 6)]
MEASURED = {  # cron string -> the server's structured calendar of it
    "*/15 9-17 * * 1-5": StructuredCalendarSpec(
        second=[R()], minute=[R(0, 59, 15)], hour=[R(9, 17)], day_of_month=ALL_DOM,
        month=ALL_MONTH, day_of_week=[R(1, 5)]),
    "30 2 * 6 *": StructuredCalendarSpec(
        second=[R()], minute=[R(30, 30)], hour=[R(2, 2)], day_of_month=ALL_DOM,
        month=[R(6, 6)], day_of_week=ALL_DOW),
    "0 0 29 2 *": StructuredCalendarSpec(
        second=[R()], minute=[R()], hour=[R()], day_of_month=[R(29, 29)], month=[R(2, 2)],
        day_of_week=ALL_DOW),
}


@pytest.mark.parametrize("cron", sorted(MEASURED))
def test_the_servers_calendar_reads_back_as_the_cron_string(cron: str) -> None:
    assert calendar_cron(MEASURED[cron]) == cron == cron_fields(cron)


def test_empty_fields_take_temporals_defaults_and_lists_become_cron_lists() -> None:
    # second, minute, hour default to 0; the rest to every value.
    assert calendar_cron(StructuredCalendarSpec()) == "0 0 * * *"
    cal = StructuredCalendarSpec(minute=[R(5), R(35)], hour=[R(1, 7, 3)], day_of_week=[R(7)])
    assert calendar_cron(cal) == "5,35 1-7/3 * * 7"  # 7 is Sunday, as cron reads it


@pytest.mark.parametrize("calendar, why", [
    (StructuredCalendarSpec(day_of_month=[R(1, 1)], day_of_week=[R(1, 1)]), "both"),
    (StructuredCalendarSpec(year=[R(2027, 2027)]), "years"),
    (StructuredCalendarSpec(second=[R(30, 30)]), "seconds"),
])
def test_a_calendar_no_cron_string_says_the_same_for_is_refused(calendar, why) -> None:
    with pytest.raises(ValueError, match=why):
        calendar_cron(calendar)


def test_calendar_strings_and_exclusions_are_refused() -> None:
    with pytest.raises(ValueError, match="excluded"):
        calendar_crons(ScheduleSpec(exclude_structured_calendar=[StructuredCalendarSpec()]))
    with pytest.raises(ValueError, match="calendar strings"):
        calendar_crons(ScheduleSpec(calendar=[CalendarSpec(hour="1")]))


def test_the_source_refuses_a_cron_string_whose_days_temporal_would_read_otherwise() -> None:
    # cron: the 1st *or* a Monday; Temporal's scheduler: a 1st that is a Monday.
    with pytest.raises(InvalidArgument, match="both the day of month and the day of week"):
        cron_fields("0 12 1 * 1")
    assert cron_fields("0 12 */2 * *") and cron_fields("0 12 * * 1")
