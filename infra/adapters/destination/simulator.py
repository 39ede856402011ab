"""A deterministic in-process stand-in for Temporal History's StartWorkflowExecution, Describe,
RequestCancelWorkflowExecution and TerminateWorkflowExecution.

It models docs/protocol.md, 'What the destination tells us': dedupe only against the current
run's request ids (running or closed), conflict policy while running, reuse policy once closed,
continue-as-new with a server-generated create request id, deletion freeing the id. Faults are
scripted or seeded so runs replay exactly. The runs themselves, and what is read from them, are
sim_runs.py's; where they are kept, sim_store.py's.
"""
from __future__ import annotations

import copy
import random
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar
from datetime import datetime, timezone

from schedfence.domain.destination_id import STORE_SIM, DestinationId
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE, WORKFLOW_ID_PREFIX
from schedfence.domain.source.action import StartWorkflowAction
from schedfence.domain.text import error_line
from schedfence.domain.ports import (DestinationError, DestinationNotFound, DestinationNotReached,
                                     DestinationUnavailable,
                                     InvalidStartRequest, RunDescription, StartAccepted,
                                     StartWorkflow, StopKind)
from schedfence.infra.adapters.destination.sim_forward import SimScheduleHost
from schedfence.infra.adapters.destination.sim_inventory import SimInventory
from schedfence.infra.adapters.destination.sim_listing import SimListing
from schedfence.infra.adapters.destination.sim_runs import (accepted, action_doc, already_started,
                                                            close_run, current_run, describe_run,
                                                            find_run, request_problem,
                                                            stop_current, timeout_at, TimedState)
from schedfence.infra.adapters.destination.sim_schedules import Clock, SimSchedules
from schedfence.infra.adapters.destination.sim_store import InMemorySimState, SimState, SimTx
from schedfence.infra.adapters.destination.sim_sql import RolledBack, SqlSimState

__all__ = ["FaultRates", "InMemorySimState", "SimState", "SimulatedDestination", "SqlSimState"]

CLOSED_STATUSES = ("completed", "failed", "canceled", "terminated", "timed_out")
T = TypeVar("T")
FAULTS = ("unavailable", "fail_before_commit", "lose_response")
FAULT_OPS = ("start", "describe", "stop_workflow", "settle", "update", "delete_schedule")
# The simulated workflow honours a cancel at once, so both kinds close the run on the spot.
STOP_STATUS: dict[str, str] = {"cancel": "canceled", "terminate": "terminated"}
DEFAULT_RETENTION_SECONDS = 3 * 86400.0  # what a namespace often has (Temporal Cloud's default)
# A batch call's starts in one transaction (PostgreSQL: a lock per workflow id; thousands at
START_CHUNK = 500  # once ran the server's lock table out: "out of shared memory")
_PRE_COMMIT_OUTCOME = {"unavailable": "unavailable", "fail_before_commit": "failed_before_commit"}


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def creates_schedule(request: StartWorkflow) -> bool:
    """A rollback's start: on a server, a CreateSchedule (destination/temporal_schedule.py),
    with a handover or, for a pause-and-notes schedule, without one (sim_schedules.py)."""
    return request.workflow_type == SCHEDULER_WORKFLOW_TYPE and \
        request.workflow_id.startswith(WORKFLOW_ID_PREFIX) and isinstance(request.input, dict)


@dataclass(frozen=True)
class FaultRates:
    """Per-call probabilities of each fault; their sum should be at most 1."""

    lose_response: float = 0.0
    fail_before_commit: float = 0.0
    unavailable: float = 0.0


class SimulatedDestination(SimSchedules, SimScheduleHost, SimInventory, SimListing):
    """Implements ``domain.ports.ActionRunner``, ``HandoverTarget``, ``ScheduleHost`` and
    ``ScheduleInventory`` over a
    ``SimState``, plus environment operations."""

    def destination_identity(self, with_cluster: bool = False) -> DestinationId:
        """The simulator kept in the store (domain/destination_id.py)."""
        return DestinationId("sim", STORE_SIM)

    def __init__(
        self, state: SimState | None = None, *, seed: int = 0, faults: FaultRates | None = None,
        clock: Clock = utc_now, retention: float = DEFAULT_RETENTION_SECONDS,
    ) -> None:
        self.clock = clock  # when a schedule is created (sim_schedules.py)
        self.retention = retention  # seconds; what ``retention_seconds`` answers
        # Every call's view: a run past its action's timeout has closed (sim_runs.TimedTx).
        self._state = TimedState(state if state is not None else InMemorySimState(), clock)
        self.seed = seed
        self.faults = faults or FaultRates()
        self._rng = random.Random(seed)
        self._scripted: dict[str, deque[str]] = {op: deque() for op in FAULT_OPS}
        self._fault_lock = threading.Lock()

    # --- faults -------------------------------------------------------------------------------

    def inject(self, op: str, fault: str, times: int = 1) -> None:
        """Make the next ``times`` calls of ``op`` fail with ``fault`` (FIFO, process-local)."""
        if op not in FAULT_OPS:
            raise ValueError(f"op must be one of {FAULT_OPS}, got {op!r}")
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
        with self._fault_lock:
            self._scripted[op].extend([fault] * times)

    def _next_fault(self, op: str) -> str | None:
        with self._fault_lock:
            # Always draw, so scripted faults do not shift the random sequence of later calls.
            draw = self._rng.random()
            if self._scripted[op]:
                return self._scripted[op].popleft()
        rates = self.faults
        for fault, rate in (
            ("lose_response", rates.lose_response),
            ("fail_before_commit", rates.fail_before_commit),
            ("unavailable", rates.unavailable),
        ):
            if draw < rate:
                return fault
            draw -= rate
        return None

    # --- ids ----------------------------------------------------------------------------------

    def _next_id(self, tx: SimTx, kind: str) -> str:
        # The counter lives in the state, so ids stay unique and replayable across processes.
        counter = tx.next_counter()
        infix = "" if kind == "run" else f"{kind}/"
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"sim/{self.seed}/{infix}{counter}"))

    def _add_run(self, tx: SimTx, req: StartWorkflow, request_id: str, first: str | None) -> dict:
        run_id = self._next_id(tx, "run")
        run = {
            "run_id": run_id,
            "first_execution_run_id": first or run_id,
            "workflow_type": req.workflow_type,
            "status": "running",
            "create_request_id": request_id,
            "request_ids": [request_id],
            "input": copy.deepcopy(req.input),  # JSON: a schedule action's may be any
            # A schedule action's start applies the whole action, as the server would:
            # arguments (payloads whole), timeouts, retry policy, memo, search attributes.
            "action": action_doc(req.action),
            "deleted": False,
            "by_start": first is None,
        }
        if first is None and (deadline := timeout_at(req.action, self.clock())):
            run["timeout_at"] = deadline  # a continued run carries none (not modelled)
        if first is None and creates_schedule(req):  # a schedule: when it began
            run["created_at"] = self.clock().isoformat()
        tx.add_run(req.namespace, req.workflow_id, run)
        return run

    # --- the port -----------------------------------------------------------------------------

    def start_workflow(self, request: StartWorkflow) -> StartAccepted:
        return self._logged_start(request, attach=False)

    def start_workflows(self, requests: Sequence[StartWorkflow]
                        ) -> list[StartAccepted | DestinationError]:
        """``StartBatcher``: each start exactly as ``start_workflow`` makes it (its own fault
        drawn, its own log entry, in order), ``START_CHUNK`` to a session (one lock of the
        counters row, or on PostgreSQL at most that many, however many a catch-up owes); a
        refusal is its answer. A chunk failing after one committed answers its starts and
        the later ones with its error (before COMMIT: ``DestinationNotReached``)."""
        pairs = list(zip(requests, [self._next_fault("start") for _ in requests]))
        answers: list[StartAccepted | DestinationError] = []
        for first in range(0, len(requests), START_CHUNK):
            chunk = pairs[first:first + START_CHUNK]
            try:
                with self._state.session() as tx:  # its rows written as it ends
                    tx.preload([(r.namespace, r.workflow_id) for r, _ in chunk])
                    chunk_answers = [self._start_logged(tx, r, f, attach=False)
                                     for r, f in chunk]
            except Exception as exc:  # noqa: BLE001 - each start after it answered with it
                if not answers:
                    raise
                kind = DestinationNotReached if isinstance(exc, RolledBack) else \
                    DestinationUnavailable
                return answers + [kind(f"starts: {error_line(exc)}")] * (len(requests) - first)
            answers += chunk_answers
        return answers

    def _logged_start(self, request: StartWorkflow, attach: bool) -> StartAccepted:
        fault = self._next_fault("start")
        with self._state.session() as tx:
            result = self._start_logged(tx, request, fault, attach)
        if isinstance(result, Exception):
            raise result
        return result

    def _start_logged(self, tx: SimTx, request: StartWorkflow, fault: str | None,
                      attach: bool) -> StartAccepted | DestinationError:
        """One start in ``tx`` under ``fault``, logged; its answer or the error it raises."""
        if fault in _PRE_COMMIT_OUTCOME:
            outcome = _PRE_COMMIT_OUTCOME[fault]
            result: StartAccepted | DestinationError = DestinationUnavailable(f"start: {outcome}")
        else:
            outcome, result = self._start(tx, request, attach)
            if fault == "lose_response":
                outcome = "lost_response"
                result = DestinationUnavailable("start committed but its response was lost")
        # A shallow copy: the request is frozen and its input is built per call (asdict's
        # deep copy was half of a start's cost in benchmarks/batch_throughput.py).
        tx.append_log({"request": dict(vars(request), action=action_doc(request.action)),
                       "outcome": outcome})
        return result

    def _start(
        self, tx: SimTx, req: StartWorkflow, attach: bool
    ) -> tuple[str, StartAccepted | DestinationError]:
        """StartWorkflowExecution; returns (log outcome, result or error to raise)."""
        problem = request_problem(req)
        if problem is not None:
            return "invalid", InvalidStartRequest(problem)
        request_id = req.request_id or self._next_id(tx, "req")  # empty: the server makes one
        current = current_run(tx.runs(req.namespace, req.workflow_id))
        if current is not None and request_id in current["request_ids"]:
            # A dedupe ignores type, input, policies. Like Temporal, ``started`` says whether the
            # id is the run's create id (a retry of the creating start), not an attached one.
            started = request_id == current["create_request_id"]
            return "deduplicated", accepted(current, started)
        if current is not None and current["status"] == "running":
            return self._start_over_running(tx, req, request_id, current, attach)
        if current is not None and (
            req.id_reuse_policy == "reject_duplicate"
            or (req.id_reuse_policy == "allow_duplicate_failed_only" and current["status"] == "completed")
        ):
            return "already_started", already_started(current)
        return "created", accepted(self._add_run(tx, req, request_id, None), True)

    def _start_over_running(
        self, tx: SimTx, req: StartWorkflow, request_id: str, current: dict, attach: bool
    ) -> tuple[str, StartAccepted | DestinationError]:
        if req.id_conflict_policy == "terminate_existing" or req.id_reuse_policy == "terminate_if_running":
            close_run(current, "terminated", self.clock().isoformat())
            return "created", accepted(self._add_run(tx, req, request_id, None), True)
        if req.id_conflict_policy == "use_existing":
            if attach:  # later starts with this id dedupe to this run (started False)
                current["request_ids"].append(request_id)
                return "use_existing_attached", accepted(current, False)
            return "use_existing", accepted(current, False)
        return "already_started", already_started(current)

    def describe(self, namespace: str, workflow_id: str, run_id: str | None = None) -> RunDescription:
        return self._described(
            lambda tx: describe_run(find_run(tx, namespace, workflow_id, run_id)))

    def run_statuses(self, namespace: str, workflow_ids: Sequence[str]) -> dict[str, str]:
        """``RunWatcher``: every id's current run status in one session (``gone``: none). A
        fault injected for ``describe`` applies to the whole call."""
        def statuses(tx: SimTx) -> dict[str, str]:
            tx.preload([(namespace, w) for w in workflow_ids])
            runs = {w: current_run(tx.runs(namespace, w)) for w in workflow_ids}
            return {w: run["status"] if run is not None else "gone" for w, run in runs.items()}
        return self._described(statuses)

    def _described(self, read: Callable[[SimTx], T]) -> T:
        """``read`` of the runs in one session, under the next fault injected for
        ``describe``: none, an outage before it, or its answer lost after it."""
        fault = self._next_fault("describe")
        if fault in _PRE_COMMIT_OUTCOME:
            raise DestinationUnavailable(f"describe: {_PRE_COMMIT_OUTCOME[fault]}")
        try:
            with self._state.session() as tx:
                answer = read(tx)
        except DestinationNotFound:
            if fault != "lose_response":
                raise
        if fault == "lose_response":  # a lost answer is lost whatever it was, NotFound too
            raise DestinationUnavailable("describe response was lost")
        return answer

    def retention_seconds(self, namespace: str) -> float:
        """``RetentionReader``: as told (closed runs stay until ``delete``)."""
        return self.retention

    def stop_workflow(self, namespace: str, workflow_id: str, kind: StopKind,
                      reason: str = "") -> None:
        """Cancel (``kind`` "cancel") or terminate the current run of ``workflow_id``.

        A running current run closes at once as "canceled" or "terminated": the simulated
        workflow honours a cancel immediately, where a real one may take its time or ignore
        it. A closed current run, or none (never started, deleted), is left as it is and the
        call returns None, so a repeated stop is a no-op. ``reason`` is accepted and dropped.
        Faults (op "stop_workflow"): "unavailable" and "fail_before_commit" change nothing,
        "lose_response" stops the run; all three raise ``DestinationUnavailable``. A bad
        ``kind`` raises ``ValueError`` and an empty id ``InvalidStartRequest``, before any
        fault is drawn. Stops are not written to the start log.
        """
        if kind not in STOP_STATUS:
            raise ValueError(f"kind must be one of {tuple(STOP_STATUS)}, got {kind!r}")
        if not workflow_id:
            raise InvalidStartRequest("workflow_id is empty")  # as a real server refuses it
        fault = self._next_fault("stop_workflow")
        if fault in _PRE_COMMIT_OUTCOME:
            raise DestinationUnavailable(f"stop_workflow: {_PRE_COMMIT_OUTCOME[fault]}")
        with self._state.session() as tx:
            stop_current(tx, namespace, workflow_id, STOP_STATUS[kind], self.clock().isoformat())
        if fault == "lose_response":
            raise DestinationUnavailable("stop_workflow committed but its response was lost")

    # --- environment operations ---------------------------------------------------------------

    def start_workflow_attaching(self, request: StartWorkflow) -> StartAccepted:
        """StartWorkflowExecution with ``on_conflict_options.attach_request_id`` set.

        Only a start that meets a *running* run under conflict policy ``use_existing`` attaches
        its request id to that run (the server records it with event type
        WORKFLOW_EXECUTION_OPTIONS_UPDATED, not STARTED); every other case is ``start_workflow``.
        Faults and the start log apply as to ``start_workflow``.
        """
        return self._logged_start(request, attach=True)

    def continue_as_new(self, namespace: str, workflow_id: str, input: dict | None = None) -> str:
        """Close the running current run as continued_as_new.

        The next run's only request id is a fresh create id; ids attached to the old run stay
        there (measured on Temporal 1.32: the new run's request_id_infos hold one STARTED id).
        """
        with self._state.session() as tx:
            current = find_run(tx, namespace, workflow_id, None)
            if current["status"] != "running":
                raise ValueError(f"cannot continue-as-new a {current['status']} run")
            close_run(current, "continued_as_new", self.clock().isoformat())
            req = StartWorkflow(
                namespace, workflow_id, "", current["workflow_type"],
                current["input"] if input is None else input,
            )
            request_id = self._next_id(tx, "req")
            return self._add_run(tx, req, request_id, current["first_execution_run_id"])["run_id"]

    def close(self, namespace: str, workflow_id: str, status: str, run_id: str | None = None) -> None:
        if status not in CLOSED_STATUSES:
            raise ValueError(f"close status must be one of {CLOSED_STATUSES}, got {status!r}")
        with self._state.session() as tx:
            run = find_run(tx, namespace, workflow_id, run_id)
            if run["status"] != "running":
                raise ValueError(f"run {run['run_id']} is already {run['status']}")
            close_run(run, status, self.clock().isoformat())

    def complete(self, namespace: str, workflow_id: str, run_id: str | None = None) -> None:
        self.close(namespace, workflow_id, "completed", run_id)

    def terminate(self, namespace: str, workflow_id: str, run_id: str | None = None) -> None:
        self.close(namespace, workflow_id, "terminated", run_id)

    def delete(self, namespace: str, workflow_id: str, run_id: str | None = None) -> None:
        """DeleteWorkflowExecution or retention; a running run is terminated first, as Temporal does."""
        with self._state.session() as tx:
            run = find_run(tx, namespace, workflow_id, run_id)
            if run["status"] == "running":
                close_run(run, "terminated", self.clock().isoformat())
            run["deleted"] = True

    def attach_request_id(
        self, namespace: str, workflow_id: str, request_id: str, run_id: str | None = None
    ) -> None:
        """Record an extra request id on a run (USE_EXISTING + attach_request_id in Temporal)."""
        with self._state.session() as tx:
            run = find_run(tx, namespace, workflow_id, run_id)
            if request_id not in run["request_ids"]:
                run["request_ids"].append(request_id)

    # --- inspection ---------------------------------------------------------------------------

    def runs(self, namespace: str, workflow_id: str) -> list[RunDescription]:
        with self._state.session() as tx:
            runs = tx.runs(namespace, workflow_id)
            return [describe_run(r) for r in runs if not r["deleted"]]

    def chains(self, namespace: str, workflow_id: str) -> list[str]:
        with self._state.session() as tx:
            firsts = (r["first_execution_run_id"] for r in tx.runs(namespace, workflow_id))
            return list(dict.fromkeys(firsts))

    def created_count(self, namespace: str, workflow_id: str, request_id: str | None = None) -> int:
        """Runs created by start_workflow (not by continue-as-new), deleted ones included."""
        with self._state.session() as tx:
            return sum(
                1
                for r in tx.runs(namespace, workflow_id)
                if r["by_start"] and (request_id is None or r["create_request_id"] == request_id)
            )

    def start_log(
        self, namespace: str | None = None, workflow_id: str | None = None
    ) -> list[tuple[StartWorkflow, str]]:
        with self._state.session() as tx:
            entries = tx.log(namespace, workflow_id)
        result = []
        for entry in entries:
            action = entry["request"].get("action")
            req = StartWorkflow(**{**entry["request"], "action": action and
                                   StartWorkflowAction.model_validate(action)})
            if namespace is not None and req.namespace != namespace:
                continue
            if workflow_id is not None and req.workflow_id != workflow_id:
                continue
            result.append((req, entry["outcome"]))
        return result

    def workflow_ids(self) -> list[tuple[str, str]]:
        with self._state.session() as tx:
            return tx.workflow_ids()

