"""The routes that move migrations: ``rollback`` (admin), ``abort`` and ``recover`` (operator),
worker control (``worker --until-idle`` as one drain, ``scheduler --once``), the projection's
catch-up and rebuild, and ``promote``. The actor recorded on every event is the token's name;
a body cannot name another (an unknown field is refused)."""
from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request

from schedfence.infra.http import bodies as b
from schedfence.infra.http.errors import RESPONSES
from schedfence.infra.http.migrations import IdempotencyKey, one_request_id
from schedfence.infra.http.calls import Admin, Operator, call, destination
from schedfence.infra.application.service import MigrationService
from schedfence.infra.engines.drain import NotDrained
from schedfence.infra.engines.drive import Drive
from schedfence.infra.engines.drive import unique_worker_id

router = APIRouter(prefix="/v1", tags=["operations"], responses=RESPONSES)


@router.post("/rollback", summary="Hand a schedule over to the destination (rollback)")
def rollback(request: Request, principal: Admin, body: b.Rollback,
             idempotency_key: IdempotencyKey = None) -> dict[str, Any]:
    """Idempotent per request id (``request_id`` or the ``Idempotency-Key`` header; derived
    from the source incarnation when both are absent). A retry with the same id writes
    nothing and answers 200 with the same ``request_id`` and ``migration_id``; its
    ``outcome`` says ``already_pending`` (or ``already_completed``) where the first said
    ``accepted``."""
    request_id = one_request_id(body.request_id, idempotency_key)
    result = call(request, lambda s: s.rollback(body.namespace, body.schedule_id, request_id,
                                                actor=principal.name))
    return dict(result.to_dict(), destination=destination(request))


@router.post("/abort", summary="Cancel the open migration, restoring the source (abort)")
def abort(request: Request, principal: Operator, body: b.Abort) -> dict[str, Any]:
    return call(request, lambda s: s.abort(body.namespace, body.schedule_id, body.reason,
                                           principal.name).to_dict())


@router.post("/recover/{kind}",
             summary="Operator recovery: rearm | abort | adopt | resolve | bind")
def recover(request: Request, principal: Operator,
            kind: Literal["rearm", "abort", "adopt", "resolve", "bind"],
            body: b.Recover) -> dict[str, Any]:
    """The options of ``schedfence recover KIND``: ``confirm_no_destination_run`` (rearm),
    ``request_id`` (adopt), ``resolution`` and ``first_run_id`` (resolve)."""
    by_kind: dict[str, dict[str, Any]] = {
        "rearm": {"confirm_no_destination_run": body.confirm_no_destination_run},
        "abort": {}, "adopt": {"request_id": body.request_id},
        "resolve": {"resolution": body.resolution, "first_run_id": body.first_run_id},
        "bind": {}}
    options = by_kind[kind]
    return call(request, lambda s: s.recover(kind, body.namespace, body.schedule_id,
                                             actor=principal.name, reason=body.reason,
                                             **options).to_dict())


@router.post("/worker/drain", summary="Attempt open migrations until idle (worker --until-idle)")
def drain(request: Request, principal: Operator, body: b.Drain) -> dict[str, Any]:
    """One drain in this process, under the identity ``<token name>#<random>``. Answers the
    CLI's summary; when work is left (``drained`` false) it also carries the CLI's
    ``not_drained`` error object: the events it wrote stay written."""
    def run(service: MigrationService) -> dict[str, Any]:
        before = service.event_count()
        report = service.drive(Drive(max_attempts=body.max_attempts, retry_for=body.retry_for,
                                     worker_id=unique_worker_id(principal.name))).report
        assert report is not None  # a drive without threads is a drain
        doc = dict(report.to_dict(), destination=destination(request),
                   events_written=service.app.events_since(before),
                   migrations=_states(service))
        if not report.drained:
            failure = NotDrained.of(report)
            doc["error"] = {"code": failure.code, "message": failure.message}
        return doc
    return call(request, run)


@router.post("/scheduler/pass", summary="One pass of the source scheduler (scheduler --once)")
def scheduler_pass(request: Request, _: Operator) -> dict[str, Any]:
    return call(request, lambda s: dict(s.run_scheduler().to_dict(),
                                        destination=destination(request)))


@router.post("/projection/catch-up", summary="Apply every event not yet projected")
def catch_up(request: Request, _: Operator) -> dict[str, Any]:
    return call(request, lambda s: _projection(s, s.catch_up()))


@router.post("/projection/rebuild", summary="Drop the projection and project the log again")
def rebuild(request: Request, _: Admin) -> dict[str, Any]:
    return call(request, lambda s: _projection(s, s.views.rebuild()))


@router.post("/promote", summary="Make this store the active one after a failover")
def promote(request: Request, principal: Admin, body: b.Promote) -> dict[str, Any]:
    epoch = call(request, lambda s: s.promote(principal.name, body.reason))
    return {"epoch": epoch, "actor": principal.name, "reason": body.reason}


def _projection(service: MigrationService, applied: int) -> dict[str, Any]:
    return dict(service.views.status(), applied=applied)


def _states(service: MigrationService) -> dict[str, int]:
    """How many migrations are in each state (the worker summary's ``migrations``)."""
    return {state: n for state, n in service.stats()["by_state"].items() if n}
