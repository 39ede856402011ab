"""The application service: admin commands, the worker loop and read views over one store.
It composes its parts, each given what it uses and none knowing the service (schedules.py,
forward.py, the worker, views and due index: built on first use, service_parts.py; bulk.py and
recovery.py are handed theirs per call)."""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, cast
from uuid import UUID

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import steps as h
from schedfence.domain.errors import (AlreadyExists, DomainError, InvalidArgument, NotFound,
                                      RecoveryRefused)
from schedfence.domain.failover import STORE_EPOCH_ID, StoreEpoch
from schedfence.domain.ids import validate_destination_key, validate_request_id
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.ports import Destination
from schedfence.domain.source.incarnation import latest_migration_id
from schedfence.domain.text import (validate_actor, validate_id, validate_reason,
                                    validate_worker_id)

from schedfence.infra.pacing import retry_call
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.infra.application.actor import actor_or_default
from schedfence.infra.application.views import (HistoryEntry, MigrationView, MigrationResult,
                                               Origin, Outcome)
from schedfence.infra.adapters.destination.choose import (default_worker_id,
                                                          open_store_and_destination)
from schedfence.infra.engines.drain import RETRY_FOR, DrainReport
from schedfence.infra.engines.attempt import CLAIM_GRACE_SECONDS
from schedfence.infra.engines.drive import Drive, Driven, drive
from schedfence.infra.engines.forward import ForwardEngine
from schedfence.domain.ports import CrashHook
from schedfence.infra.application.compose import Through
from schedfence.infra.application.schedules import ScheduleCommands
from schedfence.infra.application.forward import ForwardCommands
from schedfence.infra.application.service_parts import ServiceParts
from schedfence.projections.oncall import STUCK_AFTER

if TYPE_CHECKING:
    from schedfence.domain.invariants.checker import Violation
    from schedfence.domain.owners.audit import AuditState
    from schedfence.domain.ports import ScheduleHost
    from schedfence.projections.audit_query import CursorAuditPage
    from schedfence.projections.records import MigrationRow, OnCallItem
    from schedfence.infra.engines.pool import PoolStats
# Imported where used: what `status` never runs (the invariant checker, recovery, replay,
# replication, the worker pool; the batch steps) stays out of it (service_parts.py: the views,
# due index, leases).

MIGRATION_TOPICS = (Migration.RequestIdAssigned.TOPIC,)  # v1 (legacy) records share it
VIEWS_DEFAULT: Any = object()  # an argument left to the operator views' own default


class MigrationService(ServiceParts):
    def __init__(self, app: FenceApplication, destination: Destination, *,
                 worker_id: str | None = None, crash_hook: CrashHook | None = None,
                 on_close: Callable[[], None] | None = None,
                 claim_grace: float = CLAIM_GRACE_SECONDS,
                 retry_for: float = RETRY_FOR) -> None:
        retry_for = _valid_retry_for(retry_for)  # run_until_idle's default
        super().__init__(app, destination, validate_worker_id(worker_id) if worker_id
                         else default_worker_id(), crash_hook, claim_grace)
        self.retry_for, self._on_close = retry_for, on_close

    def close(self) -> None:
        self._close_parts()
        self.app.close()
        if self._on_close:
            self._on_close()

    def __enter__(self) -> MigrationService:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- rollbacks, failover and recovery (bulk.py, guards.py, recovery.py) ---------------------
    def rollback(self, namespace: str, schedule_id: str, request_id: str | None = None,
                 actor: str = "", job_id: str | None = None) -> MigrationResult:
        """Hand the schedule over to the destination; ``job_id``: the batch job asking (named
        on the migration's first event)."""
        validate_destination_key(namespace, schedule_id)
        if job_id is not None:
            validate_id("job id", job_id)
        if request_id is not None:
            validate_request_id(request_id)
        if actor not in ("", None):
            validate_actor(actor)
        self.require_active()
        racing = AlreadyExists("the schedule kept changing under concurrent rollbacks; retry")
        return retry_call(lambda: self._rollback_once(namespace, schedule_id, request_id, actor,
                                                      job_id),
                          **self.unit.on_conflict(racing))

    def rollback_many(self, namespace: str, schedule_ids: list[str],
                      request_ids: list[str] | None = None,
                      actor: str = "", job_id: str | None = None,
                      ) -> list[MigrationResult | DomainError]:
        """Roll back many schedules of one namespace, every accepted one in one append; one
        answer per schedule, in order (its result, or the refusal ``rollback`` would raise)."""
        from schedfence.infra.application.bulk import Parts, rollback_many
        parts = Parts(self.app, self.destination, self.require_active,
                      self.unit, self.epoch, self.rollback)
        return rollback_many(parts, namespace, schedule_ids, request_ids, actor, job_id)

    def _rollback_once(self, namespace: str, schedule_id: str, request_id: str | None,
                       actor: str, job_id: str | None = None) -> MigrationResult:
        source = self.load.source(namespace, schedule_id)
        st = source.state
        rid, origin, mid = h.rollback_identity(namespace, schedule_id, st.incarnation,
                                               request_id)
        same, pending = self.load.migration_state(mid), self.load.migration_state(st.fence_migration_id)
        sentinel = binding = None
        if same is not None and same.destination is not None:  # a retry: on its own only
            from schedfence.infra.application.guards import check_bound
            check_bound(f"migration {namespace}/{schedule_id}", same.destination,
                        self.destination)
        if d.rollback_gate(st, rid, same, pending) == "accept":  # only then ask the destination
            from schedfence.infra.application.guards import accept_binding, rollback_check
            sentinel = rollback_check(self.destination, namespace, schedule_id, st)
            binding = accept_binding(self.destination, namespace)  # what the check ran on
        change = h.rollback(st, str(source.id), rid, origin, mid, same=same, pending=pending,
                            last=self.load.migration_state(st.last_migration_id), sentinel=sentinel,
                            epoch=self.epoch(), actor=actor_or_default(actor), job_id=job_id,
                            destination=binding)
        if change.outcome != "accepted":
            existing = same if same is not None else pending
            assert existing is not None  # a refusal names the migration that decided it
            return MigrationResult(cast(Outcome, change.outcome), rid,
                                  cast(Origin, existing.origin), change.migration_id)
        self.unit.save("rollback", *change.apply(source, None))  # one append, both
        return MigrationResult("accepted", rid, origin, change.migration_id)

    def epoch(self) -> int:
        """The store's epoch: how many failovers were recorded on it (domain/failover.py)."""
        return self.load.epoch()

    def promote(self, actor: str, reason: str) -> int:
        """Record that this store is now the active one after a failover; returns the new
        epoch. Every migration accepted before it reconciles before it may act again."""
        validate_actor(actor)
        validate_reason(reason)
        from schedfence.infra.adapters.replication.standby import replica_positions

        def record() -> int:
            store_epoch = self.app.find(STORE_EPOCH_ID) or StoreEpoch.start()
            epoch = store_epoch.record_failover(actor, reason, replica_positions(self.app))
            self.unit.append(store_epoch)
            return epoch

        racing = AlreadyExists("another promotion ran concurrently")
        return retry_call(record, **self.unit.on_conflict(racing))

    def abort(self, namespace: str, schedule_id: str, reason: str, actor: str) -> MigrationView:
        """Cancel the open migration and restore the source, only where the protocol allows it (F9)."""
        validate_reason(reason)
        validate_actor(actor)
        self.require_active()
        racing = RecoveryRefused("the migration kept changing under a running worker; retry")
        return retry_call(lambda: self._abort_once(namespace, schedule_id, reason, actor),
                          **self.unit.on_conflict(racing))

    def _abort_once(self, namespace: str, schedule_id: str, reason: str,
                    actor: str) -> MigrationView:
        source = self.load.source(namespace, schedule_id)
        migration = self.load.migration(source.state.fence_migration_id)
        change = h.abort(source.state, migration.state if migration else None, actor, reason,
                         self.epoch())
        self.unit.save("abort", *change.apply(source, migration))
        assert migration is not None  # h.abort refused to go on without one
        return MigrationView.of(migration.state, migration.version)

    def recover(self, kind: str, namespace: str, schedule_id: str, *, actor: str, reason: str,
                request_id: str | None = None, **options: Any) -> MigrationView:
        """Operator recovery: rearm | abort | adopt | resolve (infra/application/recovery.py)."""
        from schedfence.infra.application.recovery import Parts, recover as recover_migration
        self.require_active()
        parts = Parts(self.load, self.destination, self.unit, self.abort)
        return recover_migration(parts, kind, namespace, schedule_id, actor=actor,
                                 reason=reason, request_id=request_id, **options)

    # -- schedule commands and views: infra/application/schedules.py ----------------------------
    create_schedule = Through("_schedules", ScheduleCommands.create_schedule)
    update_schedule = Through("_schedules", ScheduleCommands.update_schedule)
    trigger_schedule = Through("_schedules", ScheduleCommands.trigger_schedule)
    backfill_schedule = Through("_schedules", ScheduleCommands.backfill_schedule)
    run_scheduler = Through("_schedules", ScheduleCommands.run_scheduler)
    schedules_due = Through("_schedules", ScheduleCommands.schedules_due)
    failing_schedules = Through("_schedules", ScheduleCommands.failing_schedules)
    schedule = Through("_schedules", ScheduleCommands.schedule)
    upcoming = Through("_schedules", ScheduleCommands.upcoming)
    list_schedules = Through("_schedules", ScheduleCommands.list_schedules)

    # -- forward migration: infra/application/forward.py --------------------------------------
    forward = Through("_forward", ForwardCommands.forward)
    predict_forward = Through("_forward", ForwardCommands.predict_forward)
    forward_state = Through("_forward", ForwardCommands.forward_state)
    finish_forward = Through("_forward", ForwardCommands.finish_forward)
    open_forward_ids = Through("_forward", ForwardCommands.open_forward_ids)
    abort_forward = Through("_forward", ForwardCommands.abort_forward)
    take_over_forward = Through("_forward", ForwardCommands.take_over_forward)

    @property
    def host(self) -> ScheduleHost:
        return self._forward.host

    @property
    def forward_worker(self) -> ForwardEngine:
        return self._forward.forward_worker

    def oncall_doc(self, stuck_after_seconds: float) -> dict[str, Any]:
        """``oncall``'s document (CLI ``--json``, HTTP): rollbacks, then forward migrations."""
        from schedfence.projections.forward_oncall import oncall_doc
        items = self.oncall(stuck_after_seconds)  # checks stuck_after_seconds first
        doc = oncall_doc(stuck_after_seconds, items, self.forward_oncall(stuck_after_seconds),
                         self.ownership_drift(), self.failing_schedules())
        doc["jobs"] = self.job_oncall(stuck_after_seconds)
        return doc

    def job_oncall(self, stuck_after_seconds: float) -> list[dict[str, Any]]:
        """Batch jobs still selecting with no event for ``stuck_after_seconds``: their
        ``migrate`` run stopped (infra/application/job_oncall.py)."""
        from schedfence.infra.application.job_oncall import stuck_jobs
        return stuck_jobs(self.app, stuck_after_seconds)

    def ownership_drift(self) -> list[dict[str, Any]]:
        """The drift of each namespace's last ownership audit, each with the commands that
        resolve it, read from the log (infra/application/owners_doc.py)."""
        from schedfence.infra.application.owners_doc import ownership_drift
        return ownership_drift(self.app, self.load.migration_state)

    def last_audit(self, namespace: str) -> AuditState | None:
        """The last recorded ownership audit of ``namespace`` (None: never audited), read from
        the log alone: ``.at``, ``.counts`` (by ``owner`` and ``kind``), ``.owner_rows()``
        (one ``OwnerRow`` per key, with Temporal's next run time of Temporal-owned keys)."""
        from schedfence.projections.ownership import last_audit
        return last_audit(self.app, namespace)

    # -- worker -----------------------------------------------------------------------------
    def open_migration_ids(self) -> list[UUID]:
        """From the due-work index (the projection), not by scanning the log."""
        return self.due.open_ids()

    def run_workers(self, stop: threading.Event, concurrency: int = 1, *,
                    until_idle: bool = False, poll_interval: float = 1.0,
                    on_pass: Callable[[int, int], None] | None = None,
                    on_error: Callable[[int, str], None] | None = None) -> PoolStats:
        """What ``schedfence worker --concurrency N`` runs: N threads over the due index,
        safe beside any number of other workers on the same store."""
        stats = self.drive(Drive(threads=concurrency, until_idle=until_idle, then_drain=False,
                                 stop=stop, poll_interval=poll_interval, on_pass=on_pass,
                                 on_error=on_error)).stats
        assert stats is not None  # a pool ran
        return stats

    def run_until_idle(self, max_attempts: int | None = None,
                       retry_for: float | None = None) -> DrainReport:
        """Attempt every open migration until nothing more can progress without an operator
        or a lasting outage (infra/engines/drain.py): what backs off is retried for ``retry_for``
        seconds (default: the service's, 5 s; 0 = one try each). The result is the number of
        attempts (an int) that also names what is left: ``.blocked``, ``.exhausted``,
        ``.drained``."""
        report = self.drive(Drive(max_attempts=max_attempts, retry_for=retry_for)).report
        assert report is not None  # a drive without threads is a drain
        return report

    def drive(self, how: Drive = Drive()) -> Driven:
        """Drive due work as ``how`` says (infra/engines/drive.py): the one way every driver
        (the worker command, the HTTP API, a batch job) runs the worker."""
        if how.max_attempts is not None and how.max_attempts < 1:
            raise_invalid("max_attempts must be at least 1")
        retry_for = self.retry_for if how.retry_for is None else _valid_retry_for(how.retry_for)
        self.require_active()
        return drive(self._work_parts(), replace(how, retry_for=retry_for))

    # -- views ------------------------------------------------------------------------------
    def migration(self, namespace: str, schedule_id: str) -> MigrationView:
        """The open migration of the key, else its most recent one."""
        source = self.load.source(namespace, schedule_id)
        found = self.load.migration(latest_migration_id(self.load.incarnations(
            namespace, schedule_id, source.state.incarnation)))
        if found is None:
            raise NotFound(f"schedule {namespace}/{schedule_id} has no migration")
        return MigrationView.of(found.state, found.version)

    def history(self, namespace: str, schedule_id: str) -> list[HistoryEntry]:
        """Every event of the key, its incarnations and their migrations, in log order."""
        from schedfence.infra.application.log_reads import history
        return history(self.app, self.load, namespace, schedule_id)

    def event_count(self) -> int:
        return self.app.read_retrying(self.app.event_count)

    def verify(self, also: str | None = None,
               progress: Callable[[int], None] | None = None) -> list[Violation]:
        """The invariant checker over this store (and ``also``, another copy of it, and across
        them); ``progress(n)``: events of this store read so far (log_reads.py)."""
        from schedfence.infra.application.log_reads import verify
        return verify(self.app, also, progress)

    # -- operator read models: projections/service_views.py (caught up before each answer) --
    def catch_up(self) -> int:
        return self.views.catch_up()

    def audit(self, **filters: Any) -> CursorAuditPage:
        """schedule="NS/ID", request_id, migration_id, actor, since, until, newest_first,
        limit: see ``OperatorViews.audit``."""
        return self.views.audit(**filters)

    def stats(self) -> dict[str, Any]:
        return self.views.stats()

    def oncall(self, stuck_after_seconds: float = VIEWS_DEFAULT) -> list[OnCallItem]:
        """Default: ``service_views.STUCK_AFTER`` seconds. An open migration is stuck after
        that long without progress: no event, or only failed attempts (their last error from
        the stall table, infra/engines/stalls.py)."""
        seconds = STUCK_AFTER if stuck_after_seconds is VIEWS_DEFAULT else stuck_after_seconds
        return self.views.oncall(seconds, stalls=self.stall_rows())

    def forward_oncall(self, stuck_after_seconds: float) -> list[Any]:
        """Forward migrations that need an operator (infra/application/forward.py), stuck
        ones with what their attempts keep running into."""
        return self._forward.forward_oncall(stuck_after_seconds, self.stall_rows())

    def stuck_counts(self, stuck_after_seconds: float) -> dict[str, int]:
        """How many open migrations of each direction, and batch jobs (``job``), made no
        progress for ``stuck_after_seconds`` (the gauge ``schedfence_oncall_stuck``)."""
        return {"rollback": sum(i.category == "stuck" for i in self.oncall(stuck_after_seconds)),
                "forward": sum(i.category == "stuck"
                               for i in self.forward_oncall(stuck_after_seconds)),
                "job": len(self.job_oncall(stuck_after_seconds))}

    def stall_rows(self) -> dict[str, dict[str, Any]]:
        """Every migration's stall row (attempts that keep failing), by migration id."""
        from dataclasses import asdict
        return {mid: asdict(s) for mid, s in self.due.stalls.read().items()}

    def migrations_by_state(self, state: str | None = None,
                            limit: int = VIEWS_DEFAULT) -> list[MigrationRow]:
        """Default ``limit``: ``service_views.MAX_ROWS``."""
        return self.views.migrations_by_state(state, *_given(limit))

    def replay(self, namespace: str, schedule_id: str, at: int | None = None,
               migration_id: str | None = None) -> dict[str, Any]:
        """Forensic replay of a migration from the stored events alone (infra/application/replay/replayer.py)."""
        from schedfence.infra.application.replay.replayer import check_at, replay_key
        check_at(at)  # bad arguments before NotFound
        incarnation = self.schedule(namespace, schedule_id).incarnation
        return replay_key(self.app, namespace, schedule_id, incarnation, at, migration_id)


def _given(arg: Any) -> tuple[Any, ...]:
    return () if arg is VIEWS_DEFAULT else (arg,)


def raise_invalid(message: str) -> None:
    raise InvalidArgument(message)


def open_service(store: str, destination: Destination | str | None = None, *,
                 worker_id: str | None = None, crash_hook: CrashHook | None = None,
                 claim_grace: float = CLAIM_GRACE_SECONDS,
                 retry_for: float = RETRY_FOR) -> MigrationService:
    """Open a service on ``store``: ``sqlite:///path.db``, ``sqlite:///:memory:`` or
    ``postgresql://USER[:PASSWORD]@HOST:PORT/DB[?schema=NAME]``.

    ``destination`` must be chosen: ``"sim"`` (the simulator kept beside the events in the same
    store, so separate processes share it), ``"sim+STORE_URL"``, ``"temporal://HOST:PORT/NS"``
    or a ``Destination`` object; without one the call is refused (no silent simulator).
    ``retry_for``: how long ``run_until_idle`` retries a migration that backs off before it
    reports it blocked.
    """
    if worker_id is not None:
        validate_worker_id(worker_id)
    app, chosen, on_close = open_store_and_destination(store, destination)
    return MigrationService(app, chosen, worker_id=worker_id, crash_hook=crash_hook,
                            on_close=on_close, claim_grace=claim_grace, retry_for=retry_for)


def _valid_retry_for(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not 0 <= seconds <= 3600:
        raise_invalid("retry_for must be a number of seconds from 0 to 3600")
    return float(seconds)
