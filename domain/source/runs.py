"""The source scheduler's actions: events on the ``Schedule`` aggregate and how they fold.

Actions are recorded on the schedule itself, so the fence and every action are ordered by one
aggregate's versions: a tick decided before a rollback's fence conflicts with the fence's
append and is decided again, fenced. While a migration holds the fence, or after the close,
``tick`` decides nothing (I1). A start is recorded (``ActionStartIssued``) before the call, with
a request id that is a function of (schedule, nominal time, origin), so a start retried after
a crash or a lost answer is deduplicated by the runner (at most once per nominal time).

The decisions that record these events are domain/source/scheduling.py's (tick, answers, stops) and
domain/source/manual.py's (update, trigger, backfill).
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from eventsourcing.utils import register_topic

from schedfence.domain.model import EvolvingAggregate

if TYPE_CHECKING:
    from schedfence.domain.source.state import ScheduleState

RECENT = 10  # recent actions kept in the state


def no_actor(state: dict[str, Any]) -> None:
    """The upcast of an operator's event from before it named who asked: "" (not recorded)."""
    state.update(actor="")


def buffered_doc(nominal: str, origin: str, overlap: str) -> dict[str, Any]:
    """One buffered start as the state and ``TimesProcessed.buffer`` keep it."""
    return {"nominal": nominal, "origin": origin, "overlap": overlap}


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


class ActionStartRetrying(EvolvingAggregate.Event):
    """The start's outcome is unknown (the runner was unavailable or the answer was lost):
    it stays issued and is asked again, with the same request id, at ``retry_at``."""

    TOPIC: ClassVar[str] = "schedfence.schedule.ActionStartRetrying"
    nominal: str
    origin: str
    workflow_id: str
    attempt: int  # attempts made so far
    retry_at: str
    detail: str


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
    """The overlap policy asked running actions to cancel or terminate (the scheduler asks the
    runner each pass until it sees them closed)."""

    TOPIC: ClassVar[str] = "schedfence.schedule.StopRequested"
    kind: str  # cancel | terminate
    workflow_ids: list[str]


class PausedOnFailure(EvolvingAggregate.Event):
    """The policy ``pause_on_failure``: an action failed or timed out (or its start was
    refused for good), so the schedule paused itself, as Temporal's does."""

    TOPIC: ClassVar[str] = "schedfence.schedule.PausedOnFailure"
    workflow_id: str
    detail: str
    notes: str


class Triggered(EvolvingAggregate.Event):
    """A manual trigger: one start at ``nominal`` (the trigger's time), buffered under its
    own overlap policy; it ignores pause and the limit, as Temporal's trigger does."""

    TOPIC: ClassVar[str] = "schedfence.schedule.Triggered"
    class_version: ClassVar[int] = 2  # v2 adds ``actor`` (v1 reads as "": not recorded)
    nominal: str
    overlap: str
    actor: str = ""

    upcast_v1_v2: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_actor)


class BackfillRequested(EvolvingAggregate.Event):
    """A backfill: every nominal time of the spec in ``[start, end]`` starts under
    ``overlap``, processed from an exclusive ``cursor`` that starts just before ``start``."""

    TOPIC: ClassVar[str] = "schedfence.schedule.BackfillRequested"
    class_version: ClassVar[int] = 2  # v2 adds ``actor`` (v1 reads as "": not recorded)
    backfill_id: str
    start: str
    end: str
    overlap: str
    cursor: str
    actor: str = ""

    upcast_v1_v2: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_actor)


class BackfillProcessed(EvolvingAggregate.Event):
    """A backfill's cursor moved to ``cursor``; ``due`` went to the buffer under its overlap
    policy; ``done`` when the cursor reached the end (the backfill is over)."""

    TOPIC: ClassVar[str] = "schedfence.schedule.BackfillProcessed"
    backfill_id: str
    cursor: str
    due: list[str] = []
    done: bool = False


class ProgramUpdated(EvolvingAggregate.Event):
    """``schedule update``: the new spec, action, policies and limit (JSON documents, as on
    ``Schedule.Created``); ``cursor`` is where generation resumes (unchanged unless the
    schedule had no spec before: then the update's time)."""

    TOPIC: ClassVar[str] = "schedfence.schedule.ProgramUpdated"
    class_version: ClassVar[int] = 2  # v2 adds ``actor`` (v1 reads as "": not recorded)
    spec: dict[str, Any] | None = None
    action: dict[str, Any] | None = None
    policies: dict[str, Any] | None = None
    remaining_actions: int | None = None
    cursor: str | None = None
    actor: str = ""

    upcast_v1_v2: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_actor)


RUN_EVENTS = (TimesProcessed, ActionStartIssued, ActionStartRetrying, ActionStarted,
              ActionStartFailed, ActionClosed, StopRequested, PausedOnFailure, Triggered,
              BackfillRequested, BackfillProcessed, ProgramUpdated)
OBSERVATIONS = (ActionClosed,)  # what the source saw happen, not an action it took
for _event in RUN_EVENTS:  # the Schedule aggregate's events, declared outside its class body
    register_topic(_event.TOPIC, _event)


def evolve_runs(state: ScheduleState, event: object) -> ScheduleState:
    fold = _FOLDS.get(type(event))
    if fold is not None:
        return fold(state, event)
    return _evolve_answers(state, event)


def _issued(state: ScheduleState, e: ActionStartIssued) -> ScheduleState:
    issued = {"nominal": e.nominal, "origin": e.origin, "workflow_id": e.workflow_id,
              "request_id": e.request_id}
    left = state.remaining_actions  # manual starts (trigger, backfill) use no limit
    if left is not None and e.origin == "auto":
        left -= 1
    return replace(state, issued=[*state.issued, issued], remaining_actions=left,
                   action_count=state.action_count + 1)


def _retrying(state: ScheduleState, e: ActionStartRetrying) -> ScheduleState:
    issued = [dict(i, attempt=e.attempt, retry_at=e.retry_at)
              if i["workflow_id"] == e.workflow_id else i for i in state.issued]
    return replace(state, issued=issued)


def _backfill_processed(state: ScheduleState, e: BackfillProcessed) -> ScheduleState:
    backfills, buffered = [], list(state.buffered)
    for b in state.backfills:
        if b["backfill_id"] == e.backfill_id:
            buffered += [buffered_doc(t, b["backfill_id"], b["overlap"])
                         for t in e.due]
            if not e.done:
                backfills.append(dict(b, cursor=e.cursor))
        else:
            backfills.append(b)
    return replace(state, backfills=backfills, buffered=buffered)


def _program_updated(state: ScheduleState, e: ProgramUpdated) -> ScheduleState:
    return replace(state, spec=e.spec, action=e.action, policies=e.policies,
                   remaining_actions=e.remaining_actions, cursor=e.cursor or state.cursor)


_FOLDS: dict[type, Callable[[ScheduleState, Any], ScheduleState]] = {
    TimesProcessed: lambda s, e: replace(s, cursor=e.cursor, buffered=list(e.buffer)),
    ActionStartIssued: _issued,
    ActionStartRetrying: _retrying,
    PausedOnFailure: lambda s, e: replace(s, paused=True, notes=e.notes),
    Triggered: lambda s, e: replace(s, last_trigger=e.nominal, buffered=[
        *s.buffered, buffered_doc(e.nominal, "trigger", e.overlap)]),
    BackfillRequested: lambda s, e: replace(s, backfill_count=s.backfill_count + 1, backfills=[
        *s.backfills, {"backfill_id": e.backfill_id, "start": e.start, "end": e.end,
                       "overlap": e.overlap, "cursor": e.cursor}]),
    BackfillProcessed: _backfill_processed,
    ProgramUpdated: _program_updated,
}


def _evolve_answers(state: ScheduleState, event: Any) -> ScheduleState:
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
        kinds = {w: k for w, k in state.stop_kinds.items() if w != event.workflow_id}
        return replace(state, running=[w for w in state.running if w != event.workflow_id],
                       stopping=[w for w in state.stopping if w != event.workflow_id],
                       stop_kinds=kinds)
    if isinstance(event, StopRequested):
        kinds = {**state.stop_kinds, **{w: event.kind for w in event.workflow_ids}}
        return replace(state, stopping=sorted({*state.stopping, *event.workflow_ids}),
                       stop_kinds=kinds)
    raise TypeError(f"unknown schedule event {type(event).__name__}")


