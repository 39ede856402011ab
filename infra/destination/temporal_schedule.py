"""The rollback's start, on a real Temporal server: a Temporal Schedule, created by request id.

A start of the scheduler workflow type becomes ``CreateSchedule`` with the migration's durable
request id. A start that carries a handover (domain/handover.py) creates the handed-over
schedule, its initial patch (the backfills and trigger that continue exactly where the source
stopped) and the provenance memo (infra/destination/schedule_proto.py); a pause-and-notes
schedule becomes a schedule with no spec and no action that holds its pause and notes. The server runs it with its own
scheduler workflow ``temporal-sys-scheduler:<id>``, whose STARTED request id is ours, so the
protocol's proof is unchanged (measured on a dev server, 1.32):

- created: the describe that follows names our request id as the run's create id;
- the same request again is deduplicated (success): the same describe, the same answer;
- another request id is ``ALREADY_EXISTS "schedule ... is already registered"`` with no
  request id in the error, so one describe of the scheduler workflow tells whose it is:
  ``AlreadyStarted`` with that run's create request id, run id and first run id.

The boundary. The server processes its spec after its scheduler's first instant (its
``create_time``, recorded as LastProcessedTime); the patch's gap backfill ends ``GAP_MARGIN``
*before* the call, so the two ranges never overlap (the server's scheduler starts actions with
ALLOW_DUPLICATE: a time in both could run twice). The times between them are settled after the
receipt (``settle_handover``): read the server's create time and the gap's end (the schedule's
memo), skip the times whose action workflow exists already, and patch one-time backfills for
the rest under one request id derived from the migration's, which the server deduplicates.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from temporalio.api.schedule.v1 import BackfillRequest, SchedulePatch
from temporalio.api.workflowservice.v1 import (CreateScheduleRequest, DescribeScheduleRequest,
                                               DescribeScheduleResponse, PatchScheduleRequest,
                                               UpdateScheduleRequest)
from temporalio.service import RPCError, RPCStatusCode

from schedfence.domain.action import SchedulePolicies, action_workflow_id, nominal_text
from schedfence.domain.handover import (GAP_MARGIN, Handover, LimitView, boundary_gap,
                                       boundary_request_id, limit_settle, patch_plan)
from schedfence.domain.ids import WORKFLOW_ID_PREFIX
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ports import (AlreadyStarted, DestinationNotFound,
                                     DestinationUnavailable, InvalidStartRequest, StartAccepted,
                                     StartWorkflow)

from schedfence.infra.destination.schedule_proto import (OVERLAP, bare_schedule, gap_end,
                                                        timestamp, to_temporal)

if TYPE_CHECKING:
    from schedfence.infra.destination.temporal import TemporalDestination



class _Registered(Exception):
    """ALREADY_EXISTS from CreateSchedule: a schedule holds the id (whose: describe)."""


def create_request(request: StartWorkflow, identity: str, now: datetime) -> CreateScheduleRequest:
    """The CreateSchedule for a rollback's start (pure but for ``now``): the handover it
    carries, or for a pause-and-notes schedule its pre-fence pause and notes alone."""
    doc = request.input if isinstance(request.input, dict) else {}
    if doc.get("handover"):
        handover = Handover.model_validate(doc["handover"])
        schedule, patch, memo = to_temporal(handover, patch_plan(handover, now - GAP_MARGIN))
    else:
        paused, notes, incarnation = (doc.get(k) for k in ("paused", "notes", "incarnation"))
        if not (isinstance(paused, bool) and isinstance(notes, str) and
                isinstance(incarnation, int)):
            raise InvalidArgument("input: a schedule's start carries paused, notes and "
                                  "incarnation")
        schedule, memo = bare_schedule(request.namespace, str(doc.get("schedule_id", "")),
                                       incarnation, paused, notes)
        patch = SchedulePatch()
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

    if not request.workflow_id.startswith(WORKFLOW_ID_PREFIX):
        raise InvalidStartRequest(f"a schedule's scheduler runs at {WORKFLOW_ID_PREFIX}<id>, "
                                  f"not at {request.workflow_id!r}")
    try:
        rpc = create_request(request, dest.identity, datetime.now(timezone.utc))
    except (InvalidArgument, ValueError) as exc:  # a handover this server cannot take
        raise InvalidStartRequest(f"the handover cannot become a Temporal Schedule: {exc}") \
            from None
    try:
        dest._rpc("create schedule", "create_schedule", rpc, create_error)
    except _Registered:
        run = dest.describe(request.namespace, request.workflow_id)
        raise AlreadyStarted(run.create_request_id, run.run_id,
                             run.first_execution_run_id) from None
    run = dest.describe(request.namespace, request.workflow_id)
    return StartAccepted(run.run_id, run.first_execution_run_id, run.status,
                         started=run.create_request_id == request.request_id)


def settle_handover(dest: TemporalDestination, request: StartWorkflow) -> list[str]:
    """Start, once each, the spec's times between the gap backfill and the server's own first
    instant (see the module doc). Safe to call again: started times are skipped, and a
    repeated patch carries the same request id."""
    from schedfence.infra.destination.temporal import describe_error

    handover = Handover.model_validate(request.input["handover"])
    schedule_id = request.workflow_id.removeprefix(WORKFLOW_ID_PREFIX)
    desc = dest._rpc("describe schedule", "describe_schedule", DescribeScheduleRequest(
        namespace=request.namespace, schedule_id=schedule_id), describe_error)
    end = gap_end(desc.memo)
    if end is None or handover.action is None:
        return []
    created = desc.info.create_time.ToDatetime(tzinfo=timezone.utc)
    boundary = boundary_gap(handover, end, created)
    if boundary and handover.remaining_actions is not None:
        _count_against_limit(dest, request, desc, len(boundary))
    todo = [t for t in boundary
            if not _started(dest, request.namespace, action_workflow_id(handover.action, t))]
    if todo:
        overlap = OVERLAP[(handover.policies or SchedulePolicies()).overlap]
        patch = SchedulePatch(backfill_request=[
            BackfillRequest(start_time=timestamp(t), end_time=timestamp(t), overlap_policy=overlap)
            for t in todo])
        dest._rpc("patch schedule", "patch_schedule", PatchScheduleRequest(
            namespace=request.namespace, schedule_id=schedule_id, patch=patch,
            identity=dest.identity, request_id=boundary_request_id(request.request_id)),
            describe_error)
    return [nominal_text(t) for t in todo]


# How many times in a row the settle writes the limit after the server's own starts moved the
# conflict token under it, before it backs off (the settle is asked again later).
LIMIT_TRIES = 5


def _count_against_limit(dest: TemporalDestination, request: StartWorkflow,
                         desc: DescribeScheduleResponse, boundary: int) -> None:
    """A limited schedule's boundary times are backfills, which the server does not count:
    take them off its remaining actions (``limit_settle``), before the patch that starts
    them. Each update carries the conflict token of the describe it was computed from; the
    server drops one that an action of its own (or any change) overtook, answering OK, so
    the settle describes again and decides again until a describe shows the update applied.
    A settle repeated after a crash or an unknown outcome finds it applied and writes
    nothing. The request id names the token, so a rewrite after a drop is a new signal."""
    from schedfence.infra.destination.temporal import describe_error

    def update_error(exc: RPCError) -> Exception:
        if exc.status == RPCStatusCode.FAILED_PRECONDITION:
            return DestinationUnavailable(f"settle: the schedule changed under the limit's "
                                          f"update ({exc.message}); asked again")
        return describe_error(exc)

    schedule_id = request.workflow_id.removeprefix(WORKFLOW_ID_PREFIX)
    for tries in range(LIMIT_TRIES + 1):
        target = limit_settle(boundary, LimitView(desc.schedule.state.remaining_actions,
                                                  desc.info.HasField("update_time")))
        if target is None:
            return
        if tries == LIMIT_TRIES:
            break
        schedule = desc.schedule
        schedule.state.remaining_actions = target
        dest._rpc("update schedule", "update_schedule", UpdateScheduleRequest(
            namespace=request.namespace, schedule_id=schedule_id, schedule=schedule,
            conflict_token=desc.conflict_token, identity=dest.identity,
            request_id=f"{boundary_request_id(request.request_id)}-limit-"
                       f"{desc.conflict_token.hex()}"), update_error)
        desc = dest._rpc("describe schedule", "describe_schedule", DescribeScheduleRequest(
            namespace=request.namespace, schedule_id=schedule_id), describe_error)
    raise DestinationUnavailable(f"settle: the schedule's conflict token moved under the "
                                 f"limit's update {LIMIT_TRIES} times in a row; asked again")


def _started(dest: TemporalDestination, namespace: str, workflow_id: str) -> bool:
    try:
        dest.describe(namespace, workflow_id)
        return True
    except DestinationNotFound:
        return False
