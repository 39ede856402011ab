"""The operator views over one event store: one projector, caught up before every answer.

Every query first applies the events the projection has not seen (one cheap read when there
are none), then answers from the projection's indexed tables. The application builds it with
the engine on the store's database (infra/adapters/store/sql.py); nothing here knows the service.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime
from dataclasses import replace
from typing import Any, Callable, Sequence, cast
from uuid import UUID

from sqlalchemy.engine import Engine

from schedfence.domain.destination_id import describe_binding
from schedfence.domain.errors import InvalidArgument, UndecodableEvent

from . import audit_query as aq
from . import key_table as kt
from . import metrics as pm
from . import queries as q
from .cursors import keys_after
from .oncall import STUCK_AFTER as STUCK_AFTER  # the default, where "stuck" is decided
from .projection import FenceProjection
from .records import MigrationRow, OnCallItem
from .runner import ProjectionStopped, Projector
from .batch import RowWriter
from .view import FenceViews

MAX_ROWS = 1000
MAX_STUCK_AFTER = 100 * 365 * 86400.0  # a century, as the CLI's --stuck-after allows


class OperatorViews:
    """Audit, stats, on-call and migrations-by-state of ``app``'s log, from ``engine``'s tables
    (created on first use). ``tolerate_gaps``: see ``Projector``."""

    def __init__(self, app: Any, engine: Engine, *, tolerate_gaps: bool = False,
                 pipeline: bool = False,
                 write_options: dict[str, Any],
                 rows: RowWriter | None = None,
                 timeout_error: Callable[[BaseException], Exception | None] | None = None
                 ) -> None:
        self.app, self.engine = app, engine
        self._args: dict[str, Any] = {"tolerate_gaps": tolerate_gaps, "pipeline": pipeline,
                      "timeout_error": timeout_error}
        self._write_options, self._rows = write_options, rows
        self._projector: Projector | None = None
        self._lock = threading.Lock()

    @property
    def projector(self) -> Projector:
        """The projector, created (tables included) on first use."""
        with self._lock:
            if self._projector is None:
                view = FenceViews(self.engine, FenceProjection.name,
                                  write_options=self._write_options,
                                  rows=self._rows)
                view.create_tables()
                self._projector = Projector(self.app, view, **self._args)
            return self._projector

    def close(self) -> None:
        """Release the connections; a later query starts a fresh projector (tables checked
        again) on the same engine."""
        with self._lock:
            self._projector = None
        self.engine.dispose()

    def catch_up(self) -> int:
        return self.projector.catch_up()

    def rebuild(self, on_batch: Any = None) -> int:
        return self.projector.rebuild(on_batch)

    def _fresh(self) -> Projector:
        p = self.projector
        p.catch_up()
        return p

    def audit(self, *, schedule: str | None = None, request_id: str | None = None,
              migration_id: str | UUID | None = None, actor: str | None = None,
              since: str | datetime | None = None, until: str | datetime | None = None,
              newest_first: bool = False, limit: int = 100, namespace: str | None = None,
              event_types: Sequence[str] = (), after: str | None = None,
              exclude_types: Sequence[str] = (), job_id: str | None = None,
              ) -> aq.CursorAuditPage:
        """Events matching every given filter, in log order (``newest_first`` reverses it),
        a page of at most ``limit``: while more match, ``next_cursor`` is set; pass it back as
        ``after`` with the same filters for the next page.

        ``schedule`` is ``NAMESPACE/ID`` (the key: all incarnations and their migrations);
        ``event_types`` class names (``MigrationAborted``) or topics, any of them;
        ``exclude_types`` the same, none of them; ``job_id`` the events of the migrations that
        batch job requested (and the source events naming them);
        ``since``/``until`` are inclusive, ISO 8601 or a duration ago (``15m``, ``2h``).
        Each entry carries the ``reason`` its event gives (an operator's, a park's), if any."""
        query = aq.AuditQuery(
            schedule=q.parse_schedule(schedule) if schedule is not None else None,
            request_id=request_id, migration_id=_migration_id(migration_id), actor=actor,
            since_us=q.parse_time(since, "since") if since is not None else None,
            until_us=q.parse_time(until, "until") if until is not None else None,
            newest_first=bool(newest_first), limit=limit, namespace=namespace,
            event_types=tuple(event_types), after=after,
            exclude_types=tuple(exclude_types), job_id=job_id)
        query.check()  # bad arguments fail before any catch-up work
        p = self._fresh()
        page = aq.audit(p.view.engine, query, p.position)
        reasons, destinations = self._reasons(page.entries)
        # aq.audit's entries are AuditRows (the page's field is typed by its base class)
        return replace(page, entries=[
            replace(cast(aq.AuditRow, e), reason=reasons.get(e.position),
                    destination=destinations.get(e.position)) for e in page.entries])

    def _reasons(self, entries: Sequence[Any]) -> tuple[dict[int, str], dict[int, str]]:
        """The ``reason`` field of the events at these positions, and the destination an
        event names (``destination``: an accept's, a bind's), read from the log in runs of
        nearby positions (the audit index does not hold them)."""
        positions = sorted(e.position for e in entries)
        topics = sorted({e.topic for e in entries})
        found: dict[int, str] = {}
        bound: dict[int, str] = {}
        wanted = set(positions)
        for first, last in _runs(positions):
            notes = self.app.recorder.select_notifications(
                start=first, limit=last - first + 1, stop=last, topics=topics)
            for note in notes:
                if note.id not in wanted:
                    continue
                event = self.app.mapper.to_domain_event(note)
                reason = getattr(event, "reason", None)
                if isinstance(reason, str) and reason:
                    found[note.id] = reason
                if "destination" in getattr(type(event), "model_fields", {}):
                    named = getattr(event, "destination")  # an audit's: its label already
                    bound[note.id] = named if isinstance(named, str) else describe_binding(named)
        return found, bound

    def stats(self) -> dict[str, Any]:
        p = self._fresh()
        return q.stats(p.view.engine, p.position)

    def oncall(self, stuck_after_seconds: float = STUCK_AFTER,
               stalls: dict[str, dict[str, Any]] | None = None) -> list[OnCallItem]:
        """``stalls``: the stall rows by migration id (see ``queries.oncall``)."""
        if isinstance(stuck_after_seconds, bool) or not isinstance(stuck_after_seconds,
                                                                     (int, float)) \
                or not 0 <= stuck_after_seconds <= MAX_STUCK_AFTER:  # refuses nan and inf
            raise InvalidArgument(f"stuck_after_seconds must be a number from 0 to "
                                  f"{MAX_STUCK_AFTER:g}")
        return q.oncall(self._fresh().view.engine, stuck_after_seconds, stalls=stalls)

    def migrations_by_state(self, state: str | None = None,
                            limit: int = MAX_ROWS) -> list[MigrationRow]:
        q.check_state(state)  # before any catch-up work
        return q.migrations_by_state(self._fresh().view.engine, state, limit)

    def migrations_page(self, state: str | None = None, limit: int = MAX_ROWS,
                        after: str | None = None) -> q.MigrationPage:
        """``migrations_by_state``, a page at a time: ``after`` is a page's ``next_cursor``."""
        q.check_state(state)  # before any catch-up work
        if after is not None:
            q.migrations_after(after)
        return q.migrations_page(self._fresh().view.engine, state, limit, after)

    def schedule_keys(self, namespace: str | None = None, limit: int = MAX_ROWS,
                      after: str | None = None) -> q.KeyPage:
        """A page of schedule keys in creation order, with their current incarnation."""
        q.check_limit(limit)
        if after is not None:
            keys_after(after)
        return q.schedule_keys(self._fresh().view.engine, namespace, limit, after)

    def key_rows(self, only: tuple[str, str] | None = None) -> list[kt.KeyRow]:
        """Every schedule key (or ``only`` that one) with its current incarnation and latest
        migration, either direction (the operator page's table: projections/key_table.py)."""
        return kt.read_key_rows(self._fresh().view.engine, only)

    def migration_counts(self) -> dict[str, dict[str, int]]:
        """Every migration by direction and state."""
        return kt.migration_counts(self._fresh().view.engine)

    def migration_states(self, ids: list[str]) -> dict[str, str]:
        return q.migration_states(self._fresh().view.engine, ids)

    def metrics(self, now: float | None = None) -> pm.MetricsSnapshot:
        """The metrics' numbers (projections/metrics.py), caught up first. The lag is the one
        found before catching up; a stopped projection still answers, as of where it stopped,
        naming why (``stopped``)."""
        p = self.projector
        log, before = self.app.event_count(), p.position
        lag = pm.lag_seconds(self.app, before, time.time() if now is None else now)
        stopped = None
        try:
            p.catch_up()
        except (ProjectionStopped, UndecodableEvent) as exc:  # a store error propagates
            stopped = exc.code
        with p.view.engine.connect() as conn:
            numbers = pm.read(conn)
        return pm.MetricsSnapshot(max(log, p.position), p.position, max(log - before, 0), lag,
                                  stopped, **numbers)

    def status(self) -> dict[str, Any]:
        """Where the projection stands against the log, and how big its tables are."""
        p = self.projector
        return {"projection": FenceProjection.name, "projected_through": p.position,
                "log_position": self.app.event_count(),
                "tables": q.count_rows(p.view.engine)}


def _runs(positions: list[int], gap: int = 32) -> list[tuple[int, int]]:
    """Sorted positions as (first, last) runs whose neighbours lie at most ``gap`` apart."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and p - runs[-1][1] <= gap:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    return runs


def _migration_id(value: str | UUID | None) -> str | None:
    if value is None:
        return None
    try:
        return str(UUID(str(value)))
    except ValueError:
        raise InvalidArgument(f"migration id {value!r} is not a UUID") from None
