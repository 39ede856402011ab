"""When a schedule acts: its spec, and the nominal times it names (a pure function).

The names follow Temporal's schedules (``ScheduleSpec``, ``ScheduleIntervalSpec``): a spec is a
union of interval specs and cron strings, bounded by an optional start and end, read in one
time zone, with an optional jitter. Where this differs from Temporal is said in
docs/protocol.md ("Schedules").

- An interval ``every`` with ``offset`` matches the instants ``epoch + n*every + offset``
  (epoch-aligned, as Temporal's are), whatever the time zone.
- A cron string has five fields (minute hour day-of-month month day-of-week) or is one of
  ``@yearly @annually @monthly @weekly @daily @midnight @hourly``; it is read in
  ``time_zone``, with the DST rules of the cron library we use (cronsim, Debian cron's): a
  time that a spring-forward skips runs at the first instant after the gap.
- ``start_at`` (inclusive) and ``end_at`` (inclusive) bound the nominal times.
- ``jitter`` delays each action by a deterministic amount in ``[0, jitter)`` derived from the
  schedule and the nominal time; the nominal time itself never moves.

All times are timezone-aware UTC ``datetime``s at whole seconds.
"""
from __future__ import annotations

import functools
import hashlib
import heapq
import re
from datetime import date, datetime, timedelta, timezone
from importlib import resources
from typing import Iterator, Sequence
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from schedfence.domain.bounds import MAX_TIME, bounded_time
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.model import Immutable

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_SECOND = int((MAX_TIME - EPOCH).total_seconds())  # of the epoch: no nominal time after it
MAX_SECONDS = 100 * 366 * 86400  # a century: longer intervals, offsets or jitter are refused
MAX_ENTRIES = 100  # intervals or cron strings in one spec
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
          "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
          "@hourly": "0 * * * *"}
# Temporal keeps a range's step as an int32 (``Range.step``): a larger number is refused there
# ("invalid Step", or "value out of range" past int64), so it is refused here, at create.
MAX_CRON_NUMBER = 2**31 - 1
_NAMES = frozenset("jan feb mar apr may jun jul aug sep oct nov dec "
                   "sun mon tue wed thu fri sat".split())


class IntervalSpec(Immutable):
    """Every ``every`` seconds, ``offset`` seconds after each multiple since the epoch."""

    every: int
    offset: int = 0


class ScheduleSpec(Immutable):
    intervals: tuple[IntervalSpec, ...] = ()
    cron_expressions: tuple[str, ...] = ()
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter: int = 0  # seconds
    time_zone: str = "UTC"

    @property
    def empty(self) -> bool:
        """No interval and no cron string: the spec names no time (a schedule of old)."""
        return not (self.intervals or self.cron_expressions)


def _refuse(field: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"{field}: {why}")


def _seconds(field: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or \
            not minimum <= value <= MAX_SECONDS:
        raise _refuse(field, f"must be a whole number of seconds from {minimum} to "
                             f"{MAX_SECONDS}")
    return value


def utc_time(field: str, value: object) -> datetime:
    """``value`` in UTC; ``invalid_argument`` naming ``field`` unless it is a time with a zone
    within the bounds every store and Temporal represent (domain/bounds.py)."""
    return bounded_time(field, value)


def _aware(field: str, value: datetime | None) -> datetime | None:
    return None if value is None else utc_time(field, value).replace(microsecond=0)


@functools.lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The zone from the pinned ``tzdata`` package, never the machine's own database, so a
    spec names the same instants on every machine."""
    parts = name.split("/")
    if not name or any(p in ("", ".", "..") or not p.replace("_", "").replace("-", "")
                       .replace("+", "").isalnum() for p in parts):
        raise _refuse("time_zone", f"unknown time zone {name!r}")
    try:
        with resources.files("tzdata.zoneinfo").joinpath(*parts).open("rb") as f:
            return ZoneInfo.from_file(f, key=name)
    except (OSError, ValueError):
        raise _refuse("time_zone", f"unknown time zone {name!r}") from None


def cron_fields(expression: str) -> str:
    """The five-field form of a cron string, or ``invalid_argument`` naming what is wrong.
    Exactly five fields: the cron library would read a sixth as leading *seconds*, Temporal
    as a trailing *year*, so a six-field string is refused rather than read either way."""
    text = " ".join(expression.split())
    text = MACROS.get(text.lower(), text)
    why = None if len(text.split()) == 5 else f"{len(text.split())} fields"
    if why is None:
        try:
            CronSim(text, datetime(2000, 1, 1))
        except CronSimError as exc:
            why = str(exc)
    if why is not None:
        raise _refuse("cron", f"{expression!r} is not a cron string ({why}); five fields "
                              "(minute hour day month weekday) or one of "
                              f"{' '.join(MACROS)}")
    fields = text.split()
    _server_reads_alike(expression, fields)
    if not fields[2].startswith("*") and not fields[4].startswith("*"):
        raise _refuse("cron", f"{expression!r} restricts both the day of month and the day of "
                              "week: cron runs on days where either matches, Temporal's "
                              "scheduler where both do, so a handover would change its times; "
                              "restrict one of them (or use two schedules)")
    return text


def _server_reads_alike(expression: str, fields: list[str]) -> None:
    """Refuse what the cron library reads and Temporal's server does not read alike: ``L``
    (last day or weekday) and ``#`` (nth weekday). The server refuses ``L`` at create and reads
    ``#`` as the start of a *comment*, so ``0 0 * * 1#2`` (the second Monday) would run every
    Monday there. A number above ``MAX_CRON_NUMBER`` is refused by the server (measured on a
    dev server, 1.32; tests/contract/test_server_accepts.py)."""
    for token in (t for f in fields for t in re.split(r"[,/-]", f)):
        if token.isdigit() and int(token) > MAX_CRON_NUMBER:
            raise _refuse("cron", f"{expression!r}: a number above {MAX_CRON_NUMBER} "
                                  "(Temporal's server refuses it)")
        if not (token == "*" or token.isdigit() or token.lower() in _NAMES):
            raise _refuse("cron", f"{expression!r}: {token!r} is not a number, * or a month "
                                  "or weekday name (L, W and # are not supported: Temporal's "
                                  "server refuses L and reads # as a comment)")


def check_spec(spec: ScheduleSpec) -> ScheduleSpec:
    """``spec`` checked again by today's rules (a spec recorded under older ones, before a
    handover): ``invalid_argument`` naming the field."""
    return make_spec(intervals=[(i.every, i.offset) for i in spec.intervals],
                     cron=list(spec.cron_expressions), start_at=spec.start_at,
                     end_at=spec.end_at, jitter=spec.jitter, time_zone=spec.time_zone)


@functools.lru_cache(maxsize=64)
def clock_changes(name: str) -> tuple[tuple[datetime, timedelta, timedelta], ...]:
    """Every change of ``name``'s UTC offset from 2000 to 2100: (the UTC instant, to the
    minute, offset before, offset after)."""
    tz, day, out = zone(name), datetime(2000, 1, 1, tzinfo=UTC), []
    before = day.astimezone(tz).utcoffset()
    while day.year < 2100:
        day += timedelta(days=1)
        offset = day.astimezone(tz).utcoffset()
        if offset != before:
            assert offset is not None and before is not None
            lo, hi = day - timedelta(days=1), day  # the change is in (lo, hi]
            while hi - lo > timedelta(minutes=1):
                mid = lo + (hi - lo) / 2
                lo, hi = (mid, hi) if mid.astimezone(tz).utcoffset() == before else (lo, mid)
            out.append((hi.replace(second=0, microsecond=0), before, offset))  # whole minutes
            before = offset
    return tuple(out)


def sub_hour_shift(name: str) -> date | None:
    """The first day since 2000 (until 2100) on which ``name`` moves its clock by other than
    whole hours (Lord Howe's 30-minute DST, Pyongyang 2015, ...), or None. The cron library
    steps through such a shift in whole hours and would drop or repeat times there."""
    return next((at.date() for at, before, after in clock_changes(name)
                 if (after - before).total_seconds() % 3600), None)


@functools.lru_cache(maxsize=64)
def dst_hours(name: str) -> frozenset[int]:
    """The local hours that a clock change of ``name`` skips or repeats, 2000 to 2100 (New
    York: 2, skipped in spring; 1, repeated in autumn)."""
    hours = set()
    for at, before, after in clock_changes(name):
        a, b = sorted((at + before, at + after))  # the wall-clock stretch skipped/repeated
        t = a.replace(minute=0, second=0, microsecond=0)
        while t < b:
            hours.add(t.hour)
            t += timedelta(hours=1)
    return frozenset(hours)


def fixed_hours(field: str) -> set[int]:
    """The hours a cron hour field names, or the empty set for a wildcard one (``*``,
    ``*/n``): cron runs a wildcard hour in whatever hours a day has, as Temporal does."""
    if field.startswith("*"):
        return set()
    hours: set[int] = set()
    for part in field.split(","):
        span, _, step = part.partition("/")
        first, _, last = span.partition("-")
        hours.update(range(int(first), int(last or (23 if step else first)) + 1,
                           int(step or 1)))
    return hours


def check_same_on_temporal(spec: ScheduleSpec) -> None:
    """Refuse (``invalid_argument`` naming ``cron``) a cron string whose fixed hours include
    one that the zone's clock changes skip or repeat: there this scheduler runs the time
    once (after a skipped hour, at its first instant), Temporal's never or twice, so the
    starts would change when the schedule moves between them."""
    if not spec.cron_expressions:
        return
    changed = dst_hours(spec.time_zone)
    for cron in spec.cron_expressions:
        both = sorted(fixed_hours(cron.split()[1]) & changed)
        if both:
            raise _refuse("cron", f"{cron!r} runs at hour {', '.join(map(str, both))} in "
                                  f"{spec.time_zone}, which its clock changes skip or "
                                  "repeat: this scheduler runs such a time once, Temporal's "
                                  "never or twice, so a handover would change its starts; use "
                                  "another hour, a wildcard hour or UTC")


def make_spec(*, intervals: Sequence[tuple[int, int]] = (), cron: str | Sequence[str] = (),
              start_at: datetime | None = None, end_at: datetime | None = None,
              jitter: int = 0, time_zone: str = "UTC") -> ScheduleSpec:
    """A checked spec: every refusal is ``invalid_argument`` naming the field. ``cron`` is one
    cron string or a sequence of them (a bare string is one expression, never its letters)."""
    if isinstance(cron, str):
        cron = (cron,)
    if len(intervals) + len(cron) > MAX_ENTRIES:
        raise _refuse("spec", f"at most {MAX_ENTRIES} intervals and cron strings")
    checked = tuple(IntervalSpec(every=_seconds("interval", every, 1),
                                 offset=_seconds("offset", offset, 0))
                    for every, offset in intervals)
    for i in checked:
        if i.offset >= i.every:
            raise _refuse("offset", f"{i.offset}s must be less than the interval ({i.every}s)")
    start, end = _aware("start", start_at), _aware("end", end_at)
    if start is not None and end is not None and end < start:
        raise _refuse("end", f"{end.isoformat()} is before the start {start.isoformat()}")
    zone(time_zone)
    shift = sub_hour_shift(time_zone) if cron else None
    if shift is not None:
        raise _refuse("time_zone", f"{time_zone} moves its clock by less than an hour (around "
                                   f"{shift}); cron strings there are not supported: use a "
                                   "zone without such shifts (UTC) or an interval")
    return ScheduleSpec(intervals=checked, cron_expressions=tuple(cron_fields(c) for c in cron),
                        start_at=start, end_at=end, jitter=_seconds("jitter", jitter, 0),
                        time_zone=time_zone)


# -- nominal times -----------------------------------------------------------------------------
def _interval_times(i: IntervalSpec, after: datetime) -> Iterator[datetime]:
    """Instants ``epoch + n*every + offset`` strictly after ``after``, in order."""
    seconds = int((after - EPOCH).total_seconds() // 1)  # whole seconds at or before ``after``
    n = (seconds - i.offset) // i.every + 1
    while n * i.every + i.offset <= LAST_SECOND:  # no time past MAX_TIME (nor an overflow)
        t = EPOCH + timedelta(seconds=n * i.every + i.offset)
        if t > after:
            yield t
        n += 1


def _cron_times(expression: str, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """Times strictly after ``after``. The cron library reads a start inside fall-back's
    repeated hour as its first pass and can return a time before the start: dropped here, or
    a tick resuming there would start that time a second time."""
    times = iter(CronSim(expression, after.astimezone(tz)))
    while True:
        try:
            t = next(times).astimezone(UTC)
        except (OverflowError, ValueError, StopIteration):  # past year 9999: no more times
            return
        if t > MAX_TIME:
            return
        if t > after:
            yield t


def times_after(spec: ScheduleSpec, after: datetime) -> Iterator[datetime]:
    """Every nominal time of ``spec`` strictly after ``after``, increasing, each once (times
    named by more than one entry are merged), within ``start_at`` and ``end_at``."""
    after = after.astimezone(UTC)
    if spec.start_at is not None and after < spec.start_at:
        after = spec.start_at - timedelta(seconds=1)  # the start itself is a nominal time
    tz = zone(spec.time_zone)
    streams = [_interval_times(i, after) for i in spec.intervals] + \
              [_cron_times(c, tz, after) for c in spec.cron_expressions]
    last = None
    for t in heapq.merge(*streams):
        if spec.end_at is not None and t > spec.end_at:
            return
        if t != last:
            last = t
            yield t


def times_between(spec: ScheduleSpec, after: datetime, until: datetime,
                  limit: int | None = None) -> list[datetime]:
    """The nominal times in ``(after, until]``, at most ``limit`` of them."""
    out: list[datetime] = []
    for t in times_after(spec, after):
        if t > until or (limit is not None and len(out) >= limit):
            break
        out.append(t)
    return out


def times_within(spec: ScheduleSpec, start: datetime, end: datetime) -> list[datetime]:
    """The nominal times in ``[start, end]`` (a backfill's range: both ends included)."""
    return [t for t in times_between(spec, start - timedelta(seconds=1), end) if t >= start]


def jitter_of(spec: ScheduleSpec, schedule_key: str, nominal: datetime) -> timedelta:
    """The deterministic delay of the action at ``nominal``: the same for every replay."""
    if spec.jitter <= 0:
        return timedelta(0)
    digest = hashlib.sha256(f"{schedule_key}|{nominal.isoformat()}".encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % spec.jitter)
