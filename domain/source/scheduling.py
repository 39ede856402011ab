"""The source scheduler's decisions over a schedule's state (pure; the events are domain/source/runs.py's).

- ``tick``: at ``now``, the backfills' and the spec's times that became due go to the buffer
  (or are skipped with a reason), and the overlap policy decides what starts, waits, drops or
  must stop first. Nothing while a migration holds the fence or after the close (I1).
- ``start_answered``: the runner's answer to one issued start. An unknown outcome is retried
  with backoff under the same request id (a dedupe, never a second start: I17).
- ``run_closed``: a running action closed; with ``pause_on_failure`` a failure pauses.
- ``scheduled``: whether a pass looks at the schedule at all (a program, or runs to watch).
- ``due``: when a pass must look at it next (the due index), so a pass reads only what is due;
  ``Due.next_look`` adds the watch of running actions: every ``WATCH_EVERY`` where a close
  can change a decision (``closes_decide``), every ``WATCH_LAZILY`` where it cannot.
- ``watch_now``: whether a look asks for its running actions' statuses before it ticks.
- ``check_phase``: the phase gate a rollback passes before it may fence.

A start is recorded (``ActionStartIssued``) before the call, with a request id that is a
function of (schedule, nominal time, origin), so a start retried after a crash or a lost answer
is deduplicated by the runner (at most once per nominal time and origin).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from schedfence.domain.source.action import (SchedulePolicies, action_request_id, action_workflow_id, nominal_text,
                     parse_nominal)
from schedfence.domain.errors import PhaseBlocked
from schedfence.domain.source.generator import generate
from schedfence.domain.source.invoker import BufferedStart, Invocation, invoke
from schedfence.domain.model import Fact, Facts
from schedfence.domain.ports import AlreadyStarted, DestinationUnavailable, StartAccepted, StartWorkflow
from schedfence.domain.source.program import Program, policies_in, program_of
from schedfence.domain.source.runs import (ActionClosed, ActionStarted, ActionStartFailed, ActionStartIssued,
                   ActionStartRetrying, BackfillProcessed, PausedOnFailure, StopRequested,
                   TimesProcessed, buffered_doc)
from schedfence.domain.source.spec import ScheduleSpec, times_after

if TYPE_CHECKING:
    from schedfence.domain.source.state import ScheduleState

MAX_BUFFER = 1000  # a backfill adds no more than the buffer has room for; the rest next tick
MAX_BACKOFF = 60  # seconds between attempts at a start whose outcome is unknown
FAILURES = ("failed", "timed_out")  # what pause_on_failure pauses on, as Temporal's
_AT_ONCE = datetime(1970, 1, 1, tzinfo=timezone.utc)  # due at the next pass
_US = timedelta(microseconds=1)
# How often a schedule with actions running is looked at for their close, besides its own due
# times (at once where a stop or a buffered start waits on the close): a close that frees
# nothing else (a rollback's phase gate, the running list) is seen at most this late.
WATCH_EVERY = timedelta(seconds=1)
# The same, for a schedule no close can change a decision of (``closes_decide``): its closes
# only bring the running list and the audit trail up to date, so its first look in each window
# this long watches, and a look of its own comes at most two windows after the last watch.
WATCH_LAZILY = timedelta(seconds=10)


def _buffered(doc: dict[str, Any]) -> BufferedStart:
    return BufferedStart(parse_nominal(doc["nominal"]), doc["overlap"], doc["origin"])


def _doc(b: BufferedStart) -> dict[str, Any]:
    return buffered_doc(nominal_text(b.nominal), b.origin, b.overlap)


def scheduled(state: ScheduleState) -> bool:
    """Whether the scheduler's pass looks at the schedule at all: it has a spec (times to
    tick), or actions still running to watch close (a spec removed while they run). Without
    either there is nothing to decide, and the pass skips it."""
    return state.spec is not None or bool(state.running)


def closes_decide(state: ScheduleState) -> bool:
    """Whether a running action's close can change what the schedule decides next: a start
    of it (the spec's, a trigger's or a backfill's) waits for, skips beside or stops running
    actions (any overlap policy but ``allow_all``), it pauses on a failure, or a stop it asked
    for is pending. Where none of these holds, a start goes ahead whatever runs, and a close
    only brings the running list and the audit trail up to date."""
    policies = policies_in(state)
    return policies.overlap != "allow_all" or policies.pause_on_failure or \
        bool(state.stopping) or \
        any(b["overlap"] != "allow_all" for b in (*state.buffered, *state.backfills))


def watch_now(state: ScheduleState, now: datetime, watched: datetime | None) -> bool:
    """Whether a look at ``now`` asks for the running actions' statuses before it ticks:
    always where a close can change its decisions (``closes_decide``), so each decision sees
    the closes made before it; otherwise at its first look in each of the schedule's
    ``WATCH_LAZILY`` windows (``lazy_phase``) after the look that last did (``watched``;
    None, not known: now)."""
    if not state.running:
        return False
    return closes_decide(state) or watched is None or \
        now >= _after(watched, WATCH_LAZILY, lazy_phase(state))


def lazy_phase(state: ScheduleState) -> timedelta:
    """Where the schedule's ``WATCH_LAZILY`` windows begin, a fraction of the interval drawn
    from its name: a fleet's lazy watches spread over the interval instead of falling on
    the same looks (a fleet created at once, a scheduler restarted knowing no watch yet)."""
    name = f"{state.namespace}/{state.schedule_id}".encode()
    return _US * (zlib.crc32(name) % (WATCH_LAZILY // _US))


def _after(t: datetime, every: timedelta, phase: timedelta | None) -> datetime:
    """``every`` after ``t``; with a ``phase``, the first window boundary after ``t`` (times
    ``phase`` past a multiple of ``every`` since the epoch), at most ``every`` later."""
    if phase is None:
        return t + every
    windows = (t - _AT_ONCE - phase) // every
    return _AT_ONCE + phase + (windows + 1) * every


@dataclass(frozen=True)
class Due:
    """When the scheduler's pass must look at a schedule again (the due index keeps it).

    ``at``: the earliest of its next spec time after the cursor (paused or not: a time that
    passes moves the cursor), an issued start's retry time (at once without one: a start
    recorded but never answered), and at once for a backfill in progress, a start waiting in
    the buffer (for a close, or for nothing) or a stop asked for; None: not until the schedule
    changes. ``watch``: actions running whose close a pass looks for (``next_look``), every
    ``every`` (with a ``phase``: at the boundaries of windows ``every`` long, ``lazy_phase``)."""

    at: datetime | None
    watch: bool
    every: timedelta = WATCH_EVERY
    phase: timedelta | None = None

    def next_look(self, now: datetime, watched: datetime | None = None) -> datetime | None:
        """When a pass deciding at ``now`` must look again: ``at``, or sooner while watching,
        ``every`` after the look that last watched (``watched``; None: this one). With a
        ``phase`` (watched lazily), at the end of the window after the one it watched in: a
        look for the schedule's own times in that window watches (``watch_now``), so a
        schedule looked at anyway spends no look on the watch, and a close is recorded within
        two windows. Never before ``now``: a watch that went unanswered is asked again
        ``every`` (or a window) later. Not every
        pass: a pass that kept up would otherwise reload every schedule with a run in flight
        each time it polls, work that grows with the poll rate instead of with what happens.
        A close is seen within ``every``, at every due time where it can change a decision (a
        look watches before it ticks: ``watch_now``), and at once where a start or a stop
        waits on it (``at``)."""
        if not self.watch:
            return self.at
        look = _after(now if watched is None else watched, self.every, self.phase)
        if self.phase is not None:  # lazily: the end of the next window, not its start
            look = _after(look, self.every, self.phase)
        if look <= now:  # its last watch went unanswered (the runner down): not every pass
            look = _after(now, self.every, self.phase)
        return look if self.at is None else min(self.at, look)


def due(state: ScheduleState) -> Due:
    """The schedule's next due time as a pure function of its state: nothing else but an
    event changes it, so the index is kept from the log and by the pass that decided."""
    if not scheduled(state):
        return Due(None, False)
    watch = bool(state.running or state.stopping)
    eager = closes_decide(state)
    times = [parse_nominal(i["retry_at"]) if "retry_at" in i else _AT_ONCE for i in state.issued]
    if state.stopping:  # a stop the policy asked for is sent, and its close looked for, at once
        times.append(_AT_ONCE)
    program = program_of(state)
    if not (state.closed or state.migration_pending) and program.spec is not None and \
            program.action is not None and state.cursor is not None:
        if state.backfills or state.buffered:  # a buffered start waits on no close, or on
            times.append(_AT_ONCE)  # one each pass looks for, as the stops above
        following = next(times_after(program.spec, parse_nominal(state.cursor)), None)
        if following is not None:
            times.append(following)
    at = min(times) if times else None
    if eager or not watch:
        return Due(at, watch)
    return Due(at, watch, WATCH_LAZILY, lazy_phase(state))


def tick(state: ScheduleState, now: datetime, settle: bool = False,
         watched: bool = True) -> Facts:
    """What the scheduler records at ``now``: backfill and spec times that became due
    (buffered, or skipped with a reason), and the starts the overlap policy allows. Nothing
    when nothing happened: no time passed, nothing to start, the buffer as it was (an idle
    pass writes nothing). ``settle``: a pause's or an update's tick, which moves the cursor
    to ``now`` even then, since the new pause or program applies from ``now``. ``watched``:
    whether the look asked for the running actions' statuses first; where it did not and a
    close can now change a decision (the schedule changed after the look chose not to:
    ``watch_now``), nothing: the next look, at once where a start waits and within
    ``WATCH_EVERY`` otherwise (``Due.next_look``), watches first and decides."""
    program = program_of(state)
    if state.closed or state.migration_pending or program.spec is None or \
            program.action is None or state.cursor is None:
        return []
    if not watched and state.running and closes_decide(state):
        return []
    facts, added = _backfill_facts(state, program.spec)
    buffer = [_buffered(b) for b in state.buffered] + added
    return facts + _auto_facts(state, program, buffer, now, settle)


def _backfill_facts(state: ScheduleState,
                    spec: ScheduleSpec) -> tuple[Facts, list[BufferedStart]]:
    """Each backfill's next times, in order, no more than the buffer has room for; and the
    starts they add to the buffer (under the backfill's own overlap policy)."""
    facts: Facts = []
    added: list[BufferedStart] = []
    room = MAX_BUFFER - len(state.buffered)
    for bf in state.backfills:
        cursor, end = parse_nominal(bf["cursor"]), parse_nominal(bf["end"])
        out = generate(spec, cursor, end, max_times=max(room, 0),
                       catchup_window=timedelta.max, advance_idle=True)
        new_cursor = out.cursor or cursor
        if new_cursor == cursor and not out.starts:
            continue
        room -= len(out.starts)
        added += [BufferedStart(t, bf["overlap"], bf["backfill_id"]) for t in out.starts]
        facts.append(Fact(BackfillProcessed, {
            "backfill_id": bf["backfill_id"], "cursor": nominal_text(new_cursor),
            "due": [nominal_text(t) for t in out.starts], "done": new_cursor >= end}))
    return facts, added


def _auto_facts(state: ScheduleState, program: Program, buffer: list[BufferedStart],
                now: datetime, settle: bool) -> Facts:
    """The spec's times in (cursor, now], then the overlap policy over the whole buffer."""
    assert program.spec is not None and program.action is not None and state.cursor
    policies = program.policies or SchedulePolicies()  # Temporal's defaults
    waiting = sum(b.origin == "auto" for b in buffer)
    remaining = None if state.remaining_actions is None else \
        max(state.remaining_actions - waiting, 0)
    due = generate(program.spec, parse_nominal(state.cursor), now, paused=state.paused,
                   remaining=remaining,
                   catchup_window=timedelta(seconds=policies.catchup_window),
                   advance_idle=settle)
    buffer = buffer + [BufferedStart(t, policies.overlap, "auto") for t in due.starts]
    decided = _invoke(buffer, [*state.running, *(i["workflow_id"] for i in state.issued)],
                      state.paused)
    skipped = [{"nominal": nominal_text(t), "origin": "auto", "reason": r}
               for t, r in due.skipped] + \
        [dict(_doc(b), reason="overlap") for b in decided.dropped]
    facts: Facts = []
    new_cursor = nominal_text(due.cursor) if due.cursor is not None else state.cursor
    kept = [_doc(b) for b in decided.keep]
    if new_cursor != state.cursor or skipped or decided.start or kept != state.buffered:
        facts.append(Fact(TimesProcessed, {
            "cursor": new_cursor, "due": [nominal_text(t) for t in due.starts],
            "skipped": skipped, "buffer": kept}))
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


def _invoke(buffer: list[BufferedStart], running: list[str], paused: bool) -> Invocation:
    """The overlap policy over the buffer. Paused: the spec's starts wait; manual ones
    (triggers, backfills) go ahead, as Temporal's do."""
    if not paused:
        return invoke(buffer, running)
    decided = invoke([b for b in buffer if b.origin != "auto"], running)
    return replace(decided, keep=tuple(b for b in buffer if b.origin == "auto") + decided.keep)


def check_overlap_seen(state: ScheduleState) -> None:
    """A rollback waits while the source's actions run under an overlap policy other than
    ``allow_all``: a Temporal Schedule cannot be told of runs it did not start, so its first
    action would ignore them (start beside one under ``skip``, not wait under ``buffer_*``,
    not stop it under ``cancel_other``/``terminate_other``) where the never-moved schedule
    would not. Nothing is written; retry once they close."""
    overlap = policies_in(state).overlap
    if state.running and overlap != "allow_all":
        raise PhaseBlocked(f"schedule {state.namespace}/{state.schedule_id} has "
                           f"{len(state.running)} action(s) running under overlap {overlap}, "
                           "which a Temporal Schedule cannot see; retry after they close")


def check_phase(state: ScheduleState) -> None:
    """The phase gate: a rollback waits while a start is in flight (or in backoff) or a stop
    is pending, so no action of the source can land after its fence (I1)."""
    if state.issued:
        raise PhaseBlocked(f"schedule {state.namespace}/{state.schedule_id} has "
                           f"{len(state.issued)} action start(s) in flight; retry after they "
                           "are answered")
    if state.stopping:
        raise PhaseBlocked(f"schedule {state.namespace}/{state.schedule_id} is waiting for "
                           f"{len(state.stopping)} overlapping run(s) to stop; retry later")


# -- answers from the action runner -------------------------------------------------------------
def backoff(attempt: int) -> timedelta:
    """Seconds before attempt ``attempt + 1``: 1, 2, 4 ... capped at MAX_BACKOFF."""
    return timedelta(seconds=min(2 ** max(attempt - 1, 0), MAX_BACKOFF))


def issued_due(state: ScheduleState, now: datetime) -> list[dict[str, Any]]:
    """The issued starts to ask (again) at ``now``: those not waiting out a backoff."""
    return [i for i in state.issued
            if "retry_at" not in i or parse_nominal(i["retry_at"]) <= now]


def start_answered(state: ScheduleState, issued: dict[str, Any], answer: Any,
                   now: datetime) -> Facts:
    """The runner's answer to one issued start: started (a dedupe of our own request id is
    the same start); unknown (unavailable: asked again after a backoff, same request id); or
    refused for good (the time will not start; ``pause_on_failure`` pauses)."""
    ctx = {k: issued[k] for k in ("nominal", "origin", "workflow_id")}
    if not any(i["workflow_id"] == issued["workflow_id"] for i in state.issued):
        return []  # answered already
    if isinstance(answer, StartAccepted) or (
            isinstance(answer, AlreadyStarted) and
            answer.start_request_id == issued["request_id"]):
        return [Fact(ActionStarted, dict(ctx, run_id=answer.run_id))]
    detail = f"{type(answer).__name__}: {answer}"[:500]
    if isinstance(answer, DestinationUnavailable):
        attempt = issued.get("attempt", 0) + 1
        return [Fact(ActionStartRetrying, dict(
            ctx, attempt=attempt, retry_at=nominal_text(now + backoff(attempt)),
            detail=detail))]
    return [Fact(ActionStartFailed, dict(ctx, detail=detail)),
            *_pause_on_failure(state, issued["workflow_id"], f"start refused: {detail}")]


def run_closed(state: ScheduleState, workflow_id: str, status: str) -> Facts:
    """A running action's workflow closed (seen by describing it)."""
    if workflow_id not in state.running or status == "running":
        return []
    closed = Fact(ActionClosed, {"workflow_id": workflow_id, "status": status})
    if status not in FAILURES:
        return [closed]
    return [closed, *_pause_on_failure(state, workflow_id, f"action {status}")]


def _pause_on_failure(state: ScheduleState, workflow_id: str, detail: str) -> Facts:
    if not policies_in(state).pause_on_failure or state.paused or \
            state.migration_pending or state.closed:
        return []  # while fenced the fence owns pause and notes (restored on release)
    return [Fact(PausedOnFailure, {
        "workflow_id": workflow_id, "detail": detail[:500],
        "notes": f"paused on failure: {workflow_id}: {detail}"[:1000]})]


def stops_pending(state: ScheduleState) -> list[tuple[str, str]]:
    """The running actions the overlap policy asked to stop: (workflow id, cancel|terminate)."""
    return [(w, state.stop_kinds.get(w, "cancel")) for w in state.stopping]


def start_request(state: ScheduleState, issued: dict[str, Any]) -> StartWorkflow:
    """The runner's start for one issued action: its workflow id and deterministic request id,
    the action's type and queue, and the whole action (arguments, timeouts, retry policy,
    memo, search attributes, user metadata) for the destination to apply."""
    action = program_of(state).action
    assert action is not None
    return StartWorkflow(namespace=state.namespace, workflow_id=issued["workflow_id"],
                         request_id=issued["request_id"], workflow_type=action.workflow_type,
                         input=None, task_queue=action.task_queue,
                         id_reuse_policy="allow_duplicate", id_conflict_policy="fail",
                         action=action)
