"""A Temporal Schedule's calendar spec as the source's five-field cron strings, where one says
the same.

The server keeps a cron string as a *structured calendar*: per field (second, minute, hour,
day of month, month, year, day of week) a list of ranges ``start..end`` by ``step`` (an end
below its start means the start alone, a step of 0 means 1); an empty list means 0 for second,
minute and hour and every value for the rest. Measured on dev server 1.32: ``*/15 9-17 * * 1-5``
comes back as minute ``0..59/15``, hour ``9..17``, day of month ``1..31``, month ``1..12``, day
of week ``1..5``, second ``0``.

A calendar has no cron string when it names seconds other than 0 or a year, and none with
the same meaning when it restricts both the day of month and the day of week: Temporal's
scheduler requires both to match, cron (and the source's cron library) either. Those raise
``ValueError`` naming why: the forward migration parks ``unsupported_schedule``.
"""
from __future__ import annotations

from typing import Any, Iterable

# field -> (lowest, highest, empty list means every value)
_FIELDS = {"second": (0, 59, False), "minute": (0, 59, False), "hour": (0, 23, False),
           "day_of_month": (1, 31, True), "month": (1, 12, True), "day_of_week": (0, 6, True)}
CRON_ORDER = ("minute", "hour", "day_of_month", "month", "day_of_week")


def _bounds(r: Any) -> tuple[int, int, int]:
    return r.start, max(r.end, r.start), r.step or 1


def _values(ranges: Iterable[Any], lo: int, hi: int, every: bool) -> set[int]:
    ranges = list(ranges)
    if not ranges:
        return set(range(lo, hi + 1)) if every else {0}
    out: set[int] = set()
    for r in ranges:
        start, end, step = _bounds(r)
        out.update(v % 7 if hi == 6 else v for v in range(start, end + 1, step))  # 7: Sunday
    return out


def _field_text(ranges: list[Any], lo: int, hi: int, every: bool) -> str:
    if _values(ranges, lo, hi, every) == set(range(lo, hi + 1)):
        return "*"
    if not ranges:
        return str(lo)  # second, minute, hour: 0
    parts = []
    for r in ranges:
        start, end, step = _bounds(r)
        if start == end:
            parts.append(str(start))
        elif step == 1:
            parts.append(f"{start}-{end}")
        elif (start, end) == (lo, hi):
            parts.append(f"*/{step}")
        else:
            parts.append(f"{start}-{end}/{step}")
    return ",".join(parts)


def calendar_cron(calendar: Any) -> str:
    """One structured calendar as a cron string, or ``ValueError`` naming why there is none."""
    if list(calendar.year):
        raise ValueError("spec: a calendar that names years has no cron string")
    lo, hi, every = _FIELDS["second"]
    if _values(calendar.second, lo, hi, every) != {0}:
        raise ValueError("spec: a calendar that names seconds other than 0 has no cron string")
    fields = {name: _field_text(list(getattr(calendar, name)), *_FIELDS[name])
              for name in CRON_ORDER}
    if fields["day_of_month"] != "*" and fields["day_of_week"] != "*":
        raise ValueError("spec: a calendar restricting both the day of month and the day of "
                         "week matches days where both do (Temporal); a cron string matches "
                         "days where either does, so the source cannot run it the same")
    return " ".join(fields[name] for name in CRON_ORDER)


def calendar_crons(spec: Any) -> tuple[str, ...]:
    """Every structured calendar of ``spec`` as a cron string (``ValueError`` for any that has
    none, and for the calendar forms the server keeps no structure of)."""
    if list(spec.calendar) or list(spec.exclude_calendar) or list(spec.exclude_structured_calendar):
        raise ValueError("spec: calendar strings and excluded calendars have no form on the "
                         "source")
    return tuple(calendar_cron(c) for c in spec.structured_calendar)
