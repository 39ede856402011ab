"""The rollback's start, on a real Temporal server: a Temporal Schedule, created by request id.

A start of the scheduler workflow type that carries a handover (domain/handover.py) becomes
``CreateSchedule`` with the migration's durable request id, the handed-over schedule, its
initial patch (the backfills and trigger that continue exactly where the source stopped) and
the provenance memo (infra/destination/schedule_proto.py). The server runs it with its own
scheduler workflow ``temporal-sys-scheduler:<id>``, whose STARTED request id is ours, so the
protocol's proof is unchanged (measured on a dev server, 1.32):

- created: the describe that follows names our request id as the run's create id;
- the same request again is deduplicated (success): the same describe, the same answer;
- another request id is ``ALREADY_EXISTS "schedule ... is already registered"`` with no
  request id in the error, so one describe of the scheduler workflow tells whose it is:
  ``AlreadyStarted`` with that run's create request id, run id and first run id.

The patch's gap backfill ends ``GAP_MARGIN`` after the call's clock: the server processes its
spec from its own start, so the margin covers the call's latency; a time in both ranges
collides on its action workflow id (the server starts it once).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from temporalio.api.workflowservice.v1 import CreateScheduleRequest
from temporalio.service import RPCError, RPCStatusCode

from schedfence.domain.handover import Handover, patch_plan
from schedfence.domain.ids import WORKFLOW_ID_PREFIX
from schedfence.domain.ports import AlreadyStarted, StartAccepted, StartWorkflow

from schedfence.infra.destination.schedule_proto import to_temporal

if TYPE_CHECKING:
    from schedfence.infra.destination.temporal import TemporalDestination

GAP_MARGIN = timedelta(seconds=5)


class _Registered(Exception):
    """ALREADY_EXISTS from CreateSchedule: a schedule holds the id (whose: describe)."""


def create_request(request: StartWorkflow, identity: str, now: datetime) -> CreateScheduleRequest:
    """The CreateSchedule for a start that carries a handover (pure but for ``now``)."""
    handover = Handover.model_validate(request.input["handover"])
    schedule, patch, memo = to_temporal(handover, patch_plan(handover, now + GAP_MARGIN))
    return CreateScheduleRequest(
        namespace=request.namespace,
        schedule_id=request.workflow_id.removeprefix(WORKFLOW_ID_PREFIX),
        schedule=schedule, initial_patch=patch, memo=memo, identity=identity,
        request_id=request.request_id)


def create_schedule(dest: TemporalDestination, request: StartWorkflow) -> StartAccepted:
    """Create the schedule by request id; answer as a start of its scheduler workflow would."""
    from schedfence.infra.destination.temporal import start_error

    def create_error(exc: RPCError) -> Exception:
        if exc.status == RPCStatusCode.ALREADY_EXISTS:
            return _Registered(exc.message)
        return start_error(exc)

    rpc = create_request(request, dest.identity, datetime.now(timezone.utc))
    try:
        dest._rpc("create schedule", "create_schedule", rpc, create_error)
    except _Registered:
        run = dest.describe(request.namespace, request.workflow_id)
        raise AlreadyStarted(run.create_request_id, run.run_id,
                             run.first_execution_run_id) from None
    run = dest.describe(request.namespace, request.workflow_id)
    return StartAccepted(run.run_id, run.first_execution_run_id, run.status,
                         started=run.create_request_id == request.request_id)
