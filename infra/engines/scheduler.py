"""The source scheduler's loop: tick every schedule with a program, start what was issued, and
watch running actions close or stop them (the decisions are domain/source/scheduling.py's).

Each step loads the schedule, asks its decision, and saves; a save that loses a race (a
rollback's fence, another scheduler) reloads and decides again, so a tick never lands after a
fence (I1). A start is recorded before the runner is called and carries a request id that is a
function of (schedule, nominal time, origin): a crash or a lost answer leaves it issued, and
a later pass (after a backoff) asks again with the same id, which the runner deduplicates
(I17). Overlapping runs the policy asked to stop are asked again at each look until seen closed.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable
from uuid import UUID, uuid4

from eventsourcing.persistence import IntegrityError

from schedfence.domain.source import runs

from schedfence.domain.source import scheduling
from schedfence.domain.ports import (ActionRunner, Destination, DestinationError,
                                     DestinationNotFound, DestinationUnavailable, RunWatcher,
                                     StartBatcher)
from schedfence.domain.model import Facts
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.text import error_line
from schedfence.projections.records import to_us

from schedfence.infra.adapters.observability.logs import get_logger
from schedfence.infra.adapters.store.aggregates import Aggregates
from schedfence.infra.adapters.store.bulk import load_many
from schedfence.domain.ports import CrashHook
from schedfence.infra.engines.seen_schedules import SeenSchedules
from schedfence.infra.engines.step_failures import backoff_seconds, step_in_parts
from schedfence.infra.engines.unit_of_work import UnitOfWork

if TYPE_CHECKING:  # the index imports SQLAlchemy: only a pass needs it, not every command
    from schedfence.infra.engines.schedule_due import ScheduleDue

Clock = Callable[[], datetime]
# CrashHook: called at each boundary of an action start (tests raise there to simulate a crash):
# "before_tick_save", "after_tick_save" (issued, not yet called), "after_start_call"
# (answered, answer not yet saved).
RACES = 8  # reloads after a lost race before a step gives up until the next pass
LOG = get_logger("scheduler")
BATCH = 200  # schedules leased and stepped at a time
STARTS_IN_FLIGHT = 16  # action starts sent at once
# A pass that did something: any of these counts, or an error.
BUSY = ("ticks", "started", "failed", "retrying", "closed", "stops", "errors")
# The shortest pause between passes of ``schedfence scheduler``: due times closer together
# than this share a pass (and its batches) instead of each waking its own.
MIN_PAUSE = 0.05


@dataclass
class SchedulerReport:
    schedules: int = 0
    ticks: int = 0
    started: int = 0
    failed: int = 0
    retrying: int = 0
    closed: int = 0
    stops: int = 0
    unavailable: int = 0
    step_failures: int = 0  # schedules whose step failed alone: given back and put off
    errors: list[str] = field(default_factory=list)
    next_due: datetime | None = None  # the index's earliest due time after the pass's instant

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self), next_due=self.next_due and self.next_due.isoformat())

    @property
    def busy(self) -> bool:
        return any(getattr(self, name) for name in BUSY)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Scheduler:
    """One scheduler's passes over the schedules ``due`` says are due (infra/engines/
    schedule_due.py): leased in batches of ``batch``, each loaded, stepped and its next due
    time written back. A schedule with actions running is due again ``Due.every`` after the
    look that last watched them at the latest (``scheduling.WATCH_EVERY``, or ``WATCH_LAZILY``
    where no close can change its decisions), which looks for their close."""

    def __init__(self, load: Aggregates, runner: Destination, due: ScheduleDue,
                 clock: Clock = utc_now, crash_hook: CrashHook | None = None,
                 holder: str = "", batch: int = BATCH, seen: SeenSchedules | None = None) -> None:
        self.load, self.app, self.runner, self.clock = load, load.app, runner, clock
        self.due, self.batch = due, batch
        self.seen = seen if seen is not None else SeenSchedules()
        self.holder = holder or f"scheduler-{uuid4()}"
        self.unit = UnitOfWork.of(self.app, crash_hook=crash_hook)
        self.crash = self._crash_point
        self._crashed: BaseException | None = None
        self._stepped = self._attempted = False  # this pass: a part stepped; a batch taken

    def run_once(self, now: datetime | None = None) -> SchedulerReport:
        """Every schedule due at ``now``, a leased batch at a time, until none is left. A batch
        whose step fails is stepped in parts, and a schedule that fails alone is given back
        and put off (step_failures.py): a failure never keeps a lease to the next pass."""
        report = SchedulerReport()
        at = now or self.clock()
        self.due.sweep()
        seen: set[str] = set()
        self._stepped = self._attempted = False
        while True:
            leased = self.due.take(at, self.holder, self.batch)
            taken = [aid for aid in leased if aid not in seen]
            self.due.release([aid for aid in leased if aid in seen], self.holder)
            if not taken:  # what is left is what this pass watched: the next pass's
                report.next_due = self.due.next_after(at)
                if self._attempted:
                    self.seen.healthy = self._stepped
                return report
            seen.update(taken)
            self._attempted = True
            self._step_batch(taken, at, report)

    def _step_batch(self, ids: list[str], at: datetime, report: SchedulerReport) -> None:
        """The leased batch ``ids`` stepped, in parts where it fails (``step_in_parts``). If
        this itself fails (the store lost), what is still leased is given back, as far as the
        store lets it; a crash (the crash hook: the process dies) gives back nothing."""
        left = set(ids)

        def attempt(part: list[str]) -> Exception | None:
            error = self._attempt(part, at, report)
            if error is None:
                left.difference_update(part)
            return error

        def failed(aid: str, error: Exception) -> None:
            self._failed(aid, at, error, report)
            left.discard(aid)
        try:
            step_in_parts(ids, attempt, failed)
        except BaseException as exc:
            self.seen.clear()  # a schedule in hand may hold facts never saved
            if exc is not self._crashed and left:
                with suppress(Exception):
                    self.due.release(sorted(left), self.holder)
            raise

    def _attempt(self, ids: list[str], at: datetime, report: SchedulerReport) -> Exception | None:
        """One step of the schedules ``ids`` (``_batch``) and their next due times settled;
        the error it raised instead (their copies forgotten), unless a crash point raised it."""
        counted = report.schedules  # a part stepped again is counted once, where it succeeds
        try:
            sources = self._batch(ids, at, report)
            decided = [(str(source.id), source.version, _to_us(scheduling.due(
                source.state).next_look(at, self.seen.watched(source.id))))
                for source in sources]
        except Exception as exc:  # noqa: BLE001 - the batch is stepped again in parts
            if exc is self._crashed:
                raise
            self.seen.forget(ids)
            report.schedules = counted
            return exc
        self.seen.keep(sources)
        self.due.settle(decided, self.holder)
        self._stepped = True
        return None

    def _failed(self, aid: str, at: datetime, error: Exception, report: SchedulerReport) -> None:
        """The schedule ``aid`` failed alone: given back, and put off (step_failures.py)."""
        blamed = self._stepped or self.seen.healthy
        stored = self.app.recorder.select_events(UUID(aid), desc=True, limit=1)
        failures = self.due.fail(aid, self.holder, stored[0].originator_version if stored
                                 else 0, at, error_line(error),
                                 partial(backoff_seconds, blamed=blamed))
        report.step_failures += 1
        report.errors.append(f"schedule {aid}: its step failed"
                             f"{f' ({failures} in a row)' if failures else ''}: "
                             f"{error_line(error)}")

    def _crash_point(self, point: str) -> None:
        """A crash point; what its hook raises is the process dying, never stepped again."""
        try:
            self.unit.crash(point)
        except BaseException as exc:
            self._crashed = exc
            raise

    def _batch(self, ids: list[str], at: datetime, report: SchedulerReport) -> list[Schedule]:
        """A batch of due schedules: their closed runs recorded, then one tick each at ``at``
        (saved in one append), then every start they issued sent together and the answers
        saved in one append; the schedules as they then stand."""
        uuids = [UUID(aid) for aid in ids]
        loaded = load_many(self.app, uuids, self.seen.known(uuids))
        sources: list[Schedule] = [loaded[i] for i in uuids]
        active = [i for i, source in enumerate(sources) if scheduling.scheduled(source.state)]
        report.schedules += len(active)
        # A closed run first (it frees its slot), then the tick: both in the tick's append.
        watching = {i for i in active if scheduling.watch_now(
            sources[i].state, at, self.seen.watched(sources[i].id))}
        steps = self._watch_all(sources, sorted(watching), at, report)
        for i in active:
            steps.setdefault(i, []).append(
                partial(scheduling.tick, now=at, watched=i in watching))
        self.crash("before_tick_save")
        ticked = self._step_all(sources, steps, report)
        report.closed += sum(f.event is runs.ActionClosed for fs in ticked.values() for f in fs)
        report.ticks += sum(any(f.event is not runs.ActionClosed for f in fs)
                            for fs in ticked.values())
        self.crash("after_tick_save")
        calls = [(i, issued) for i in active
                 for issued in scheduling.issued_due(sources[i].state, at)]
        if calls:
            answers = self._send([scheduling.start_request(sources[i].state, issued)
                                  for i, issued in calls])
            self.crash("after_start_call")
            decisions: dict[int, list[Callable[[Any], Facts]]] = {}
            for (i, issued), answer in zip(calls, answers):
                decisions.setdefault(i, []).append(partial(
                    scheduling.start_answered, issued=issued, answer=answer, now=at))
            saved = [f for facts in self._step_all(sources, decisions, report).values()
                     for f in facts]
            report.started += sum(f.event is runs.ActionStarted for f in saved)
            report.failed += sum(f.event is runs.ActionStartFailed for f in saved)
            report.retrying += sum(f.event is runs.ActionStartRetrying for f in saved)
        return sources

    def _send(self, requests: list[Any]) -> list[Any]:
        """Each start's answer (a refusal or an outage as its error): in one call where the
        runner takes a batch (``StartBatcher``), else the starts in flight together (up to
        ``STARTS_IN_FLIGHT`` at once)."""
        def send(request: Any) -> Any:
            try:
                return self.runner.start_workflow(request)
            except DestinationError as exc:
                return exc
        if isinstance(self.runner, StartBatcher):  # all in one call (the simulator)
            try:
                return self.runner.start_workflows(requests)
            except DestinationError as exc:  # no start's outcome known: each asked again
                return [exc] * len(requests)
        if len(requests) == 1:
            return [send(requests[0])]
        with ThreadPoolExecutor(min(STARTS_IN_FLIGHT, len(requests))) as pool:
            return list(pool.map(send, requests))

    def _step_all(self, sources: list[Schedule], decisions: dict[int, list[Callable[[Any], Facts]]],
                  report: SchedulerReport) -> dict[int, Facts]:
        """Each decision in turn on its schedule (``sources[i]``), every schedule's facts in
        one append; after a lost race, each schedule reloaded and stepped alone. The facts
        saved, by schedule."""
        recorded: dict[int, Facts] = {}
        for i, decides in decisions.items():
            for decide in decides:
                facts = decide(sources[i].state)
                if facts:
                    sources[i].record(facts)
                    recorded.setdefault(i, []).extend(facts)
        if not recorded:
            return {}
        try:
            self.unit.append(*(sources[i] for i in recorded))  # not an append crash boundary
            return recorded
        except IntegrityError:
            pass
        saved: dict[int, Facts] = {}
        for i in recorded:
            sources[i] = self.app.repository.get(sources[i].id)
            for decide in decisions[i]:
                sources[i], facts = self._step(sources[i], decide, report)
                saved.setdefault(i, []).extend(facts)
        return saved

    def _step(self, source: Schedule, decide: Callable[[Any], Facts],
              report: SchedulerReport) -> tuple[Schedule, Facts]:
        """Decide on the schedule in hand and save; after a lost race, reload and decide
        again. Returns the schedule as it now stands and the facts saved (none: nothing)."""
        for _ in range(RACES):
            facts = decide(source.state)
            if not facts:
                return source, []
            source.record(facts)
            try:
                self.unit.append(source)  # a tick is not an append crash boundary
                return source, facts
            except IntegrityError:
                source = self.app.repository.get(source.id)
        report.errors.append(f"schedule {source.id}: kept losing races; next pass")
        return self.app.repository.get(source.id), []

    def _watch_all(self, sources: list[Schedule], watching: list[int], at: datetime,
                   report: SchedulerReport) -> dict[int, list[Callable[[Any], Facts]]]:
        """The decisions recording the running actions that closed of the schedules
        ``watching`` (indices of ``sources``), by schedule (saved with the tick); the ones
        still running that the overlap policy wants stopped are asked to stop (again). Their
        statuses come from one call per namespace where the runner can (``RunWatcher``), else
        from one describe per run. A schedule whose every run was answered is marked watched
        at ``at`` (``SeenSchedules.watched``)."""
        watched = {i: list(sources[i].state.running) for i in watching}
        namespaces: dict[str, list[str]] = {}
        for i, ids in watched.items():
            namespaces.setdefault(sources[i].state.namespace, []).extend(ids)
        statuses = {(ns, w): status for ns, ids in namespaces.items()
                    for w, status in self._statuses(ns, ids, report).items()}
        self.seen.mark_watched([sources[i].id for i, ids in watched.items() if all(
            (sources[i].state.namespace, w) in statuses for w in ids)], at)
        decisions: dict[int, list[Callable[[Any], Facts]]] = {}
        for i, ids in watched.items():
            ns, stops = sources[i].state.namespace, dict(scheduling.stops_pending(sources[i].state))
            for workflow_id in ids:
                status = statuses.get((ns, workflow_id))
                if status == "running" and workflow_id in stops:
                    self._stop(ns, workflow_id, stops[workflow_id], report)
                elif status is not None:
                    decisions.setdefault(i, []).append(partial(
                        scheduling.run_closed, workflow_id=workflow_id, status=status))
        return decisions

    def _statuses(self, namespace: str, workflow_ids: list[str],
                  report: SchedulerReport) -> dict[str, str]:
        """Each workflow's current run status (``gone``: none); an unknown one is left out."""
        if isinstance(self.runner, RunWatcher):
            try:
                return self.runner.run_statuses(namespace, workflow_ids)
            except DestinationUnavailable:
                report.unavailable += 1
                return {}
        statuses: dict[str, str] = {}
        for workflow_id in workflow_ids:
            try:
                statuses[workflow_id] = self.runner.describe(namespace, workflow_id).status
            except DestinationNotFound:
                statuses[workflow_id] = "gone"
            except DestinationUnavailable:
                report.unavailable += 1
        return statuses

    def _stop(self, namespace: str, workflow_id: str, kind: str,
              report: SchedulerReport) -> None:
        if not isinstance(self.runner, ActionRunner):
            report.errors.append(f"{workflow_id}: the action runner cannot {kind} workflows")
            return
        try:
            self.runner.stop_workflow(namespace, workflow_id, kind,  # type: ignore[arg-type]  # stop_kinds: cancel or terminate
                                      "schedule overlap policy")
            report.stops += 1
        except DestinationUnavailable:
            report.unavailable += 1  # asked again next pass
        except DestinationError as exc:  # refused: said, and asked again next pass
            report.errors.append(f"{workflow_id}: the runner refused to {kind} it: {exc}")


def _to_us(at: datetime | None) -> int | None:
    """The index's next due time (µs); None: not due until the schedule changes."""
    return None if at is None else to_us(at)


def pause(report: SchedulerReport, poll_interval: float, now: float) -> float:
    """Seconds from ``now`` (epoch seconds) to the next pass: until the earliest due time the
    pass saw in the index (a timer: a schedule starts at its time, not up to a poll later, and
    a scheduler ahead of its fleet sleeps instead of polling), at least ``MIN_PAUSE``; at most
    ``poll_interval``, which bounds how late a change made by a command is seen (and how often
    what is due at once is looked at again: a stop or a start waiting on the runner)."""
    if report.next_due is None:
        return poll_interval
    return min(poll_interval, max(MIN_PAUSE, report.next_due.timestamp() - now))


def run_until_stopped(one_pass: Callable[[], SchedulerReport], stop: threading.Event,
                      poll_interval: float, on_busy: Callable[[SchedulerReport], None],
                      worker_id: str = "") -> None:
    """``schedfence scheduler``'s loop: a pass (``one_pass``: the service's, which checks the
    store is active each time), then a ``pause`` (at most ``poll_interval`` seconds), until
    ``stop`` is set. A
    pass that did something is given to ``on_busy`` (the command's line), and each of its
    errors is a warning record. A pass that fails (the store unreachable during a failover,
    its appends refused until ``promote``, the runner down) is a warning record too, and the
    loop goes on: the next pass decides again on what the store holds then."""
    while not stop.is_set():
        try:
            report = one_pass()
        except Exception as exc:  # noqa: BLE001 - the loop outlives a bad pass, as a worker's
            LOG.warning("scheduler: error: %s (retrying)", error_line(exc),
                        extra={"worker": worker_id})
            stop.wait(poll_interval)
            continue
        if report.busy:
            on_busy(report)
            for error in report.errors:  # the line counts them; each is a record
                LOG.warning("scheduler: error: %s", error, extra={"worker": worker_id})
        stop.wait(pause(report, poll_interval, time.time()))
