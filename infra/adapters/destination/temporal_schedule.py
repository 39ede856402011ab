"""The rollback's start, on a real Temporal server: a Temporal Schedule, created by request id.

A start of the scheduler workflow type becomes ``CreateSchedule`` with the migration's durable
request id. A start that carries a handover (domain/rollback/handover.py) creates the handed-over
schedule, its initial patch (the backfills and trigger that continue exactly where the source
stopped) and the provenance memo (infra/adapters/destination/schedule_proto.py); a pause-and-notes
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

A limited handover is pinned instead (domain.handover.pin_instant): its spec starts at ``S``,
its count is what the limit leaves after every owed time before ``S``, and its create has no
patch; the settle clears the pin under the conflict token once the server is past ``S``, then
sends the whole patch (``_settle_pinned``; docs/protocol.md, "A limited schedule is pinned").
"""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable

from temporalio.api.schedule.v1 import (BackfillRequest, Schedule, SchedulePatch,
                                        TriggerImmediatelyRequest)
from temporalio.api.workflowservice.v1 import (CreateScheduleRequest, DescribeScheduleRequest,
                                               DescribeScheduleResponse, PatchScheduleRequest,
                                               UpdateScheduleRequest)
from temporalio.service import RPCError, RPCStatusCode

from schedfence.domain.source.action import SchedulePolicies, action_workflow_id, nominal_text
from schedfence.domain.rollback.handover import (GAP_MARGIN, SECOND, Handover, LimitView,
                                       boundary_gap, boundary_request_id, clear_pin,
                                       limit_overrun, limit_settle, patch_plan, pin_instant,
                                       pin_owed, pin_plan, pinned)
from schedfence.domain.source.spec import times_within
from schedfence.domain.ids import WORKFLOW_ID_PREFIX
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ports import (AlreadyStarted, DestinationNotFound,
                                     DestinationUnavailable, InvalidStartRequest, Settled,
                                     StartAccepted, StartWorkflow)

from schedfence.infra.adapters.destination.schedule_proto import (OVERLAP, bare_schedule, gap_end,
                                                        pin_of, pin_stands, timestamp,
                                                        to_temporal, unpinned)

if TYPE_CHECKING:
    from temporalio.api.enums.v1 import ScheduleOverlapPolicy

    from schedfence.infra.adapters.destination.temporal import TemporalDestination



class _Registered(Exception):
    """ALREADY_EXISTS from CreateSchedule: a schedule holds the id (whose: describe)."""


def create_request(request: StartWorkflow, identity: str, now: datetime) -> CreateScheduleRequest:
    """The CreateSchedule for a rollback's start (pure but for ``now``): the handover it
    carries, or for a pause-and-notes schedule its pre-fence pause and notes alone."""
    doc = request.input if isinstance(request.input, dict) else {}
    if doc.get("handover"):
        handover = Handover.model_validate(doc["handover"])
        if pinned(handover):  # the patch waits for the settle: nothing before the pin starts
            pin = pin_instant(now)
            schedule, _, memo = to_temporal(handover, pin_plan(handover, pin), pin)
            patch = SchedulePatch()
        else:
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
    from schedfence.infra.adapters.destination.temporal_wire import start_error

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


def settle_handover(dest: TemporalDestination, request: StartWorkflow,
                    chain: str) -> Settled:
    """Start, once each, the spec's times between the gap backfill and the server's own first
    instant (see the module doc); a pinned handover's whole patch, once its pin is cleared
    (``_settle_pinned``). Safe to call again: started times are skipped, and a repeated
    patch carries the same request id. ``chain`` is the receipt's first run id: a schedule
    at the id whose scheduler workflow began another chain is not ours and is never written
    (``DestinationNotFound``; ``_describe``, ``_patch``)."""
    handover = Handover.model_validate(request.input["handover"])
    desc = _describe(dest, request, chain)
    end = gap_end(desc.memo)
    if end is None or handover.action is None:
        return Settled()
    created = desc.info.create_time.ToDatetime(tzinfo=timezone.utc)
    pin = pin_of(desc.memo)
    if pin is not None:
        return _settle_pinned(dest, request, chain, handover, desc, pin, created)
    boundary = boundary_gap(handover, end, created)
    if boundary and handover.remaining_actions is not None:  # a create from before the pin
        _count_against_limit(dest, request, chain, desc, len(boundary))
    todo = [t for t in boundary
            if not _started(dest, request.namespace, action_workflow_id(handover.action, t))]
    if todo:
        overlap = OVERLAP[(handover.policies or SchedulePolicies()).overlap]
        _patch(dest, request, chain, SchedulePatch(backfill_request=[
            _one(t, overlap) for t in todo]))
    return Settled([nominal_text(t) for t in todo])


def _describe(dest: TemporalDestination, request: StartWorkflow,
              chain: str) -> DescribeScheduleResponse:
    """The schedule, if it is still the one handed over: its scheduler workflow's chain is
    checked after the read, so a delete and re-create before the read is seen."""
    from schedfence.infra.adapters.destination.temporal_wire import describe_error
    desc = dest._rpc("describe schedule", "describe_schedule", DescribeScheduleRequest(
        namespace=request.namespace,
        schedule_id=request.workflow_id.removeprefix(WORKFLOW_ID_PREFIX)), describe_error)
    _check_chain(dest, request, chain)
    return desc


def _check_chain(dest: TemporalDestination, request: StartWorkflow, chain: str) -> None:
    """``DestinationNotFound`` unless the scheduler workflow's current run belongs to the
    chain the receipt names: a schedule deleted and re-created at the id by someone else
    (its create time, memo and count are not the handover's) is never read or written as
    ours. The settle of the deleted one reads that chain by its run id."""
    run = dest.describe(request.namespace, request.workflow_id)
    if run.first_execution_run_id != chain:
        raise DestinationNotFound(f"the schedule at {request.workflow_id} began another "
                                  f"chain ({run.first_execution_run_id}) than the handed-over "
                                  f"one ({chain}): deleted and re-created since")


def _patch(dest: TemporalDestination, request: StartWorkflow, chain: str,
           patch: SchedulePatch) -> None:
    from schedfence.infra.adapters.destination.temporal_wire import describe_error
    _check_chain(dest, request, chain)  # just before the write (see docs/protocol.md)
    dest._rpc("patch schedule", "patch_schedule", PatchScheduleRequest(
        namespace=request.namespace,
        schedule_id=request.workflow_id.removeprefix(WORKFLOW_ID_PREFIX), patch=patch,
        identity=dest.identity, request_id=boundary_request_id(request.request_id)),
        describe_error)


def _one(t: datetime, overlap: ScheduleOverlapPolicy.ValueType) -> BackfillRequest:
    return BackfillRequest(start_time=timestamp(t), end_time=timestamp(t),
                           overlap_policy=overlap)


# The longest a settle waits for its pin to pass (normally PIN_LEAD and two clock margins
# after the create, a few seconds); longer (a clock that jumped) backs off and asks again.
PIN_WAIT_MAX = 30.0
sleep = time.sleep  # tests hold it


def _settle_pinned(dest: TemporalDestination, request: StartWorkflow, chain: str,
                   handover: Handover, desc: DescribeScheduleResponse, pin: datetime,
                   created: datetime) -> Settled:
    """A limited handover's settle: once the server's clock is surely past the pin (so its
    own processing has passed every time before it), clear the pin under the conflict token
    (``clear_pin``), then send the whole patch: every owed time before the pin, the
    backfills in progress, the buffered starts, and the owed times a slow create left
    between the pin and the server's create instant ``created`` (``late``). A settle that
    finds the pin cleared already (a crash after the clear) skips the times whose action
    workflow exists."""
    late = boundary_gap(handover, pin - SECOND, created)
    first = pin_stands(desc.schedule.spec, desc.memo)
    over: list[int] = []  # of the describe whose token the applied clearing update carried
    if first:
        wait = (pin + GAP_MARGIN - datetime.now(timezone.utc)).total_seconds()
        if wait > PIN_WAIT_MAX:
            raise DestinationUnavailable(f"settle: the pin stands {wait:.0f}s more; asked "
                                         "again")
        if wait > 0:
            sleep(wait)
        _update_until_applied(dest, request, chain, _describe(dest, request, chain), "pin",
                              lambda d: _unpinned_write(d, len(late), over))
    patch, asked = _pinned_patch(dest, request, handover, pin, late, first)
    if patch.backfill_request or patch.HasField("trigger_immediately"):
        _patch(dest, request, chain, patch)
    # A repeat cannot read what the server's count was at the clear: known only without late.
    over_limit = over[-1] if over else None if late else 0
    return Settled([nominal_text(t) for t in asked], nominal_text(pin), over_limit=over_limit)


def _unpinned_write(desc: DescribeScheduleResponse, late: int,
                    over: list[int]) -> Schedule | None:
    """The schedule the update that clears the pin writes (None: cleared already); appends
    to ``over`` what the server's own starts went beyond the limit (``limit_overrun``)."""
    target = clear_pin(late, desc.schedule.state.remaining_actions,
                       pin_stands(desc.schedule.spec, desc.memo))
    if target is None:
        return None
    over.append(limit_overrun(late, desc.schedule.state.remaining_actions))
    schedule = desc.schedule
    schedule.spec.CopyFrom(unpinned(schedule.spec, desc.memo))
    schedule.state.remaining_actions = target
    return schedule


def _pinned_patch(dest: TemporalDestination, request: StartWorkflow, h: Handover,
                  pin: datetime, late: list[datetime],
                  first: bool) -> tuple[SchedulePatch, list[datetime]]:
    """The pinned handover's patch, and the spec's owed times it asks for; on a repeat
    (``first`` False) the times whose action workflow exists are left out (the request id
    deduplicates it too, within the server's current run of its scheduler workflow)."""
    assert h.action is not None and h.spec is not None
    action = h.action  # not None, in the closure too
    overlap = OVERLAP[(h.policies or SchedulePolicies()).overlap]
    plan = pin_plan(h, pin)
    started: dict[datetime, bool] = {}

    def todo(t: datetime) -> bool:
        if first:
            return True
        if t not in started:
            started[t] = _started(dest, request.namespace, action_workflow_id(action, t))
        return not started[t]

    if first:
        backfills = [BackfillRequest(start_time=timestamp(r.start), end_time=timestamp(r.end),
                                     overlap_policy=OVERLAP[r.overlap]) for r in plan.backfills]
    else:
        backfills = [_one(t, OVERLAP[r.overlap]) for r in plan.backfills
                     for t in times_within(h.spec, r.start, r.end) if todo(t)]
    patch = SchedulePatch(backfill_request=backfills + [_one(t, overlap) for t in late
                                                        if todo(t)])
    if plan.trigger is not None and todo(plan.trigger[0]):
        patch.trigger_immediately.CopyFrom(TriggerImmediatelyRequest(
            overlap_policy=OVERLAP[plan.trigger[1]], scheduled_time=timestamp(plan.trigger[0])))
    return patch, [t for t in pin_owed(h, pin) + late if todo(t)]


# How many times in a row the settle writes the limit after the server's own starts moved the
# conflict token under it, before it backs off (the settle is asked again later).
LIMIT_TRIES = 5


def _count_against_limit(dest: TemporalDestination, request: StartWorkflow, chain: str,
                         desc: DescribeScheduleResponse, boundary: int) -> None:
    """A limited schedule created before the pin: its boundary times are backfills, which
    the server does not count: take them off its remaining actions (``limit_settle``),
    before the patch that starts them."""
    def write(d: DescribeScheduleResponse) -> Schedule | None:
        target = limit_settle(boundary, LimitView(d.schedule.state.remaining_actions,
                                                  d.info.HasField("update_time")))
        if target is None:
            return None
        schedule = d.schedule
        schedule.state.remaining_actions = target
        return schedule

    _update_until_applied(dest, request, chain, desc, "limit", write)


def _update_until_applied(dest: TemporalDestination, request: StartWorkflow, chain: str,
                          desc: DescribeScheduleResponse, what: str,
                          write: Callable[[DescribeScheduleResponse], Schedule | None]) -> None:
    """Write what ``write`` decides from a describe, under that describe's conflict token,
    until a describe shows it applied (``write`` answers None). The server drops an update
    that one of its own starts (or any change) overtook, answering OK, so the settle
    describes again and decides again. A settle repeated after a crash or an unknown outcome
    finds it applied and writes nothing. The request id names the token, so a rewrite after
    a drop is a new signal."""
    from schedfence.infra.adapters.destination.temporal_wire import describe_error

    def update_error(exc: RPCError) -> Exception:
        if exc.status == RPCStatusCode.FAILED_PRECONDITION:
            return DestinationUnavailable(f"settle: the schedule changed under the {what}'s "
                                          f"update ({exc.message}); asked again")
        return describe_error(exc)

    for tries in range(LIMIT_TRIES + 1):
        schedule = write(desc)
        if schedule is None:
            return
        if tries == LIMIT_TRIES:
            break
        _check_chain(dest, request, chain)  # a re-created schedule's token is 1 too
        dest._rpc("update schedule", "update_schedule", UpdateScheduleRequest(
            namespace=request.namespace,
            schedule_id=request.workflow_id.removeprefix(WORKFLOW_ID_PREFIX),
            schedule=schedule, conflict_token=desc.conflict_token, identity=dest.identity,
            request_id=f"{boundary_request_id(request.request_id)}-{what}-"
                       f"{desc.conflict_token.hex()}"), update_error)
        desc = _describe(dest, request, chain)
    raise DestinationUnavailable(f"settle: the schedule's conflict token moved under the "
                                 f"{what}'s update {LIMIT_TRIES} times in a row; asked again")


def _started(dest: TemporalDestination, namespace: str, workflow_id: str) -> bool:
    try:
        dest.describe(namespace, workflow_id)
        return True
    except DestinationNotFound:
        return False
