"""The forward migration's engine: reads the Temporal schedule, asks the domain's ``next_step``
(domain/forward/steps.py) what to do, records it, then makes the one call it names (fence,
delete) or the one append (the source's creation, the completion). Every append and every call
is a crash point, named ``forward.<step>.<when>``; a crash anywhere leaves a migration the next
attempt continues from its log.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from schedfence.domain.destination_id import DestinationMismatch, DestinationUnknown
from schedfence.domain.forward import steps as fs
from schedfence.domain.forward.aggregate import ForwardMigration, forward_marker
from schedfence.domain.ids import schedule_aggregate_id, schedule_key_id
from schedfence.domain.model import Facts
from schedfence.domain.ports import (ConflictTokenMoved, DestinationNotFound,
                                     DestinationUnavailable, ScheduleHost, ScheduleSnapshot)
from schedfence.domain.process import Step
from schedfence.domain.source.schedule import Schedule
from schedfence.infra.adapters.destination.identity import check_destination
from schedfence.infra.adapters.observability.calls import latency_of
from schedfence.infra.adapters.observability.logs import get_logger
from schedfence.infra.engines.attempt import AttemptResult
from schedfence.domain.ports import CrashHook
from schedfence.infra.engines.failures import FailureNotes
from schedfence.infra.engines.gate import IDENTIFY, refused
from schedfence.infra.engines.unit_of_work import UnitOfWork

MAX_STEPS = 10
FORWARD_TOPICS = (ForwardMigration.ForwardRequested.TOPIC,)
CLOSED_TOPICS = tuple(c.TOPIC for c in (ForwardMigration.ForwardCompleted,
                                        ForwardMigration.ForwardAborted))
PARKED_TOPICS = (ForwardMigration.ForwardParked.TOPIC,)
ENDED_TOPICS = CLOSED_TOPICS + PARKED_TOPICS  # nothing left for a worker to do
LOG = get_logger("worker.forward")
# Each step's call to the schedule host, by the port method (the latency metric's ``call``).
CALLS = {"describe": "describe_schedule", "fence": "update_schedule_state",
         "delete": "delete_schedule"}


class ForwardEngine:
    def __init__(self, app: Any, host: ScheduleHost, worker_id: str,
                 crash_hook: CrashHook | None = None, epoch: Callable[[], int] = lambda: 0):
        self.app, self.host, self.worker_id = app, host, worker_id
        self.unit = UnitOfWork.of(app, worker_id, crash_hook, LOG, prefix="forward.")
        self.epoch = epoch
        self.notes = FailureNotes()  # each attempt's last failed call (infra/engines/failures.py)
        self.refusals: dict[UUID, str] = {}  # refused by the destination gate: why, a line

    def gate(self, st: Any) -> None:
        """Before any step: this process serves the destination the forward was accepted
        against (domain/destination_id.py), else ``DestinationMismatch``/``Unknown``."""
        check_destination(f"forward migration {st.namespace}/{st.schedule_id} (request "
                          f"{st.request_id})", st.destination, self.host,
                          "abort it with `schedfence forward-abort` (docs/operators.md)")

    @property
    def crash_hook(self) -> CrashHook:
        return self.unit.crash_hook

    @crash_hook.setter
    def crash_hook(self, hook: CrashHook | None) -> None:
        self.unit = self.unit.hooked(hook)

    def _save(self, label: str, *aggregates: Any) -> None:
        self.unit.save(label, *aggregates)  # forward.<label>.before_append / after_append

    def _call(self, label: str, fn: Callable[[], Any]) -> Any:
        timed = partial(latency_of(self.host).time, CALLS[label], fn)
        return self.unit.call(label, partial(self.notes.calling, label, timed))

    def _facts(self, facts: Facts) -> Facts:
        return [type(f)(f.event, dict(f.fields, worker=self.worker_id))
                if "worker" in f.fields else f for f in facts]

    def attempt(self, migration_id: UUID) -> AttemptResult:
        """Steps until the migration needs nothing more now, or must back off."""
        with self.notes.attempt(migration_id, None):
            return self._attempt(migration_id)

    def _attempt(self, migration_id: UUID) -> AttemptResult:
        result: AttemptResult = "idle"
        resent = False
        for _ in range(MAX_STEPS):
            mig = self.app.repository.get(migration_id)
            self.notes.began(mig.modified_on)  # the streak's reference (failures.py)
            st = mig.state
            if not st.is_open:
                return result
            try:
                self.notes.calling(IDENTIFY, lambda: self.gate(st))
            except (DestinationMismatch, DestinationUnknown) as exc:
                return refused(self.refusals, migration_id, exc, LOG, self.worker_id)
            except DestinationUnavailable:
                return "backoff"
            try:
                step = fs.next_step(st, self._snapshot(st) if fs.needs_snapshot(st) else None)
                if step.facts:
                    mig.record(self._facts(step.facts))
                    self._save(step.call or step.facts[0].event.__name__, mig)
                    result = "progress"
                if step.call is None:
                    if step.facts and mig.state.is_open:
                        continue  # recorded a step that calls nothing: look again
                    return result
                if step.wait and resent:
                    return "backoff"  # the fence we sent twice is not applied yet
                resent |= step.wait
                self._do(step.call, mig)
            except DestinationUnavailable:
                return "backoff"
            except IntegrityError:
                # Another worker moved it first (its step saved, ours wrote nothing): as the
                # rollback's attempt does, load it again and decide on what the winner wrote.
                result = "progress"
                continue
            if not step.wait:
                result = "progress"
        return result

    def _snapshot(self, st: Any) -> ScheduleSnapshot | None:
        try:
            return self._call("describe", lambda: self.host.describe_schedule(
                st.namespace, st.schedule_id))
        except DestinationNotFound:
            return None

    def _do(self, call: Step, mig: ForwardMigration) -> None:
        st = mig.state
        if call is Step.FENCE:
            try:
                self._call("fence", lambda: self.host.update_schedule_state(
                    st.namespace, st.schedule_id, st.conflict_token, True,  # type: ignore[arg-type]  # fence_issued: a token
                    forward_marker(st.request_id)))
            except (ConflictTokenMoved, DestinationNotFound):
                pass  # the next look re-reads it (a fresh fence, or a park)
            return
        if call is Step.CREATE_SOURCE:
            self._create_source(mig)
            return
        if call is Step.DELETE:
            try:
                self._call("delete", lambda: self.host.delete_schedule(st.namespace,
                                                                       st.schedule_id))
            except DestinationNotFound:
                pass  # gone: our own delete whose answer was lost, or one racing it
            self.complete(mig, "the Temporal schedule is deleted")
            return
        raise ValueError(f"unknown forward call {call!r}")

    def _create_source(self, mig: ForwardMigration) -> None:
        st = mig.state
        key = self.app.repository.get(schedule_key_id(st.namespace, st.schedule_id))
        current = key.state.current_schedule_id
        current_state = self.app.repository.get(current).state if current else None
        n = key.state.incarnation + 1
        sid = schedule_aggregate_id(st.namespace, st.schedule_id, n)
        mfacts, sfacts = fs.create_source_facts(st, key.state, current_state, str(sid), n,
                                                self.epoch())
        mig.record(mfacts)
        if not sfacts:
            self._save("create", mig)
            return
        key.start_incarnation()
        ((event, fields),) = sfacts
        source = Schedule._create(event, id=sid, **fields)
        self._save("create", mig, key, source)

    def complete(self, mig: ForwardMigration, detail: str) -> None:
        """The completion: migration, source released, key freed, in one append."""
        st = mig.state
        source = self.app.repository.get(UUID(st.source_id))
        key = self.app.repository.get(schedule_key_id(st.namespace, st.schedule_id))
        mfacts, sfacts = fs.complete_facts(st, detail)
        mig.record(mfacts)
        source.record(sfacts)
        key.close_forward(st.migration_id)
        self._save("complete", mig, source, key)
