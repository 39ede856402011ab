"""The state machine's use of the one oracle (domain/invariants/exactly_once.py), after every step.

For each incarnation of the running schedule: the source's starts (its ``ActionStartIssued``
slots) and the starts of every destination that took its handover
(``domain.handover.destination_slots``), together, against what one never-migrated scheduler
owes: its spec's times after its first cursor outside the stretches a user paused it, its
backfills' ranges under their names, its triggers. Overlap policies, faults and
pause-on-failure can only leave owed times unstarted, so the machine asserts that nothing is
started twice and nothing is started that was never owed (an upper bound, exact in what it
forbids); the missing side is asserted where it is exact (``a_handed_over_time_starts_once``).
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Iterable

from schedfence.domain.source.action import parse_nominal
from schedfence.domain.invariants.exactly_once import Backfill, Owed, Slot, Verdict, check_exactly_once
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.runs import (ActionStartIssued, BackfillRequested, ProgramUpdated,
                                    Triggered)
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.spec import ScheduleSpec

class PauseLog:
    """The stretches a user paused each incarnation, on the machine's clock."""

    def __init__(self) -> None:
        self.stretches: dict[int, list[tuple[datetime, datetime | None]]] = {}

    def set(self, incarnation: int, paused: bool, at: datetime) -> None:
        runs = self.stretches.setdefault(incarnation, [])
        is_open = bool(runs) and runs[-1][1] is None
        if paused and not is_open:
            runs.append((at, None))
        elif not paused and is_open:
            runs[-1] = (runs[-1][0], at)

    def of(self, incarnation: int, until: datetime) -> tuple[tuple[datetime, datetime], ...]:
        return tuple((a, until + timedelta(days=1) if b is None else b)
                     for a, b in self.stretches.get(incarnation, []))


class UpdateLog:
    """The program updates that took effect on each incarnation: (instant, new spec), on the
    machine's clock. From each instant on, a never-migrated schedule's ticks follow the new
    spec."""

    def __init__(self) -> None:
        self.updates: dict[int, list[tuple[datetime, ScheduleSpec]]] = {}

    def add(self, incarnation: int, at: datetime, spec: ScheduleSpec) -> None:
        self.updates.setdefault(incarnation, []).append((at, spec))

    def of(self, incarnation: int) -> tuple[tuple[datetime, ScheduleSpec], ...]:
        return tuple(self.updates.get(incarnation, []))


def _backfills(events: list[Any], spec: ScheduleSpec) -> tuple[Backfill, ...]:
    """Each backfill under the spec in force when it was requested (the last program update
    before it, in the aggregate's order)."""
    out = []
    for e in events:
        if isinstance(e, ProgramUpdated) and e.spec:
            spec = ScheduleSpec.model_validate(e.spec)
        elif isinstance(e, BackfillRequested):
            out.append(Backfill(parse_nominal(e.start), parse_nominal(e.end), e.backfill_id,
                                spec))
    return tuple(out)


def _owed(events: list[Any], paused: tuple[tuple[datetime, datetime], ...],
          until: datetime, ticks: tuple[datetime, ...], live: tuple[datetime, ...],
          updates: tuple[tuple[datetime, ScheduleSpec], ...] = ()) -> Owed | None:
    first = events[0]
    remaining, window = None, None
    if isinstance(first, Schedule.Created):
        if not first.spec or not first.cursor:
            return None
        spec, cursor, remaining = first.spec, first.cursor, first.remaining_actions
        window = timedelta(seconds=(first.policies or {}).get("catchup_window", 365 * 86400))
    elif isinstance(first, Schedule.CreatedByMigration):  # the Temporal side's: looser
        spec, cursor = first.handover.get("spec"), first.handover.get("cursor")
        if not spec or not cursor:
            return None
    else:
        return None
    start = ScheduleSpec.model_validate(spec)
    return Owed(start, parse_nominal(cursor), until, backfills=_backfills(events, start),
                paused=paused,
                triggers=tuple(parse_nominal(e.nominal) for e in events
                               if isinstance(e, Triggered)),
                remaining=remaining, catchup_window=window, ticks=ticks,
                live=tuple((t, until) for t in live), updates=updates)


def verdict(events: list[Any], pauses: PauseLog, incarnation: int,
            destination: Iterable[Slot], until: datetime,
            ticks: tuple[datetime, ...] = (),
            live: tuple[datetime, ...] = (),
            updates: UpdateLog | None = None) -> Verdict | None:
    """The oracle's verdict on one incarnation (None: it runs nothing); ``ticks`` are the
    instants the source processed times at (passes, pauses, updates), ``live`` the creates
    of destinations, which process their times on time from then on; ``updates`` the
    program updates the machine made."""
    owed = _owed(events, pauses.of(incarnation, until), until, ticks, live,
                 updates.of(incarnation) if updates else ())
    if owed is None:
        return None
    source = [(parse_nominal(e.nominal), e.origin) for e in events
              if isinstance(e, ActionStartIssued)]
    return check_exactly_once(owed, source, list(destination))


def deleted_before_settle(migration_events: list[Any]) -> datetime | None:
    """When the destination's schedule was deleted, if its settle found it deleted (and
    started the owed times before that instant as plain workflows); None otherwise."""
    return next((datetime.fromisoformat(e.deleted_at) for e in migration_events
                 if isinstance(e, Migration.BoundarySettled) and e.deleted_at), None)
