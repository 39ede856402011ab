"""The operator views of a ``MigrationService``: one projector per service, caught up first.

Every query first applies the events the projection has not seen (one cheap read when there
are none), then answers from the projection's indexed tables.
"""
from __future__ import annotations

import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID
from weakref import WeakKeyDictionary

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.migration import PHASES

from . import queries as q
from .engine import engine_for_application
from .projection import FenceProjection
from .records import AuditPage, MigrationRow, OnCallItem
from .runner import Projector
from .view import FenceViews

if TYPE_CHECKING:
    from schedfence.infra.service import MigrationService

STUCK_AFTER = 900.0  # seconds without an event before an open migration counts as stuck
MAX_ROWS = 1000
_projectors: WeakKeyDictionary[Any, Projector] = WeakKeyDictionary()
_lock = threading.Lock()


def projector(service: MigrationService) -> Projector:
    """The service's projector, created (tables included) on first use."""
    with _lock:
        found = _projectors.get(service)
        if found is None:
            view = FenceViews(engine_for_application(service.app), FenceProjection.name)
            view.create_tables()
            postgres = service.app.env.get("PERSISTENCE_MODULE") == "eventsourcing.postgres"
            found = _projectors[service] = Projector(service.app, view, tolerate_gaps=postgres)
        return found


def close_views(service: MigrationService) -> None:
    with _lock:
        found = _projectors.pop(service, None)
    if found is not None:
        found.view.engine.dispose()


def catch_up(service: MigrationService) -> int:
    return projector(service).catch_up()


def rebuild(service: MigrationService) -> int:
    return projector(service).rebuild()


def _fresh(service: MigrationService) -> Projector:
    p = projector(service)
    p.catch_up()
    return p


def audit(service: MigrationService, *, schedule: str | None = None,
          request_id: str | None = None, migration_id: str | UUID | None = None,
          actor: str | None = None, since: str | datetime | None = None,
          until: str | datetime | None = None, newest_first: bool = False,
          limit: int = 100) -> AuditPage:
    """Events matching every given filter, in log order (``newest_first`` reverses it).

    ``schedule`` is ``NAMESPACE/ID`` (the key: all incarnations and their migrations);
    ``since``/``until`` are inclusive, ISO 8601 or a duration ago (``15m``, ``2h``)."""
    query = q.AuditQuery(
        schedule=q.parse_schedule(schedule) if schedule is not None else None,
        request_id=request_id, migration_id=_migration_id(migration_id), actor=actor,
        since_us=q.parse_time(since, "since") if since is not None else None,
        until_us=q.parse_time(until, "until") if until is not None else None,
        newest_first=bool(newest_first), limit=limit)
    query.check()  # bad arguments fail before any catch-up work
    p = _fresh(service)
    return q.audit(p.view.engine, query, p.position)


def _migration_id(value: str | UUID | None) -> str | None:
    if value is None:
        return None
    try:
        return str(UUID(str(value)))
    except ValueError:
        raise InvalidArgument(f"migration id {value!r} is not a UUID") from None


def stats(service: MigrationService) -> dict[str, Any]:
    p = _fresh(service)
    return q.stats(p.view.engine, p.position)


MAX_STUCK_AFTER = 100 * 365 * 86400.0  # a century, as the CLI's --stuck-after allows


def oncall(service: MigrationService,
           stuck_after_seconds: float = STUCK_AFTER) -> list[OnCallItem]:
    if isinstance(stuck_after_seconds, bool) or not isinstance(stuck_after_seconds,
                                                                 (int, float)) \
            or not 0 <= stuck_after_seconds <= MAX_STUCK_AFTER:  # refuses nan and inf too
        raise InvalidArgument(f"stuck_after_seconds must be a number from 0 to "
                              f"{MAX_STUCK_AFTER:g}")
    return q.oncall(_fresh(service).view.engine, stuck_after_seconds)


def migrations_by_state(service: MigrationService, state: str | None = None,
                        limit: int = MAX_ROWS) -> list[MigrationRow]:
    if state is not None and state not in PHASES:
        raise InvalidArgument(f"unknown state {state!r} (one of {', '.join(PHASES)})")
    return q.migrations_by_state(_fresh(service).view.engine, state, limit)


def status(service: MigrationService) -> dict[str, Any]:
    """Where the projection stands against the log, and how big its tables are."""
    p = projector(service)
    return {"projection": FenceProjection.name, "projected_through": p.position,
            "log_position": service.event_count(), "tables": q.count_rows(p.view.engine)}
