"""A pool of worker threads over the due-work index (``schedfence worker --concurrency N``).

Any number of pools, in any number of processes, may run on one store at once. They compete
for the same due migrations; nothing is leased. Every attempt reloads its migration and the
store's optimistic concurrency decides each race (one claim consumed once, one receipt, one
close): a loser's append fails, it reloads, and continues from what the winner wrote. Inside
one pool, thread ``i`` of ``N`` takes the migrations whose id hashes to ``i``, so threads of
one process do not race each other; across processes the due list is shuffled per pass.
"""
from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable
from uuid import UUID

from domain.errors import DomainError

from .worker import TaskWorker

BATCH = 200  # due migrations read per pass
PRUNE_EVERY = 60.0  # seconds between clean-ups of finished migrations' backoff rows


@dataclass
class PoolStats:
    passes: int = 0
    attempts: int = 0
    results: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"passes": self.passes, "attempts": self.attempts,
                "results": dict(self.results), "errors": self.errors[-10:]}


class WorkerPool:
    def __init__(self, service: Any, concurrency: int = 1, *, poll_interval: float = 1.0,
                 on_pass: Callable[[int, int], None] | None = None,
                 on_error: Callable[[int, str], None] | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.service, self.concurrency, self.poll_interval = service, concurrency, poll_interval
        self.on_pass = on_pass or (lambda thread, progressed: None)
        self.on_error = on_error or (lambda thread, message: None)
        self.stats = PoolStats()
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._pruned_at = 0.0

    def _worker(self, index: int) -> TaskWorker:
        base = self.service.worker
        wid = base.worker_id if self.concurrency == 1 else f"{base.worker_id}/{index}"
        return TaskWorker(base.app, base.destination, wid, base.crash_hook, base.claim_grace)

    def run(self, stop: threading.Event, until_idle: bool = False) -> PoolStats:
        """Run until ``stop`` is set (or, with ``until_idle``, until a pass finds nothing)."""
        threads = [threading.Thread(target=self._loop, args=(i, stop, until_idle),
                                    name=f"schedfence-worker-{i}", daemon=True)
                   for i in range(self.concurrency)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.5)  # wake up for KeyboardInterrupt
        except KeyboardInterrupt:
            stop.set()
            for t in threads:
                t.join()
        return self.stats

    def _loop(self, index: int, stop: threading.Event, until_idle: bool) -> None:
        worker = self._worker(index)
        while not stop.is_set():
            try:
                progressed = self.one_pass(worker, index)[1]
            except Exception as exc:  # noqa: BLE001 - a thread must outlive a bad pass
                # E.g. the projection stopped, or the database went away: say so once per
                # pass, keep everything already appended, and try again after the interval.
                message = f"{exc.code}: {exc.message}" if isinstance(exc, DomainError) \
                    else f"internal: {type(exc).__name__}: {str(exc).strip()[:300]}"
                self._record_error(message)
                self.on_error(index, message)
                progressed = 0
            self.on_pass(index, progressed)
            if until_idle and not progressed:
                return
            if not progressed:
                stop.wait(self.poll_interval)

    def one_pass(self, worker: TaskWorker, index: int) -> tuple[int, int]:
        """Attempt this thread's due migrations once; returns (found, progressed)."""
        due = self.service.due
        ids = [(m, backed) for m, backed in due.due(BATCH) if self._mine(m, index)]
        self._rng.shuffle(ids)  # processes that read the same list start in different places
        progressed = 0
        for mid, backed_off in ids:
            result = worker.attempt(mid)
            if result == "progress":
                progressed += 1
                if backed_off:
                    due.clear(mid)
            else:
                due.back_off(mid, result)
            with self._lock:
                self.stats.attempts += 1
                self.stats.results[result] += 1
        with self._lock:
            self.stats.passes += 1
        if not ids and self._prune_due():
            due.prune()  # idle: a write, so not on every poll of every thread
        return len(ids), progressed

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
