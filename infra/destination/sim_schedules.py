"""The simulator as a Temporal Schedule: a start that carries a handover creates a schedule
(by request id, with the same dedupe and chain as any start), and the simulator keeps the
destination's record of action starts the way Temporal's scheduler would make it
(domain.handover.destination_starts): the create's patch, the boundary's settled times, and
its own spec times after its create time. The clock is the simulator's, so tests compress time.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

from schedfence.domain.action import nominal_text, parse_nominal
from schedfence.domain.handover import GAP_MARGIN, Handover, boundary_gap, destination_starts
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE, WORKFLOW_ID_PREFIX
from schedfence.domain.ports import (DestinationNotFound, DestinationUnavailable, Settled,
                                     StartWorkflow)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def creates_schedule(request: StartWorkflow) -> bool:
    """A rollback's start: on a server, a CreateSchedule (infra/destination/temporal_schedule.py),
    with a handover or, for a pause-and-notes schedule, without one."""
    return request.workflow_type == SCHEDULER_WORKFLOW_TYPE and \
        request.workflow_id.startswith(WORKFLOW_ID_PREFIX) and isinstance(request.input, dict)


class SimSchedules:
    """Mixed into ``SimulatedDestination`` (which provides ``_state``, ``clock`` and
    ``_next_fault``)."""

    _state: Any
    clock: Clock

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

    def settle_handover(self, request: StartWorkflow) -> Settled:
        """The boundary's times, recorded once (a second call adds nothing)."""
        if self._next_fault("settle") in ("unavailable", "fail_before_commit"):  # type: ignore[attr-defined]
            raise DestinationUnavailable("settle: unavailable")
        handover = Handover.model_validate(request.input["handover"])
        with self._state.session() as tx:
            head = self._chain_head(tx, request.namespace, request.workflow_id)
            created = parse_nominal(head["created_at"])
            done = set(head.get("settled", []))
            todo = [nominal_text(t) for t in boundary_gap(handover, created - GAP_MARGIN,
                                                          created)
                    if nominal_text(t) not in done]
            head["settled"] = sorted(done | set(todo))
        return Settled(todo)

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
