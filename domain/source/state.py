"""The source schedule's folded state, and the guards every change to it checks first: an
ordinary mutation only of an open, unfenced source (I1), a migration's source transition only by
the migration whose request id the fence holds (I10).

``evolve_schedule`` (schedule.py) folds the source's lifecycle and fences into it, and
``evolve_runs`` (runs.py) the scheduler's actions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schedfence.domain.errors import Closed, MigrationPending


@dataclass(frozen=True)
class ScheduleState:
    namespace: str
    schedule_id: str
    incarnation: int
    paused: bool
    notes: str
    closed: bool = False
    close_reason: str = ""
    fence_request_id: str | None = None
    fence_migration_id: str | None = None
    completed_request_id: str | None = None
    completed_migration_id: str | None = None
    last_migration_id: str | None = None
    epoch: int = 0  # the store epoch (failovers recorded) this incarnation was created in
    # What it runs and when (None on a schedule of old: no spec, no action). JSON documents of
    # domain.spec.ScheduleSpec, domain.action.StartWorkflowAction and SchedulePolicies.
    spec: dict[str, Any] | None = None
    action: dict[str, Any] | None = None
    policies: dict[str, Any] | None = None
    remaining_actions: int | None = None  # limited actions left; None: unlimited
    cursor: str | None = None  # the last processed time (exclusive), RFC 3339 UTC
    # The scheduler's actions (domain/source/runs.py): JSON documents, oldest first.
    buffered: list[dict[str, Any]] = field(default_factory=list)  # waiting to start
    issued: list[dict[str, Any]] = field(default_factory=list)  # started, not yet answered
    running: list[str] = field(default_factory=list)  # action workflow ids
    stopping: list[str] = field(default_factory=list)  # asked to cancel or terminate
    stop_kinds: dict[str, str] = field(default_factory=dict)  # workflow id -> cancel|terminate
    # Backfills in progress: {backfill_id, start, end, overlap, cursor (exclusive)}.
    backfills: list[dict[str, Any]] = field(default_factory=list)
    backfill_count: int = 0  # backfills ever requested (names the next: backfill-<n+1>)
    recent_actions: list[dict[str, Any]] = field(default_factory=list)
    action_count: int = 0
    last_trigger: str | None = None  # the latest trigger's nominal time, on this key

    @property
    def migration_pending(self) -> bool:
        return self.fence_migration_id is not None


def check_mutable(state: ScheduleState) -> None:
    """Guard for every ordinary mutation (pause, notes, delete, actions)."""
    if state.closed:
        raise Closed(f"schedule {state.namespace}/{state.schedule_id} is closed")
    if state.migration_pending:
        raise MigrationPending(
            f"schedule {state.namespace}/{state.schedule_id} has a pending migration to "
            "workflow; retry later"
        )


def check_fence(state: ScheduleState, request_id: str | None) -> None:
    """Guard for a migration's source transition: the fence must still hold this request id."""
    if state.closed:
        raise Closed(f"schedule {state.namespace}/{state.schedule_id} is closed")
    if state.fence_request_id != request_id:
        raise MigrationPending(
            f"schedule {state.namespace}/{state.schedule_id} is fenced by "
            f"{state.fence_request_id!r}, not {request_id!r}"
        )
