"""What an attempt that could not progress last ran into, kept by the engine that made it.

An attempt that backs off (the destination unavailable, a settle the server's busy scheduler
workflow times out) writes no event: without this, the error would be gone once the attempt
returned. Each engine's destination calls go through ``FailureNotes.calling``, which remembers
the last failed call of the attempt its thread is running (``attempt``); the driver that counts
the attempt's result takes it (``take``) and records it in the store's stall table
(infra/engines/stalls.py), where ``oncall`` reads it from any process. No SQL here: the
engines import it, and commands that never drive work stay light.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator, TypeVar
from uuid import UUID

T = TypeVar("T")
MAX_ERROR = 500  # characters of an error kept


@dataclass(frozen=True)
class Failure:
    """An attempt's last failure: the ``step`` (the destination call's label, or ``wait`` /
    ``backoff`` when no call failed), the ``error`` (None: none raised) and the instant of the
    migration's last event when the attempt began (``since_event``: a stall noted before it is
    an older streak)."""

    step: str
    error: str | None
    since_event: datetime | None


class FailureNotes:
    """Per migration, the last failure of its latest attempt (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local = threading.local()
        self._notes: dict[UUID, Failure] = {}

    @contextmanager
    def attempt(self, migration_id: UUID, last_event: datetime | None) -> Iterator[None]:
        """Calls made in this block (in this thread) are ``migration_id``'s."""
        self._local.current = (migration_id, last_event)
        with self._lock:
            self._notes.pop(migration_id, None)
        try:
            yield
        finally:
            self._local.current = None

    def began(self, last_event: datetime) -> None:
        """The migration's last event when the current attempt began, for an attempt opened
        before its migration was loaded (kept once)."""
        current = getattr(self._local, "current", None)
        if current is not None and current[1] is None:
            self._local.current = (current[0], last_event)

    def calling(self, step: str, fn: Callable[[], T]) -> T:
        """``fn()``; an exception it raises is noted as the current attempt's failure."""
        try:
            return fn()
        except Exception as exc:
            self.failed(step, f"{type(exc).__name__}: {exc}")
            raise

    def failed(self, step: str, error: str | None) -> None:
        current = getattr(self._local, "current", None)
        if current is None:
            return  # a call outside an attempt (a batch's start thread): its answer is an event
        mid, since = current
        with self._lock:
            self._notes[mid] = Failure(step, None if error is None else error[:MAX_ERROR], since)

    def take(self, migration_id: UUID, result: str) -> Failure | None:
        """The failure of ``migration_id``'s latest attempt, whose result was ``result`` (None
        when it progressed or needed nothing: no stall)."""
        with self._lock:
            found = self._notes.pop(migration_id, None)
        if result not in ("backoff", "wait"):
            return None
        return found or Failure(result, None, None)


def after_attempt(table: Any, notes: FailureNotes, migration_id: UUID, result: str,
                  direction: str) -> None:
    """Note a stall in ``table`` (infra/engines/stalls.py's ``Stalls``) when the attempt
    ``notes`` kept could not progress (``backoff``, ``wait``); nothing otherwise."""
    failure = notes.take(migration_id, result)
    if failure is not None:
        table.note(migration_id, direction, failure)
