"""The source scheduler's actions: events on the ``Schedule`` aggregate, and the tick decision.

Actions are recorded on the schedule itself, so the fence and every action are ordered by one
aggregate's versions: a tick decided before a rollback's fence conflicts with the fence's
append and is decided again, fenced. While a migration holds the fence, or after the close,
``tick`` decides nothing (I1). A start is recorded (``ActionStartIssued``) before the call, with
a request id that is a function of (schedule, nominal time, origin), so a start retried after
a crash or a lost answer is deduplicated by the runner (at most once per nominal time).

Not yet wired to a runner or a loop (docs/protocol.md, "Schedules"); the decisions are here.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from eventsourcing.utils import register_topic

from .action import (SchedulePolicies, action_request_id, action_workflow_id, nominal_text,
                     parse_nominal)
from .errors import PhaseBlocked
from .generator import generate
from .invoker import BufferedStart, Invocation, invoke
from .model import EvolvingAggregate, Fact, Facts
from .ports import AlreadyStarted, DestinationUnavailable, StartAccepted, StartWorkflow
from .program import program_of

if TYPE_CHECKING:
    from .schedule import ScheduleState

RECENT = 10  # recent actions kept in the state


class TimesProcessed(EvolvingAggregate.Event):
    """A tick: the cursor moved to ``cursor``; ``due`` are the times that became due and went
    to the overlap policy; ``skipped`` times (reason ``limit``, ``catchup_window`` or
    ``overlap``) will never start; ``buffer`` is the whole buffer now."""

    TOPIC: ClassVar[str] = "schedfence.schedule.TimesProcessed"
    cursor: str
    due: list[str] = []
    skipped: list[dict[str, Any]] = []
    buffer: list[dict[str, Any]] = []


class ActionStartIssued(EvolvingAggregate.Event):
    """One start, recorded before the call: its workflow id and deterministic request id."""

    TOPIC: ClassVar[str] = "schedfence.schedule.ActionStartIssued"
    nominal: str
    origin: str
    workflow_id: str
    request_id: str


class ActionStarted(EvolvingAggregate.Event):
    TOPIC: ClassVar[str] = "schedfence.schedule.ActionStarted"
    nominal: str
    origin: str
    workflow_id: str
    run_id: str


class ActionStartFailed(EvolvingAggregate.Event):
    """The runner refused the start for good (a bad request, or the action workflow id is
    taken by a run our request did not create): the time will not start."""

    TOPIC: ClassVar[str] = "schedfence.schedule.ActionStartFailed"
    nominal: str
    origin: str
    workflow_id: str
    detail: str


class ActionClosed(EvolvingAggregate.Event):
    TOPIC: ClassVar[str] = "schedfence.schedule.ActionClosed"
    workflow_id: str
    status: str


class StopRequested(EvolvingAggregate.Event):
    """The overlap policy asked running actions to cancel or terminate."""

    TOPIC: ClassVar[str] = "schedfence.schedule.StopRequested"
    kind: str  # cancel | terminate
    workflow_ids: list[str]


RUN_EVENTS = (TimesProcessed, ActionStartIssued, ActionStarted, ActionStartFailed, ActionClosed,
              StopRequested)
for _event in RUN_EVENTS:  # the Schedule aggregate's events, declared outside its class body
    register_topic(_event.TOPIC, _event)


def evolve_runs(state: ScheduleState, event: Any) -> ScheduleState:
    if isinstance(event, TimesProcessed):
        return replace(state, cursor=event.cursor, buffered=list(event.buffer))
    if isinstance(event, ActionStartIssued):
        issued = {"nominal": event.nominal, "origin": event.origin,
                  "workflow_id": event.workflow_id, "request_id": event.request_id}
        left = None if state.remaining_actions is None else state.remaining_actions - 1
        return replace(state, issued=[*state.issued, issued], remaining_actions=left,
                       action_count=state.action_count + 1)
    if isinstance(event, ActionStarted):
        issued = [i for i in state.issued if i["workflow_id"] != event.workflow_id]
        recent = [*state.recent_actions, {"nominal": event.nominal, "origin": event.origin,
                                          "workflow_id": event.workflow_id,
                                          "run_id": event.run_id}][-RECENT:]
        return replace(state, issued=issued, running=[*state.running, event.workflow_id],
                       recent_actions=recent)
    if isinstance(event, ActionStartFailed):
        return replace(state, issued=[i for i in state.issued
                                      if i["workflow_id"] != event.workflow_id])
    if isinstance(event, ActionClosed):
        return replace(state, running=[w for w in state.running if w != event.workflow_id],
                       stopping=[w for w in state.stopping if w != event.workflow_id])
    if isinstance(event, StopRequested):
        return replace(state, stopping=sorted({*state.stopping, *event.workflow_ids}))
    raise TypeError(f"unknown schedule event {type(event).__name__}")


def _buffered(doc: dict[str, Any]) -> BufferedStart:
    return BufferedStart(parse_nominal(doc["nominal"]),
                         doc["overlap"], doc["origin"])


def _doc(b: BufferedStart) -> dict[str, Any]:
    return {"nominal": nominal_text(b.nominal), "origin": b.origin, "overlap": b.overlap}


def tick(state: ScheduleState, now: datetime) -> Facts:
    """What the scheduler records at ``now``: the times that became due (buffered or skipped
    with a reason), and the starts the overlap policy allows. Nothing while fenced or closed."""
    program = program_of(state)
    if state.closed or state.migration_pending or program.spec is None or \
            program.action is None or state.cursor is None:
        return []
    policies = program.policies or SchedulePolicies()  # Temporal's defaults
    cursor = parse_nominal(state.cursor)
    remaining = None if state.remaining_actions is None else \
        max(state.remaining_actions - len(state.buffered), 0)
    due = generate(program.spec, cursor, now, paused=state.paused, remaining=remaining,
                   catchup_window=timedelta(seconds=policies.catchup_window))
    buffer = [_buffered(b) for b in state.buffered] + \
        [BufferedStart(t, policies.overlap, "auto") for t in due.starts]
    # Paused: the buffer waits (nothing starts); otherwise the overlap policy decides.
    decided = Invocation(keep=tuple(buffer)) if state.paused else \
        invoke(buffer, [*state.running, *(i["workflow_id"] for i in state.issued)])
    skipped = [{"nominal": nominal_text(t), "origin": "auto", "reason": r}
               for t, r in due.skipped] + \
        [dict(_doc(b), reason="overlap") for b in decided.dropped]
    facts: Facts = []
    new_cursor = nominal_text(due.cursor) if due.cursor is not None else state.cursor
    if new_cursor != state.cursor or skipped or decided.start:
        facts.append(Fact(TimesProcessed, {
            "cursor": new_cursor, "due": [nominal_text(t) for t in due.starts],
            "skipped": skipped, "buffer": [_doc(b) for b in decided.keep]}))
    for kind, ids in (("cancel", decided.cancel), ("terminate", decided.terminate)):
        new = [w for w in ids if w not in state.stopping]
        if new:
            facts.append(Fact(StopRequested, {"kind": kind, "workflow_ids": new}))
    for b in decided.start:
        facts.append(Fact(ActionStartIssued, {
            "nominal": nominal_text(b.nominal), "origin": b.origin,
            "workflow_id": action_workflow_id(program.action, b.nominal),
            "request_id": action_request_id(state.namespace, state.schedule_id, b.nominal,
                                            b.origin)}))
    return facts


def check_phase(state: ScheduleState) -> None:
    """The phase gate: a rollback waits while a start is in flight or a stop is pending, so no
    action of the source can land after its fence (I1)."""
    if state.issued:
        raise PhaseBlocked(f"schedule {state.namespace}/{state.schedule_id} has "
                           f"{len(state.issued)} action start(s) in flight; retry after they "
                           "are answered")
    if state.stopping:
        raise PhaseBlocked(f"schedule {state.namespace}/{state.schedule_id} is waiting for "
                           f"{len(state.stopping)} overlapping run(s) to stop; retry later")


# -- answers from the action runner -------------------------------------------------------------
def start_answered(state: ScheduleState, issued: dict[str, Any], answer: Any) -> Facts:
    """The runner's answer to one issued start: started (a dedupe of our own request id is
    the same start), or failed for good; an unknown outcome (unavailable) records nothing,
    the start stays issued and is asked again with the same request id."""
    ctx = {k: issued[k] for k in ("nominal", "origin", "workflow_id")}
    if not any(i["workflow_id"] == issued["workflow_id"] for i in state.issued):
        return []  # answered already
    if isinstance(answer, StartAccepted):
        return [Fact(ActionStarted, dict(ctx, run_id=answer.run_id))]
    if isinstance(answer, AlreadyStarted) and answer.start_request_id == issued["request_id"]:
        return [Fact(ActionStarted, dict(ctx, run_id=answer.run_id))]
    if isinstance(answer, DestinationUnavailable):
        return []
    return [Fact(ActionStartFailed, dict(ctx, detail=f"{type(answer).__name__}: {answer}"[:500]))]


def run_closed(state: ScheduleState, workflow_id: str, status: str) -> Facts:
    """A running action's workflow closed (seen by describing it)."""
    if workflow_id not in state.running or status == "running":
        return []
    return [Fact(ActionClosed, {"workflow_id": workflow_id, "status": status})]


def start_request(state: ScheduleState, issued: dict[str, Any]) -> StartWorkflow:
    """The runner's start for one issued action: its workflow id and deterministic request id,
    the action's type, queue and input."""
    action = program_of(state).action
    assert action is not None
    return StartWorkflow(namespace=state.namespace, workflow_id=issued["workflow_id"],
                         request_id=issued["request_id"], workflow_type=action.workflow_type,
                         input=action.input, task_queue=action.task_queue,
                         id_reuse_policy="allow_duplicate", id_conflict_policy="fail")
