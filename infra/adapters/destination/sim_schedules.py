"""The simulator as a Temporal Schedule: a start that carries a handover creates a schedule
(by request id, with the same dedupe and chain as any start), and the simulator keeps the
destination's record of action starts the way Temporal's scheduler would make it
(domain.handover.destination_starts): the create's patch, the boundary's settled times, and
its own spec times after its create time. The clock is the simulator's, so tests compress time.
"""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Sequence

from schedfence.domain.source.action import nominal_text, parse_nominal
from schedfence.domain.rollback.handover import GAP_MARGIN, Handover, boundary_gap, destination_starts
from schedfence.domain.rollback.handover_gone import owed_before_delete
from schedfence.domain.ports import (DestinationNotFound, DestinationUnavailable, SchedulerGone,
                                     Settled, StartAccepted, StartWorkflow)

from schedfence.infra.adapters.destination.gone import read_after_delete, start_owed

Clock = Callable[[], datetime]


class SimSchedules:
    """Mixed into ``SimulatedDestination`` (which provides ``_state``, ``clock`` and
    ``_next_fault``)."""

    _state: Any
    clock: Clock
    if TYPE_CHECKING:  # SimulatedDestination's
        def _next_fault(self, op: str) -> str | None: ...
        def start_workflow(self, request: StartWorkflow) -> StartAccepted: ...
        def action_starts(self, namespace: str,  # SimListing's
                          prefixes: Sequence[str] | None = None) -> list[str]: ...

    def _chain_head(self, tx: Any, namespace: str, workflow_id: str) -> dict:
        """The first run of the current chain, which holds the schedule's create time. A
        schedule whose current run closed, or whose head is gone, is gone (as DescribeSchedule
        of a deleted schedule is NOT_FOUND)."""
        runs = [r for r in tx.runs(namespace, workflow_id) if not r["deleted"]]
        if not runs or runs[-1]["status"] != "running":
            raise DestinationNotFound(f"no schedule at {namespace}/{workflow_id}")
        first = runs[-1]["first_execution_run_id"]
        head = next((r for r in runs if r["run_id"] == first), None)
        if head is None or "created_at" not in head:
            raise DestinationNotFound(f"the schedule at {namespace}/{workflow_id} has no head")
        return head

    def settle_handover(self, request: StartWorkflow, first_run_id: str) -> Settled:
        """The boundary's times, recorded once (a second call adds nothing); a schedule at
        the id whose chain began with another run than the receipt's is someone else's
        (``DestinationNotFound``: the handed-over one was deleted)."""
        if self._next_fault("settle") in ("unavailable", "fail_before_commit"):
            raise DestinationUnavailable("settle: unavailable")
        handover = Handover.model_validate(request.input["handover"])
        with self._state.session() as tx:
            head = self._chain_head(tx, request.namespace, request.workflow_id)
            if head["run_id"] != first_run_id:
                raise DestinationNotFound(f"the schedule at {request.namespace}/"
                                          f"{request.workflow_id} is not the one handed over")
            created = parse_nominal(head["created_at"])
            done = set(head.get("settled", []))
            todo = [nominal_text(t) for t in boundary_gap(handover, created - GAP_MARGIN,
                                                          created)
                    if nominal_text(t) not in done]
            head["settled"] = sorted(done | set(todo))
        return Settled(todo)

    def settle_deleted(self, request: StartWorkflow, first_run_id: str) -> Settled:
        """The settle of a schedule deleted since the receipt, as on a server
        (temporal_gone.py): from the chain headed by ``first_run_id`` (its create time, the
        close of its last run), the owed times before the close start as plain workflows
        (infra/adapters/destination/gone.py); those this migration started join the record's settled
        times. The head deleted (retention): ``SchedulerGone``."""
        fault = self._next_fault("settle")
        if fault in ("unavailable", "fail_before_commit"):
            raise DestinationUnavailable("settle: unavailable")
        handover = Handover.model_validate(request.input["handover"])
        with self._state.session() as tx:
            chain = [r for r in tx.runs(request.namespace, request.workflow_id)
                     if r["first_execution_run_id"] == first_run_id]
            head = next((r for r in chain if r["run_id"] == first_run_id), None)
            if head is None or head["deleted"] or chain[-1]["deleted"] or \
                    "created_at" not in head or "closed_at" not in chain[-1] and \
                    chain[-1]["status"] != "running":
                raise SchedulerGone(f"{request.namespace}/{request.workflow_id}: the chain of "
                                    f"{first_run_id} cannot be read")
            if chain[-1]["status"] == "running":
                raise DestinationUnavailable("settle: the scheduler workflow still runs")
            created = parse_nominal(head["created_at"])
            deleted = datetime.fromisoformat(chain[-1]["closed_at"])
        owed = owed_before_delete(handover, created - GAP_MARGIN, created, None, deleted)
        start: Callable[[StartWorkflow], StartAccepted] = \
            self.start_workflow
        done = start_owed(start, request, handover, owed, deleted)
        assert handover.action is not None
        done = read_after_delete(done, self.action_starts(
            request.namespace, [handover.action.workflow_id]), handover, deleted)
        with self._state.session() as tx:
            runs = tx.runs(request.namespace, request.workflow_id)
            head = next(r for r in runs if r["run_id"] == first_run_id)
            head["settled"] = sorted(set(head.get("settled", [])) | set(done.started))
            # started as plain runs at their ids (sim_listing.py lists those runs, not these)
            head["settled_plain"] = sorted(set(head.get("settled_plain", [])) |
                                           set(done.started))
        return done

    def schedule_starts(self, namespace: str, workflow_id: str,
                        now: datetime | None = None) -> list[datetime]:
        """The destination's record: the nominal times its schedule started by ``now``."""
        with self._state.session() as tx:
            head = self._chain_head(tx, namespace, workflow_id)
        if not head["input"].get("handover"):
            return []  # a pause-and-notes schedule never acts
        handover = Handover.model_validate(head["input"]["handover"])
        return destination_starts(handover, parse_nominal(head["created_at"]),
                                  [parse_nominal(t) for t in head.get("settled", [])],
                                  now or self.clock())
