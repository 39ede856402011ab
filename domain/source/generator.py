"""The source scheduler's generator: which nominal times became due, as a pure decision.

``generate(spec, cursor, now, ...)`` looks at the nominal times in ``(cursor, now]`` (the cursor
is the last processed time, exclusive) and says, for each, start it or skip it with a reason:

- ``paused``: nothing is started and nothing recorded; the cursor moves to ``now`` once a
  time has passed (as in Temporal, times passed while paused are not caught up on unpause);
- ``limit``: the schedule's remaining actions are used up;
- ``catchup_window``: the time is older than ``now - catchup_window`` (the scheduler was down
  or late for longer than the schedule tolerates).

A tick in which no time passed leaves the cursor where it was (``idle``), so a pass with
nothing due writes nothing: where the cursor stands between two nominal times changes no
later decision. ``advance_idle`` moves it to ``now`` anyway: a pause's or an update's tick,
which is written in any case and after which the new program or pause applies from ``now``.

Ticking at ``t1`` then ``t2`` processes exactly the times one tick at ``t2`` processes, each
once, in order (tests/domain/source/test_generator.py checks it over arbitrary splits).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from schedfence.domain.source.spec import ScheduleSpec, times_after

SkipReason = Literal["limit", "catchup_window"]
MAX_PER_TICK = 1000  # times processed per call; the cursor says where the next call resumes


@dataclass(frozen=True)
class Generated:
    starts: tuple[datetime, ...] = ()
    skipped: tuple[tuple[datetime, SkipReason], ...] = ()
    cursor: datetime | None = None  # the new exclusive cursor

    @property
    def processed(self) -> list[datetime]:
        """Every nominal time this tick decided on, in order."""
        return sorted([*self.starts, *(t for t, _ in self.skipped)])


def generate(spec: ScheduleSpec, cursor: datetime, now: datetime, *, paused: bool = False,
             remaining: int | None = None, catchup_window: timedelta = timedelta(days=365),
             max_times: int = MAX_PER_TICK, advance_idle: bool = False) -> Generated:
    """The due nominal times in ``(cursor, now]``: started, or skipped with a reason."""
    if now <= cursor:
        return Generated(cursor=cursor)
    if paused:
        first = next(times_after(spec, cursor), None)
        passed = first is not None and first <= now
        return Generated(cursor=now if passed or advance_idle else cursor)
    starts: list[datetime] = []
    skipped: list[tuple[datetime, SkipReason]] = []
    last = cursor
    for t in times_after(spec, cursor):
        if t > now:
            break
        if len(starts) + len(skipped) >= max_times:
            return Generated(tuple(starts), tuple(skipped), last)  # the rest next tick
        if remaining is not None and len(starts) >= remaining:
            skipped.append((t, "limit"))
        elif now - t > catchup_window:
            skipped.append((t, "catchup_window"))
        else:
            starts.append(t)
        last = t
    if not starts and not skipped and not advance_idle:
        return Generated(cursor=cursor)  # idle: nothing to record
    return Generated(tuple(starts), tuple(skipped), now)
