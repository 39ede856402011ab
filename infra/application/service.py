"""The application service: admin commands, the worker loop and read views over one store."""
from __future__ import annotations

import os
import socket
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable
from uuid import UUID

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import steps as h
from schedfence.domain.errors import (AlreadyExists, DomainError, InvalidArgument, NotFound,
                                      RecoveryRefused)
from schedfence.domain.failover import STORE_EPOCH_ID, StoreEpoch, check_active
from schedfence.domain.ids import (destination_workflow_id, validate_destination_key,
                                   validate_request_id)
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.ports import (Destination, DestinationNotFound, DestinationUnavailable,
                                     command_error)
from schedfence.domain.source.incarnation import latest_migration_id
from schedfence.domain.text import validate_actor, validate_reason, validate_worker_id

from schedfence.infra.adapters.store.aggregates import Aggregates
from schedfence.infra.adapters.store.eventstore import (FenceApplication, open_application, parse_store_url,
                                               retry_on_conflict)
from schedfence.infra.application.views import HistoryEntry, MigrationView, MigrationResult, operator_views
from schedfence.infra.adapters.destination.choose import CHOOSE_API, check_spec, open_destination
from schedfence.infra.engines.drain import RETRY_FOR, DrainReport, drain
from schedfence.infra.engines.attempt import CLAIM_GRACE_SECONDS
from schedfence.domain.ports import CrashHook
from schedfence.infra.application.schedules import ScheduleCommands
from schedfence.infra.application.forward import ForwardCommands

if TYPE_CHECKING:
    from schedfence.domain.invariants.checker import Violation
    from schedfence.projections import service_views as pv
    from schedfence.projections.queries import CursorAuditPage
    from schedfence.projections.records import MigrationRow, OnCallItem
    from schedfence.infra.engines.batch import BatchWorker
    from schedfence.infra.engines.due import DueWork
    from schedfence.infra.engines.lease import Leases
    from schedfence.infra.engines.pool import PoolStats
# Imported where used: what a command such as `status` never runs (the invariant checker,
# recovery, replay, replication, the worker pool) stays out of its start-up; so are the batch
# worker, the operator views, the due index and the leases (SQLAlchemy), built on first use.

MIGRATION_TOPICS = (Migration.RequestIdAssigned.TOPIC,)  # v1 (legacy) records share it
VIEWS_DEFAULT: Any = object()  # an argument left to the operator views' own default


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class MigrationService(ScheduleCommands, ForwardCommands):
    def __init__(self, app: FenceApplication, destination: Destination, *,
                 worker_id: str | None = None, crash_hook: CrashHook | None = None,
                 on_close: Callable[[], None] | None = None,
                 claim_grace: float = CLAIM_GRACE_SECONDS,
                 retry_for: float = RETRY_FOR) -> None:
        self.app = app
        self.retry_for = _valid_retry_for(retry_for)  # run_until_idle's default
        self.destination = destination
        self.worker_id = validate_worker_id(worker_id) if worker_id else default_worker_id()
        self.load = Aggregates(app)
        self.crash_hook = crash_hook
        self._worker_args = (app, destination, self.worker_id, crash_hook, claim_grace)
        self._parts: dict[str, Any] = {}  # see _part
        self._building = threading.RLock()
        self._on_close = on_close
        self._active = False  # proven not to be an unpromoted standby (require_active)

    # Built on first use: `status` needs none of them, a rollback only the worker.
    @property
    def worker(self) -> BatchWorker:
        from schedfence.infra.engines.batch import BatchWorker
        return self._part("worker", lambda: BatchWorker(*self._worker_args))

    @property
    def views(self) -> pv.OperatorViews:
        """The operator views: an SQLAlchemy engine on the store (infra/application/views.py)."""
        return self._part("views", lambda: operator_views(self.app))

    @property
    def due(self) -> DueWork:
        from schedfence.infra.engines.due import DueWork
        return self._part("due", lambda: DueWork(self.views, self.epoch))

    @property
    def leases(self) -> Leases:
        from schedfence.infra.engines.lease import Leases
        return self._part("leases", lambda: Leases(self.views.engine))

    def _part(self, name: str, build: Callable[[], Any]) -> Any:
        """``name``, built once (also when a worker pool's threads ask at the same moment)."""
        part = self._parts.get(name)
        if part is None:
            with self._building:  # reentrant: building the due index builds the views
                part = self._parts.get(name)
                if part is None:
                    part = self._parts[name] = build()
        return part

    def close(self) -> None:
        for name in ("views", "worker"):  # the worker's start threads, the views' engine
            if name in self._parts:
                self._parts[name].close()
        self.app.close()
        if self._on_close:
            self._on_close()

    def __enter__(self) -> MigrationService:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- admin (schedule commands: infra/application/schedules.py) --------------------------------
    def rollback(self, namespace: str, schedule_id: str, request_id: str | None = None,
                 actor: str = "") -> MigrationResult:
        validate_destination_key(namespace, schedule_id)
        if request_id is not None:
            validate_request_id(request_id)
        if actor not in ("", None):
            validate_actor(actor)
        self.require_active()
        return retry_on_conflict(
            lambda: self._rollback_once(namespace, schedule_id, request_id, actor),
            AlreadyExists("the schedule kept changing under concurrent rollbacks; retry"))

    def rollback_many(self, namespace: str, schedule_ids: list[str],
                      request_ids: list[str] | None = None,
                      actor: str = "") -> list[MigrationResult | DomainError]:
        """Roll back many schedules of one namespace, every accepted one in one append; one
        answer per schedule, in order (its result, or the refusal ``rollback`` would raise)."""
        from schedfence.infra.application.bulk import rollback_many
        return rollback_many(self, namespace, schedule_ids, request_ids, actor)

    def _rollback_once(self, namespace: str, schedule_id: str, request_id: str | None,
                       actor: str) -> MigrationResult:
        source = self.load.source(namespace, schedule_id)
        st = source.state
        rid, origin, mid = h.rollback_identity(namespace, schedule_id, st.incarnation,
                                               request_id)
        same, pending = self.load.migration_state(mid), self.load.migration_state(st.fence_migration_id)
        sentinel = None
        if d.rollback_gate(st, rid, same, pending) == "accept":  # only then ask the destination
            from schedfence.infra.application.bulk import rollback_check
            sentinel = rollback_check(self, namespace, schedule_id, st)
        change = h.rollback(st, str(source.id), rid, origin, mid, same=same, pending=pending,
                            last=self.load.migration_state(st.last_migration_id), sentinel=sentinel,
                            epoch=self.epoch(), actor=actor or self.worker_id)
        if change.outcome != "accepted":
            existing = same if same is not None else pending
            return MigrationResult(change.outcome, rid, existing.origin,
                                  change.migration_id)
        self.worker.save("rollback", *change.apply(source, None))  # one append, both
        return MigrationResult("accepted", rid, origin, change.migration_id)

    def _destination_check(self, namespace: str, schedule_id: str,
                           what: str) -> dict[str, Any]:
        """What the destination shows at the schedule's workflow id, as recorded on the
        event it justifies (the sentinel gate, I12; a source create, I1)."""
        workflow_id = destination_workflow_id(schedule_id)
        try:
            current = self.destination.describe(namespace, workflow_id)
        except DestinationNotFound:
            current = None
        except DestinationUnavailable as exc:
            raise command_error(exc, f"the {what}") from exc
        return d.destination_check(workflow_id, current)

    def epoch(self) -> int:
        """The store's epoch: how many failovers were recorded on it (domain/failover.py)."""
        return self.load.epoch()

    def require_active(self) -> None:
        """Refuse to act on a standby that was not promoted since its last copy: its claims
        may have been used on the active already (domain/failover.py)."""
        if self._active:
            return
        from schedfence.infra.adapters.replication.standby import PREFIX, replica_positions
        found = self.app.read_retrying(lambda: self.app.find(STORE_EPOCH_ID))
        copied = self.app.read_retrying(lambda: replica_positions(self.app))
        check_active(copied, found.state if found is not None else None,
                     shown=lambda name: name.removeprefix(PREFIX))
        self._active = True

    def promote(self, actor: str, reason: str) -> int:
        """Record that this store is now the active one after a failover; returns the new
        epoch. Every migration accepted before it reconciles before it may act again."""
        validate_actor(actor)
        validate_reason(reason)
        from schedfence.infra.adapters.replication.standby import replica_positions

        def record() -> int:
            store_epoch = self.app.find(STORE_EPOCH_ID) or StoreEpoch.start()
            epoch = store_epoch.record_failover(actor, reason, replica_positions(self.app))
            self.app.save(store_epoch)
            return epoch

        return retry_on_conflict(record, AlreadyExists("another promotion ran concurrently"))

    def abort(self, namespace: str, schedule_id: str, reason: str, actor: str) -> MigrationView:
        """Cancel the open migration and restore the source, only where the protocol allows it (F9)."""
        validate_reason(reason)
        validate_actor(actor)
        self.require_active()
        return retry_on_conflict(
            lambda: self._abort_once(namespace, schedule_id, reason, actor),
            RecoveryRefused("the migration kept changing under a running worker; retry"))

    def _abort_once(self, namespace: str, schedule_id: str, reason: str,
                    actor: str) -> MigrationView:
        source = self.load.source(namespace, schedule_id)
        migration = self.load.migration(source.state.fence_migration_id)
        change = h.abort(source.state, migration and migration.state, actor, reason,
                         self.epoch())
        self.worker.save("abort", *change.apply(source, migration))
        return MigrationView.of(migration.state, migration.version)

    def recover(self, kind: str, namespace: str, schedule_id: str, *, actor: str, reason: str,
                request_id: str | None = None, **options: Any) -> MigrationView:
        """Operator recovery: rearm | abort | adopt | resolve (infra/application/recovery.py)."""
        from schedfence.infra.application.recovery import recover as recover_migration
        self.require_active()
        return recover_migration(self, kind, namespace, schedule_id, actor=actor,
                                 reason=reason, request_id=request_id, **options)

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
        from schedfence.infra.engines.pool import WorkerPool
        self.require_active()
        self.leases  # noqa: B018 - built (its lease time checked) before any thread starts
        pool = WorkerPool(self, concurrency, poll_interval=poll_interval, on_pass=on_pass,
                          on_error=on_error)
        return pool.run(stop, until_idle)

    def run_until_idle(self, max_attempts: int | None = None,
                       retry_for: float | None = None) -> DrainReport:
        """Attempt every open migration until nothing more can progress without an operator
        or a lasting outage (infra/engines/drain.py): what backs off is retried for ``retry_for``
        seconds (default: the service's, 5 s; 0 = one try each). The result is the number of
        attempts (an int) that also names what is left: ``.blocked``, ``.exhausted``,
        ``.drained``."""
        if max_attempts is not None and max_attempts < 1:
            raise_invalid("max_attempts must be at least 1")
        wait = self.retry_for if retry_for is None else _valid_retry_for(retry_for)
        self.require_active()
        batched = self._batch_pass(max_attempts)
        unseen = set(batched)  # batched ones the drain never asked for (finished)

        def attempt(mid: UUID) -> str:  # a batched migration's first attempt was the batch's
            unseen.discard(mid)
            return batched.pop(mid, None) or self.worker.attempt(mid)
        report = drain(attempt, self.open_migration_ids, max_attempts, wait,  # 0: try once
                       wait_for=self.worker.claim_grace if wait > 0 else 0.0)
        report = DrainReport(int(report) + len(unseen), report.blocked, report.exhausted)
        if not self.open_forward_ids():
            return report
        forward = drain(self.forward_worker.attempt, self.open_forward_ids, max_attempts, wait)
        return DrainReport(int(report) + int(forward), report.blocked + forward.blocked,
                           report.exhausted or forward.exhausted)

    def _batch_pass(self, max_attempts: int | None) -> dict[UUID, str]:
        """The due migrations' happy path in batches (infra/engines/batch.py), each one's
        result; the drain counts it as that migration's first attempt and finishes the rest
        one by one. Skipped when attempts are counted (``max_attempts``)."""
        results: dict[UUID, str] = {}
        if max_attempts is not None:
            return results
        from schedfence.infra.engines.batch import BATCH_SIZE, leased_batch
        seen: set[UUID] = set()
        while True:  # page by page: finished ones leave the due list, others are not re-read
            due = [mid for mid, _ in self.due.due(BATCH_SIZE * 10) if mid not in seen]
            if not due:
                return results
            seen.update(due)
            for start in range(0, len(due), BATCH_SIZE):
                # One another process holds is left to the drain (one by one, unleased:
                # safety never rests on a lease, and a dead holder's may not have expired).
                results.update(leased_batch(self.worker, self.leases,
                                            due[start:start + BATCH_SIZE]))

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
        from schedfence.infra.adapters.store.history import key_events, kind_of, topic_of
        source = self.load.source(namespace, schedule_id)
        return [HistoryEntry(position, kind_of(e), str(e.originator_id), e.originator_version,
                             topic_of(e), e.timestamp.isoformat(), e.payload())
                for position, e in key_events(self.app, namespace, schedule_id,
                                              source.state.incarnation)]

    def event_count(self) -> int:
        return self.app.read_retrying(self.app.event_count)

    def verify(self, also: str | None = None,
               progress: Callable[[int], None] | None = None) -> list[Violation]:
        """The checker over this store; with ``also`` (another copy of it, e.g. the old
        active after a failover), over both, and across them (I4: one chain per migration).
        ``progress(n)``: called with how many events of this store were read so far."""
        from schedfence.domain.invariants.checker import check_histories, check_history
        if also is None:
            return check_history(_decoded(self.app, progress))
        from schedfence.infra.adapters.replication.follower import open_copy
        other = open_copy(also)
        try:
            theirs, mine = check_histories([_decoded(other), _decoded(self.app, progress)])
        finally:
            other.close()
        return mine + [replace(v, message=f"in the other store: {v.message}") for v in theirs]

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
        """Default: ``service_views.STUCK_AFTER`` seconds."""
        return self.views.oncall(*_given(stuck_after_seconds))

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


def _decoded(app: FenceApplication, progress: Callable[[int], None] | None = None) -> Any:
    for n, note in enumerate(app.notifications(), 1):
        if progress is not None and n % PROGRESS_EVERY == 0:
            progress(n)
        yield note.id, app.mapper.to_domain_event(note)


PROGRESS_EVERY = 500  # events read between two progress calls


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
    if destination is None:
        raise InvalidArgument(CHOOSE_API)
    url = parse_store_url(store)
    if isinstance(destination, str):
        check_spec(destination)  # refused before the store is opened: nothing is created
    app = open_application(url)
    on_close: Callable[[], None] | None = None
    if isinstance(destination, str):
        try:
            opened = open_destination(destination, url)
        except BaseException:
            app.close()
            raise
        chosen: Destination = opened.destination
        destination, on_close = chosen, opened.close
    return MigrationService(app, destination, worker_id=worker_id, crash_hook=crash_hook,
                            on_close=on_close, claim_grace=claim_grace, retry_for=retry_for)


def _valid_retry_for(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not 0 <= seconds <= 3600:
        raise_invalid("retry_for must be a number of seconds from 0 to 3600")
    return float(seconds)
