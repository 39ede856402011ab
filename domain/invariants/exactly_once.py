"""I14, exactly once across the handoff: the action starts of both sides of a schedule, taken
together, are what one scheduler that never migrated would have started.

``Owed`` is that scheduler, as a pure model written apart from the source's generator (so it
can judge it): from the spec, the first cursor and ``until``, it owes

- each spec time (origin ``auto``) in ``(first, until]`` outside the ``paused`` stretches
  (``(from, to]`` intervals), none older than the ``catchup_window`` at the instant it was
  processed (on time inside a ``live`` stretch, where a scheduler ran throughout, such as a
  Temporal Schedule after its create; else the first of ``ticks`` at or after it; else
  ``until``), and no more than ``remaining`` of them (the action limit: the first ones where
  every due time starts; only started actions count, so a time an overlap policy dropped
  leaves its place to a later one);
- each backfill's times in ``[start, end]`` under its own origin (``backfill-N``, N from
  ``first_backfill``), ignoring pause, limit and window, as Temporal's backfill does;
- each trigger at its instant (origin ``trigger``);
- each of ``also``: slots owed that the caller derived (the buffered starts a forward's
  handover carried in).

A program update changes the spec mid-life: ``updates`` are ``(at, spec)``, and from ``at`` on
(times after it) ticks follow that spec (None: no spec, nothing owed); before the first, the
``spec``. A backfill is ``(start, end)`` (named ``backfill-N`` in order, its times the
``spec``'s) or a ``Backfill`` naming its origin and the spec its times follow (the one in force
when it was processed: a backfill an update cut is two pieces under one name).

Starts are counted per origin, as both schedulers count them (I17): a time two backfills
cover is owed twice. ``check_exactly_once`` takes each side's starts, as (time, origin)
slots where a side knows them (the source's log, the handover's plan) or as bare times where
it does not (a server's listing of ``<prefix>-<nominal Z>`` workflows, all runs counted), and
names the times started more often than owed, owed and never started, and started though
never owed. Overlap policies are not modelled: a run the policy skipped or buffered out is
the caller's to leave out of ``owed`` (the source records each such skip with its reason).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Iterable, TypeVar, Union

from schedfence.domain.source.spec import ScheduleSpec, times_after, times_within

Slot = tuple[datetime, str]  # (nominal time, origin)
Start = Union[datetime, Slot]
Counted = TypeVar("Counted", datetime, Slot)  # what a verdict counts: slots, or times


@dataclass(frozen=True)
class Backfill:
    """A backfill's times in ``[start, end]`` of ``spec`` (None: the owed's ``spec``), under
    ``origin`` (None: ``backfill-N`` by its place)."""

    start: datetime
    end: datetime
    origin: str | None = None
    spec: ScheduleSpec | None = None


@dataclass(frozen=True)
class Verdict:
    twice: tuple[datetime, ...] = ()
    missing: tuple[datetime, ...] = ()
    unexpected: tuple[datetime, ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.twice or self.missing or self.unexpected)

    @property
    def first(self) -> tuple[str, datetime] | None:
        """The earliest time at fault and how: ``twice``, ``missing`` or ``unexpected``."""
        found = [(t, name) for name in ("twice", "missing", "unexpected")
                 for t in getattr(self, name)]
        return None if not found else min(found)[::-1]

    def describe(self) -> str:
        def few(ts: tuple[datetime, ...]) -> str:
            return ", ".join(t.isoformat() for t in ts[:5]) + (" ..." if len(ts) > 5 else "")
        return "; ".join(f"{name}: {few(ts)}" for name, ts in (
            ("started twice", self.twice), ("never started", self.missing),
            ("started but not owed", self.unexpected)) if ts) or "exactly once"


@dataclass(frozen=True)
class Owed:
    """What one scheduler that never migrated owes (see the module doc)."""

    spec: ScheduleSpec | None
    first: datetime
    until: datetime
    backfills: tuple[Union[tuple[datetime, datetime], Backfill], ...] = ()
    paused: tuple[tuple[datetime, datetime], ...] = field(default=())
    triggers: tuple[datetime, ...] = ()
    remaining: int | None = None
    catchup_window: timedelta | None = None
    ticks: tuple[datetime, ...] = ()
    first_backfill: int = 1
    live: tuple[tuple[datetime, datetime], ...] = ()
    updates: tuple[tuple[datetime, ScheduleSpec | None], ...] = ()
    also: tuple[Slot, ...] = ()

    def programs(self) -> list[tuple[datetime, datetime, ScheduleSpec]]:
        """The stretches ``(from, to]`` after ``first`` up to ``until`` and the spec each
        follows (the updates in order; a stretch without a spec owes nothing)."""
        edges = [(self.first, self.spec)] + sorted(
            ((max(at, self.first), spec) for at, spec in self.updates), key=lambda e: e[0])
        ends = [at for at, _ in edges[1:]] + [self.until]
        return [(a, b, spec) for (a, spec), b in zip(edges, ends) if spec is not None and a < b]

    def spec_times(self, limited: bool = True) -> list[datetime]:
        """The ``auto`` times owed, in order: with the limit, its first ``remaining`` (exact
        where every due time starts; an overlap policy that drops a due time leaves the limit
        to a later one, as both schedulers count only started actions)."""
        out: list[datetime] = []
        for t in self._unpaused_times():
            if limited and self.remaining is not None and len(out) >= self.remaining:
                break
            if self.catchup_window is not None and \
                    self._processed_at(t) - t > self.catchup_window:
                continue
            out.append(t)
        return out

    def _unpaused_times(self) -> Iterable[datetime]:
        """Each stretch's spec times outside the paused stretches, skipping a paused stretch
        whole (a long pause costs nothing to pass over)."""
        for a, b, spec in self.programs():
            times = times_after(spec, a)
            while True:
                t = next(times, None)
                if t is None or t > b:
                    break
                pause = next(((p, q) for p, q in self.paused if p < t <= q), None)
                if pause is None:
                    yield t
                else:
                    times = times_after(spec, max(pause[1], t))

    def _processed_at(self, t: datetime) -> datetime:
        if any(a < t <= b for a, b in self.live):
            return t
        return min((k for k in self.ticks if k >= t), default=self.until)

    def slots(self, limited: bool = True) -> Counter[Slot]:
        owed: Counter[Slot] = Counter((t, "auto") for t in self.spec_times(limited))
        for n, b in enumerate(self.backfills, start=self.first_backfill):
            if not isinstance(b, Backfill):
                b = Backfill(*b)
            spec = b.spec or self.spec
            if spec is not None:
                owed.update((t, b.origin or f"backfill-{n}")
                            for t in times_within(spec, b.start, b.end))
        owed.update((t, "trigger") for t in self.triggers)
        owed.update(self.also)
        return owed

    def times(self) -> set[datetime]:
        return {t for t, _ in self.slots()}


def check_exactly_once(owed: Owed, source: Iterable[Start],
                       destination: Iterable[Start]) -> Verdict:
    """The I14 verdict over both sides' starts (see the module doc): by slot where every
    start names its origin, else by time (each time owed as often as its slots). Under a
    limit, an ``auto`` start may be any owed time (overlap decides which), at most
    ``remaining`` of them; the later ones beyond it are named unexpected."""
    starts = [*source, *destination]
    allowed, exact = owed.slots(limited=False), owed.slots()
    if all(isinstance(s, tuple) for s in starts):
        got: Counter[Slot] = Counter(s for s in starts if isinstance(s, tuple))
        autos = sorted(t for t, origin in got.elements() if origin == "auto")
        over = autos[owed.remaining:] if owed.remaining is not None else []
        return _verdict(got, allowed, exact, over)
    by_time = Counter(s[0] if isinstance(s, tuple) else s for s in starts)
    return _verdict(by_time, Counter(t for t, _ in allowed.elements()),
                    Counter(t for t, _ in exact.elements()), [])


def _verdict(got: Counter[Counted], allowed: Counter[Counted], exact: Counter[Counted],
             over: list[datetime]) -> Verdict:
    """Counts of slots, or of times, against what may start and what must."""
    def at(key: Counted) -> datetime:
        return key[0] if isinstance(key, tuple) else key

    keys = set(got) | set(allowed)
    return Verdict(
        twice=tuple(sorted({at(k) for k in keys if got[k] > allowed[k] > 0})),
        missing=tuple(sorted({at(k) for k in keys if got[k] < exact[k]})),
        unexpected=tuple(sorted({at(k) for k in keys if got[k] and not allowed[k]} |
                                set(over))))
