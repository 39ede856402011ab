"""The application's schedule commands: create, update, trigger, backfill, run the scheduler,
and the schedule views. Each loads the source, asks a domain decision, and saves; a refusal
(``migration_pending`` while fenced, ``invalid_argument``) writes nothing.

A part of ``MigrationService`` (infra/application/service.py), built from what it uses: the
store, its aggregates, the destination and the active-store check.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable
from uuid import UUID

from schedfence.domain.source import manual

from schedfence.domain.source import scheduling
from schedfence.domain.source.action import SchedulePolicies, StartWorkflowAction, nominal_text
from schedfence.domain.source.invoker import Overlap
from schedfence.domain.errors import AlreadyExists, InvalidArgument, MigrationPending
from schedfence.domain.ids import validate_destination_key
from schedfence.domain.model import Facts
from schedfence.domain.ports import Destination
from schedfence.domain.source.program import Program, program_of, upcoming
from schedfence.domain.source.incarnation import check_creatable
from schedfence.domain.source.key import ScheduleKey, check_not_forwarding
from schedfence.domain.source.schedule import Schedule, signed
from schedfence.domain.source.state import ScheduleState, check_mutable
from schedfence.domain.source.spec import ScheduleSpec
from schedfence.domain.text import validate_actor, validate_notes
from schedfence.projections.records import EPOCH, MICROSECOND
from schedfence.projections.schedule_oncall import FailingScheduleItem, failing_item

from schedfence.infra.adapters.store.aggregates import Aggregates
from schedfence.infra.application.actor import default_actor
from schedfence.infra.pacing import retry_call
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.infra.application.guards import destination_check
from schedfence.infra.application.views import ScheduleView
from schedfence.infra.engines.scheduler import (Scheduler, SchedulerReport, SeenSchedules,
                                               utc_now)
from schedfence.domain.ports import CrashHook
from schedfence.infra.engines.unit_of_work import UnitOfWork

if TYPE_CHECKING:
    from schedfence.infra.engines.schedule_due import ScheduleDue

KEEP = manual.KEEP


class ScheduleCommands:
    def __init__(self, app: FenceApplication, load: Aggregates, unit: UnitOfWork,
                 destination: Destination, require_active: Callable[[], None],
                 due: Callable[[], ScheduleDue]) -> None:
        self.app, self.load, self.unit, self.destination = app, load, unit, destination
        self.require_active, self.due = require_active, due
        self.seen = SeenSchedules()  # the scheduler's, between its passes

    def create_schedule(self, namespace: str, schedule_id: str, paused: bool = False,
                        notes: str = "", *, spec: ScheduleSpec | None = None,
                        action: StartWorkflowAction | None = None,
                        policies: SchedulePolicies | None = None,
                        limit: int | None = None,
                        now: datetime | None = None, actor: str = "") -> ScheduleView:
        """A new schedule (or incarnation). ``spec`` (domain.spec.make_spec), ``action`` and
        ``policies`` (domain.action.make_action / make_policies) and ``limit`` (remaining
        actions) make it run, on times after ``now`` (default: the clock); without them it
        is a pause-and-notes schedule, as before."""
        validate_destination_key(namespace, schedule_id)
        validate_notes(notes)
        check_paused(paused)
        program = Program(spec, action, policies, limit).check()
        who = self._actor(actor)
        self.require_active()

        def create() -> ScheduleView:
            key = self.load.key(namespace, schedule_id) or ScheduleKey.create(namespace, schedule_id)
            current = key.state.current_schedule_id
            check_not_forwarding(key.state)
            previous = self.app.repository.get(current).state if current else None
            check_creatable(namespace, schedule_id, previous)
            check = destination_check(self.destination, namespace, schedule_id,
                                      "create check")
            n = key.start_incarnation()
            schedule = Schedule.create(namespace, schedule_id, n, paused, notes, check,
                                       self.load.epoch(), program, now or utc_now(), previous,
                                       actor=who)
            self.unit.append(key, schedule)
            return ScheduleView.of(schedule.state, schedule.version)

        return retry_call(create, **self.unit.on_conflict(AlreadyExists(
            f"schedule {namespace}/{schedule_id} is being created concurrently")))

    def update_schedule(self, namespace: str, schedule_id: str, *, paused: bool | None = None,
                        notes: str | None = None, delete: bool = False,
                        spec: Any = KEEP, action: Any = KEEP, policies: Any = KEEP,
                        limit: Any = KEEP, now: datetime | None = None,
                        conflict_token: int | None = None, actor: str = "") -> ScheduleView:
        """Ordinary source mutations, in one save; all refused with ``migration_pending`` while
        fenced. ``spec``, ``action``, ``policies`` and ``limit`` replace that part of the
        program (``KEEP``, the default: unchanged; None: removed). With ``conflict_token``
        (a view's), refused with ``failed_precondition`` if the schedule changed since."""
        if notes is not None:
            validate_notes(notes)
        if paused is not None:
            check_paused(paused)
        changes = {"spec": spec, "action": action, "policies": policies,
                   "remaining_actions": limit}
        at, who = now or utc_now(), self._actor(actor)

        def update(schedule: Schedule) -> None:
            manual.check_conflict_token(schedule.state, schedule.version, conflict_token)
            if any(v is not KEEP for v in changes.values()):
                new = manual.merged(program_of(schedule.state), **changes)
                schedule.record(signed(manual.update_program(schedule.state, new, at), who))
            if paused is not None:
                schedule.set_paused(paused, at, who)
            if notes is not None:
                schedule.set_notes(notes, who)
            if delete:
                check_mutable(schedule.state)  # closed or fenced: those answers first
                scheduling.check_phase(schedule.state)  # no start in flight is orphaned (I1)
                schedule.delete(who)

        return self._change(namespace, schedule_id, update)

    def trigger_schedule(self, namespace: str, schedule_id: str, *, overlap: Overlap | None = None,
                         now: datetime | None = None, actor: str = "") -> ScheduleView:
        """One action now (whole seconds), under ``overlap`` (default: the schedule's); the
        scheduler starts it on its next pass. Ignores pause and the limit, as Temporal's."""
        at, who = now or utc_now(), self._actor(actor)
        return self._decide(namespace, schedule_id,
                            lambda st: signed(manual.trigger(st, at, overlap), who))

    def backfill_schedule(self, namespace: str, schedule_id: str, start: datetime | None,
                          end: datetime | None, *, overlap: Overlap | None = None,
                          now: datetime | None = None, actor: str = "") -> ScheduleView:
        """Every nominal time of the spec in ``[start, end]`` (both past), under ``overlap``;
        the scheduler works through it from a durable cursor (domain/source/manual.py)."""
        at, who = now or utc_now(), self._actor(actor)
        return self._decide(namespace, schedule_id,
                            lambda st: signed(manual.backfill(st, start, end, at, overlap), who))

    def _actor(self, actor: str) -> str:
        """Who asks, as every command records it: ``actor`` (checked), else the default
        (``SCHEDFENCE_ACTOR``, or ``user@host``: application/actor.py)."""
        if actor:
            return validate_actor(actor)
        return default_actor()

    def _decide(self, namespace: str, schedule_id: str,
                decide: Callable[[ScheduleState], Facts]) -> ScheduleView:
        return self._change(namespace, schedule_id, lambda s: s.record(decide(s.state)))

    def _change(self, namespace: str, schedule_id: str,
                change: Callable[[Schedule], None]) -> ScheduleView:
        self.require_active()

        def once() -> ScheduleView:
            # After a conflict (e.g. a rollback fenced it meanwhile) the next decision refuses.
            schedule = self.load.source(namespace, schedule_id)
            change(schedule)
            self.unit.append(schedule)
            return ScheduleView.of(schedule.state, schedule.version)

        return retry_call(once, **self.unit.on_conflict(MigrationPending(
            "the schedule kept changing concurrently; retry later")))

    def run_scheduler(self, now: datetime | None = None,
                      crash_hook: CrashHook | None = None) -> SchedulerReport:
        """One pass of the source scheduler (infra/engines/scheduler.py): every schedule the
        due index says is due at ``now`` (default: the clock) is ticked, what it issued is
        started through the destination, and its closed actions are recorded (a schedule
        with actions running is looked at every ``WATCH_EVERY``, 1 s, or once a 10 s window,
        ``WATCH_LAZILY``, where no close can change its decisions). The leases are this service's worker
        id's. Nothing happens on a fenced schedule (I1)."""
        self.require_active()
        with self.seen.borrowed() as seen:  # one pass at a time holds what passes saw
            return Scheduler(self.load, self.destination, self.due(), crash_hook=crash_hook,
                             holder=self.unit.worker_id, seen=seen).run_once(now)

    def schedules_due(self, now: datetime | None = None) -> int:
        """Schedules the due index says are due at ``now`` (default: the clock)."""
        return self.due().backlog(now or utc_now())

    def failing_schedules(self, limit: int = 100) -> list[FailingScheduleItem]:
        """The schedules whose scheduler step keeps failing (infra/engines/step_failures.py),
        most failures first, each with its last error (``oncall``, the metrics)."""
        def at(us: int | None) -> str | None:
            return None if us is None else nominal_text(EPOCH + us * MICROSECOND)
        items = []
        for row in self.due().failing(limit):
            state: ScheduleState = self.app.repository.get(UUID(row.aggregate_id)).state
            items.append(failing_item(state.namespace, state.schedule_id, row.failures,
                                      row.error, at(row.failed_us), at(row.due_us)))
        return items

    # -- views ------------------------------------------------------------------------------
    def schedule(self, namespace: str, schedule_id: str) -> ScheduleView:
        source = self.load.source(namespace, schedule_id)
        return ScheduleView.of(source.state, source.version)

    def upcoming(self, namespace: str, schedule_id: str, count: int = 5,
                 now: datetime | None = None) -> list[datetime]:
        """The schedule's next ``count`` nominal times (aware, UTC); none without a spec."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
            raise InvalidArgument("count must be from 1 to 1000")
        state = self.load.source(namespace, schedule_id).state
        return [t.astimezone(timezone.utc) for t in upcoming(state, now or utc_now(), count)]

    def list_schedules(self) -> list[ScheduleView]:
        sources: list[Schedule] = [self.app.repository.get(sid)
                                   for sid in self.load.current_schedule_ids()]
        return [ScheduleView.of(s.state, s.version) for s in sources]


def check_paused(paused: object) -> None:
    if not isinstance(paused, bool):
        raise InvalidArgument("paused must be true or false")
