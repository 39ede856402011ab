"""The migration: one handoff of a schedule's ownership from the source to the destination.

Its events are the audit trail of the fenced protocol (docs/protocol.md): request-id assignment,
the one-shot start claim, the destination's answer, chain verification, the ownership receipt,
parking, the source close and abort. ``evolve_migration`` is the only reducer: the aggregate,
replay and the invariant checker all fold with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self
from uuid import UUID

from pydantic import model_validator

from schedfence.domain.model import EvolvingAggregate, updated
from schedfence.domain.rollback import upcasts as up
from schedfence.domain.rollback.evidence import AbsenceObserved
from schedfence.domain.rollback.phases import (OPEN_PHASES, PARK_MEANING, UNVERIFIED_PARKS,
                                               AnswerKind, Phase)
from schedfence.domain.rollback.upcasts import Upcaster


@dataclass(frozen=True)
class MigrationState:
    migration_id: str
    namespace: str
    schedule_id: str
    source_id: str
    incarnation: int
    workflow_id: str
    request_id: str | None
    origin: str  # caller | derived | legacy | adopted
    pre_paused: bool
    pre_notes: str
    phase: Phase
    claim_armed: bool
    starts_issued: int = 0
    unproven_starts: int = 0  # starts whose answer does not prove "nothing committed"
    last_answer: dict[str, Any] | None = None
    receipt: str | None = None
    park_reason: str | None = None
    park_detail: str = ""
    attempts: int = 0
    last_worker: str = ""
    epoch: int = 0  # the store epoch (failovers recorded) this migration's steps belong to
    handover: dict[str, Any] | None = None  # what the destination continues (domain/rollback/handover.py)
    boundary_settled: bool = False  # its boundary's times were asked for (BoundarySettled)
    job_id: str | None = None  # the batch job that requested it (None: asked one by one)
    # The destination it was accepted against (domain/destination_id.py); None: unknown.
    destination: dict[str, str] | None = None

    @property
    def is_open(self) -> bool:
        return self.phase in OPEN_PHASES

    @property
    def no_commit_proven(self) -> bool:
        """Every start ever issued has an answer proving it committed nothing."""
        return self.unproven_starts == 0

    @property
    def unverified_why(self) -> str:
        """Why "no start in this log" proves nothing, for an unverified park."""
        if self.unverified and self.park_reason is not None:  # unverified: a reason is set
            return PARK_MEANING[self.park_reason]
        return ""

    @property
    def unverified(self) -> bool:
        """Parked because starts may exist that this log does not hold (an older release's,
        or a tail lost in a failover): "no start issued" here proves nothing."""
        return self.phase == "parked" and self.park_reason in UNVERIFIED_PARKS


class _Event(EvolvingAggregate.Event):
    """A migration step taken by a worker attempt."""

    request_id: str | None
    attempt: int = 0
    worker: str = ""


class Migration(EvolvingAggregate):
    TOPIC = "schedfence.Migration"
    # snapshot state v2: the handover's action whole; v3: job_id; v4: destination
    class_version: ClassVar[int] = 4

    upcast_v1_v2: ClassVar[Upcaster] = staticmethod(up.migration_state_v1_v2)
    upcast_v2_v3: ClassVar[Upcaster] = staticmethod(up.no_job)
    upcast_v3_v4: ClassVar[Upcaster] = staticmethod(up.no_destination)

    class Created(EvolvingAggregate.Created):
        """Abstract: a migration begins with one of the two subclasses below."""

        TOPIC: ClassVar[str] = "schedfence.migration.Created"

    class RequestIdAssigned(Created):
        """The admin rollback was accepted; persisted with the source's pause and fence.

        v7 adds ``destination``: the destination the rollback was accepted against, its
        binding (domain/destination_id.py); None on v6 and older: unknown, never guessed.
        v6 adds ``job_id``: the batch job (``schedfence migrate``) that requested it; None for
        a rollback asked by itself, and on v5 and older (not recorded).
        v5: the handover's action is whole (domain/source/action.py; a v4 one is upcast).
        v4 adds ``handover``: the source as the fence froze it (domain/rollback/handover.py, a JSON
        document; None for a schedule with no program, and on v3 and older).
        v3 adds the store ``epoch`` the migration was accepted in (failovers
        recorded before it; v2 reads as 0) and ``sentinel_check``: what the admin gate saw at
        the destination workflow id before accepting (``{"workflow_id", "current": None |
        {run_id, workflow_type, status}}``; None on v2, which did not record it).
        v2 carries the durable ``request_id``, its ``origin``, the armed start
        claim and the ``actor``. v1 is what an older release wrote under the same topic: only
        ``namespace, schedule_id, source_id, incarnation, workflow_id, pre_paused, pre_notes``
        (plus the envelope ``originator_id, originator_version, timestamp, originator_topic``)
        and no ``class_version`` marker. Such a migration has no durable id, so ``upcast_v1_v2``
        reads it as identity-less: ``request_id=None, origin="legacy", claim_armed=False``; it
        folds to ``legacy_pending`` and never acts until an operator adopts it (F8, I6).
        """

        TOPIC: ClassVar[str] = "schedfence.migration.RequestIdAssigned"
        class_version: ClassVar[int] = 7
        namespace: str
        schedule_id: str
        source_id: str
        incarnation: int
        workflow_id: str
        request_id: str | None
        origin: Literal["caller", "derived", "legacy"]
        pre_paused: bool
        pre_notes: str
        claim_armed: bool = True
        actor: str = ""
        epoch: int = 0
        sentinel_check: dict[str, Any] | None = None
        handover: dict[str, Any] | None = None
        job_id: str | None = None
        destination: dict[str, str] | None = None

        upcast_v1_v2: ClassVar[Upcaster] = staticmethod(up.request_id_assigned_v1_v2)
        upcast_v2_v3: ClassVar[Upcaster] = staticmethod(up.request_id_assigned_v2_v3)
        upcast_v3_v4: ClassVar[Upcaster] = staticmethod(up.request_id_assigned_v3_v4)
        upcast_v4_v5: ClassVar[Upcaster] = staticmethod(up.request_id_assigned_v4_v5)
        upcast_v5_v6: ClassVar[Upcaster] = staticmethod(up.no_job)
        upcast_v6_v7: ClassVar[Upcaster] = staticmethod(up.no_destination)

        @model_validator(mode="after")
        def _identity_consistent(self) -> Self:
            # An id-less record is only ever a v1 upcast; it must never carry an armed claim.
            if (self.request_id is None) != (self.origin == "legacy"):
                raise ValueError("origin 'legacy' if and only if there is no request id")
            if self.request_id is None and self.claim_armed:
                raise ValueError("an identity-less migration cannot have an armed start claim")
            return self

    class StartClaimConsumed(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.StartClaimConsumed"

    class DestinationStartIssued(_Event):
        """v2: the input's handover has its action whole (a v1 one is upcast)."""

        TOPIC: ClassVar[str] = "schedfence.migration.DestinationStartIssued"
        class_version: ClassVar[int] = 2
        workflow_id: str
        workflow_type: str
        id_reuse_policy: str
        id_conflict_policy: str
        input: dict[str, Any]

        upcast_v1_v2: ClassVar[Upcaster] = staticmethod(up.start_issued_v1_v2)

    class DestinationAnswered(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.DestinationAnswered"
        kind: AnswerKind
        run_id: str = ""
        first_execution_run_id: str = ""
        start_request_id: str = ""
        status: str = ""
        detail: str = ""
        proves_no_commit: bool = False

    class ChainVerified(_Event):
        """What reconcile saw of the chain. v2 adds ``head_create_request_id``: the id the
        chain head was *created* with (its STARTED entry). v1 recorded only every id of the
        head (``head_request_ids``, attached ones included), so it reads as "" (unknown):
        a v1 ``owned`` verdict is no proof of creation. ``claim_age`` and ``claim_grace``
        (seconds; None when not recorded) say how long after the migration's last step the
        destination was read, and for how long a start could still land then: a park on
        absence inside that window is a false park (the checker flags it)."""

        TOPIC: ClassVar[str] = "schedfence.migration.ChainVerified"
        class_version: ClassVar[int] = 2
        verdict: Literal["owned", "foreign", "head_missing", "no_current_run",
                         "no_first_run_identity", "unavailable"]
        current_run_id: str = ""
        current_status: str = ""
        first_run_id: str = ""
        head_request_ids: list[str] = []
        head_create_request_id: str = ""
        detail: str = ""
        claim_age: float | None = None
        claim_grace: float | None = None

        upcast_v1_v2: ClassVar[Upcaster] = staticmethod(up.chain_verified_v1_v2)

    class FailoverReconciled(_Event):
        """The first step of a migration accepted before the store's latest failover: its
        claim may have been used on a tail the failover lost, so it may never start again
        until reconcile proves the chain ours (then a receipt follows in the same append)
        or an operator decides (it parks ``failover_unverified``)."""

        TOPIC: ClassVar[str] = "schedfence.migration.FailoverReconciled"
        epoch: int

    class OwnershipAccepted(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.OwnershipAccepted"
        destination_first_run_id: str
        evidence: Literal["start_created", "start_deduplicated", "already_started_same_id",
                          "chain_head"]

    class BoundarySettled(_Event):
        """After the receipt, before the close: the destination that took the whole schedule
        was asked to start the spec's times at the handover's boundary (``started``, RFC 3339
        UTC; empty: none fell there or they had started). docs/protocol.md, "The handover".
        v2 adds ``pin``: a limited handover's pin (RFC 3339 UTC), the spec start its create
        set and this settle cleared before the patch; None when not pinned (and on v1).
        v3 adds ``deleted_at``: the schedule was deleted since the receipt, its delete took
        effect then (RFC 3339 UTC), and ``started`` are the owed times before it that this
        settle started as plain workflows (domain/rollback/handover_gone.py); None otherwise (and on
        v1, v2, whose ``detail`` "the schedule is gone" meant nothing was started).
        v4 adds ``over_limit``: a pinned settle whose create came after its pin found the
        server's own starts had gone that many beyond the limit (I21 reports it); None: not
        known (a settle repeated after the pin was cleared, and on v1-v3).
        v5 adds ``after_delete``: with ``deleted_at``, the nominal times (RFC 3339 UTC) whose
        action workflows the server itself started at or after the delete, as its listing
        showed once the scheduler had closed (empty: none; and on v1-v4, read as none)."""

        TOPIC: ClassVar[str] = "schedfence.migration.BoundarySettled"
        class_version: ClassVar[int] = 5
        started: list[str] = []
        detail: str = ""  # e.g. what a settle of a deleted schedule started, and why
        pin: str | None = None
        deleted_at: str | None = None
        over_limit: int | None = None
        after_delete: list[str] = []

        upcast_v1_v2: ClassVar[Upcaster] = staticmethod(up.boundary_settled_v1_v2)
        upcast_v2_v3: ClassVar[Upcaster] = staticmethod(up.boundary_settled_v2_v3)
        upcast_v3_v4: ClassVar[Upcaster] = staticmethod(up.boundary_settled_v3_v4)
        upcast_v4_v5: ClassVar[Upcaster] = staticmethod(up.boundary_settled_v4_v5)

    class MigrationParked(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.MigrationParked"
        reason: Literal["foreign_destination", "head_missing", "no_first_run_identity",
                        "start_rejected", "failover_unverified", "deleted_unsettled"]
        detail: str = ""

    class LegacyMigrationAdopted(_Event):
        """An operator gave an identity-less migration a durable id (``request_id`` is the new
        id). Saved with the source's ``FenceAdopted``. The migration parks as
        ``adopted_unverified``: an older release may have started the destination with ids we
        never saw, so nothing is started until the operator resolves or re-arms with a
        confirmed, live-checked absence of a destination run. v2 adds ``destination``: the
        destination the adopting process serves, which the adoption binds the migration to
        (the operator's word, as ``DestinationBound``); None on v1: unknown."""

        TOPIC: ClassVar[str] = "schedfence.migration.LegacyMigrationAdopted"
        class_version: ClassVar[int] = 2
        actor: str
        reason: str
        destination: dict[str, str] | None = None

        upcast_v1_v2: ClassVar[Upcaster] = staticmethod(up.no_destination)

    class MigrationResolved(_Event):
        """An operator's attested resolution of a parked migration, always followed in the
        same append by the step it justifies: ``destination_owns`` sets the receipt
        (``destination_first_run_id``) then ``SourceClosed``; ``source_kept`` then
        ``MigrationAborted`` (restore). ``observation`` is what the destination showed live."""

        TOPIC: ClassVar[str] = "schedfence.migration.MigrationResolved"
        actor: str
        reason: str
        resolution: Literal["source_kept", "destination_owns"]
        attestation: str
        destination_first_run_id: str = ""
        observation: dict[str, Any] = {}

    class DestinationBound(_Event):
        """An operator bound a migration whose destination is unknown (accepted by an older
        release) to the one the binding names, attesting it is the one it was accepted
        against (``schedfence recover bind``, docs/operators.md). Only an unknown binding is
        ever bound; a recorded one is never replaced."""

        TOPIC: ClassVar[str] = "schedfence.migration.DestinationBound"
        actor: str
        reason: str
        destination: dict[str, str]

    class StartClaimRearmed(_Event):
        """The start claim may be used again. v2 adds ``absence``: on a re-arm on absence
        inside retention (reason ``absent_within_retention``, domain/rollback/evidence.py), what the
        describe and the namespace's retention showed, which proves that the latest start
        (its answer unknown) committed nothing. A v1 re-arm carries none."""

        TOPIC: ClassVar[str] = "schedfence.migration.StartClaimRearmed"
        class_version: ClassVar[int] = 2
        actor: str
        reason: str
        evidence: dict[str, Any] = {}
        absence: AbsenceObserved | None = None

        upcast_v1_v2: ClassVar[Upcaster] = staticmethod(up.claim_rearmed_v1_v2)

    class SourceClosed(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.SourceClosed"
        destination_first_run_id: str

    class MigrationAborted(_Event):
        TOPIC: ClassVar[str] = "schedfence.migration.MigrationAborted"
        actor: str
        reason: str
        restored_paused: bool
        restored_notes: str

    if TYPE_CHECKING:  # folded by evolve; an annotation here would make a dataclass field
        state: MigrationState

    @staticmethod
    def evolve(state: MigrationState | None, event: object) -> MigrationState:
        return evolve_migration(state, event)

    @classmethod
    def assign_request_id(cls, migration_id: UUID, **fields: Any) -> Migration:
        return cls._create(cls.RequestIdAssigned, id=migration_id, **fields)



def _created(event: Migration.RequestIdAssigned, *, request_id: str | None, origin: str,
             phase: Phase, armed: bool) -> MigrationState:
    return MigrationState(
        migration_id=str(event.originator_id), namespace=event.namespace,
        schedule_id=event.schedule_id, source_id=event.source_id,
        incarnation=event.incarnation, workflow_id=event.workflow_id, request_id=request_id,
        origin=origin, pre_paused=event.pre_paused, pre_notes=event.pre_notes, phase=phase,
        claim_armed=armed, epoch=event.epoch, handover=event.handover, job_id=event.job_id,
        destination=event.destination,
    )


def _answer(state: MigrationState, e: Migration.DestinationAnswered) -> MigrationState:
    unproven = state.unproven_starts - (1 if e.proves_no_commit else 0)
    return updated(state, last_answer=e.payload(), unproven_starts=max(unproven, 0))


def _step(state: MigrationState, event: object) -> MigrationState:
    """Bookkeeping shared by every worker step."""
    attempts = max(state.attempts, getattr(event, "attempt", 0))
    return updated(state, attempts=attempts, last_worker=getattr(event, "worker", "") or
                   state.last_worker)


def _operator(state: MigrationState, e: Migration.LegacyMigrationAdopted |
              Migration.MigrationResolved) -> MigrationState:
    """Operator recovery steps (domain/rollback/recover.py decides when they are allowed)."""
    if isinstance(e, Migration.LegacyMigrationAdopted):
        return updated(state, request_id=e.request_id, origin="adopted", phase="parked",
                       destination=state.destination or e.destination,
                       claim_armed=False, park_reason="adopted_unverified",
                       park_detail=f"adopted by {e.actor}: an older release may have started "
                                   "the destination with unknown ids")
    if e.resolution == "destination_owns":
        return updated(state, receipt=e.destination_first_run_id, phase="receipted",
                       park_reason=None, park_detail="")
    return state  # source_kept: the MigrationAborted that follows restores the source


def evolve_migration(state: MigrationState | None, event: object) -> MigrationState:
    """Pure, total reducer: state × event → state. Unknown events raise (never skipped)."""
    M = Migration
    if isinstance(event, M.RequestIdAssigned):
        return _created(event, request_id=event.request_id, origin=event.origin,
                        phase="pending" if event.request_id else "legacy_pending",
                        armed=event.claim_armed and event.request_id is not None)
    if state is None:
        raise ValueError(f"{type(event).__name__} before the migration was created")
    state = _step(state, event)
    if isinstance(event, M.StartClaimConsumed):
        return updated(state, claim_armed=False, phase="claimed")
    if isinstance(event, M.DestinationStartIssued):
        return updated(state, starts_issued=state.starts_issued + 1,
                       unproven_starts=state.unproven_starts + 1)
    if isinstance(event, M.DestinationAnswered):
        return _answer(state, event)
    if isinstance(event, M.ChainVerified):
        return state
    if isinstance(event, M.FailoverReconciled):
        # Disarmed: only proof (a receipt) or an operator may move it on from here.
        return updated(state, epoch=max(state.epoch, event.epoch), claim_armed=False)
    if isinstance(event, M.OwnershipAccepted):
        return updated(state, receipt=event.destination_first_run_id, phase="receipted",
                       park_reason=None, park_detail="")
    if isinstance(event, M.BoundarySettled):
        return updated(state, boundary_settled=True)
    if isinstance(event, M.MigrationParked):
        return updated(state, phase="parked", park_reason=event.reason,
                       park_detail=event.detail)
    if isinstance(event, (M.LegacyMigrationAdopted, M.MigrationResolved)):
        return _operator(state, event)
    if isinstance(event, M.DestinationBound):
        return updated(state, destination=event.destination)
    if isinstance(event, M.StartClaimRearmed):
        # A re-arm on absence proves the latest start, the one unproven, committed nothing.
        unproven = state.unproven_starts - (1 if event.absence is not None else 0)
        return updated(state, claim_armed=True, phase="pending", park_reason=None,
                       park_detail="", unproven_starts=max(unproven, 0))
    if isinstance(event, M.SourceClosed):
        return updated(state, phase="completed")
    if isinstance(event, M.MigrationAborted):
        return updated(state, phase="aborted", claim_armed=False)
    raise TypeError(f"unknown migration event {type(event).__name__}")
