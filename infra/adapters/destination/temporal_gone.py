"""The settle of a Temporal Schedule deleted since the receipt (``settle_deleted``; the port's
HandoverTarget, domain/rollback/handover_gone.py).

DescribeSchedule of a deleted schedule is NOT_FOUND, but its scheduler workflow
``temporal-sys-scheduler:<id>`` stays readable by run id until the namespace's retention
removes it. Its first run (the receipt's destination first run id) holds the create's memo
(the gap's end, a limited handover's pin) and, in its history, the instant the server's
scheduler began: the first workflow task's start, which is the scheduler's ``workflow.Now()``
when it set its LastProcessedTime and create time. The chain's last run (after any
continue-as-new) closed when the delete took effect. From those the settle starts each owed
time before the delete as a plain workflow (gone.py). A chain that cannot be read any more
is ``SchedulerGone``: nothing is guessed.

The server's scheduler may go on starting after the delete took effect (a delete during its
long first workflow task, the gap backfill: the closed run's task still sends its starts), so
the settle waits until the close is ``QUIET`` old and then reads the namespace's listing of
the action's workflows (temporal_listing.py): each time at or after the delete with a run
there is recorded as the server's (``Settled.after_delete``), never assumed away.

A delete during that first task also cuts the create's patch (its gap backfill, the carried
backfills, buffered starts and trigger): measured on a dev server, 10 of a 1200-time gap
started. So the settle owes those times too (``cut_patch``), and each whose id has a run (the
server's) is left alone by the start's reuse policy, which sees every run still within the
namespace's retention. Past ``created + retention - RETENTION_MARGIN`` a run the server made
may be gone from it, so nothing is guessed: ``SchedulerGone`` (the migration parks).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, HistoryEventFilterType, WorkflowExecutionStatus
from temporalio.api.workflowservice.v1 import (DescribeWorkflowExecutionRequest,
                                               GetWorkflowExecutionHistoryRequest)
from temporalio.service import RPCError

from schedfence.domain.rollback.handover import Handover
from schedfence.domain.rollback.handover_gone import owed_before_delete
from schedfence.domain.ports import (DestinationNotFound, DestinationUnavailable, SchedulerGone,
                                     Settled, StartWorkflow)

from schedfence.infra.adapters.destination.gone import read_after_delete, start_owed
from schedfence.infra.adapters.destination.schedule_proto import gap_end, pin_of

if TYPE_CHECKING:
    from schedfence.infra.adapters.destination.temporal import TemporalDestination

# A chain longer than this (continue-as-new after continue-as-new) is read again later.
MAX_RUNS = 100
# How long after the delete's close the settle waits before it reads what the server started
# (its last workflow task's starts, and visibility's lag): asked again until then.
QUIET = timedelta(seconds=20)
RETENTION_MARGIN = timedelta(hours=1)


def settle_deleted(dest: TemporalDestination, request: StartWorkflow,
                   first_run_id: str) -> Settled:
    handover = Handover.model_validate(request.input["handover"])
    first = _describe(dest, request, first_run_id)
    end = gap_end(first.memo)
    if end is None or handover.action is None:
        return Settled()  # a create from before the gap was recorded: nothing it owes here
    created = _began(dest, request, first_run_id)
    deleted = _closed(dest, request, first)
    quiet = getattr(dest, "gone_quiet", QUIET)
    if datetime.now(timezone.utc) < deleted + quiet:
        raise DestinationUnavailable(f"settle: the schedule was deleted less than "
                                     f"{quiet.total_seconds():g} s ago; what its scheduler "
                                     "started is read once it is quiet: asked again")
    retained = created + timedelta(seconds=dest.retention_seconds(request.namespace))
    if datetime.now(timezone.utc) > retained - RETENTION_MARGIN:
        raise SchedulerGone("the deleted schedule's first actions may be past the namespace's "
                            "retention: which of its create's patch the server started "
                            "cannot be told")
    owed = owed_before_delete(handover, end, created, pin_of(first.memo), deleted,
                              cut_patch=True)
    done = start_owed(dest.start_workflow, request, handover, owed, deleted)
    listing = dest.action_starts(request.namespace, [handover.action.workflow_id])
    return read_after_delete(done, listing, handover, deleted)


def _gone_error(exc: RPCError) -> Exception:
    from schedfence.infra.adapters.destination.temporal_wire import describe_error
    err = describe_error(exc)
    if isinstance(err, DestinationNotFound):
        return SchedulerGone(f"the deleted schedule's scheduler workflow cannot be read: {err}")
    return err


def _describe(dest: TemporalDestination, request: StartWorkflow, run_id: str) -> Any:
    return dest._rpc("describe scheduler", "describe_workflow_execution",
                     DescribeWorkflowExecutionRequest(
                         namespace=request.namespace,
                         execution=WorkflowExecution(workflow_id=request.workflow_id,
                                                     run_id=run_id)),
                     _gone_error).workflow_execution_info


def _events(dest: TemporalDestination, request: StartWorkflow, run_id: str,
            close_only: bool) -> Any:
    return dest._rpc("scheduler history", "get_workflow_execution_history",
                     GetWorkflowExecutionHistoryRequest(
                         namespace=request.namespace,
                         execution=WorkflowExecution(workflow_id=request.workflow_id,
                                                     run_id=run_id),
                         maximum_page_size=10,
                         history_event_filter_type=(
                             HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT
                             if close_only else
                             HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)),
                     _gone_error).history.events


def _began(dest: TemporalDestination, request: StartWorkflow, first_run_id: str) -> datetime:
    """When the server's scheduler began: its first workflow task's start."""
    for event in _events(dest, request, first_run_id, close_only=False):
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            return event.event_time.ToDatetime(tzinfo=timezone.utc)
    raise DestinationUnavailable("settle: the scheduler workflow's first task has not started")


def _closed(dest: TemporalDestination, request: StartWorkflow, info: Any) -> datetime:
    """When the chain's last run closed (the delete): continue-as-new is followed."""
    for _ in range(MAX_RUNS):
        if info.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING:
            raise DestinationUnavailable("settle: the schedule is not found but its scheduler "
                                         "workflow still runs; asked again")
        if info.status != WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
            return info.close_time.ToDatetime(tzinfo=timezone.utc)
        close = _events(dest, request, info.execution.run_id, close_only=True)
        nxt = close[-1].workflow_execution_continued_as_new_event_attributes \
            .new_execution_run_id if close else ""
        if not nxt:
            raise DestinationUnavailable("settle: the scheduler's continue-as-new names no run")
        info = _describe(dest, request, nxt)
    raise DestinationUnavailable(f"settle: the scheduler's chain is longer than {MAX_RUNS} "
                                 "runs; asked again")
