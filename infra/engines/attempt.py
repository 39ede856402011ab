"""The rollback engine: at-least-once, idempotent, safe to crash anywhere (docs/protocol.md,
the steps). One class, ``RollbackEngine``, drives a rollback: one migration at a time
(``attempt``) and the happy path for many at once (``attempt_batch``, whose steps are in
infra/engines/batch.py).

Every attempt reloads the migration, asks the pure ``next_step`` what it may do, makes at most
the destination calls that step allows, and appends the decision's events. The claim is
consumed durably *before* the only start call, so a crash between them leaves a migration that
can only reconcile, never start twice.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from datetime import datetime, timezone
from typing import Any, Callable, Self, cast
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import observe as ob
from schedfence.domain.rollback import steps as h
from schedfence.domain.destination_id import (DestinationMismatch, DestinationUnknown,
                                              bind_hint)
from schedfence.domain.errors import Closed, MigrationPending
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.ports import (Destination, DestinationError, DestinationNotFound,
                                     HandoverTarget, RetentionReader, SchedulerGone,
                                     DestinationUnavailable, RunDescription)
from schedfence.domain.rollback.evidence import (RETENTION_MARGIN_SECONDS, ClaimRecord,
                                         RetentionReading)
from schedfence.domain.process import AttemptResult, Step, rest_result
from schedfence.domain.source.schedule import Schedule

from schedfence.infra.adapters.destination.identity import check_destination
from schedfence.infra.adapters.observability.calls import latency_of
from schedfence.infra.adapters.observability.logs import get_logger
from schedfence.infra.adapters.store.aggregates import Aggregates
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.infra.pacing import AdaptiveLimit
from schedfence.domain.ports import CrashHook
from schedfence.infra.engines.failures import FailureNotes
from schedfence.infra.engines.gate import IDENTIFY, refused
from schedfence.infra.engines.unit_of_work import UnitOfWork

# AttemptResult (domain/process.py): "wait": another start may still land (the claim grace);
# a drain waits it out (drain.py).
# How long a claim consumed by *another* worker counts as in flight: its one start call may
# still be under way (deadline 5 s), and reconciling before it lands would see no run and
# park the migration head_missing while the start is about to commit.
CLAIM_GRACE_SECONDS = 15.0
LOG = get_logger("worker")
# Each step's destination call, by the port method it makes (the latency metric's ``call``).
CALLS = {"start": "start_workflow", "describe": "describe", "settle": "settle_handover",
         "settle_deleted": "settle_deleted",
         "retention": "retention_seconds"}
BACK_OFF = ("unavailable", "not_sent")  # start outcomes looked at again later, not at once
BATCH_SIZE = 50  # migrations per batch (infra/engines/batch.py)
# Start calls in flight at once: the whole batch, so a stop (taken between batches) lands
# within one call deadline even against a destination that never answers.
CONCURRENCY = BATCH_SIZE


# The Temporal adapter's default deadline (DEFAULT_RPC_TIMEOUT, infra/adapters/destination/
# temporal.py, not imported here: it brings temporalio); CLAIM_GRACE_SECONDS covers it.
DEFAULT_DEADLINE = 5.0


def covering_grace(claim_grace: float, destination: Any) -> float:
    """The claim grace, raised to cover a deadline set above the default (a URL's
    ``?rpc_timeout=``) where it would not: a start
    is sent within half the grace of its claim and must be answered (its ``rpc_timeout``,
    and the second its wait adds) within the other half (``start_in_time``). A grace of 0
    (tests) stays 0, and so does a grace given with the default deadline (the documented rule:
    at most half the grace). Every worker of a store must use the same destination URL and
    grace: a reconciler's grace is its own."""
    deadline = getattr(destination, "rpc_timeout", None)
    if claim_grace <= 0 or not isinstance(deadline, (int, float)) or \
            deadline <= DEFAULT_DEADLINE:
        return claim_grace  # the default grace covers the default deadline
    return max(claim_grace, 2.0 * (float(deadline) + 1.0))


def start_pacer(destination: Any) -> AdaptiveLimit:
    """The limit of a worker's start calls in flight (infra/pacing.py): the destination's own,
    fed by every call's answer time (a Temporal adapter's: it starts at 4 and adapts, so a
    server that slows down gets fewer calls instead of calls that run out their deadline);
    elsewhere (the simulator) a fixed one."""
    found = getattr(destination, "pacer", None)
    return found if isinstance(found, AdaptiveLimit) else AdaptiveLimit(CONCURRENCY)


class RollbackEngine:
    """The one engine of a rollback. ``attempt`` runs one migration's steps; ``attempt_batch``
    runs the happy path for many (infra/engines/batch.py, whose steps call this engine's
    ``save``, ``is_own``, ``claim_if_ours``, ``start_in_time``, ``record_answer``,
    ``verify_head`` and ``start_pool``) and leaves anything off it to ``attempt``."""

    concurrency: int = CONCURRENCY  # a batch's start calls in flight at once

    def __init__(self, app: FenceApplication, destination: Destination, worker_id: str,
                 crash_hook: CrashHook | None = None,
                 claim_grace: float = CLAIM_GRACE_SECONDS,
                 retention_margin: float = RETENTION_MARGIN_SECONDS) -> None:
        self.app, self.destination, self.worker_id = app, destination, worker_id
        self.load = Aggregates(app)
        self.unit = UnitOfWork.of(app, worker_id, crash_hook, LOG)
        self.claim_grace = covering_grace(claim_grace, destination)
        self.pacer = start_pacer(destination)  # shared by as_worker's engines
        self.retention_margin = retention_margin  # F16: retention less this proves absence
        # Claims under this identity (or its "/<thread>" ids) are this process's own too: a
        # finished pool's, whose start calls have all returned (``worker --until-idle``).
        self.own_prefix = ""
        self._pool: tuple[ThreadPoolExecutor | None, int] = (None, 0)  # see start_pool
        self.notes = FailureNotes()  # each attempt's last failed call (infra/engines/failures.py)
        self.refusals: dict[UUID, str] = {}  # refused by the destination gate: why, a line

    def as_worker(self, worker_id: str, claim_grace: float | None = None) -> Self:
        """An engine like this one (store, destination, crash hook, claim grace, retention
        margin) under another identity."""
        engine = type(self)(self.app, self.destination, worker_id, self.crash_hook,
                            self.claim_grace if claim_grace is None else claim_grace,
                            self.retention_margin)
        engine.pacer = self.pacer  # one limit for every thread's start calls
        return engine

    # -- boundaries: every append and every destination call is a crash point -------------
    @property
    def crash_hook(self) -> CrashHook:
        return self.unit.crash_hook

    @crash_hook.setter
    def crash_hook(self, hook: CrashHook | None) -> None:
        self.unit = self.unit.hooked(hook)

    def save(self, label: str, *aggregates: Any) -> None:
        self.unit.save(label, *aggregates)  # infra/engines/unit_of_work.py

    def _call(self, label: str, fn: Callable[[], Any]) -> Any:
        """A destination call (``fn``: the destination's own bound method with its arguments,
        so the latency timer below never calls back up into this module)."""
        timed = partial(latency_of(self.destination).time, CALLS[label], fn)
        return self.unit.call(label, partial(self.notes.calling, label, timed))

    def _commit(self, label: str, mig: Migration, change: h.Change,
                source: Schedule | None = None) -> None:
        """Save a decision's change (the source's events and the migration's) in one append."""
        self.save(label, *change.apply(source, mig))

    def _source(self, mig: Migration) -> Schedule:
        return self.app.repository.get(UUID(mig.state.source_id))  # the migration's own

    # -- many attempts: the happy path batched (infra/engines/batch.py) ---------------------
    def attempt_batch(self, ids: list[UUID]) -> dict[UUID, AttemptResult]:
        """Attempt every migration of ``ids``: the happy path batched, the rest one by one."""
        from schedfence.infra.engines.batch import attempt_batch  # loaded on first batch
        return attempt_batch(self, ids)

    def start_pool(self) -> ThreadPoolExecutor:
        """The batch's start threads, kept from batch to batch (making 50 threads per batch
        cost more than the simulator's starts); made again when ``concurrency`` changes."""
        size = max(1, self.concurrency)
        pool, made_for = self._pool
        if pool is None or made_for != size:
            self.close()
            pool = ThreadPoolExecutor(size, "batch-start")
            self._pool = (pool, size)
        return pool

    def close(self) -> None:
        """Let the start threads go (each is idle between batches)."""
        pool, _ = self._pool
        if pool is not None:
            pool.shutdown(wait=False)
            self._pool = (None, 0)

    # -- one attempt ------------------------------------------------------------------------
    def attempt(self, migration_id: UUID) -> AttemptResult:
        """Run steps for one migration until it needs nothing more, or must back off."""
        mig: Migration = self.app.repository.get(migration_id)
        with self.notes.attempt(migration_id, mig.modified_on):
            return self._attempt(mig)

    def _attempt(self, mig: Migration) -> AttemptResult:
        result: AttemptResult = "idle"
        migration_id = mig.id
        attempt = mig.state.attempts + 1
        epoch = self.epoch()
        for _ in range(8):  # a full rollback is at most claim, answer, chain, close
            try:
                # After a successful append the aggregate in hand is the stored one; it is
                # reloaded only when another writer won a race (its copy is then stale).
                step = self._step(mig, attempt, epoch)
            except IntegrityError:
                step = "progress"  # another worker moved it; reload and look again
                mig = self.app.repository.get(migration_id)
            except (MigrationPending, Closed):
                return result  # the fence no longer holds this id (I10): change nothing
            except (DestinationMismatch, DestinationUnknown) as exc:
                return refused(self.refusals, migration_id, exc, LOG, self.worker_id)
            if step != "progress":
                return step if step in ("backoff", "wait") else result
            result = "progress"
        return result

    def epoch(self) -> int:
        return self.load.epoch()

    def gate(self, st: Any) -> None:
        """Before any step that writes or calls: this process must serve the destination the
        migration was accepted against (domain/destination_id.py); refused otherwise."""
        check_destination(f"migration {st.namespace}/{st.schedule_id}", st.destination,
                          self.destination, bind_hint(st.namespace, st.schedule_id))

    def _step(self, mig: Migration, attempt: int, epoch: int) -> AttemptResult:
        st = mig.state
        age = _age(mig)
        in_flight = h.claim_in_flight(age, self.claim_grace, self.is_own(st.last_worker))
        step = h.task_step(st, epoch, in_flight, isinstance(self.destination, HandoverTarget))
        if step.rests:
            return rest_result(step)  # wait: another worker's start may still land: let it
        try:  # every step below writes or calls: on its own destination only
            self.notes.calling(IDENTIFY, lambda: self.gate(st))
        except DestinationUnavailable:
            return "backoff"  # the cluster's id could not be read: look again later
        if step is Step.SETTLE:
            return self._settle(mig, attempt)
        if step is Step.CLOSE:
            source = self._source(mig)
            self._commit("close", mig, h.close(source.state, st, attempt, self.worker_id),
                         source)
            return "progress"
        if step is Step.FAILOVER_RECONCILE:
            return self._failover_reconcile(mig, attempt, epoch)
        if step is Step.CLAIM_AND_START:
            return self._claim_and_start(mig, attempt)
        if step is Step.RECONCILE:
            return self._reconcile(mig, attempt)
        return self._check_foreign(mig, attempt)

    def _settle(self, mig: Migration, attempt: int) -> AttemptResult:
        """Before the close, a destination that took the whole schedule starts the times at
        the handover's boundary (HandoverTarget), and the log records which; an unknown
        outcome backs off with the source still fenced (the settle is idempotent). A schedule
        deleted since the receipt: the owed times before its delete are started as plain
        workflows (``settle_deleted``); its scheduler workflow unreadable, the migration parks
        ``deleted_unsettled`` with the source still fenced."""
        request = d.start_request(mig.state)
        target: Any = self.destination
        first = mig.state.receipt or ""
        try:
            try:
                done = self._call("settle", partial(target.settle_handover, request, first))
            except DestinationNotFound:  # deleted after the receipt: what came before it
                done = self._call("settle_deleted",
                                  partial(target.settle_deleted, request, first))
        except SchedulerGone as exc:
            self._commit("park", mig, h.settle_unreadable(mig.state, str(exc), attempt,
                                                          self.worker_id))
            return "progress"
        except DestinationError:
            return "backoff"
        self._commit("settle", mig, h.settled(mig.state, done.started, attempt, self.worker_id,
                                              done.detail, done.pin, done.deleted_at,
                                              done.over_limit, done.after_delete))
        return "progress"

    def is_own(self, worker: str | None) -> bool:
        return h.is_own_worker(worker, self.worker_id, self.own_prefix)

    def _claim_and_start(self, mig: Migration, attempt: int) -> AttemptResult:
        claimed = h.claim(self._source(mig).state, mig.state, attempt, self.worker_id)
        before = mig.state
        try:
            self._commit("claim", mig, claimed)
        except IntegrityError:
            raise
        except Exception as exc:  # the store failed the save: did the claim commit anyway?
            mig = self.claim_if_ours(mig.id, before, attempt, exc)
        answer = self.start_in_time(mig)
        if answer is None:
            return "wait"  # never sent: after the grace, absence re-arms it (F16)
        outcome = d.outcome_of_start(answer)
        recorded = self.record_answer(mig, outcome, attempt)
        if recorded is None:
            return "progress"  # another worker already proved the chain and took it on
        mig, head = recorded
        if head is not None:
            self.verify_head(mig, head, outcome, attempt)
        return "backoff" if outcome.kind in BACK_OFF else "progress"

    def start_in_time(self, mig: Migration) -> Any:
        """The one start call, and its answer (an error is data too); None if it was not
        sent because half the claim grace has passed since the claim: a start sent later
        could land after another worker waited out the grace, found no run and re-armed the
        claim on absence (F16). The destination's deadline must be within the other half."""
        if self.claim_grace > 0 and _age(mig) > self.claim_grace / 2:
            LOG.warning("worker %s: migration %s: start not sent %.1fs after its claim (grace "
                        "%gs); a reconcile after the grace decides", self.worker_id, mig.id,
                        _age(mig), self.claim_grace)
            return None
        request = d.start_request(mig.state)
        try:
            return self._call("start", partial(self.destination.start_workflow, request))
        except DestinationError as exc:  # the destination's answer, whatever it is, is data
            return exc

    def verify_head(self, mig: Migration, head: str, outcome: d.StartOutcome,
                     attempt: int) -> None:
        """A start answered with a run our id may not have created: prove the chain head."""
        obs = self._observe_head(mig.state.namespace, mig.state.workflow_id, head,
                                 outcome.run_id, outcome.status)
        self._commit("chain", mig, h.chain(self._source(mig).state, mig.state, obs, attempt,
                                           self.worker_id))

    def claim_if_ours(self, migration_id: UUID, before: Any, attempt: int,
                       exc: Exception) -> Migration:
        """A claim whose commit answer was lost (the connection dropped at COMMIT) may have
        committed. Reloaded, a claim that names this worker and attempt is ours, and its one
        start has not been sent: go on with it, rather than leave it to a reconcile that would
        find no run and park. Anything else: the save failed, raise."""
        if self.app.store_error(exc) is None:
            raise exc
        try:
            mig: Migration = self.app.read_retrying(
                lambda: self.app.repository.get(migration_id))
        except Exception:
            raise exc from None
        if not h.claimed_by(mig.state, before, self.worker_id, attempt):
            raise exc
        return mig

    def record_answer(self, mig: Migration, outcome: d.StartOutcome,
                       attempt: int) -> tuple[Migration, str | None] | None:
        """The one start's answer is evidence that must not be lost: when another worker
        moved the migration meanwhile (it reconciled before the start landed, say), decide
        again on top of what that worker wrote. None: nothing left to record."""
        for _ in range(8):
            if not mig.state.is_open or mig.state.receipt is not None:
                return None  # closed or accepted meanwhile: the answer adds nothing
            answered = h.answer(self._source(mig).state, mig.state, outcome, attempt,
                                self.worker_id)
            try:
                self._commit("answer", mig, answered)
                return mig, answered.head
            except IntegrityError:
                mig = self.app.repository.get(mig.id)
        return None  # still racing: the answer is lost, and reconcile decides from the log

    def _reconcile(self, mig: Migration, attempt: int) -> AttemptResult:
        obs = self._observe_chain_in_window(mig)
        if obs.failure == "no_current_run" and not obs.in_flight:
            obs = self._with_retention(mig, obs)
        verdict = h.chain(self._source(mig).state, mig.state, obs, attempt, self.worker_id)
        if verdict.empty:
            return "wait"  # absent, but inside the grace: look again after it
        self._commit("chain", mig, verdict)
        return "backoff" if obs.failure == "unavailable" else "progress"

    def _observe_chain_in_window(self, mig: Migration) -> d.ChainObservation:
        """The chain as read now, with how long ago the migration's last step was: whoever
        claimed it (this worker too, or one on the store before a failover), the one start
        may still be on its way."""
        obs = self._observe_chain(mig.state.namespace, mig.state.workflow_id)
        observed_at = datetime.now(timezone.utc)
        return replace(obs, claim_age=round(_age(mig, observed_at), 3),
                       claim_grace=self.claim_grace, observed_at=observed_at)

    def _with_retention(self, mig: Migration, obs: d.ChainObservation) -> d.ChainObservation:
        """No run at all at the workflow id: read the namespace's retention now, so the
        decision can tell whether that absence proves no create committed (F16). A failed
        read is an unreachable destination (nothing changes)."""
        dest = self.destination
        if not isinstance(dest, RetentionReader):
            return obs  # no retention known: absence proves nothing, as before
        try:
            seconds = self._call("retention",
                                 partial(dest.retention_seconds, mig.state.namespace))
        except DestinationError as exc:
            return replace(obs, failure="unavailable", detail=f"retention: {exc}")
        assert obs.observed_at is not None
        return replace(obs, retention=RetentionReading(
            obs.observed_at, float(seconds), self._latest_claim(mig), self.retention_margin))

    def _latest_claim(self, mig: Migration) -> ClaimRecord | None:
        """The latest claim in the migration's log, and the answer to its start since."""
        answer = "none"
        for event in self.app.events.get(mig.id, desc=True):
            if isinstance(event, Migration.DestinationAnswered) and answer == "none":
                answer = event.kind  # the latest answer, if it follows the latest claim
            if isinstance(event, Migration.StartClaimConsumed):
                return ClaimRecord(event.timestamp, answer)
        return None

    def _failover_reconcile(self, mig: Migration, attempt: int, epoch: int) -> AttemptResult:
        obs = self._observe_chain_in_window(mig)
        verdict = h.failover_reconcile(self._source(mig).state, mig.state, obs, epoch, attempt,
                                       self.worker_id)
        if verdict.empty:
            return "backoff"
        self._commit("failover", mig, verdict)
        return "progress"

    def _check_foreign(self, mig: Migration, attempt: int) -> AttemptResult:
        st = mig.state
        try:
            current = self._describe(st.namespace, st.workflow_id)
        except DestinationUnavailable:
            return "backoff"
        rearmed = h.foreign_check(st, current, attempt, self.worker_id)
        if rearmed.empty:
            return "idle"
        self._commit("rearm", mig, rearmed)
        return "progress"

    # -- reading the destination ------------------------------------------------------------
    def _describe(self, namespace: str, workflow_id: str,
                  run_id: str | None = None) -> RunDescription | None:
        try:
            return self._call("describe", partial(self.destination.describe,
                                              namespace, workflow_id, run_id))
        except DestinationNotFound:
            return None

    def _observe_chain(self, namespace: str, workflow_id: str) -> d.ChainObservation:
        current = self._read(namespace, workflow_id)
        obs = ob.observe_current(workflow_id, current)
        if obs is not None:
            return obs
        run = cast(RunDescription, current)  # observe_current judged every other answer
        return self._observe_head(namespace, workflow_id, run.first_execution_run_id,
                                  run.run_id, run.status)

    def _observe_head(self, namespace: str, workflow_id: str, first: str,
                      current_run_id: str, current_status: str) -> d.ChainObservation:
        head = self._read(namespace, workflow_id, first) if ob.head_to_read(first) else None
        return ob.observe_head(first, current_run_id, current_status, head)

    def _read(self, namespace: str, workflow_id: str, run_id: str | None = None) -> ob.Reading:
        """One describe's answer as data: the run, None (no run there), or the failure."""
        try:
            return self._describe(namespace, workflow_id, run_id)
        except DestinationUnavailable as exc:
            return exc


def _age(mig: Migration, now: datetime | None = None) -> float:
    """Seconds since the migration's last step, now (the step's own clock is the writer's)."""
    return ((now or datetime.now(timezone.utc)) - mig.modified_on).total_seconds()
