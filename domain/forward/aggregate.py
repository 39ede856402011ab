"""The forward migration: a Temporal Schedule handed to the source (docs/protocol.md, "Forward
migration"). One aggregate per (key, request id), the rollback's mirror image:

1. ``ForwardRequested``: the durable request id, before anything is done to either side;
2. ``TemporalFenceIssued``: the schedule's pause and notes *before* the fence and the conflict
   token it was read with, recorded before the UpdateSchedule that pauses it and marks its
   notes with the request id (re-issued, with a fresh reading, when the token moved under us);
3. ``TemporalFenced``: a describe showed the fence applied; the handover read after it,
   with the cursor the source resumes strictly after;
4. ``SourceCreated``: the source incarnation created, dormant (fenced by this migration),
   in the same append as the schedule's ``CreatedByMigration``;
5. ``TemporalDeleteIssued`` then ``ForwardCompleted``: the Temporal schedule deleted, and
   only then the source released with the pre-fence pause and notes (``OwnershipTaken``).

``ForwardParked`` stops it for an operator with a reason; ``ForwardAborted`` ends it without a
handover. The decisions are in domain/forward/steps.py.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from schedfence.domain.source.action import upcast_handover_v1_v2
from schedfence.domain.ids import SCHEDFENCE_NAMESPACE
from schedfence.domain.model import EvolvingAggregate
from schedfence.domain.rollback.upcasts import no_destination, no_job

PHASES = ("requested", "fence_issued", "fenced", "source_created", "delete_issued",
          "completed", "parked", "aborted")
OPEN_PHASES = PHASES[:5]
FORWARD_TOPIC_PREFIX = "schedfence.forward."


def forward_marker(request_id: str) -> str:
    """The notes a fenced Temporal schedule carries: who fenced it, and why."""
    return f"schedfence: migrating to the source (request {request_id})"


def derive_forward_request_id(namespace: str, schedule_id: str, conflict_token: str,
                              schedule_identity: str) -> str:
    """A caller that omits an id gets one stable across its retries of one migration: a
    function of the key, the Temporal Schedule taken over (``schedule_identity``: its
    scheduler workflow's first run id, so one created later at the id, whose conflict token
    starts again at 1, is a new forward) and the conflict token it had when asked."""
    key = f"forward/{len(namespace)}:{namespace}/{len(schedule_id)}:{schedule_id}/" \
          f"{len(schedule_identity)}:{schedule_identity}/{conflict_token}"
    return str(uuid.uuid5(SCHEDFENCE_NAMESPACE, key))


def forward_aggregate_id(namespace: str, schedule_id: str, request_id: str) -> uuid.UUID:
    base = f"forward/{len(namespace)}:{namespace}/{len(schedule_id)}:{schedule_id}"
    return uuid.uuid5(SCHEDFENCE_NAMESPACE, f"{base}/{request_id}")


@dataclass(frozen=True)
class ForwardState:
    namespace: str
    schedule_id: str
    request_id: str
    request_id_origin: str
    phase: str = "requested"
    attempts: int = 0
    conflict_token: str | None = None  # the token the fence was issued with
    fence_issues: int = 0
    pre_paused: bool | None = None
    pre_notes: str | None = None
    handover: dict[str, Any] | None = None
    source_id: str | None = None
    incarnation: int | None = None
    park_reason: str | None = None
    park_detail: str = ""
    parked_from: str | None = None  # the phase a park interrupted
    job_id: str | None = None  # the batch job that requested it (None: asked by itself)
    # The destination it was accepted against (domain/destination_id.py); None: unknown.
    destination: dict[str, str] | None = None

    @property
    def is_open(self) -> bool:
        return self.phase in OPEN_PHASES

    @property
    def migration_id(self) -> str:
        return str(forward_aggregate_id(self.namespace, self.schedule_id, self.request_id))


class ForwardMigration(EvolvingAggregate):
    TOPIC = "schedfence.ForwardMigration"
    # snapshot state v2: the handover's action whole; v3: job_id; v4: destination
    class_version: ClassVar[int] = 4

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        upcast_handover_v1_v2(state.get("handover"))

    upcast_v2_v3: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_job)
    upcast_v3_v4: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_destination)

    class Created(EvolvingAggregate.Created):
        """Abstract: a forward migration begins with ``ForwardRequested``."""

        TOPIC: ClassVar[str] = "schedfence.forward.Created"

    class ForwardRequested(Created):
        """v3 adds ``job_id``: the batch job that requested it (None: asked by itself, and
        on v2 and older, which did not record it). v4 adds ``destination``: the Temporal
        server the forward was accepted against, its binding (domain/destination_id.py);
        None on v3 and older: unknown, never guessed."""

        TOPIC: ClassVar[str] = "schedfence.forward.ForwardRequested"
        class_version: ClassVar[int] = 4
        namespace: str
        schedule_id: str
        request_id: str
        request_id_origin: str
        actor: str
        epoch: int = 0
        # The Temporal Schedule as asked: its identity and conflict token (a derived id is a
        # function of both); "" where not read (an older event).
        schedule_identity: str = ""
        conflict_token: str = ""
        job_id: str | None = None
        destination: dict[str, str] | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(schedule_identity="", conflict_token="")

        upcast_v2_v3: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_job)
        upcast_v3_v4: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_destination)

    class TemporalFenceIssued(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.forward.TemporalFenceIssued"
        class_version: ClassVar[int] = 1
        request_id: str
        conflict_token: str
        pre_paused: bool
        pre_notes: str
        worker: str

    class TemporalFenced(EvolvingAggregate.Event):
        """v2: the handover's action is whole (a v1 one is upcast), and ``boundary`` records
        what the server was seen to have started (a v1 one reads as None: its cursor came
        from the update's time)."""

        TOPIC: ClassVar[str] = "schedfence.forward.TemporalFenced"
        class_version: ClassVar[int] = 2
        request_id: str
        conflict_token: str  # the token after the fence applied
        handover: dict[str, Any]
        # What the server was seen to have started (domain/forward/boundary.py), the
        # handover's cursor's proof; None: v1, whose cursor came from the update's time.
        boundary: dict[str, Any] | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(boundary=None)
            upcast_handover_v1_v2(state.get("handover"))

    class SourceCreated(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.forward.SourceCreated"
        class_version: ClassVar[int] = 1
        request_id: str
        source_id: str
        incarnation: int

    class TemporalDeleteIssued(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.forward.TemporalDeleteIssued"
        class_version: ClassVar[int] = 1
        request_id: str
        worker: str

    class ForwardCompleted(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.forward.ForwardCompleted"
        class_version: ClassVar[int] = 1
        request_id: str
        detail: str = ""

    class ForwardParked(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.forward.ForwardParked"
        class_version: ClassVar[int] = 1
        request_id: str
        reason: str
        detail: str = ""

    class ForwardAborted(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.forward.ForwardAborted"
        class_version: ClassVar[int] = 1
        request_id: str
        reason: str
        actor: str
        temporal_restored: bool  # the Temporal schedule's pre-fence pause and notes put back

    if TYPE_CHECKING:  # folded by evolve; an annotation here would make a dataclass field
        state: ForwardState

    @staticmethod
    def evolve(state: ForwardState | None, event: EvolvingAggregate.Event) -> ForwardState:
        return evolve_forward(state, event)

    @classmethod
    def request(cls, namespace: str, schedule_id: str, request_id: str, origin: str,
                actor: str, epoch: int, schedule_identity: str = "",
                conflict_token: str = "", job_id: str | None = None,
                destination: dict[str, str] | None = None) -> ForwardMigration:
        return cls._create(cls.ForwardRequested,
                           id=forward_aggregate_id(namespace, schedule_id, request_id),
                           namespace=namespace, schedule_id=schedule_id,
                           request_id=request_id, request_id_origin=origin, actor=actor,
                           epoch=epoch, schedule_identity=schedule_identity,
                           conflict_token=conflict_token, job_id=job_id,
                           destination=destination)


F = ForwardMigration


def evolve_forward(state: ForwardState | None, e: object) -> ForwardState:
    """Pure reducer of a forward migration's events."""
    if isinstance(e, F.ForwardRequested):
        return ForwardState(e.namespace, e.schedule_id, e.request_id, e.request_id_origin,
                            job_id=e.job_id, destination=e.destination)
    assert state is not None, f"{type(e).__name__} before ForwardRequested"
    if isinstance(e, F.TemporalFenceIssued):
        return replace(state, phase="fence_issued", conflict_token=e.conflict_token,
                       fence_issues=state.fence_issues + 1, pre_paused=e.pre_paused,
                       pre_notes=e.pre_notes, attempts=state.attempts + 1)
    if isinstance(e, F.TemporalFenced):
        return replace(state, phase="fenced", conflict_token=e.conflict_token,
                       handover=e.handover)
    if isinstance(e, F.SourceCreated):
        return replace(state, phase="source_created", source_id=e.source_id,
                       incarnation=e.incarnation)
    if isinstance(e, F.TemporalDeleteIssued):
        return replace(state, phase="delete_issued", attempts=state.attempts + 1)
    if isinstance(e, F.ForwardCompleted):
        return replace(state, phase="completed")
    if isinstance(e, F.ForwardParked):
        return replace(state, phase="parked", park_reason=e.reason, park_detail=e.detail,
                       parked_from=state.phase)
    if isinstance(e, F.ForwardAborted):
        return replace(state, phase="aborted")
    raise TypeError(f"unknown forward migration event {type(e).__name__}")
