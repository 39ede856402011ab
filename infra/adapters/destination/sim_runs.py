"""The simulated destination's runs: each a plain-JSON dict among the runs of its workflow id
(sim_store.py's ``SimTx`` holds them), and what the simulator reads and does to them: the
current run, a run by id, closing one (by hand, or at its timeout), the port's answers made
from one, and the request validation a server does before any dedupe.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Callable, get_args

from schedfence.domain.source.action import StartWorkflowAction
from schedfence.domain.ports import (AlreadyStarted, ConflictPolicy, DestinationNotFound,
                                     ReusePolicy, RunDescription, StartAccepted, StartWorkflow)
from schedfence.infra.adapters.destination.sim_store import SimState, SimTx

REUSE_POLICIES: tuple[str, ...] = get_args(ReusePolicy)
CONFLICT_POLICIES: tuple[str, ...] = get_args(ConflictPolicy)


def current_run(runs: list[dict]) -> dict | None:
    # Deleting the latest run removes the id's current record, so older runs never become current.
    if runs and not runs[-1]["deleted"]:
        return runs[-1]
    return None


def find_run(tx: SimTx, namespace: str, workflow_id: str, run_id: str | None) -> dict:
    runs = tx.runs(namespace, workflow_id)
    if run_id is None:
        run = current_run(runs)
    else:
        run = next((r for r in runs if r["run_id"] == run_id and not r["deleted"]), None)
    if run is None:
        which = "current run" if run_id is None else f"run {run_id}"
        raise DestinationNotFound(f"{namespace}/{workflow_id}: no {which}")
    return run


def stop_current(tx: SimTx, namespace: str, workflow_id: str, status: str, at: str) -> None:
    """Close the current run with ``status`` if it is running; otherwise change nothing."""
    try:
        run = find_run(tx, namespace, workflow_id, None)
    except DestinationNotFound:
        return  # never started, or its current run deleted: nothing to stop
    if run["status"] == "running":
        close_run(run, status, at)


def close_run(run: dict, status: str, at: str) -> None:
    """A running run closes with ``status`` at ``at`` (ISO 8601: its close time)."""
    run["status"], run["closed_at"] = status, at


def describe_run(run: dict) -> RunDescription:
    return RunDescription(
        run_id=run["run_id"],
        first_execution_run_id=run["first_execution_run_id"],
        workflow_type=run["workflow_type"],
        status=run["status"],
        request_ids=frozenset(run["request_ids"]),
        create_request_id=run["create_request_id"],
    )


def accepted(run: dict, started: bool) -> StartAccepted:
    return StartAccepted(run["run_id"], run["first_execution_run_id"], run["status"], started)


def already_started(run: dict) -> AlreadyStarted:
    return AlreadyStarted(
        start_request_id=run["create_request_id"],
        run_id=run["run_id"],
        first_execution_run_id=run["first_execution_run_id"],
    )


def action_doc(action: StartWorkflowAction | None) -> dict[str, Any] | None:
    return None if action is None else action.model_dump(mode="json")


def request_problem(req: StartWorkflow) -> str | None:
    """Request-validation errors, which Temporal returns before any dedupe."""
    if not req.workflow_id:
        return "workflow_id is empty"
    if req.id_reuse_policy not in REUSE_POLICIES:
        return f"unknown id_reuse_policy {req.id_reuse_policy!r}"
    if req.id_conflict_policy not in CONFLICT_POLICIES:
        return f"unknown id_conflict_policy {req.id_conflict_policy!r}"
    if req.id_reuse_policy == "terminate_if_running" and req.id_conflict_policy != "fail":
        return f"terminate_if_running cannot be combined with conflict policy {req.id_conflict_policy!r}"
    if req.id_reuse_policy == "reject_duplicate" and req.id_conflict_policy == "terminate_existing":
        # A real server refuses this pair too (INVALID_ARGUMENT; contract suite).
        return "reject_duplicate cannot be combined with conflict policy 'terminate_existing'"
    return None


def timeout_at(action: StartWorkflowAction | None, started: datetime) -> str | None:
    """When a run a schedule's action started times out (RFC 3339), from the action's
    execution or run timeout, whichever is shorter; None: it never does."""
    limits = [t for t in (action.execution_timeout, action.run_timeout) if t] if action else []
    return (started + timedelta(seconds=min(limits))).isoformat() if limits else None


class TimedTx:
    """A session's view of the state in which a running run past its ``timeout_at`` has closed
    ``timed_out`` at that time, as the server closes it. The simulator keeps no timer: a run
    is closed when it is next read, which no reader can tell apart."""

    def __init__(self, tx: SimTx, now: datetime) -> None:
        self._tx, self._now = tx, now

    def runs(self, namespace: str, workflow_id: str) -> list[dict]:
        runs = self._tx.runs(namespace, workflow_id)
        for run in runs:
            deadline = run.get("timeout_at")
            if run["status"] == "running" and deadline and \
                    datetime.fromisoformat(deadline) <= self._now:
                close_run(run, "timed_out", deadline)
        return runs

    def add_run(self, namespace: str, workflow_id: str, run: dict) -> None:
        self._tx.add_run(namespace, workflow_id, run)

    def preload(self, keys: list[tuple[str, str]]) -> None:
        self._tx.preload(keys)

    def next_counter(self) -> int:
        return self._tx.next_counter()

    def append_log(self, entry: dict) -> None:
        self._tx.append_log(entry)

    def log(self, namespace: str | None = None, workflow_id: str | None = None) -> list[dict]:
        return self._tx.log(namespace, workflow_id)

    def workflow_ids(self) -> list[tuple[str, str]]:
        return self._tx.workflow_ids()


class TimedState:
    """A ``SimState`` whose sessions are ``TimedTx`` views at the clock's time."""

    def __init__(self, state: SimState, clock: Callable[[], datetime]) -> None:
        self.inner, self._clock = state, clock

    @contextmanager
    def session(self) -> Iterator[SimTx]:
        with self.inner.session() as tx:
            yield TimedTx(tx, self._clock())
