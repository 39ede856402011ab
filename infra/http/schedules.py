"""The admin's schedule commands (``schedule create|update|pause|unpause|notes|delete|trigger|
backfill``): each answers the schedule's view, as ``schedfence schedule ... --json`` prints it,
and records the token's name as the actor of its events.
While a migration holds the fence every change is refused (``migration_pending``, 409) and
nothing is written."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from schedfence.infra.http import bodies as b
from schedfence.infra.http.errors import RESPONSES
from schedfence.infra.http.auth import Principal
from schedfence.infra.http.calls import Admin, call

router = APIRouter(prefix="/v1/schedule", tags=["schedules"], responses=RESPONSES)


@router.post("/create", summary="Create a schedule, or a new incarnation (schedule create)")
def create(request: Request, principal: Admin, body: b.CreateSchedule) -> dict[str, Any]:
    program = b.create_program(body)
    return call(request, lambda s: s.create_schedule(
        body.namespace, body.schedule_id, body.paused, body.notes, **program,
        actor=principal.name).to_dict())


@router.post("/update", summary="Replace parts of what a schedule runs (schedule update)")
def update(request: Request, principal: Admin, body: b.UpdateSchedule) -> dict[str, Any]:
    changes = b.update_program(body)
    return call(request, lambda s: s.update_schedule(
        body.namespace, body.schedule_id, conflict_token=body.conflict_token,
        actor=principal.name, **changes).to_dict())


def _change(request: Request, key: b.Key, principal: Principal,
            **change: Any) -> dict[str, Any]:
    return call(request, lambda s: s.update_schedule(key.namespace, key.schedule_id,
                                                     actor=principal.name, **change).to_dict())


@router.post("/pause", summary="Pause a schedule")
def pause(request: Request, principal: Admin, body: b.Key) -> dict[str, Any]:
    return _change(request, body, principal, paused=True)


@router.post("/unpause", summary="Unpause a schedule")
def unpause(request: Request, principal: Admin, body: b.Key) -> dict[str, Any]:
    return _change(request, body, principal, paused=False)


@router.post("/notes", summary="Replace a schedule's notes")
def notes(request: Request, principal: Admin, body: b.Notes) -> dict[str, Any]:
    return _change(request, body, principal, notes=body.notes)


@router.post("/delete", summary="Delete (close) a schedule")
def delete(request: Request, principal: Admin, body: b.Key) -> dict[str, Any]:
    return _change(request, body, principal, delete=True)


@router.post("/trigger", summary="Take one action now (schedule trigger)")
def trigger(request: Request, principal: Admin, body: b.Trigger) -> dict[str, Any]:
    return call(request, lambda s: s.trigger_schedule(
        body.namespace, body.schedule_id, overlap=body.overlap,
        actor=principal.name).to_dict())


@router.post("/backfill", summary="Every action time of the spec in [start, end]")
def backfill(request: Request, principal: Admin, body: b.Backfill) -> dict[str, Any]:
    start, end = b.moment(body.start, "start"), b.moment(body.end, "end")
    return call(request, lambda s: s.backfill_schedule(
        body.namespace, body.schedule_id, start, end, overlap=body.overlap,
        actor=principal.name).to_dict())
