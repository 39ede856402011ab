"""The destination side made real: a Temporal workflow that owns a handed-over schedule.

``ScheduleWorkflow`` is registered as ``temporal-sys-scheduler-workflow``, the type our start
sends. It takes over the schedule's pre-migration pause and notes, takes an action every
``interval_seconds`` while not paused (recorded in workflow state: this project has no side
effects to run), and continues-as-new every ``max_iterations_before_can`` iterations carrying
its whole state, so a long-lived schedule is a *chain* of runs that share a first run id,
exactly what the protocol's chain-head proof is about.

``SentinelWorkflow`` (``temporal-sys-dummy-workflow``) is the dummy (sentinel) that holds the id:
it sleeps, 15 minutes by default, and completes.
"""
from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field, fields
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE

DEFAULT_INTERVAL_SECONDS = 60.0
DEFAULT_MAX_ITERATIONS = 500
SENTINEL_IDLE_SECONDS = 15 * 60.0
RECENT_ACTIONS = 10
# The real V1 scheduler workflow answers this signal the same way (SignalNameForceCAN).
FORCE_CAN_SIGNAL = "force-continue-as-new"


def bad_input(message: str) -> ApplicationError:
    # Non-retryable: a bad input fails the run instead of retrying its workflow task forever.
    return ApplicationError(message, type="BadScheduleInput", non_retryable=True)


@dataclass
class SchedulerRunState:
    """Everything a run hands to the next one; also the workflow's input (all but 5 optional)."""

    namespace: str
    schedule_id: str
    incarnation: int
    paused: bool
    notes: str
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS
    max_iterations_before_can: int = DEFAULT_MAX_ITERATIONS
    actions_taken: int = 0
    next_action_at: float | None = None  # epoch seconds; None: one interval after the start
    recent_actions: list[float] = field(default_factory=list)
    runs: int = 1  # runs of this chain so far, this one included
    deleted: bool = False

    @classmethod
    def from_input(cls, args: dict[str, Any]) -> SchedulerRunState:
        """Build from the start's input; unknown keys are ignored so newer senders still work."""
        known = {f.name for f in fields(cls)}
        try:
            state = cls(**{k: v for k, v in args.items() if k in known})
        except TypeError as exc:
            raise bad_input(f"bad schedule input: {exc}") from None
        if not state.interval_seconds > 0:
            raise bad_input(f"interval_seconds must be > 0, got {state.interval_seconds}")
        if state.max_iterations_before_can < 1:
            raise bad_input("max_iterations_before_can must be >= 1")
        return state

    def to_input(self) -> dict[str, Any]:
        return asdict(self)


@workflow.defn(name=SCHEDULER_WORKFLOW_TYPE)
class ScheduleWorkflow:
    @workflow.init
    def __init__(self, args: dict[str, Any]) -> None:
        # Built here, not in run: a signal can be delivered before run's body starts (a new
        # run of the chain gets the signals sent while the previous one continued-as-new).
        self._state = SchedulerRunState.from_input(args)
        self._woken = False
        self._force_can = False

    @workflow.run
    async def run(self, args: dict[str, Any]) -> dict[str, Any]:
        state = self._state
        now = workflow.now().timestamp()
        if state.next_action_at is None:
            state.next_action_at = now + state.interval_seconds
        for _ in range(state.max_iterations_before_can):
            await self._sleep_until(state.next_action_at)
            if state.deleted:
                return state.to_input()
            if self._force_can:
                break
            self._act_if_due(state, workflow.now().timestamp())
            if workflow.info().is_continue_as_new_suggested():
                break
        state.runs += 1
        workflow.continue_as_new(state.to_input())

    async def _sleep_until(self, at: float) -> None:
        """One iteration: wait for the next action time, or for a signal."""
        delay = at - workflow.now().timestamp()
        if delay > 0 and not self._woken:
            try:
                await workflow.wait_condition(lambda: self._woken,
                                              timeout=timedelta(seconds=delay))
            except asyncio.TimeoutError:
                pass
        self._woken = False

    @staticmethod
    def _act_if_due(state: SchedulerRunState, now: float) -> None:
        """Take every action due by ``now``: timers fire late (about 1 s on a dev server) and a
        worker may have been down, but neither is a pause. Actions due while paused are
        skipped, as a paused schedule skips them."""
        assert state.next_action_at is not None
        if now < state.next_action_at:
            return
        due = int((now - state.next_action_at) // state.interval_seconds) + 1
        if not state.paused:
            state.actions_taken += due
            times = [state.next_action_at + k * state.interval_seconds
                     for k in range(max(0, due - RECENT_ACTIONS), due)]
            state.recent_actions = (state.recent_actions + times)[-RECENT_ACTIONS:]
        state.next_action_at += due * state.interval_seconds

    def _wake(self) -> None:
        self._woken = True

    @workflow.signal
    def pause(self, notes: str | None = None) -> None:
        self._update(True, notes)

    @workflow.signal
    def unpause(self, notes: str | None = None) -> None:
        self._update(False, notes)

    def _update(self, paused: bool, notes: str | None) -> None:
        self._state.paused = paused
        if notes is not None:
            self._state.notes = notes
        self._wake()

    @workflow.signal
    def delete(self) -> None:
        """The schedule is deleted: the chain completes."""
        self._state.deleted = True
        self._wake()

    @workflow.signal(name=FORCE_CAN_SIGNAL)
    def force_continue_as_new(self) -> None:
        self._force_can = True
        self._wake()

    @workflow.query
    def state(self) -> dict[str, Any]:
        return self._state.to_input()


@workflow.defn(name=DUMMY_WORKFLOW_TYPE)
class SentinelWorkflow:
    @workflow.run
    async def run(self, args: dict[str, Any] | None = None) -> None:
        await workflow.sleep(float((args or {}).get("sleep_seconds", SENTINEL_IDLE_SECONDS)))


WORKFLOWS = (ScheduleWorkflow, SentinelWorkflow)
