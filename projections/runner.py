"""Polling the notification log into the views, a batch per transaction.

SQLite has no ``subscribe()``, so the runner polls ``recorder.select_notifications`` from the
tracked position. It never skips: a hole in the positions or an event it cannot decode or fold
stops it with an error naming that position, after committing everything before it (so the
views are as current as the log allows and a resumed run starts exactly there).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from eventsourcing.persistence import PersistenceError, Tracking
from sqlalchemy.exc import DBAPIError

from schedfence.domain.errors import DomainError
from schedfence.domain.errors import UndecodableEvent

from .projection import FenceProjection
from .view import Batch, FenceViews, TrackingConflict

BATCH_SIZE = 500
CONFLICT_RETRIES = 50


class ProjectionStopped(DomainError):
    """The projector cannot apply the event at ``position``; nothing after it is applied."""

    code = "projection_stopped"

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


class ProjectionGap(ProjectionStopped):
    code = "projection_gap"


class ProjectionUndecodable(UndecodableEvent):
    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


class Projector:
    """Runs ``FenceProjection`` over ``app``'s log into ``view``.

    ``tolerate_gaps``: PostgreSQL sequences leave holes where a save rolled back (an optimistic
    concurrency conflict); eventsourcing.postgres appends under an exclusive table lock, so a
    hole below a visible position is permanent and safe to pass. SQLite rowids have no holes,
    so there a hole means a lost event and stops the projector.
    """

    def __init__(self, app: Any, view: FenceViews, *, batch_size: int = BATCH_SIZE,
                 tolerate_gaps: bool = False,
                 timeout_error: Callable[[BaseException], Exception | None] | None = None
                 ) -> None:
        """``timeout_error``: the store's reading of a database error as a timeout (an
        exception naming it, raised instead), or None."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.app, self.view, self.batch_size = app, view, batch_size
        self.timeout_error = timeout_error or (lambda exc: None)
        self.tolerate_gaps = tolerate_gaps
        self.projection = FenceProjection(view)
        # One batch at a time per projector (the view stages it); other projectors, in this
        # process or another, are kept apart by the tracking compare-and-set instead.
        self._lock = threading.RLock()

    @property
    def position(self) -> int:
        return self.view.max_tracking_id(self.app.name) or 0

    def catch_up(self, on_batch: Callable[[Batch], None] | None = None) -> int:
        """Apply every event not yet applied; returns how many. Cheap when nothing is new.

        ``on_batch`` is called with each batch once it has committed (its ``position``, how
        many events it ``applied``, and ``mono_us``, the newest event time through it), also
        with the part of a batch committed before a stop."""
        applied = 0
        with self._lock:
            while True:
                try:
                    batch, problem = self._one_batch()
                except (DBAPIError, PersistenceError) as exc:  # a timeout names itself
                    timed_out = self.timeout_error(exc)
                    if timed_out is None:
                        raise
                    raise timed_out from None
                applied += batch.applied
                if batch.applied and on_batch is not None:
                    on_batch(batch)
                if problem is not None:
                    raise problem
                if batch.applied == 0:
                    return applied

    def rebuild(self, on_batch: Callable[[Batch], None] | None = None) -> int:
        """Drop the views and project the whole log from position 0 (``on_batch``: as for
        ``catch_up``)."""
        with self._lock:
            self.view.drop_tables()
            self.view.create_tables()
            return self.catch_up(on_batch)

    def _one_batch(self) -> tuple[Batch, DomainError | None]:
        """One committed batch, and the error that stopped it early (if any)."""
        for _ in range(CONFLICT_RETRIES):
            batch = self.view.begin_batch(self.app.name)
            try:
                problem = self._fill(batch)
                if batch.applied:
                    self.view.commit_batch()
            except TrackingConflict:
                continue  # another projector got there first: read from its position
            finally:
                self.view.end_batch()
            return batch, problem
        raise ProjectionStopped("the projection kept changing under concurrent projectors; "
                                "retry", self.position + 1)

    def _fill(self, batch: Batch) -> DomainError | None:
        """Stage the batch's events; returns the error that stopped it early, if any."""
        notes = self.app.recorder.select_notifications(
            start=batch.base, limit=self.batch_size, inclusive_of_start=False)
        decoded, problem = self._decode(batch.base, notes)
        self.view.prefetch(str(n.originator_id) for n, _ in decoded)
        for note, event in decoded:
            try:
                self.projection.process_event(event, Tracking(self.app.name, note.id))
            except Exception as exc:  # the reducer rejected it: this history is not foldable
                return ProjectionStopped(
                    f"cannot apply {note.topic} at log position {note.id}: "
                    f"{type(exc).__name__}: {exc}; {_stopped(batch.position)}", note.id)
        return problem

    def _decode(self, base: int, notes: Any) -> tuple[list[tuple[Any, Any]], DomainError | None]:
        decoded: list[tuple[Any, Any]] = []
        expected = base + 1
        for note in notes:
            if note.id != expected and not self.tolerate_gaps:
                missing = f"{expected}" if note.id == expected + 1 else \
                    f"{expected}..{note.id - 1}"
                return decoded, ProjectionGap(
                    f"notification log gap: position {missing} is missing (the log jumps from "
                    f"{expected - 1} to {note.id}); {_stopped(expected - 1)}", expected)
            try:
                event = self.app.mapper.to_domain_event(note)
            except Exception as exc:  # UndecodableEvent, or bytes that are not even JSON
                text = exc.message if isinstance(exc, UndecodableEvent) else \
                    (f"cannot decode the event at log position {note.id} ({note.topic}, "
                     f"aggregate {note.originator_id} version {note.originator_version}): "
                     f"{type(exc).__name__}: {str(exc)[:200]}")
                return decoded, ProjectionUndecodable(f"{text}; {_stopped(note.id - 1)}",
                                                      note.id)
            decoded.append((note, event))
            expected = note.id + 1
        return decoded, None


def _stopped(through: int) -> str:
    return f"the projection stopped after position {through}"
