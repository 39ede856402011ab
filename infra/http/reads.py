"""The reader's routes: the same documents the CLI's ``--json`` prints (``status``, ``list``,
``history``, ``schedule describe``, ``verify``, ``replay``, ``audit``, ``stats``, ``oncall``,
``migrations``, ``projection status``, ``owners``: its last recorded audit). Keys travel as query parameters (an id may hold ``/``).
"""
from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import StringConstraints

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.action import nominal_text
from schedfence.domain.rollback.phases import Phase
from schedfence.projections import service_views as pv
from schedfence.domain.ids import validate_id
from schedfence.domain.text import MAX_ID_LENGTH
from schedfence.projections.cursors import MAX_CURSOR
from schedfence.projections.queries import MAX_LIMIT

from schedfence.infra.http.errors import RESPONSES
from schedfence.infra.http.calls import Reader, call
from schedfence.infra.http.fields import KEY_PATTERN, UUID_PATTERN, QueryId
from schedfence.infra.application.display import verdict
from schedfence.infra.application.owners import require_audit
from schedfence.infra.application.owners_doc import audit_doc
from schedfence.infra.application.views import history_doc, schedule_list, status_doc

router = APIRouter(prefix="/v1", tags=["views"], responses=RESPONSES)
Namespace = QueryId
ScheduleId = QueryId
MAX_PAGE = 1000  # audit entries per page
# A filter's text: no NUL (no stored value holds one; PostgreSQL refuses it as a parameter).
NO_NUL = r"^[^\x00]*$"
EventType = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=NO_NUL)]


@router.get("/schedules", summary="Schedule keys, a page at a time (list)")
def list_schedules(request: Request, _: Reader, namespace: Namespace | None = None,
                   limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = pv.MAX_ROWS,
                   after: Annotated[str | None, Query(max_length=MAX_CURSOR)] = None
                   ) -> dict[str, Any]:
    """One row per key, in creation order; while more match, ``next_cursor`` is set: pass it
    back as ``after`` with the same namespace for the next page (as the CLI's ``list``)."""
    if namespace is not None:
        validate_id("namespace", namespace)
    return call(request, lambda s: schedule_list(s, namespace, limit, after))


@router.get("/schedule", summary="A schedule and its latest migration (status)")
def status(request: Request, _: Reader, namespace: Namespace,
           schedule_id: ScheduleId) -> dict[str, Any]:
    return call(request, lambda s: status_doc(s, namespace, schedule_id))


@router.get("/schedule/describe", summary="Program, next action times, activity (describe)")
def describe(request: Request, _: Reader, namespace: Namespace, schedule_id: ScheduleId,
             next: Annotated[int, Query(ge=1, le=1000)] = 5) -> dict[str, Any]:
    return call(request, lambda s: dict(s.schedule(namespace, schedule_id).to_dict(),
                                        next_action_times=[nominal_text(t) for t in s.upcoming(
                                            namespace, schedule_id, next)]))


@router.get("/schedule/history", summary="Every event of a key, narrated (history)")
def history(request: Request, _: Reader, namespace: Namespace,
            schedule_id: ScheduleId) -> dict[str, Any]:
    return call(request, lambda s: history_doc(s, namespace, schedule_id))


@router.get("/schedule/replay", summary="A migration re-derived step by step (replay)")
def replay(request: Request, _: Reader, namespace: Namespace, schedule_id: ScheduleId,
           at: Annotated[int | None, Query(ge=1)] = None,
           migration: Annotated[str | None, Query(pattern=UUID_PATTERN)] = None
           ) -> dict[str, Any]:
    return call(request, lambda s: s.replay(namespace, schedule_id, at=at,
                                            migration_id=migration))


@router.get("/verify", summary="The invariant checker over the whole store (verify)")
def verify(request: Request, _: Reader) -> dict[str, Any]:
    return call(request, verdict)


@router.get("/audit", summary="Who did what, when and why, a page at a time (audit)")
def audit(request: Request, _: Reader,
          schedule: Annotated[str | None, Query(max_length=2 * MAX_ID_LENGTH + 1,
                                                pattern=KEY_PATTERN,
                                                description="NAMESPACE/SCHEDULE_ID")] = None,
          namespace: Namespace | None = None,
          type: Annotated[list[EventType], Query(max_length=200, description="Event type "
                                           "(class name or topic); repeat for any of "
                                           "several")] = [],  # noqa: B006 (FastAPI copies)
          exclude_type: Annotated[list[EventType], Query(
              max_length=200, description="Drop events of this type (class name or topic); "
                                          "repeatable")] = [],  # noqa: B006 (FastAPI copies)
          job: Annotated[str | None, Query(min_length=1, max_length=MAX_ID_LENGTH,
                                           description="Events of the migrations this batch "
                                                       "job requested")] = None,
          request_id: Annotated[str | None, Query(min_length=1, max_length=20_000,
                                                  pattern=NO_NUL)] = None,
          migration: Annotated[str | None, Query(pattern=UUID_PATTERN)] = None,
          actor: Annotated[str | None, Query(min_length=1, max_length=20_000,
                                             pattern=NO_NUL)] = None,
          since: Annotated[str | None, Query(max_length=100)] = None,
          until: Annotated[str | None, Query(max_length=100)] = None,
          newest_first: bool = False,
          limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
          page_token: Annotated[str | None, Query(max_length=MAX_CURSOR)] = None
          ) -> dict[str, Any]:
    """Filters combine as on the CLI. A page holds at most ``limit`` entries; while more match,
    ``next_page_token`` (the CLI's ``next_cursor``, also here) is set: pass it back with the
    same filters for the next page. Pages continue after the last entry returned, so no entry
    is returned twice however the log grows."""
    page = call(request, lambda s: s.audit(
        schedule=schedule, request_id=request_id, migration_id=migration, actor=actor,
        since=since, until=until, newest_first=newest_first, limit=limit,
        namespace=namespace, event_types=tuple(type), after=page_token,
        exclude_types=tuple(exclude_type), job_id=job))
    return dict(page.to_dict(), next_page_token=page.next_cursor)


@router.get("/stats", summary="Migrations per namespace and state (stats)")
def stats(request: Request, _: Reader) -> dict[str, Any]:
    return call(request, lambda s: s.stats())


@router.get("/oncall", summary="What needs an operator, and what each may do (oncall)")
def oncall(request: Request, _: Reader,
           stuck_after: Annotated[float | None, Query(
               ge=0, le=pv.MAX_STUCK_AFTER, allow_inf_nan=False,
               description="Seconds without progress before an open migration counts as "
                           "stuck (default: the server's --stuck-after)")] = None
           ) -> dict[str, Any]:
    seconds = request.app.state.stuck_after if stuck_after is None else stuck_after
    if not math.isfinite(seconds):
        raise InvalidArgument("stuck_after must be a number of seconds")
    return call(request, lambda s: s.oncall_doc(seconds))


@router.get("/owners", summary="The last ownership audit of a namespace, a page at a time "
            "(owners)")
def owners(request: Request, _: Reader, namespace: Namespace,
           limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = pv.MAX_ROWS,
           after: Annotated[str | None, Query(max_length=MAX_CURSOR)] = None,
           drift_only: bool = False) -> dict[str, Any]:
    """What ``schedfence owners --json`` printed when it last audited ``namespace``, read from
    the log (no call to Temporal; ``not_found`` before the first audit): the summary, and its
    rows in key order, ``limit`` a page; while more follow, ``next_cursor`` is set: pass it
    back as ``after`` (``drift_only``: the drift rows only)."""
    validate_id("namespace", namespace)
    return call(request, lambda s: audit_doc(require_audit(s.app, namespace), limit, after,
                                             drift_only))


@router.get("/migrations", summary="Migrations by state, most recently changed first")
def migrations(request: Request, _: Reader,
               state: Phase | None = None,
               limit: Annotated[int, Query(ge=1, le=pv.MAX_ROWS)] = pv.MAX_ROWS,
               after: Annotated[str | None, Query(max_length=MAX_CURSOR)] = None
               ) -> dict[str, Any]:
    return call(request, lambda s: s.views.migrations_page(state, limit, after)).to_dict()


@router.get("/projection", summary="How far the operator projection is (projection status)")
def projection(request: Request, _: Reader) -> dict[str, Any]:
    return call(request, lambda s: s.views.status())
