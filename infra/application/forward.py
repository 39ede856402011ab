"""Forward migration commands (a Temporal Schedule handed to the source), a part of the
application service like the schedule commands, built from what they use (the store, its
aggregates, the destination, the active-store check): each loads, asks a domain decision and
saves.
The protocol is in domain/forward/aggregate.py and domain/forward/steps.py; the worker in
infra/engines/forward.py.
"""
from __future__ import annotations

import time
from typing import Any, Callable
from uuid import UUID

from schedfence.domain.forward import steps as fs
from schedfence.domain.errors import (AlreadyExists, InvalidArgument, NotFound, RecoveryRefused,
                                      Unavailable)
from schedfence.domain.forward.aggregate import (ForwardMigration, ForwardState,
                                       derive_forward_request_id, forward_aggregate_id)
from schedfence.domain.ids import validate_destination_key, validate_request_id
from schedfence.domain.process import retry_outcome
from schedfence.domain.ports import (Destination, DestinationNotFound, DestinationUnavailable,
                                     ScheduleHost, ScheduleSnapshot, command_error)
from schedfence.domain.source.key import ScheduleKey
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.text import validate_actor, validate_reason
from schedfence.infra.adapters.store.aggregates import Aggregates
from schedfence.infra.pacing import retry_call
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.projections import forward_oncall as fo
from schedfence.domain.ports import CrashHook
from schedfence.infra.application.actor import actor_or_default
from schedfence.infra.application.views import MigrationResult, Origin
from schedfence.infra.engines.drain import RETRY_FOR, drain
from schedfence.infra.engines.drive import OpenForwards
from schedfence.infra.application.guards import accept_binding, check_bound
from schedfence.infra.engines.forward import CLOSED_TOPICS, PARKED_TOPICS, ForwardEngine
from schedfence.infra.engines.unit_of_work import UnitOfWork



class ForwardCommands:
    def __init__(self, app: FenceApplication, load: Aggregates, unit: UnitOfWork,
                 destination: Destination, require_active: Callable[[], None], worker_id: str,
                 crash_hook: CrashHook | None = None,
                 open_forwards: Callable[[], list[UUID]] | None = None) -> None:
        """``open_forwards``: the service's ``OpenForwards`` (infra/engines/drive.py), which
        its workers read too; None: one of these commands' own."""
        self.app, self.load, self.unit, self.destination = app, load, unit, destination
        self.require_active, self.worker_id, self.crash_hook = require_active, worker_id, crash_hook
        self._open_forwards = open_forwards or OpenForwards(app)

    @property
    def host(self) -> ScheduleHost:
        if not isinstance(self.destination, ScheduleHost):
            raise InvalidArgument("this destination has no Schedules API: forward migration "
                                  "needs the simulator or a Temporal server")
        return self.destination

    @property
    def forward_worker(self) -> ForwardEngine:
        return ForwardEngine(self.app, self.host, self.worker_id, self.crash_hook, self.load.epoch)

    def forward(self, namespace: str, schedule_id: str, request_id: str | None = None,
                actor: str = "", job_id: str | None = None) -> MigrationResult:
        """Ask for a Temporal Schedule to be handed to the source. The request id (the
        caller's, or one derived from the Temporal Schedule taken over and its conflict token
        now, stable across the caller's retries) is recorded before anything is done to
        either side; a schedule the Temporal side does not hold is refused (``not_found``),
        writing nothing."""
        validate_destination_key(namespace, schedule_id)
        if request_id is not None:
            validate_request_id(request_id)
        if actor:
            validate_actor(actor)
        self.require_active()
        seen: ScheduleSnapshot | None = None
        origin: Origin
        if request_id is not None and self.app.find(
                forward_aggregate_id(namespace, schedule_id, request_id)) is not None:
            rid, origin = request_id, "caller"  # a retry: the same migration's answer
        elif request_id is None and (pending := self._derived_retry(namespace, schedule_id)):
            return pending
        else:
            self._check_key(namespace, schedule_id)  # the key first: no I/O for a refusal
            seen = self._describe(namespace, schedule_id)  # none there: refused, unwritten
            origin = "caller" if request_id is not None else "derived"
            rid = request_id or derive_forward_request_id(
                namespace, schedule_id, seen.conflict_token, seen.identity)
        racing = AlreadyExists("the schedule's key kept changing under concurrent requests; retry")
        return retry_call(
            lambda: self._forward_once(namespace, schedule_id, rid, origin, actor, seen, job_id),
            **self.unit.on_conflict(racing))

    def _derived_retry(self, namespace: str, schedule_id: str) -> MigrationResult | None:
        """A caller without an id asking again while its forward is pending: the id derived
        now names the migration that holds the key (same Temporal Schedule, same token), so
        the answer is that migration's, ``already_pending``. Otherwise None (decide anew)."""
        key = self.load.key(namespace, schedule_id)
        holder = key.state.forward_migration_id if key is not None else None
        if holder is None:
            return None
        try:
            snap = self._describe(namespace, schedule_id)
        except (NotFound, Unavailable):
            return None  # the key's refusal says more than the Temporal side's silence
        rid = derive_forward_request_id(namespace, schedule_id, snap.conflict_token,
                                        snap.identity)
        if str(forward_aggregate_id(namespace, schedule_id, rid)) != str(holder):
            return None  # another forward holds the key: refused as before
        return MigrationResult("already_pending", rid, "derived", str(holder))

    def predict_forward(self, namespace: str, schedule_id: str,
                        request_id: str) -> tuple[str, tuple[str, str] | None]:
        """What ``forward`` with ``request_id`` would answer now, and the park the schedule as
        it stands would lead to, read only: refusals raise as ``forward`` raises them."""
        validate_destination_key(namespace, schedule_id)
        validate_request_id(request_id)
        same = self.app.find(forward_aggregate_id(namespace, schedule_id, request_id))
        if same is not None:
            return retry_outcome(same.state.phase), None
        self._check_key(namespace, schedule_id)
        return "accepted", fs.predicted_park(self._describe(namespace, schedule_id))

    def _forward_once(self, namespace: str, schedule_id: str, request_id: str, origin: Origin,
                      actor: str, seen: ScheduleSnapshot | None,
                      job_id: str | None = None) -> MigrationResult:
        mid = forward_aggregate_id(namespace, schedule_id, request_id)
        same = self.app.find(mid)
        if same is not None:
            return MigrationResult(retry_outcome(same.state.phase), request_id,
                                  same.state.request_id_origin, str(mid))
        key = self._check_key(namespace, schedule_id)
        mig = ForwardMigration.request(namespace, schedule_id, request_id, origin,
                                       actor_or_default(actor), self.load.epoch(),
                                       seen.identity if seen else "",
                                       seen.conflict_token if seen else "", job_id,
                                       accept_binding(self.destination, namespace))
        key.open_forward(str(mig.id))
        self.unit.append(mig, key)
        return MigrationResult("accepted", request_id, origin, str(mid))

    def _check_key(self, namespace: str, schedule_id: str) -> ScheduleKey:
        """The key (new if none), once no migration holds it and no live source runs it."""
        key = self.load.key(namespace, schedule_id) or ScheduleKey.create(namespace, schedule_id)
        current = key.state.current_schedule_id
        fs.request_check(key.state, self.app.repository.get(current).state if current else None)
        return key

    def _describe(self, namespace: str, schedule_id: str) -> ScheduleSnapshot:
        try:
            return self.host.describe_schedule(namespace, schedule_id)
        except DestinationNotFound:
            raise NotFound(f"no Temporal schedule {namespace}/{schedule_id}") from None
        except DestinationUnavailable as exc:
            raise command_error(exc, "the Temporal schedule's description") from exc

    def forward_state(self, namespace: str, schedule_id: str, request_id: str) -> ForwardState:
        found = self.app.find(forward_aggregate_id(namespace, schedule_id, request_id))
        if found is None:
            raise NotFound(f"no forward migration of {namespace}/{schedule_id} with request id "
                           f"{request_id}")
        return found.state

    def open_forward_ids(self) -> list[UUID]:
        """Forward migrations a worker may move: requested, not completed, aborted or parked
        (read from the log's topics, only what was appended since the last read; no
        aggregate is loaded: infra/engines/drive.py's ``OpenForwards``)."""
        return self._open_forwards()

    def finish_forward(self, namespace: str, schedule_id: str, request_id: str,
                       retry_for: float = RETRY_FOR) -> ForwardState:
        """Drive this one forward migration (``forward``'s wait) until it is no longer open
        (completed, aborted or parked), whichever process moved it: a worker that shares the
        store may take every step, and the wait ends at the first look that finds it ended.
        What backs off is retried for ``retry_for`` seconds (infra/engines/drain.py)."""
        self.require_active()
        state = self.forward_state(namespace, schedule_id, request_id)
        mid = UUID(state.migration_id)
        drain(self.forward_worker.attempt,
              lambda: [mid] if mid in self.open_forward_ids() else [], retry_for=retry_for)
        return self.forward_state(namespace, schedule_id, request_id)

    def forward_oncall(self, stuck_after_seconds: float,
                       stalls: dict[str, dict[str, Any]] | None = None
                       ) -> list[fo.ForwardOnCallItem]:
        """Forward migrations that need an operator (parked, or open and without progress
        for ``stuck_after_seconds``: no event, or only failed attempts, ``stalls``' rows by
        migration id), each with what may be done about it."""
        closed = {n.originator_id for n in self.app.notifications(CLOSED_TOPICS)}
        parked = [n.originator_id for n in self.app.notifications(PARKED_TOPICS)
                  if n.originator_id not in closed]
        now, items = time.time(), []
        for mid in dict.fromkeys(self.open_forward_ids() + parked):
            mig: ForwardMigration = self.app.repository.get(mid)
            last = mig.modified_on.timestamp()
            stall = fo.current_stall((stalls or {}).get(str(mid)), last, now)
            found = fo.item(mig.state, max(now - last, 0.0), stuck_after_seconds, stall)
            if found is not None:
                items.append(found)
        return items

    def abort_forward(self, namespace: str, schedule_id: str, request_id: str, reason: str,
                      actor: str) -> ForwardState:
        """End a forward migration without a handover: the Temporal schedule gets back its
        pre-fence pause and notes (if our fence applied), a dormant source is closed. A
        worker that moved the migration meanwhile: looked at and decided again."""
        validate_reason(reason)
        validate_actor(actor)
        self.require_active()
        restored: list[bool] = []  # whether any try gave the Temporal schedule back
        return retry_call(lambda: self._abort_once(namespace, schedule_id, request_id, reason,
                                                   actor, restored),
                          **self.unit.on_conflict(_racing()))

    def _abort_once(self, namespace: str, schedule_id: str, request_id: str, reason: str,
                    actor: str, restored: list[bool]) -> ForwardState:
        st = self.forward_state(namespace, schedule_id, request_id)
        if st.destination is not None:  # unknown: restored only where our marker is seen
            self._gate(st)
        fs.check_abortable(st)
        snap = self._snapshot_or_none(st)
        if snap is not None and fs.fenced_by_us(st, snap):
            try:
                self.host.update_schedule_state(namespace, schedule_id, snap.conflict_token,
                                                bool(st.pre_paused), st.pre_notes or "")
                restored.append(True)
            except DestinationUnavailable as exc:
                raise command_error(exc, "restoring the Temporal schedule") from exc
        mig: ForwardMigration = self.app.repository.get(UUID(st.migration_id))
        key = self.load.key(namespace, schedule_id)
        assert key is not None  # the migration holds it (check_abortable)
        mfacts, sfacts = fs.abort_facts(st, reason, actor, bool(restored))
        mig.record(mfacts)
        saved: list[ForwardMigration | ScheduleKey | Schedule] = [mig, key]
        if sfacts:
            source: Schedule = self.app.repository.get(UUID(st.source_id))
            source.record(sfacts)
            saved.append(source)
        key.close_forward(st.migration_id)
        self.unit.append(*saved)
        return mig.state

    def take_over_forward(self, namespace: str, schedule_id: str, request_id: str,
                          actor: str) -> ForwardState:
        """An operator confirms a delete that raced the handoff: the dormant source runs."""
        validate_actor(actor)
        self.require_active()

        def once() -> ForwardState:
            st = self.forward_state(namespace, schedule_id, request_id)
            self._gate(st)  # the delete it confirms was seen on its own destination
            fs.check_takeover(st, self._snapshot_or_none(st))
            mig: ForwardMigration = self.app.repository.get(UUID(st.migration_id))
            self.forward_worker.complete(mig, f"an operator ({actor}) confirmed the delete")
            return mig.state

        return retry_call(once, **self.unit.on_conflict(_racing()))

    def _gate(self, st: ForwardState) -> None:
        check_bound(f"forward migration {st.namespace}/{st.schedule_id} (request "
                    f"{st.request_id})", st.destination, self.destination)

    def _snapshot_or_none(self, st: ForwardState) -> ScheduleSnapshot | None:
        try:
            return self._describe(st.namespace, st.schedule_id)
        except NotFound:
            return None


def _racing() -> RecoveryRefused:
    return RecoveryRefused("the forward migration kept changing under a running worker; retry")


__all__ = ["ForwardCommands", "FORWARD_TOPICS", "RecoveryRefused"]
