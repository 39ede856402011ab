"""The key of a schedule, (namespace, schedule id): which incarnation is current, and which
forward migration (domain/forward/aggregate.py) holds the key while it takes a Temporal Schedule in.

One aggregate per key, so two forward migrations of one key, or a forward and a new
incarnation, race on its version and one of them retries (no ping-pong, I19)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar
from uuid import UUID

from schedfence.domain.errors import MigrationPending
from schedfence.domain.ids import schedule_aggregate_id, schedule_key_id
from schedfence.domain.model import EvolvingAggregate, updated


@dataclass(frozen=True)
class KeyState:
    namespace: str
    schedule_id: str
    incarnation: int = 0
    forward_migration_id: str | None = None  # the open forward migration holding the key

    @property
    def current_schedule_id(self) -> UUID | None:
        if self.incarnation == 0:
            return None
        return schedule_aggregate_id(self.namespace, self.schedule_id, self.incarnation)


def check_not_forwarding(key: KeyState | None) -> None:
    """A key a forward migration holds takes no new incarnation and no second forward
    migration (``migration_pending``) until that migration ends (I19). No key: none holds it."""
    if key is not None and key.forward_migration_id is not None:
        raise MigrationPending(f"schedule {key.namespace}/{key.schedule_id} is being taken in "
                               f"by forward migration {key.forward_migration_id}")


class ScheduleKey(EvolvingAggregate):
    """Maps a (namespace, schedule id) key to its current incarnation."""

    TOPIC = "schedfence.ScheduleKey"

    class Created(EvolvingAggregate.Created):
        TOPIC: ClassVar[str] = "schedfence.schedule_key.Created"
        namespace: str
        schedule_id: str

    class IncarnationStarted(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.schedule_key.IncarnationStarted"
        incarnation: int
        schedule_aggregate_id: str

    class ForwardOpened(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.schedule_key.ForwardOpened"
        class_version: ClassVar[int] = 1
        migration_id: str

    class ForwardClosed(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.schedule_key.ForwardClosed"
        class_version: ClassVar[int] = 1
        migration_id: str

    if TYPE_CHECKING:  # folded by evolve; an annotation here would make a dataclass field
        state: KeyState

    @staticmethod
    def evolve(state: KeyState | None, event: object) -> KeyState:
        if isinstance(event, ScheduleKey.Created):
            return KeyState(event.namespace, event.schedule_id)
        assert state is not None
        if isinstance(event, ScheduleKey.IncarnationStarted):
            return updated(state, incarnation=event.incarnation)
        if isinstance(event, ScheduleKey.ForwardOpened):
            return updated(state, forward_migration_id=event.migration_id)
        if isinstance(event, ScheduleKey.ForwardClosed):
            return updated(state, forward_migration_id=None)
        raise TypeError(f"unknown schedule key event {type(event).__name__}")

    @classmethod
    def create(cls, namespace: str, schedule_id: str) -> ScheduleKey:
        return cls._create(cls.Created, id=schedule_key_id(namespace, schedule_id),
                           namespace=namespace, schedule_id=schedule_id)

    def start_incarnation(self) -> int:
        n = self.state.incarnation + 1
        sid = schedule_aggregate_id(self.state.namespace, self.state.schedule_id, n)
        self.trigger_event(self.IncarnationStarted, incarnation=n, schedule_aggregate_id=str(sid))
        return n

    def open_forward(self, migration_id: str) -> None:
        check_not_forwarding(self.state)
        self.trigger_event(self.ForwardOpened, migration_id=migration_id)

    def close_forward(self, migration_id: str) -> None:
        if self.state.forward_migration_id == migration_id:
            self.trigger_event(self.ForwardClosed, migration_id=migration_id)
