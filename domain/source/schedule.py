"""The source: a CHASM-style schedule, one aggregate per incarnation of a (namespace, id) key.

While a migration holds the fence the schedule executes nothing and every mutation is refused
with ``migration_pending`` before anything is written (I1). Only the migration that holds the
fence may close the source or release the fence (I10).
"""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from schedfence.domain.errors import Closed, MigrationPending
from schedfence.domain.ids import schedule_aggregate_id
from schedfence.domain.source.incarnation import carried_over, check_destination_free
from schedfence.domain.source.action import nominal_text, parse_nominal, upcast_action_v1_v2, upcast_handover_v1_v2
from schedfence.domain.model import EvolvingAggregate, Fact, Facts, updated
from schedfence.domain.rollback.upcasts import Upcaster
from schedfence.domain.source.program import Program
from schedfence.domain.source.runs import (BackfillRequested, ProgramUpdated, Triggered,
                                           evolve_runs, no_actor)
from schedfence.domain.source.state import ScheduleState, check_fence, check_mutable

MIGRATION_NOTE = "paused for migration to workflow-backed scheduler"
FORWARD_NOTE = "dormant: taking over from a Temporal Schedule"


class Schedule(EvolvingAggregate):
    """``class_version`` versions the snapshot state: v2 keeps the action whole
    (domain/source/action.py, ``upcast_action_v1_v2``)."""

    TOPIC = "schedfence.Schedule"
    class_version: ClassVar[int] = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        upcast_action_v1_v2(state.get("action"))

    class Created(EvolvingAggregate.Created):
        """v5 adds ``actor``: who created it (``OPERATOR_EVENTS``; v4 and older read as "",
        not recorded).

        v4 keeps the action whole (every payload with its metadata, timeouts, retry
        policy, user metadata: domain/source/action.py; a v3 action is upcast by
        ``upcast_action_v1_v2``) and adds ``cursor``: the first exclusive cursor of a schedule
        with a spec, given by the caller's clock (a test's fixed clock, so a seed replays
        exactly) and never before the previous incarnation's; and what a new incarnation
        carries over from its key's previous one so no (time, origin) of the key starts twice
        (I17): ``backfill_count`` (its first backfill is named after the previous one's last)
        and ``last_trigger``. v3 and older read as None, 0 and None: the cursor is the event's
        timestamp in whole seconds, as it was.

        v3 adds what the schedule runs and when: ``spec``, ``action`` and ``policies`` (JSON
        documents of domain.spec / domain.action; None: none) and ``remaining_actions`` (None:
        unlimited). v2 and v1 read as a schedule with no spec and no action.

        v2 adds ``epoch`` (the store's failover epoch when created; v1 reads as 0) and
        ``destination_check``: what the destination showed at the schedule's
        workflow id before this incarnation was created (``{"workflow_id", "current": None |
        {run_id, workflow_type, status, ...}}``), so the log proves no chain was running
        there (single owner, I1). v1 did not look, and reads as None."""

        TOPIC: ClassVar[str] = "schedfence.schedule.Created"
        class_version: ClassVar[int] = 5
        namespace: str
        schedule_id: str
        incarnation: int
        paused: bool
        notes: str
        destination_check: dict[str, Any] | None = None
        epoch: int = 0
        spec: dict[str, Any] | None = None
        action: dict[str, Any] | None = None
        policies: dict[str, Any] | None = None
        remaining_actions: int | None = None
        cursor: str | None = None
        backfill_count: int = 0
        last_trigger: str | None = None
        actor: str = ""

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(destination_check=None, epoch=0)

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            state.update(spec=None, action=None, policies=None, remaining_actions=None)

        @staticmethod
        def upcast_v3_v4(state: dict[str, Any]) -> None:
            state.update(cursor=None, backfill_count=0, last_trigger=None)
            upcast_action_v1_v2(state.get("action"))

        upcast_v4_v5: ClassVar[Upcaster] = staticmethod(no_actor)

    class Paused(EvolvingAggregate.Event):
        """v2 adds ``cursor``: an unpause moves the exclusive cursor to the instant it
        applied, so the paused stretch is never caught up, however rarely the scheduler
        passed during it (``pause_facts``). v1 reads as None: the cursor stays. v3 adds
        ``actor`` (v2 and older read as "": not recorded)."""

        TOPIC: ClassVar[str] = "schedfence.schedule.Paused"
        class_version: ClassVar[int] = 3
        paused: bool
        cursor: str | None = None
        actor: str = ""

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(cursor=None)

        upcast_v2_v3: ClassVar[Upcaster] = staticmethod(no_actor)

    class NotesUpdated(EvolvingAggregate.Event):
        """v2 adds ``actor`` (v1 reads as "": not recorded)."""

        TOPIC: ClassVar[str] = "schedfence.schedule.NotesUpdated"
        class_version: ClassVar[int] = 2
        notes: str
        actor: str = ""

        upcast_v1_v2: ClassVar[Upcaster] = staticmethod(no_actor)

    class Deleted(EvolvingAggregate.Event):
        """v2 adds ``actor`` (v1 reads as "": not recorded)."""

        TOPIC: ClassVar[str] = "schedfence.schedule.Deleted"
        class_version: ClassVar[int] = 2
        actor: str = ""

        upcast_v1_v2: ClassVar[Upcaster] = staticmethod(no_actor)

    class FencedForMigration(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.schedule.FencedForMigration"
        request_id: str | None  # None only for identity-less (legacy) migrations
        migration_id: str

    class ClosedByMigration(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.schedule.ClosedByMigration"
        request_id: str
        migration_id: str
        destination_first_run_id: str

    class FenceAdopted(EvolvingAggregate.Event):
        """An operator gave the identity-less migration holding the fence a durable id, so
        every later close/release recheck compares against it (saved with the adoption)."""

        TOPIC: ClassVar[str] = "schedfence.schedule.FenceAdopted"
        request_id: str
        migration_id: str

    class FenceReleased(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.schedule.FenceReleased"
        request_id: str | None
        migration_id: str
        restored_paused: bool
        restored_notes: str

    class CreatedByMigration(EvolvingAggregate.Created):
        """An incarnation a forward migration created from a Temporal Schedule's handover
        (domain/forward/aggregate.py): dormant, fenced by that migration, until the Temporal schedule
        is deleted and ``OwnershipTaken`` releases it. v2: the handover's action is whole
        (a v1 one is upcast, ``upcast_handover_v1_v2``). v3 carries the key's backfill count
        and last trigger from its previous incarnation, as ``Created`` v4 does (v2 reads as
        0 and None)."""

        TOPIC: ClassVar[str] = "schedfence.schedule.CreatedByMigration"
        class_version: ClassVar[int] = 3
        namespace: str
        schedule_id: str
        incarnation: int
        request_id: str
        migration_id: str
        handover: dict[str, Any]
        epoch: int = 0
        backfill_count: int = 0
        last_trigger: str | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            upcast_handover_v1_v2(state.get("handover"))

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            state.update(backfill_count=0, last_trigger=None)

    class OwnershipTaken(EvolvingAggregate.Event):
        """The forward migration proved the Temporal schedule gone: the source runs it now,
        with the pause and notes the Temporal schedule had before the fence."""

        TOPIC: ClassVar[str] = "schedfence.schedule.OwnershipTaken"
        class_version: ClassVar[int] = 1
        request_id: str
        migration_id: str
        restored_paused: bool
        restored_notes: str

    class TakeoverAbandoned(EvolvingAggregate.Event):
        """The forward migration that created this dormant incarnation was aborted: it closes
        without ever acting."""

        TOPIC: ClassVar[str] = "schedfence.schedule.TakeoverAbandoned"
        class_version: ClassVar[int] = 1
        request_id: str
        migration_id: str

    if TYPE_CHECKING:  # folded by evolve; an annotation here would make a dataclass field
        state: ScheduleState

    @staticmethod
    def evolve(state: ScheduleState | None, event: EvolvingAggregate.Event) -> ScheduleState:
        return evolve_schedule(state, event)

    @classmethod
    def create(
        cls, namespace: str, schedule_id: str, incarnation: int, paused: bool, notes: str,
        destination_check: dict[str, Any] | None = None, epoch: int = 0,
        program: Program | None = None, now: datetime | None = None,
        previous: ScheduleState | None = None, actor: str = "",
    ) -> Schedule:
        """A new incarnation; ``destination_check`` must show no running run at the
        destination workflow id (see ``check_destination_free``). A schedule with a spec
        processes times after ``now`` (default: the event's own time), and never one the
        key's ``previous`` incarnation processed, nor its backfills' or trigger's names."""
        if destination_check is not None:
            check_destination_free(namespace, schedule_id, destination_check)
        return cls._create(
            cls.Created,
            id=schedule_aggregate_id(namespace, schedule_id, incarnation),
            namespace=namespace, schedule_id=schedule_id, incarnation=incarnation,
            paused=paused, notes=notes, destination_check=destination_check, epoch=epoch,
            actor=actor,
            **(program or Program()).fields(), **carried_over(program, now, previous),
        )

    def set_paused(self, paused: bool, now: datetime | None = None, actor: str = "") -> None:
        check_mutable(self.state)
        self.record(signed(pause_facts(self.state, paused, now), actor))

    def set_notes(self, notes: str, actor: str = "") -> None:
        check_mutable(self.state)
        if self.state.notes != notes:
            self.trigger_event(self.NotesUpdated, notes=notes, actor=actor)

    def delete(self, actor: str = "") -> None:
        check_mutable(self.state)
        self.trigger_event(self.Deleted, actor=actor)

    def fence_for_migration(self, request_id: str | None, migration_id: UUID) -> None:
        self.record(fence_facts(self.state, request_id, str(migration_id)))

    def close_for_migration(self, request_id: str, destination_first_run_id: str) -> None:
        self.record(close_source_facts(self.state, request_id, destination_first_run_id))

    def adopt_fence(self, request_id: str, migration_id: str) -> None:
        self.record(adopt_fence_facts(self.state, request_id, migration_id))

    def release_fence(self, request_id: str | None, paused: bool, notes: str) -> None:
        self.record(release_fence_facts(self.state, request_id, paused, notes))


# The events an operator's command records on the source: each names who asked (``actor``: an
# operator's identity, an HTTP token's name, or the worker id by default). The scheduler's own
# events in the same append (a pause's tick) name nobody.
OPERATOR_EVENTS: tuple[type, ...] = (Schedule.Created, Schedule.Paused, Schedule.NotesUpdated,
                                     Schedule.Deleted, Triggered, BackfillRequested,
                                     ProgramUpdated)


def signed(facts: Facts, actor: str) -> Facts:
    """``facts`` with ``actor`` on each operator event (``OPERATOR_EVENTS``)."""
    return [Fact(event, dict(fields, actor=actor)) if event in OPERATOR_EVENTS
            else Fact(event, fields) for event, fields in facts]


# -- the source's side of a migration: pure decisions (domain/rollback/steps.py combines them) --------
def fence_facts(state: ScheduleState, request_id: str | None, migration_id: str) -> Facts:
    """Pause the source for a migration: only a mutable (open, unfenced) source (I1)."""
    check_mutable(state)
    return [Fact(Schedule.FencedForMigration,
                 {"request_id": request_id, "migration_id": migration_id})]


def close_source_facts(state: ScheduleState, request_id: str,
                       destination_first_run_id: str) -> Facts:
    """Close the source for good: only by the migration whose id the fence holds (I10)."""
    check_fence(state, request_id)
    return [Fact(Schedule.ClosedByMigration, {
        "request_id": request_id, "migration_id": state.fence_migration_id,
        "destination_first_run_id": destination_first_run_id})]


def adopt_fence_facts(state: ScheduleState, request_id: str, migration_id: str) -> Facts:
    """Give the identity-less migration holding the fence its durable id."""
    if state.closed:
        raise Closed(f"schedule {state.namespace}/{state.schedule_id} is closed")
    if state.fence_migration_id != migration_id or state.fence_request_id:
        raise MigrationPending(f"the fence is not held by identity-less migration "
                               f"{migration_id}")
    return [Fact(Schedule.FenceAdopted, {"request_id": request_id,
                                         "migration_id": migration_id})]


def pause_facts(state: ScheduleState, paused: bool, now: datetime | None) -> Facts:
    """Pause or unpause at ``now``, as a scheduler that never stops would see it. A pause
    first ticks at ``now`` (the times that came due before it are the schedule's, as if a
    pass had just run: ``scheduling.tick``); an unpause moves the cursor to ``now``, so the
    paused stretch is not caught up (as in Temporal). Without ``now`` (an older caller) only
    the flag changes."""
    if state.paused == paused:
        return []
    if now is None or state.cursor is None:
        return [Fact(Schedule.Paused, {"paused": paused})]
    if paused:
        from schedfence.domain.source.scheduling import tick  # scheduling reads this module's state type
        return [*tick(state, now, settle=True), Fact(Schedule.Paused, {"paused": True})]
    cursor = max(parse_nominal(state.cursor), now.replace(microsecond=0))
    return [Fact(Schedule.Paused, {"paused": False, "cursor": nominal_text(cursor)})]


def release_fence_facts(state: ScheduleState, request_id: str | None, paused: bool,
                        notes: str) -> Facts:
    """Restore the source's own pause and notes: only by the fence's migration (I10)."""
    check_fence(state, request_id)
    return [Fact(Schedule.FenceReleased, {
        "request_id": request_id, "migration_id": state.fence_migration_id,
        "restored_paused": paused, "restored_notes": notes})]


def evolve_schedule(state: ScheduleState | None, event: object) -> ScheduleState:
    """Pure reducer of the source's events."""
    if isinstance(event, Schedule.Created):
        return ScheduleState(event.namespace, event.schedule_id, event.incarnation,
                             event.paused, event.notes, epoch=event.epoch, spec=event.spec,
                             action=event.action, policies=event.policies,
                             remaining_actions=event.remaining_actions,
                             cursor=event.cursor or (nominal_text(event.timestamp)
                                                     if event.spec else None),
                             backfill_count=event.backfill_count,
                             last_trigger=event.last_trigger)
    if isinstance(event, Schedule.CreatedByMigration):
        h = event.handover
        return ScheduleState(
            event.namespace, event.schedule_id, event.incarnation, True, FORWARD_NOTE,
            fence_request_id=event.request_id, fence_migration_id=event.migration_id,
            last_migration_id=event.migration_id, epoch=event.epoch, spec=h["spec"],
            action=h["action"], policies=h["policies"],
            remaining_actions=h["remaining_actions"], cursor=h["cursor"],
            recent_actions=list(h["recent_actions"]), running=list(h["running"]),
            action_count=h["action_count"], backfill_count=event.backfill_count,
            last_trigger=event.last_trigger)
    assert state is not None, f"{type(event).__name__} before Created"
    if isinstance(event, Schedule.OwnershipTaken):
        return updated(state, paused=event.restored_paused, notes=event.restored_notes,
                       fence_request_id=None, fence_migration_id=None,
                       completed_request_id=event.request_id,
                       completed_migration_id=event.migration_id)
    if isinstance(event, Schedule.TakeoverAbandoned):
        return updated(state, closed=True, close_reason="takeover_abandoned",
                       fence_request_id=None, fence_migration_id=None)
    if isinstance(event, Schedule.Paused):
        return updated(state, paused=event.paused, cursor=event.cursor or state.cursor)
    if isinstance(event, Schedule.NotesUpdated):
        return updated(state, notes=event.notes)
    if isinstance(event, Schedule.Deleted):
        return updated(state, closed=True, close_reason="deleted")
    if isinstance(event, Schedule.FencedForMigration):
        return updated(state, paused=True, notes=MIGRATION_NOTE,
                       fence_request_id=event.request_id, fence_migration_id=event.migration_id,
                       last_migration_id=event.migration_id)
    if isinstance(event, Schedule.ClosedByMigration):
        return updated(state, closed=True, close_reason="migrated", fence_request_id=None,
                       fence_migration_id=None, completed_request_id=event.request_id,
                       completed_migration_id=event.migration_id)
    if isinstance(event, Schedule.FenceAdopted):
        return updated(state, fence_request_id=event.request_id)
    if isinstance(event, Schedule.FenceReleased):
        return updated(state, paused=event.restored_paused, notes=event.restored_notes,
                       fence_request_id=None, fence_migration_id=None)
    return evolve_runs(state, event)  # the scheduler's actions
