"""The histories of the replay corpus: one per rollback failure mode of docs/protocol.md, one
corrupted history, and seeded random workloads (``workload.py``).

Each builder drives the real service, worker, crash hook and simulator on a fresh in-memory
store, the way ``tests/infra/test_failure_modes.py`` does; refusals write nothing, so a failure
mode that is only a refusal (F4's running sentinel, F7, F10, F11) leaves the history around it.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Callable

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.errors import DomainError
from schedfence.domain.ids import (DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE,
                                   destination_workflow_id)
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.scheduling import WATCH_EVERY
from schedfence.domain.source.spec import make_spec
from tests.helpers import NS, Crash, World, plant_legacy, start_foreign


def wid(sid: str) -> str:
    return destination_workflow_id(sid)


def accept(w: World, sid: str, request_id: str | None = "R1", notes: str = "pre",
           paused: bool = False) -> str:
    w.service.create_schedule(NS, sid, paused=paused, notes=notes)
    return w.service.rollback(NS, sid, request_id).migration_id


def crash_run(w: World, point: str) -> None:
    """A worker run that dies at ``point`` (the crash is expected: fail if it does not fire)."""
    w.hooks.crash_once(point)
    try:
        w.service.run_until_idle()
    except Crash:
        return
    raise AssertionError(f"no crash at {point}")


def refused(fn: Callable[[], object]) -> None:
    try:
        fn()
    except DomainError:
        return
    raise AssertionError("expected a refusal")


def f1(w: World) -> None:
    accept(w, "f1")
    start_foreign(w.dest, "f1", workflow_type="order-fulfilment-workflow")
    w.service.run_until_idle()
    w.service.run_until_idle()  # the foreign run still runs: nothing to do
    w.dest.complete(NS, wid("f1"))
    w.service.run_until_idle()  # re-armed (AlreadyStarted proved no commit), then ours


def f2(w: World) -> None:
    accept(w, "f2-close")
    crash_run(w, "close.before_append")
    refused(lambda: w.service.update_schedule(NS, "f2-close", delete=True))
    w.dest.terminate(NS, wid("f2-close"))
    w.service.run_until_idle()  # close from the receipt, never a second start
    accept(w, "f2-answer")
    crash_run(w, "answer.before_append")
    w.dest.terminate(NS, wid("f2-answer"))
    w.service.run_until_idle()  # reconcile: our terminated run is the chain head
    accept(w, "f2-retention")  # residual hole (ii): the head is gone before the retry
    w.dest.inject("start", "lose_response")
    w.service.run_until_idle()
    head = w.dest.chains(NS, wid("f2-retention"))[0]
    w.dest.continue_as_new(NS, wid("f2-retention"))
    w.dest.delete(NS, wid("f2-retention"), run_id=head)
    w.service.run_until_idle()  # parked head_missing, nothing restarted


def f3(w: World) -> None:
    accept(w, "f3")
    w.dest.inject("start", "lose_response")
    w.service.run_until_idle()
    w.service.run_until_idle()


def f4(w: World) -> None:
    start_foreign(w.dest, "f4-done", workflow_type=DUMMY_WORKFLOW_TYPE, request_id="sentinel-1")
    w.dest.complete(NS, wid("f4-done"))
    accept(w, "f4-done")
    w.service.run_until_idle()
    w.service.create_schedule(NS, "f4-running")
    start_foreign(w.dest, "f4-running", workflow_type=DUMMY_WORKFLOW_TYPE,
                  request_id="sentinel-2")
    refused(lambda: w.service.rollback(NS, "f4-running", "R1"))  # sentinel_blocked
    w.dest.complete(NS, wid("f4-running"))
    w.service.rollback(NS, "f4-running", "R1")
    w.service.run_until_idle()


def f5(w: World) -> None:
    accept(w, "f5", request_id=None)
    w.service.rollback(NS, "f5")  # the caller's retry: already_pending, nothing written
    w.service.run_until_idle()
    w.dest.terminate(NS, wid("f5"))
    w.service.create_schedule(NS, "f5")  # incarnation 2 derives a different id
    w.service.rollback(NS, "f5")
    w.service.run_until_idle()


def f6(w: World) -> None:
    accept(w, "f6-owned")
    w.dest.inject("start", "lose_response")
    w.service.run_until_idle()
    w.dest.continue_as_new(NS, wid("f6-owned"))
    w.service.run_until_idle()  # accepted via the chain head's request ids
    w.service.create_schedule(NS, "f6-foreign", notes="pre")
    start_foreign(w.dest, "f6-foreign", workflow_type=SCHEDULER_WORKFLOW_TYPE)
    w.dest.continue_as_new(NS, wid("f6-foreign"))
    w.service.rollback(NS, "f6-foreign", "R1")
    w.service.run_until_idle()  # the head is not ours: parked foreign_destination


def f7(w: World) -> None:
    accept(w, "f7", "rollback-X")
    refused(lambda: w.service.rollback(NS, "f7", "rollback-Y"))
    w.service.run_until_idle()


def f8(w: World) -> None:
    w.service.create_schedule(NS, "f8", notes="old release")
    plant_legacy(w.service, "f8")  # the v1 record an older release stored, never rewritten
    w.service.run_until_idle()  # fails closed: nothing written, never started
    refused(lambda: w.service.rollback(NS, "f8"))


def f9(w: World) -> None:
    accept(w, "f9-early", notes="keep me", paused=True)
    w.service.abort(NS, "f9-early", "changed-my-mind", "ops")
    accept(w, "f9-foreign")
    start_foreign(w.dest, "f9-foreign")
    w.service.run_until_idle()
    w.service.abort(NS, "f9-foreign", "foreign-owner-keeps-it", "ops")
    accept(w, "f9-unknown")
    w.dest.inject("start", "lose_response")
    w.service.run_until_idle()
    refused(lambda: w.service.abort(NS, "f9-unknown", "gave-up", "ops"))  # two owners
    w.service.run_until_idle()


def f10(w: World) -> None:
    accept(w, "f10")
    refused(lambda: w.service.update_schedule(NS, "f10", paused=False))
    w.dest.inject("start", "lose_response")
    w.service.run_until_idle()
    refused(lambda: w.service.update_schedule(NS, "f10", notes="changed"))
    refused(lambda: w.service.update_schedule(NS, "f10", delete=True))
    w.service.run_until_idle()


def f11(w: World) -> None:
    mid = accept(w, "f11", "rollback-F11")
    w.service.run_until_idle()
    w.service.rollback(NS, "f11", "rollback-F11")  # already_completed, nothing written
    refused(lambda: w.service.rollback(NS, "f11", "rollback-new"))
    w.service.worker.attempt(uuid.UUID(mid))  # a duplicate task delivery is dropped


def corrupt(w: World) -> None:
    """Events no decision would write, appended directly: the checker must flag each one."""
    mid = uuid.UUID(accept(w, "bad"))
    m = w.service.app.repository.get(mid)
    ctx = {"request_id": "R1", "attempt": 1, "worker": "rogue"}
    m.record([(Migration.DestinationStartIssued, dict(
        ctx, workflow_id=wid("bad"), workflow_type="x", id_reuse_policy="allow_duplicate",
        id_conflict_policy="fail", input={"paused": True, "notes": "migration"}))])
    m.record([(Migration.SourceClosed, dict(ctx, destination_first_run_id="nowhere"))])
    w.service.app.save(m)  # I4 (no claim), I11 (migration pause), I2 (no receipt), I10


def s1(w: World) -> None:
    """A schedule takes actions (buffer_one overlap: one waits, the rest skip); a rollback is
    refused by the phase gate while a start's answer is unknown, and while its run runs (a
    Temporal Schedule's buffer_one could not see it); once closed, the fence stops every
    action and the handover completes."""
    w.service.create_schedule(NS, "s1", spec=make_spec(intervals=[(2, 0)]),
                              action=make_action(workflow_type="Report", task_queue="q",
                                                 workflow_id="act"),
                              policies=make_policies(overlap="buffer_one"))
    cursor = w.service.load.source(NS, "s1").state.cursor
    t0 = datetime.fromisoformat(cursor.replace("Z", "+00:00"))
    w.service.run_scheduler(now=t0 + timedelta(seconds=7))
    first = w.service.load.source(NS, "s1").state.running[0]
    w.dest.complete(NS, first)
    w.dest.inject("start", "lose_response")
    w.service.run_scheduler(now=t0 + timedelta(seconds=7))  # closed; the buffered one starts
    refused(lambda: w.service.rollback(NS, "s1", "R1"))  # phase gate: its answer was lost
    w.service.run_scheduler(now=t0 + timedelta(seconds=8))  # after the backoff: a dedupe
    refused(lambda: w.service.rollback(NS, "s1", "R1"))  # it runs: Temporal could not see it
    at = t0 + timedelta(seconds=8)
    while running := w.service.load.source(NS, "s1").state.running:  # it closes, the
        w.dest.complete(NS, running[0])  # buffered one runs (and at most one more time's)
        at += WATCH_EVERY  # a run's close is looked for a second after the last look
        w.service.run_scheduler(now=at)  # its close seen
    w.service.rollback(NS, "s1", "R1")
    w.service.run_scheduler(now=t0 + timedelta(seconds=30))  # fenced: nothing
    w.service.run_until_idle()


def s2(w: World) -> None:
    """A backfill (allow_all) whose first start's outcome is unknown (retried after a backoff,
    a dedupe); an action fails and pause_on_failure pauses; a trigger under terminate_other
    asks the running backfill actions to stop, and the rollback waits behind the phase gate
    until they have closed; then fenced (nothing more) and handed over."""
    # The hourly spec's times fall half an hour away from the creation, so none is due inside
    # the scenario's few seconds, whatever the wall clock (at 10:59:58 one was, and it asked
    # the trigger to stop too).
    now = datetime.now(timezone.utc)
    offset = (now.minute * 60 + now.second + 1800) % 3600
    w.service.create_schedule(NS, "s2", spec=make_spec(intervals=[(3600, offset)]),
                              action=make_action(workflow_type="Report", task_queue="q",
                                                 workflow_id="act2"),
                              policies=make_policies(overlap="terminate_other",
                                                     pause_on_failure=True))
    t0 = datetime.fromisoformat(w.service.load.source(NS, "s2").state.cursor)
    start = t0.replace(minute=0, second=0) - timedelta(hours=3)
    w.service.backfill_schedule(NS, "s2", start, start + timedelta(hours=2),
                                overlap="allow_all", now=t0)
    w.dest.inject("start", "lose_response")
    w.service.run_scheduler(now=t0)  # three starts; the first one's answer is lost
    w.service.run_scheduler(now=t0 + timedelta(seconds=2))  # asked again after the backoff
    state = w.service.load.source(NS, "s2").state
    w.dest.close(NS, state.running[0], "failed")
    w.service.run_scheduler(now=t0 + timedelta(seconds=2) + WATCH_EVERY)  # seen failed: paused
    assert w.service.load.source(NS, "s2").state.paused
    w.service.update_schedule(NS, "s2", paused=False)
    w.service.trigger_schedule(NS, "s2", overlap="terminate_other",
                               now=t0 + timedelta(seconds=3))
    w.service.run_scheduler(now=t0 + timedelta(seconds=3))  # the trigger waits; stops asked
    refused(lambda: w.service.rollback(NS, "s2", "R2"))  # phase gate: stops pending
    for _ in range(3):  # stops carried out, closes seen, the trigger starts
        w.service.run_scheduler(now=t0 + timedelta(seconds=3))
    for workflow_id in w.service.load.source(NS, "s2").state.running:  # the trigger's run
        w.dest.complete(NS, workflow_id)
    w.service.run_scheduler(now=t0 + timedelta(seconds=3) + WATCH_EVERY)  # its close seen
    w.service.rollback(NS, "s2", "R2")
    w.service.run_scheduler(now=t0 + timedelta(hours=2))  # fenced: nothing
    w.service.run_until_idle()


def s3(w: World) -> None:
    """A schedule handed over whole: a finished backfill, one in progress at the fence, a time
    due and never ticked; the handover rides on the rollback's first event, the worker's start
    carries it, and the boundary is settled before the close."""
    w.service.create_schedule(NS, "s3", spec=make_spec(intervals=[(60, 0)]),
                              action=make_action(workflow_type="Report", task_queue="q",
                                                 workflow_id="act3"),
                              policies=make_policies(overlap="allow_all"))
    first = datetime.fromisoformat(w.service.load.source(NS, "s3").state.cursor)
    now = [first]
    w.dest.clock = lambda: now[0]
    w.service.backfill_schedule(NS, "s3", first - timedelta(minutes=20),
                                first - timedelta(minutes=15), now=first)
    w.service.run_scheduler(now=first + timedelta(minutes=2))
    w.service.backfill_schedule(NS, "s3", first - timedelta(minutes=10),
                                first - timedelta(minutes=5), now=first)
    now[0] = (first + timedelta(minutes=3)).replace(second=0, microsecond=0) + \
        timedelta(seconds=1)
    w.service.rollback(NS, "s3", "R3")
    w.dest.inject("start", "lose_response")  # the receipt comes by reconcile
    w.service.run_until_idle()
    w.service.run_until_idle()


SCENARIOS: dict[str, tuple[str, str, Callable[[World], None]]] = {
    "f1_foreign_destination": ("F1", "foreign destination parks, re-arms once it closes", f1),
    "f2_close_failure": ("F2", "close crash / answer crash then terminated; head deleted", f2),
    "f3_lost_response": ("F3", "committed start, lost response, reconcile accepts", f3),
    "f4_sentinel": ("F4", "completed dummy does not block; running dummy does", f4),
    "f5_derived_id": ("F5", "omitted id retried; a new incarnation derives a new id", f5),
    "f6_continue_as_new": ("F6", "owned chain continued-as-new; foreign chain parks", f6),
    "f7_other_request_id": ("F7", "a different request id while one is pending", f7),
    "f8_legacy_v1": ("F8", "identity-less v1 record fails closed", f8),
    "f9_abort": ("F9", "abort before a claim, after a foreign answer; refused when unknown", f9),
    "f10_fenced_source": ("F10", "source mutations refused while the migration is open", f10),
    "f11_retry_after_completion": ("F11", "retry after completion is already_completed", f11),
    "s1_actions_fenced": ("S1", "actions, overlap, the phase gate, then fenced and handed over",
                          s1),
    "s2_backfill_trigger_stop": ("S2", "a backfill with a retried start, pause on failure, a "
                                       "trigger stopping running actions behind the phase "
                                       "gate, then fenced and handed over", s2),
    "s3_handover": ("S3", "a whole schedule handed over mid-backfill, its start answer lost, "
                          "the boundary settled before the close", s3),
    "corrupt_history": ("-", "events no decision writes: every step's violation pinned",
                        corrupt),
}
