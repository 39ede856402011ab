"""The migration: one handoff of a schedule's ownership from the source to the destination.

Its events are the audit trail of the fenced protocol (PROTOCOL.md A2): request-id assignment,
the one-shot start claim, the destination's answer, chain verification, the ownership receipt,
parking, the source close and abort. ``evolve_migration`` is the only reducer: the aggregate,
replay and the invariant checker all fold with it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from .model import EvolvingAggregate

Phase = Literal[
    "pending", "claimed", "receipted", "completed", "parked", "legacy_pending", "aborted"
]
OPEN_PHASES = ("pending", "claimed", "receipted", "parked", "legacy_pending")


@dataclass(frozen=True)
class MigrationState:
    migration_id: str
    namespace: str
    schedule_id: str
    source_id: str
    incarnation: int
    workflow_id: str
    request_id: str | None
    origin: str  # caller | derived | legacy
    pre_paused: bool
    pre_notes: str
    phase: Phase
    claim_armed: bool
    starts_issued: int = 0
    unproven_starts: int = 0  # starts whose answer does not prove "nothing committed"
    last_answer: dict | None = None
    receipt: str | None = None
    park_reason: str | None = None
    park_detail: str = ""
    attempts: int = 0
    last_worker: str = ""

    @property
    def is_open(self) -> bool:
        return self.phase in OPEN_PHASES

    @property
    def no_commit_proven(self) -> bool:
        """Every start ever issued has an answer proving it committed nothing."""
        return self.unproven_starts == 0


class _Event(EvolvingAggregate.Event):
    """A migration step taken by a worker attempt."""

    request_id: str | None
    attempt: int = 0
    worker: str = ""


class Migration(EvolvingAggregate):
    TOPIC = "schedfence.Migration"

    class Created(EvolvingAggregate.Created):
        """Abstract: a migration begins with one of the two subclasses below."""

        TOPIC: ClassVar[str] = "schedfence.migration.Created"

    class RequestIdAssigned(Created):
        """The admin rollback was accepted; persisted with the source's pause and fence."""

        TOPIC: ClassVar[str] = "schedfence.migration.RequestIdAssigned"
        namespace: str
        schedule_id: str
        source_id: str
        incarnation: int
        workflow_id: str
        request_id: str
        origin: Literal["caller", "derived"]
        pre_paused: bool
        pre_notes: str
        claim_armed: bool = True
        actor: str = ""

    class LegacyRollbackRequested(Created):
        """What an older release wrote: a pending rollback with no durable request id."""

        TOPIC: ClassVar[str] = "schedfence.migration.LegacyRollbackRequested"
        namespace: str
        schedule_id: str
        source_id: str
        incarnation: int
        workflow_id: str
        pre_paused: bool
        pre_notes: str

    class StartClaimConsumed(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.StartClaimConsumed"

    class DestinationStartIssued(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.DestinationStartIssued"
        workflow_id: str
        workflow_type: str
        id_reuse_policy: str
        id_conflict_policy: str
        input: dict[str, Any]

    class DestinationAnswered(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.DestinationAnswered"
        kind: Literal["created", "deduplicated", "already_started", "unavailable", "rejected"]
        run_id: str = ""
        first_execution_run_id: str = ""
        start_request_id: str = ""
        status: str = ""
        detail: str = ""
        proves_no_commit: bool = False

    class ChainVerified(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.ChainVerified"
        verdict: Literal["owned", "foreign", "head_missing", "no_current_run",
                         "no_first_run_identity", "unavailable"]
        current_run_id: str = ""
        current_status: str = ""
        first_run_id: str = ""
        head_request_ids: list[str] = []
        detail: str = ""

    class OwnershipAccepted(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.OwnershipAccepted"
        destination_first_run_id: str
        evidence: Literal["start_created", "start_deduplicated", "already_started_same_id",
                          "chain_head"]

    class MigrationParked(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.MigrationParked"
        reason: Literal["foreign_destination", "head_missing", "no_first_run_identity",
                        "start_rejected"]
        detail: str = ""

    class StartClaimRearmed(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.StartClaimRearmed"
        actor: str
        reason: str
        evidence: dict[str, Any] = {}

    class SourceClosed(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.SourceClosed"
        destination_first_run_id: str

    class MigrationAborted(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.MigrationAborted"
        actor: str
        reason: str
        restored_paused: bool
        restored_notes: str

    @staticmethod
    def evolve(state: MigrationState | None, event: Any) -> MigrationState:
        return evolve_migration(state, event)

    @classmethod
    def assign_request_id(cls, migration_id: Any, **fields: Any) -> Migration:
        return cls._create(cls.RequestIdAssigned, id=migration_id, **fields)

    @classmethod
    def legacy(cls, migration_id: Any, **fields: Any) -> Migration:
        return cls._create(cls.LegacyRollbackRequested, id=migration_id, **fields)

    def record(self, facts: list[tuple[type, dict[str, Any]]]) -> None:
        """Append the events a pure decision returned, in order."""
        for event_class, fields in facts:
            self.trigger_event(event_class, **fields)


def _created(event: Any, *, request_id: str | None, origin: str, phase: Phase,
             armed: bool) -> MigrationState:
    return MigrationState(
        migration_id=str(event.originator_id), namespace=event.namespace,
        schedule_id=event.schedule_id, source_id=event.source_id,
        incarnation=event.incarnation, workflow_id=event.workflow_id, request_id=request_id,
        origin=origin, pre_paused=event.pre_paused, pre_notes=event.pre_notes, phase=phase,
        claim_armed=armed,
    )


def _answer(state: MigrationState, e: Migration.DestinationAnswered) -> MigrationState:
    unproven = state.unproven_starts - (1 if e.proves_no_commit else 0)
    return replace(state, last_answer=e.payload(), unproven_starts=max(unproven, 0))


def _step(state: MigrationState, event: Any) -> MigrationState:
    """Bookkeeping shared by every worker step."""
    attempts = max(state.attempts, getattr(event, "attempt", 0))
    return replace(state, attempts=attempts, last_worker=getattr(event, "worker", "") or
                   state.last_worker)


def evolve_migration(state: MigrationState | None, event: Any) -> MigrationState:
    """Pure, total reducer: state × event → state. Unknown events raise (never skipped)."""
    M = Migration
    if isinstance(event, M.RequestIdAssigned):
        return _created(event, request_id=event.request_id, origin=event.origin,
                        phase="pending", armed=event.claim_armed)
    if isinstance(event, M.LegacyRollbackRequested):
        return _created(event, request_id=None, origin="legacy", phase="legacy_pending",
                        armed=False)
    if state is None:
        raise ValueError(f"{type(event).__name__} before the migration was created")
    state = _step(state, event)
    if isinstance(event, M.StartClaimConsumed):
        return replace(state, claim_armed=False, phase="claimed")
    if isinstance(event, M.DestinationStartIssued):
        return replace(state, starts_issued=state.starts_issued + 1,
                       unproven_starts=state.unproven_starts + 1)
    if isinstance(event, M.DestinationAnswered):
        return _answer(state, event)
    if isinstance(event, M.ChainVerified):
        return state
    if isinstance(event, M.OwnershipAccepted):
        return replace(state, receipt=event.destination_first_run_id, phase="receipted",
                       park_reason=None, park_detail="")
    if isinstance(event, M.MigrationParked):
        return replace(state, phase="parked", park_reason=event.reason,
                       park_detail=event.detail)
    if isinstance(event, M.StartClaimRearmed):
        return replace(state, claim_armed=True, phase="pending", park_reason=None,
                       park_detail="")
    if isinstance(event, M.SourceClosed):
        return replace(state, phase="completed")
    if isinstance(event, M.MigrationAborted):
        return replace(state, phase="aborted", claim_armed=False)
    raise TypeError(f"unknown migration event {type(event).__name__}")
