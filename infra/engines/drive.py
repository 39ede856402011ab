"""Driving due work: the one function every driver of the worker calls (``drive``).

``schedfence worker`` (a pool, or one drain), the HTTP API's drain, ``run_until_idle``,
``run_workers`` and a batch job's drive between pages all come here, each with its parameters
(``Drive``): nothing is set on the service's worker beforehand.

A drive is a pool of threads over the due index (infra/engines/pool.py) until it is stopped
or, with ``until_idle``, until a pass finds nothing; then (``until_idle``) a drain
(infra/engines/drain.py): the due migrations' happy path in leased batches
(infra/engines/batch.py), each one's result counted as its first attempt, and every open
migration attempted until nothing more can progress; then the open forward migrations alike.
Without threads a drive is the drain alone.
"""
from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar
from uuid import UUID

from schedfence.infra.engines.drain import RETRY_FOR, DrainReport, Progress, drain
from schedfence.infra.engines.forward import ENDED_TOPICS, FORWARD_TOPICS, ForwardEngine
from schedfence.infra.engines.failures import after_attempt
from schedfence.infra.pacing import retry_call

if TYPE_CHECKING:  # the due index, leases and pool (SQLAlchemy) are imported on first use
    from schedfence.infra.engines.attempt import RollbackEngine
    from schedfence.infra.engines.due import DueWork
    from schedfence.infra.engines.lease import Leases
    from schedfence.infra.engines.pool import PoolStats

T = TypeVar("T")
PassHook = Callable[[int, int], None]  # (thread, progressed) after each pass of a pool thread
ErrorHook = Callable[[int, str], None]  # (thread, message) for each failed pass


def unique_worker_id(base: str, index: int | None = None, token: str | None = None) -> str:
    """``base#token[/index]``: the user's id stays the prefix, the rest is a pool's (or one
    drive's) own."""
    wid = f"{base}#{token or secrets.token_hex(4)}"
    return wid if index is None else f"{wid}/{index}"


class OpenForwards:
    """The forward migrations a worker may move of one store: requested, not completed,
    aborted or parked, in the order they were requested (read from the log by topic; no
    aggregate is loaded). Kept by the service and called by every pass of a pool's threads:
    each call reads only the notifications after the log position the last one reached.

    Reading a topic's notifications by position misses nothing because notification ids
    commit in order: every append takes the events table's EXCLUSIVE lock before its ids
    are drawn (eventsourcing's PostgreSQL recorder, pg_recorder.py, the standby's copy; its
    insert function, which takes none, is never used: eventstore.py), and SQLite has one
    writer at a time. So once the highest id is read, every id at or below it that will ever
    commit has. A log that no longer holds the event at the position reached (an
    asynchronous failover lost its tail, and ids are drawn again) is read again whole."""

    TOPICS = FORWARD_TOPICS + ENDED_TOPICS

    def __init__(self, app: Any) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._open: dict[UUID, None] = {}
        self._reached: tuple[int, tuple[UUID, int] | None] = (0, None)  # position, its event

    def __call__(self) -> list[UUID]:
        with self._lock:  # one reader at a time; the others then find nothing new
            retry_call(self._catch_up, **self.app.read_retry())  # the store never calls up
            return list(self._open)

    def _catch_up(self) -> None:
        position, event = self._reached
        tail = self.app.recorder.max_notification_id() or 0
        if position and (tail < position or self._event_at(position) != event):
            self._open.clear()  # not the log read so far: read it again from its start
            position = 0
        elif tail == position:
            return
        for note in self.app.notifications(self.TOPICS, start=position + 1, stop=tail):
            if note.topic in ENDED_TOPICS:
                self._open.pop(note.originator_id, None)
            else:  # requested: a forward migration's first event, before any end of it
                self._open[note.originator_id] = None
        self._reached = (tail, self._event_at(tail) if tail else None)

    def _event_at(self, position: int) -> tuple[UUID, int] | None:
        found = self.app.recorder.select_notifications(start=position, stop=position, limit=1)
        return (found[0].originator_id, found[0].originator_version) if found else None


class Once(Generic[T]):
    """``build()``, built on the first call and the same after (also when a pool's threads
    call at the same moment): a part handed down ready to build, whose ``build`` is code of
    this layer or below (a ``partial`` of a constructor), never a call back up into the
    service that made it."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build, self._lock = build, threading.Lock()
        self._built: list[T] = []

    def __call__(self) -> T:
        if not self._built:
            with self._lock:
                if not self._built:
                    self._built.append(self._build())
        return self._built[0]


@dataclass(frozen=True)
class WorkParts:
    """What driving needs of a service, and no more (never the service itself). ``due``,
    ``leases`` and a forward worker are built on first use: a drain that counts its attempts
    takes no lease, and one on a store with no forward migration needs no Schedules API."""

    worker: RollbackEngine  # the service's: its store, destination, crash hook, grace, identity
    due: Callable[[], DueWork]
    leases: Callable[[], Leases]
    forward_ids: Callable[[], list[UUID]]
    forward_worker: Callable[[str], ForwardEngine]  # one working under the given identity


@dataclass(frozen=True)
class Drive:
    """How one drive runs. ``threads``: None, the drain alone; N, a pool of N threads first
    (until ``stop`` is set, or with ``until_idle`` until a pass finds nothing), then, with
    ``until_idle`` and ``then_drain``, the drain, trusting the pool's claims as its own (their
    start calls have all returned). ``retry_for``: None, ``RETRY_FOR`` (the service passes
    its own). ``claim_grace``: None, the service worker's. ``worker_id``: the drain's
    identity; None, the service's own worker (a pool's threads make their own).
    ``own_prefix``: claims recorded under this identity (a finished pool's) are the drain's
    own. ``progress``: the drain's (drain.py)."""

    threads: int | None = None
    until_idle: bool = True
    then_drain: bool = True
    max_attempts: int | None = None
    retry_for: float | None = None
    claim_grace: float | None = None
    worker_id: str | None = None
    own_prefix: str | None = None
    progress: Progress | None = None
    poll_interval: float = 1.0
    stop: threading.Event | None = None
    on_pass: PassHook | None = None
    on_error: ErrorHook | None = None


@dataclass(frozen=True)
class Driven:
    """What a drive did: the pool's stats (None without threads) and the drain's report
    (None without a drain)."""

    stats: PoolStats | None
    report: DrainReport | None


def drive(parts: WorkParts, how: Drive = Drive()) -> Driven:
    """Drive due work as ``how`` says (see the module's docstring)."""
    own = parts.worker
    if how.claim_grace is not None:
        parts = replace(parts, worker=parts.worker.as_worker(parts.worker.worker_id,
                                                             how.claim_grace))
    stats = None
    if how.threads is not None:
        from schedfence.infra.engines.pool import WorkerPool
        parts.leases()  # built (its lease time checked) before any thread starts
        pool = WorkerPool(parts, how.threads, poll_interval=how.poll_interval,
                          on_pass=how.on_pass, on_error=how.on_error)
        stats = pool.run(how.stop or threading.Event(), how.until_idle)
        if not (how.until_idle and how.then_drain):
            return Driven(stats, None)
    worker = _drain_worker(parts, how.worker_id,
                           stats.identity if stats is not None else how.own_prefix)
    retry_for = RETRY_FOR if how.retry_for is None else how.retry_for
    try:
        return Driven(stats, drain_idle(parts, worker, how.max_attempts, retry_for,
                                        how.progress))
    finally:
        if worker is not own:
            worker.close()  # its start threads


def _drain_worker(parts: WorkParts, worker_id: str | None,
                  own_prefix: str | None) -> RollbackEngine:
    """The drain's worker: the service's own, or one under ``worker_id``; claims under
    ``own_prefix`` (a finished pool's: its start calls all returned) count as its own. The
    service's own worker keeps trusting them after (it outlives the drive)."""
    worker = parts.worker
    if worker_id is not None:
        worker = worker.as_worker(worker_id)
        worker.own_prefix = parts.worker.own_prefix  # what the service's worker trusts
    if own_prefix is not None:
        worker.own_prefix = own_prefix
    return worker


def drain_idle(parts: WorkParts, worker: RollbackEngine, max_attempts: int | None,
               retry_for: float, progress: Progress | None = None) -> DrainReport:
    """Attempt every open migration as ``worker`` until nothing more can progress; what backs
    off is retried for ``retry_for`` seconds (0: one try each)."""
    batched = batch_pass(parts, worker) if max_attempts is None else {}
    unseen = set(batched)  # batched ones the drain never asked for (finished)

    stalls = parts.due().stalls

    def attempt(mid: UUID) -> str:  # a batched migration's first attempt was the batch's
        unseen.discard(mid)
        result = batched.pop(mid, None) or worker.attempt(mid)
        after_attempt(stalls, worker.notes, mid, result, "rollback")
        return result
    report = drain(attempt, parts.due().open_ids, max_attempts, retry_for,  # 0: try once
                   progress=progress, wait_for=worker.claim_grace if retry_for > 0 else 0.0)
    report = DrainReport(int(report) + len(unseen), report.blocked, report.exhausted,
                         _refused(worker.refusals, report.blocked))
    if not parts.forward_ids():
        stalls.prune(parts.due().open_ids())
        return report
    fworker = parts.forward_worker(parts.worker.worker_id)

    def forward_attempt(mid: UUID) -> str:
        result = fworker.attempt(mid)
        after_attempt(stalls, fworker.notes, mid, result, "forward")
        return result
    forward = drain(forward_attempt, parts.forward_ids, max_attempts, retry_for,
                    progress=progress)
    stalls.prune(parts.due().open_ids() + parts.forward_ids())
    return DrainReport(int(report) + int(forward), report.blocked + forward.blocked,
                       report.exhausted or forward.exhausted,
                       report.refused + _refused(fworker.refusals, forward.blocked))


def _refused(refusals: dict[UUID, str], blocked: tuple[str, ...]) -> tuple[str, ...]:
    """The refusal line of each blocked migration the destination gate refused."""
    return tuple(refusals[UUID(m)] for m in blocked if UUID(m) in refusals)


def batch_pass(parts: WorkParts, worker: RollbackEngine) -> dict[UUID, str]:
    """The due migrations' happy path in batches (infra/engines/batch.py), each one's result;
    the drain counts it as that migration's first attempt and finishes the rest one by one."""
    from schedfence.infra.engines.attempt import BATCH_SIZE
    from schedfence.infra.engines.batch import leased_batches
    results: dict[UUID, str] = {}
    seen: set[UUID] = set()
    while True:  # page by page: finished ones leave the due list, others are not re-read
        due = [mid for mid, _ in parts.due().due(BATCH_SIZE * 10) if mid not in seen]
        if not due:
            return results
        seen.update(due)
        # One another process holds is left to the drain (one by one, unleased: safety
        # never rests on a lease, and a dead holder's may not have expired).
        for batch in leased_batches(worker, parts.leases(), due):
            results.update(batch)
