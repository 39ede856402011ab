"""The source scheduler's loop: tick every schedule with a program, start what was issued, and
watch running actions close (the decisions are domain/runs.py's).

Each step loads the schedule, asks its decision, and saves; a save that loses a race (a
rollback's fence, another scheduler) reloads and decides again, so a tick never lands after a
fence (I1). A start is recorded before the runner is called and carries a request id that is a
function of (schedule, nominal time, origin): a crash or a lost answer leaves it issued, and
the next pass asks again with the same id, which the runner deduplicates (I17).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from schedfence.domain import runs
from schedfence.domain.ports import (Destination, DestinationError, DestinationNotFound,
                                     DestinationUnavailable)
from schedfence.domain.schedule import Schedule, ScheduleKey

from schedfence.infra.store.eventstore import FenceApplication

Clock = Callable[[], datetime]
RACES = 8  # reloads after a lost race before a step gives up until the next pass


@dataclass
class SchedulerReport:
    schedules: int = 0
    ticks: int = 0
    started: int = 0
    failed: int = 0
    closed: int = 0
    unavailable: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Scheduler:
    def __init__(self, app: FenceApplication, runner: Destination,
                 clock: Clock = utc_now) -> None:
        self.app, self.runner, self.clock = app, runner, clock

    def schedule_ids(self) -> list[UUID]:
        """Every key's current incarnation (the ones without a program decide nothing)."""
        ids = []
        for note in self.app.notifications((ScheduleKey.Created.TOPIC,)):
            current = self.app.repository.get(note.originator_id).state.current_schedule_id
            if current is not None:
                ids.append(current)
        return ids

    def run_once(self, now: datetime | None = None) -> SchedulerReport:
        report = SchedulerReport()
        for sid in self.schedule_ids():
            source = self.app.repository.get(sid)
            if source.state.spec is None:
                continue
            report.schedules += 1
            self._watch(sid, report)  # first: a closed run frees its overlap slot this pass
            self._step(sid, lambda st: runs.tick(st, now or self.clock()), report, "ticks")
            self._start_issued(sid, report)
        return report

    def _step(self, sid: UUID, decide: Callable[[Any], Any], report: SchedulerReport,
              counter: str) -> Schedule | None:
        """Load, decide, save; after a lost race, reload and decide again."""
        for _ in range(RACES):
            source = self.app.repository.get(sid)
            facts = decide(source.state)
            if not facts:
                return source
            source.record(facts)
            try:
                self.app.save(source)
            except IntegrityError:
                continue
            setattr(report, counter, getattr(report, counter) + 1)
            return source
        report.errors.append(f"schedule {sid}: kept losing races; next pass")
        return None

    def _start_issued(self, sid: UUID, report: SchedulerReport) -> None:
        source = self.app.repository.get(sid)
        for issued in list(source.state.issued):
            request = runs.start_request(source.state, issued)
            try:
                answer: Any = self.runner.start_workflow(request)
            except DestinationError as exc:
                answer = exc
            if isinstance(answer, DestinationUnavailable):
                report.unavailable += 1  # stays issued: asked again, same request id
                continue
            counter = "started" if not isinstance(answer, DestinationError) or \
                getattr(answer, "start_request_id", None) == issued["request_id"] else "failed"
            self._step(sid, lambda st: runs.start_answered(st, issued, answer), report, counter)

    def _watch(self, sid: UUID, report: SchedulerReport) -> None:
        source = self.app.repository.get(sid)
        for workflow_id in list(source.state.running):
            try:
                status = self.runner.describe(source.state.namespace, workflow_id).status
            except DestinationNotFound:
                status = "gone"
            except DestinationUnavailable:
                report.unavailable += 1
                continue
            self._step(sid, lambda st: runs.run_closed(st, workflow_id, status), report,
                       "closed")
