"""Forward migration (``schedfence forward``, ``forward-status|abort|take-over``) and batch
jobs (``schedfence migrate``, ``job status|cancel|list``). As everywhere in the API, the actor
is the token's name, and a request id comes from the body or the ``Idempotency-Key`` header.

A forward request answers once it is recorded (``forward --no-wait``), and ``migrate``
requests its selection without driving it (``migrate --no-wait``): an HTTP call does not wait
for a whole handoff. A worker (``POST /v1/worker/drain`` or ``schedfence worker``) drives them.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.text import ID_PATTERN, MAX_ID_LENGTH

from schedfence.infra.application import jobs
from schedfence.infra.http import bodies as b
from schedfence.infra.http.calls import Admin, Operator, Reader, call, destination
from schedfence.infra.http.errors import RESPONSES
from schedfence.infra.http.fields import QueryId

router = APIRouter(prefix="/v1", tags=["forward migration and jobs"], responses=RESPONSES)
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", min_length=1,
                                              max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]
Id = QueryId


def one_request_id(body_id: str | None, header_id: str | None) -> str | None:
    """The request id of the body or the header (both given: they must agree)."""
    if body_id is not None and header_id is not None and body_id != header_id:
        raise InvalidArgument("request_id and the Idempotency-Key header differ; give one")
    return body_id if body_id is not None else header_id


def forward_view(state: Any, handover: bool = False) -> dict[str, Any]:
    """A forward migration as ``forward-status --json`` shows it (the handover: there only)."""
    doc = asdict(state)
    shown = doc.pop("handover", None)
    return dict({"migration_id": state.migration_id, **doc},
                **({"handover": shown} if handover else {}))


@router.post("/forward", summary="Take a Temporal Schedule back into the source (forward)")
def forward(request: Request, principal: Admin, body: b.Forward,
            idempotency_key: IdempotencyKey = None) -> dict[str, Any]:
    request_id = one_request_id(body.request_id, idempotency_key)
    result = call(request, lambda s: s.forward(body.namespace, body.schedule_id, request_id,
                                               principal.name))
    return dict(result.to_dict(), destination=destination(request))


@router.get("/forward", summary="One forward migration (forward-status)")
def forward_status(request: Request, _: Reader, namespace: Id, schedule_id: Id,
                   request_id: Id) -> dict[str, Any]:
    return call(request, lambda s: forward_view(
        s.forward_state(namespace, schedule_id, request_id), handover=True))


@router.post("/forward/abort", summary="End a forward migration without a handover")
def forward_abort(request: Request, principal: Operator, body: b.ForwardAbort) -> dict[str, Any]:
    return call(request, lambda s: forward_view(s.abort_forward(
        body.namespace, body.schedule_id, body.request_id, body.reason, principal.name)))


@router.post("/forward/take-over", summary="Confirm a delete that raced the handoff")
def forward_take_over(request: Request, principal: Operator,
                      body: b.ForwardStep) -> dict[str, Any]:
    return call(request, lambda s: forward_view(s.take_over_forward(
        body.namespace, body.schedule_id, body.request_id, principal.name)))


@router.post("/migrate", summary="Request a batch job's migrations (migrate --no-wait)")
def migrate(request: Request, principal: Admin, body: b.Migrate) -> dict[str, Any]:
    """Run or resume job ``job_id``: the same body again continues from the job's cursor and
    asks no schedule twice, then asks its blocked schedules again in rounds
    (``blocked_rounds``, ``blocked_wait`` seconds before each; the call answers after them);
    ``dry_run`` says what it would request, writing nothing."""
    options = jobs.RunOptions(rate=body.rate, dry_run=body.dry_run, wait=False,
                              actor=principal.name, blocked_rounds=body.blocked_rounds,
                              blocked_wait=body.blocked_wait)
    doc = call(request, lambda s: jobs.run_job(
        s, body.job_id, body.namespace, body.to, schedule_ids=body.schedule_ids,
        match=body.match, options=options))
    return dict(doc, destination=destination(request))


@router.get("/jobs", summary="Every batch job (job list)")
def list_jobs(request: Request, _: Reader) -> list[dict[str, Any]]:
    return call(request, jobs.list_jobs)


@router.get("/job", summary="A batch job's report (job status)")
def job_status(request: Request, _: Reader, job_id: Id) -> dict[str, Any]:
    return call(request, lambda s: jobs.job_report(s, job_id))


@router.post("/job/cancel", summary="Stop a job's new requests (job cancel)")
def cancel_job(request: Request, principal: Operator, body: b.CancelJob) -> dict[str, Any]:
    return call(request, lambda s: jobs.cancel_job(s, body.job_id, principal.name, body.reason))
