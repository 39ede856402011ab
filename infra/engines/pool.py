"""A pool of worker threads over the due-work index (``schedfence worker --concurrency N``).

Any number of pools, in any number of processes, may run on one store at once. A pass reads
the due migrations, leases them a batch at a time (infra/engines/lease.py: a migration another
process holds is left to it) and attempts each batch together (infra/engines/batch.py). Leases
only spare wasted work: every attempt reloads its migration and the store's optimistic
concurrency decides each race (one claim consumed once, one receipt, one close): a loser's
append fails, it reloads, and continues from what the winner wrote. Inside one pool, thread
``i`` of ``N`` takes the migrations whose id hashes to ``i``, so threads of one process do not
race each other; across processes the due list is shuffled per pass.

Each thread works under its own identity, ``<worker id>#<pool token>/<thread>``: the claim
grace trusts only a claim recorded under the attempting thread's own identity, so two
processes started with the same ``--worker-id`` must never share one.

A thread outlives every exception of a pass, the pass's callbacks included. Should one die
anyway (a bug), ``run`` stops the others and raises ``WorkerThreadDied``: a process whose
share of the due work silently stalls would be worse than one that exits non-zero.
"""
from __future__ import annotations

import math
import random
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable
from uuid import UUID

from schedfence.domain.errors import DomainError
from schedfence.domain.text import one_line

from schedfence.infra.adapters.observability.logs import get_logger
from schedfence.infra.engines.attempt import BATCH_SIZE, RollbackEngine
from schedfence.infra.engines.batch import leased_batches
from schedfence.infra.engines.drive import unique_worker_id
from schedfence.infra.engines.failures import after_attempt

BATCH = 200  # due migrations read per pass
PRUNE_EVERY = 60.0  # seconds between clean-ups of finished migrations' backoff rows
MAX_POLL_INTERVAL = 3600.0  # seconds; also the bound of ``--poll-interval``
MAX_MESSAGE = 300  # characters of an exception's text kept in an error line
LOG = get_logger("worker.pool")  # each failed pass: one warning record (infra/observability)

if TYPE_CHECKING:  # the pool is given the parts it needs (drive.py), never the service
    from schedfence.infra.engines.drive import WorkParts


class WorkerThreadDied(RuntimeError):
    """A pool thread ended by an exception its loop could not absorb."""


def error_message(exc: BaseException) -> str:
    if isinstance(exc, DomainError):
        return one_line(f"{exc.code}: {exc.message}", MAX_MESSAGE)
    return one_line(f"internal: {type(exc).__name__}: {exc}", MAX_MESSAGE)


@dataclass
class PoolStats:
    passes: int = 0
    attempts: int = 0
    results: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    identity: str = ""  # <worker id>#<token>: every thread's id is this, or this + "/<n>"

    def to_dict(self) -> dict[str, Any]:
        return {"passes": self.passes, "attempts": self.attempts,
                "results": dict(self.results), "errors": self.errors[-10:]}


class WorkerPool:
    def __init__(self, parts: WorkParts, concurrency: int = 1, *, poll_interval: float = 1.0,
                 on_pass: Callable[[int, int], None] | None = None,
                 on_error: Callable[[int, str], None] | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not (isinstance(poll_interval, (int, float)) and math.isfinite(poll_interval)
                and 0 <= poll_interval <= MAX_POLL_INTERVAL):
            raise ValueError(f"poll_interval must be from 0 to {MAX_POLL_INTERVAL:g} seconds")
        self.parts, self.concurrency, self.poll_interval = parts, concurrency, poll_interval
        self.on_pass = on_pass or (lambda thread, progressed: None)
        self.on_error = on_error or (lambda thread, message: None)
        self.stats = PoolStats()
        self.token = secrets.token_hex(4)  # this pool's part of every thread's identity
        self.stats.identity = unique_worker_id(parts.worker.worker_id, None, self.token)
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._pruned_at = 0.0
        self._deaths: dict[int, BaseException] = {}

    def _worker(self, index: int) -> RollbackEngine:
        base = self.parts.worker
        return base.as_worker(unique_worker_id(
            base.worker_id, None if self.concurrency == 1 else index, self.token))

    def run(self, stop: threading.Event, until_idle: bool = False) -> PoolStats:
        """Run until ``stop`` is set (or, with ``until_idle``, until a pass finds nothing).

        Raises ``WorkerThreadDied`` (after stopping the other threads) if a thread died."""
        threads = [threading.Thread(target=self._thread, args=(i, stop, until_idle),
                                    name=f"schedfence-worker-{i}", daemon=True)
                   for i in range(self.concurrency)]
        for t in threads:
            t.start()
        try:
            self._supervise(threads, stop)
        except KeyboardInterrupt:
            stop.set()
            for t in threads:
                t.join()
        return self.stats

    def _supervise(self, threads: list[threading.Thread], stop: threading.Event) -> None:
        while True:
            if self._deaths:
                stop.set()  # the dead thread's share would stall: stop the whole pool
                for t in threads:
                    t.join()
                index, exc = min(self._deaths.items(), key=lambda item: item[0])
                raise WorkerThreadDied(f"worker thread {index} died: "
                                       f"{error_message(exc)}")
            alive = [t for t in threads if t.is_alive()]
            if not alive:
                return
            alive[0].join(timeout=0.2)  # wakes up for KeyboardInterrupt and for deaths

    def _thread(self, index: int, stop: threading.Event, until_idle: bool) -> None:
        try:
            self._loop(index, stop, until_idle)
        except BaseException as exc:  # noqa: BLE001 - reported by the supervisor, once
            self._deaths[index] = exc

    def _loop(self, index: int, stop: threading.Event, until_idle: bool) -> None:
        worker = self._worker(index)
        while not stop.is_set():
            progressed = self._guarded_pass(worker, index, stop)
            if until_idle and not progressed:
                return
            if not progressed:
                stop.wait(self.poll_interval)

    def _guarded_pass(self, worker: RollbackEngine, index: int, stop: threading.Event) -> int:
        """One pass and its callbacks; an exception of any of them is one error line."""
        try:
            progressed = self.one_pass(worker, index, stop)[1]
        except Exception as exc:  # noqa: BLE001 - a thread must outlive a bad pass
            # E.g. the projection stopped, or the database went away: say so once per
            # pass, keep everything already appended, and try again after the interval.
            self._report(index, exc)
            progressed = 0
        try:
            self.on_pass(index, progressed)
        except Exception as exc:  # noqa: BLE001 - e.g. the CLI's progress line reads the store
            self._report(index, exc)
        return progressed

    def _report(self, index: int, exc: Exception) -> None:
        message = error_message(self.parts.worker.app.store_error(exc) or exc)
        self._record_error(message)
        LOG.warning("worker thread %d: error: %s (retrying)", index, message,
                    extra={"worker": self.stats.identity, "worker_thread": index})
        try:
            self.on_error(index, message)
        except Exception:  # noqa: BLE001 - nowhere left to report to (stderr gone): go on
            pass

    def one_pass(self, worker: RollbackEngine, index: int,
                 stop: threading.Event | None = None) -> tuple[int, int]:
        """Attempt this thread's due migrations once; returns (found, progressed).

        ``stop`` is checked before every batch: once it is set no new claim is taken."""
        due = self.parts.due()
        ids = [(m, backed) for m, backed in due.due(BATCH) if self._mine(m, index)]
        self._rng.shuffle(ids)  # processes that read the same list start in different places
        backed = {m for m, b in ids if b}
        progressed = 0
        for batch in leased_batches(worker, self.parts.leases(), [m for m, _ in ids], stop,
                                    BATCH_SIZE):
            for mid, result in batch.items():
                progressed += self._account(mid, result, mid in backed)
                after_attempt(self.parts.due().stalls, worker.notes, mid, result, "rollback")
        progressed += self._forward_pass(worker, index, stop)
        with self._lock:
            self.stats.passes += 1
        if not ids and self._prune_due():
            due.prune()  # idle: a write, so not on every poll of every thread
        return len(ids), progressed

    def _account(self, mid: UUID, result: str, backed_off: bool) -> bool:
        """Record one attempt's result (the due-work backoff, the stats); whether it moved."""
        due = self.parts.due()
        if result == "progress":
            if backed_off:
                due.clear(mid)
        else:
            due.back_off(mid, result)
        with self._lock:
            self.stats.attempts += 1
            self.stats.results[result] += 1
        return result == "progress"

    def _forward_pass(self, worker: RollbackEngine, index: int,
                      stop: threading.Event | None) -> int:
        """This thread's open forward migrations (domain/forward/aggregate.py), attempted once each."""
        fids = [m for m in self.parts.forward_ids() if self._mine(m, index)]
        if not fids:
            return 0
        forward = self.parts.forward_worker(worker.worker_id)
        progressed = 0
        for mid in fids:
            if stop is not None and stop.is_set():
                break
            result = forward.attempt(mid)
            after_attempt(self.parts.due().stalls, forward.notes, mid, result, "forward")
            progressed += result == "progress"
            with self._lock:
                self.stats.attempts += 1
                self.stats.results[result] += 1
        return progressed

    def _prune_due(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if now - self._pruned_at < PRUNE_EVERY:
                return False
            self._pruned_at = now
            return True

    def _mine(self, migration_id: UUID, index: int) -> bool:
        return migration_id.int % self.concurrency == index

    def _record_error(self, message: str) -> None:
        with self._lock:
            self.stats.errors.append(message)
