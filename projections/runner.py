"""Polling the notification log into the views, a batch per transaction.

SQLite has no ``subscribe()``, so the runner polls ``recorder.select_notifications`` from the
tracked position. It never skips: a hole in the positions or an event it cannot decode or fold
stops it with an error naming that position, after committing everything before it (so the
views are as current as the log allows and a resumed run starts exactly there).
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from eventsourcing.persistence import PersistenceError, Tracking
from sqlalchemy.exc import DBAPIError

from schedfence.domain.errors import DomainError
from schedfence.domain.errors import UndecodableEvent

from .batch import Batch
from .projection import FenceProjection
from .view import FenceViews, TrackingConflict

BATCH_SIZE = 500
# A rebuild reads the whole log with nobody waiting on its first rows: bigger batches mean
# fewer commits and fewer rewrites of a migration's row (benchmarks/RESULTS.md).
REBUILD_BATCH_SIZE = 5000
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
                 tolerate_gaps: bool = False, pipeline: bool = False,
                 timeout_error: Callable[[BaseException], Exception | None] | None = None
                 ) -> None:
        """``timeout_error``: the store's reading of a database error as a timeout (an
        exception naming it, raised instead), or None. ``pipeline``: commit a full batch in a
        thread while the next is read (only where the engine's connections are independent:
        PostgreSQL, not SQLite's one shared connection)."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.app, self.view, self.batch_size = app, view, batch_size
        self.timeout_error = timeout_error or (lambda exc: None)
        self.tolerate_gaps, self.pipeline = tolerate_gaps, pipeline
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
        with self._lock:
            try:
                return self._catch_up(on_batch or (lambda batch: None))
            except (DBAPIError, PersistenceError) as exc:  # a timeout names itself
                timed_out = self.timeout_error(exc)
                if timed_out is None:
                    raise
                raise timed_out from None

    def rebuild(self, on_batch: Callable[[Batch], None] | None = None) -> int:
        """Drop the views and project the whole log from position 0 (``on_batch``: as for
        ``catch_up``)."""
        with self._lock:
            self.view.drop_tables()
            self.view.create_tables()
            size, self.batch_size = self.batch_size, max(self.batch_size, REBUILD_BATCH_SIZE)
            try:
                return self.catch_up(on_batch)
            finally:
                self.batch_size = size

    def _catch_up(self, on_batch: Callable[[Batch], None]) -> int:
        """Batch after batch until the log is exhausted. With ``pipeline``, while a full batch
        commits in a thread of its own the next one is read and folded on top of it (the
        view keeps the rows it touched); if that commit loses a race, the next batch is
        dropped and read again from the stored position."""
        applied, conflicts = 0, 0
        pending: tuple[Batch, Future[None]] | None = None
        with ThreadPoolExecutor(1, thread_name_prefix="projection-commit") as committer:
            while True:
                batch, problem, full = self._stage(pending[0] if pending else None)
                if pending is not None:
                    done, commit = pending
                    pending = None
                    try:
                        commit.result()
                    except TrackingConflict:
                        conflicts = self._conflicted(conflicts)
                        continue  # ``batch`` was built on it: read again
                    applied, conflicts = applied + done.applied, 0
                    on_batch(done)
                if batch.applied and full and problem is None and self.pipeline:
                    pending = batch, committer.submit(self.view.commit_batch, batch)
                    continue
                if batch.applied:
                    try:
                        self.view.commit_batch(batch)
                    except TrackingConflict:
                        conflicts = self._conflicted(conflicts)
                        continue
                    applied, conflicts = applied + batch.applied, 0
                    on_batch(batch)
                if problem is not None:
                    raise problem
                if not full:
                    return applied

    def _conflicted(self, conflicts: int) -> int:
        """Another projector committed first: count it, or give up after CONFLICT_RETRIES."""
        if conflicts + 1 >= CONFLICT_RETRIES:
            raise ProjectionStopped("the projection kept changing under concurrent projectors;"
                                    " retry", self.position + 1)
        return conflicts + 1

    def _one_batch(self) -> tuple[Batch, DomainError | None]:
        """One batch staged and committed (tests step with it); a lost race is read again."""
        conflicts = 0
        while True:
            batch, problem, _ = self._stage(None)
            try:
                if batch.applied:
                    self.view.commit_batch(batch)
            except TrackingConflict:
                conflicts = self._conflicted(conflicts)
                continue
            return batch, problem

    def _stage(self, after: Batch | None) -> tuple[Batch, DomainError | None, bool]:
        """The next batch read and folded (on the stored position, or on ``after``), sealed;
        the error that stopped it early, if any; and whether it read a whole ``batch_size``
        (so more may follow)."""
        batch = self.view.begin_batch(self.app.name, after)
        try:
            problem, read = self._fill(batch)
            self.view.seal_batch()
        finally:
            self.view.end_batch()
        return batch, problem, read == self.batch_size

    def _fill(self, batch: Batch) -> tuple[DomainError | None, int]:
        """Stage the batch's events; returns the error that stopped it early, if any, and how
        many notifications it read."""
        notes = self.app.recorder.select_notifications(
            start=batch.base, limit=self.batch_size, inclusive_of_start=False)
        decoded, problem = self._decode(batch.base, notes)
        first: dict[Any, int] = {}  # each aggregate's first version in the batch
        for note, _ in decoded:
            first.setdefault(note.originator_id, note.originator_version)
        self.view.prefetch(str(i) for i, version in first.items() if version > 1)
        handler, name = self.projection.handler, self.app.name
        for note, event in decoded:
            try:
                handler(type(event))(event, Tracking(name, note.id))
            except Exception as exc:  # the reducer rejected it: this history is not foldable
                return ProjectionStopped(
                    f"cannot apply {note.topic} at log position {note.id}: "
                    f"{type(exc).__name__}: {exc}; {_stopped(batch.position)}",
                    note.id), len(notes)
        return problem, len(notes)

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
