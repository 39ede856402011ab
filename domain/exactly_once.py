"""I14, exactly once across the handoff: the action starts of both sides of a schedule, taken
together, are what one scheduler that never migrated would have started.

``check_exactly_once`` takes what the source started (its ``ActionStartIssued`` nominal times,
any origin), what the destination started (its own record: the simulator's, or the action
workflows a Temporal server lists, by their deterministic ``<prefix>-<nominal Z>`` ids) and
what one scheduler would have owed over the same period: every spec time after the schedule's
first cursor up to ``until``, and every time of each backfill's range. It reports the times
started twice (on one side or across both), the times owed and started nowhere, and the times
started that nobody owed. A schedule that was paused during the period owes the times of its
unpaused stretches only; ``paused`` lists those stretches as ``(from, to]`` intervals.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable

from .spec import ScheduleSpec, times_between, times_within


@dataclass(frozen=True)
class Verdict:
    twice: tuple[datetime, ...] = ()
    missing: tuple[datetime, ...] = ()
    unexpected: tuple[datetime, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.twice or self.missing or self.unexpected)

    def describe(self) -> str:
        def few(ts: tuple[datetime, ...]) -> str:
            return ", ".join(t.isoformat() for t in ts[:5]) + (" ..." if len(ts) > 5 else "")
        return "; ".join(f"{name}: {few(ts)}" for name, ts in (
            ("started twice", self.twice), ("never started", self.missing),
            ("started but not owed", self.unexpected)) if ts) or "exactly once"


@dataclass(frozen=True)
class Owed:
    """What one scheduler that never migrated owes: the spec's times in ``(first, until]``
    outside ``paused`` stretches, and each backfill's times in ``[start, end]``."""

    spec: ScheduleSpec
    first: datetime
    until: datetime
    backfills: tuple[tuple[datetime, datetime], ...] = ()
    paused: tuple[tuple[datetime, datetime], ...] = field(default=())

    def times(self) -> set[datetime]:
        owed = {t for t in times_between(self.spec, self.first, self.until)
                if not any(a < t <= b for a, b in self.paused)}
        for start, end in self.backfills:
            owed.update(times_within(self.spec, start, end))
        return owed


def check_exactly_once(owed: Owed, source: Iterable[datetime],
                       destination: Iterable[datetime]) -> Verdict:
    """The I14 verdict over both sides' starts (see the module doc)."""
    counts = Counter([*source, *destination])
    expected = owed.times()
    return Verdict(
        twice=tuple(sorted(t for t, n in counts.items() if n > 1)),
        missing=tuple(sorted(expected - set(counts))),
        unexpected=tuple(sorted(set(counts) - expected)))

