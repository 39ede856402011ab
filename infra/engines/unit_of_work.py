"""The unit of work: the one way events are saved in infra.

Every decision's events, of every aggregate it changes, go to the store in **one** append
(one transaction): a save that loses an optimistic-concurrency race writes nothing, and the
caller reloads and decides again (``on_conflict``). Around an append that is a crash boundary
(``save``), the crash hook is called before and after it (``<label>.before_append``,
``<label>.after_append``: tests raise there to simulate a process dying) and, once it
succeeded, each appended event is one log record naming the worker. A destination call is a
crash boundary too (``call``: ``<label>.before_call``, ``<label>.after_call``).

``append`` is the same one append without crash points or log records: the saves that are not
crash boundaries (the schedule commands', a promotion's, the source scheduler's).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable, TypeVar

from schedfence.domain.ports import CrashHook
from schedfence.infra.adapters.observability.logs import appending, get_logger
from schedfence.infra.adapters.store.eventstore import conflict_retry

T = TypeVar("T")
LOG = get_logger("worker")


def no_crash(point: str) -> None:
    """The crash hook of a process that is not under test: nothing happens."""


@dataclass(frozen=True)
class UnitOfWork:
    """Saves on ``app`` as ``worker_id``, calling ``crash_hook`` at every boundary."""

    app: Any
    worker_id: str = ""
    crash_hook: CrashHook = no_crash
    log: logging.Logger = field(default=LOG, compare=False)
    prefix: str = ""  # before every boundary's name (the forward worker's "forward.")

    @classmethod
    def of(cls, app: Any, worker_id: str = "", crash_hook: CrashHook | None = None,
           log: logging.Logger = LOG, prefix: str = "") -> UnitOfWork:
        return cls(app, worker_id, crash_hook or no_crash, log, prefix)

    def as_worker(self, worker_id: str) -> UnitOfWork:
        """The same unit, logging its appends under another identity."""
        return replace(self, worker_id=worker_id)

    def hooked(self, crash_hook: CrashHook | None) -> UnitOfWork:
        """The same unit, calling another crash hook."""
        return replace(self, crash_hook=crash_hook or no_crash)

    def crash(self, point: str) -> None:
        """One crash point, by its full name (the scheduler's ``before_tick_save``...)."""
        self.crash_hook(point)

    def save(self, label: str, *aggregates: Any) -> None:
        """One decision's events, every aggregate's, in one append: a crash boundary, logged."""
        self.crash_hook(f"{self.prefix}{label}.before_append")
        with appending(self.log, aggregates, self.worker_id):
            self.app.save(*aggregates)
        self.crash_hook(f"{self.prefix}{label}.after_append")

    def append(self, *aggregates: Any) -> None:
        """One decision's events in one append, not a crash boundary (and not logged)."""
        self.app.save(*aggregates)

    def call(self, label: str, fn: Callable[[], T]) -> T:
        """A destination call between its two crash points."""
        self.crash_hook(f"{self.prefix}{label}.before_call")
        try:
            return fn()
        finally:
            self.crash_hook(f"{self.prefix}{label}.after_call")

    @staticmethod
    def on_conflict(exhausted: Exception) -> dict[str, Any]:
        """How a use case runs again after it lost a race, as ``pacing.retry_call``'s
        arguments: ``retry_call(once, **unit.on_conflict(exhausted))`` runs ``once`` (it reloads
        and decides again on what the winner wrote) until it saves, and raises ``exhausted`` when
        the aggregates keep changing under it. The use case calls the loop itself, so its own
        body never runs from a frame below it."""
        return conflict_retry(exhausted)
