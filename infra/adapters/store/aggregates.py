"""Loading the aggregates a decision needs, by the domain's names for them.

The application and the worker load through this, never through each other's internals: the
current source of a key, a migration (or just its state), the store's failover epoch.
"""
from __future__ import annotations

from typing import Iterator
from uuid import UUID

from schedfence.domain.errors import NotFound
from schedfence.domain.failover import STORE_EPOCH_ID
from schedfence.domain.ids import schedule_aggregate_id, schedule_key_id, validate_id
from schedfence.domain.rollback.aggregate import Migration, MigrationState
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.key import ScheduleKey

from .eventstore import FenceApplication


class Aggregates:
    def __init__(self, app: FenceApplication) -> None:
        self.app = app

    def key(self, namespace: str, schedule_id: str) -> ScheduleKey | None:
        return self.app.find(schedule_key_id(namespace, schedule_id))

    def source(self, namespace: str, schedule_id: str) -> Schedule:
        """The key's current incarnation; ``not_found`` if it has none."""
        validate_id("namespace", namespace)
        validate_id("schedule id", schedule_id)
        key = self.key(namespace, schedule_id)
        if key is None or key.state.current_schedule_id is None:
            raise NotFound(f"schedule {namespace}/{schedule_id} not found")
        return self.app.repository.get(key.state.current_schedule_id)

    def current_schedule_ids(self) -> Iterator[UUID]:
        """Every key's current incarnation, keys in the order they were created."""
        for note in self.app.notifications((ScheduleKey.Created.TOPIC,)):
            key: ScheduleKey = self.app.repository.get(note.originator_id)
            current = key.state.current_schedule_id
            if current is not None:
                yield current

    def incarnations(self, namespace: str, schedule_id: str,
                     newest: int) -> Iterator[ScheduleState]:
        """The key's incarnations' states, newest first (loaded as they are read)."""
        for n in range(newest, 0, -1):
            yield self.app.repository.get(schedule_aggregate_id(namespace, schedule_id, n)).state

    def migration(self, migration_id: str | UUID | None) -> Migration | None:
        """The rollback migration of that id; None if there is none (a forward migration's
        id, domain/forward/aggregate.py, which may hold a dormant source's fence, is not one)."""
        if migration_id is None:
            return None
        found = self.app.find(UUID(str(migration_id)))
        return found if isinstance(found, Migration) else None

    def migration_state(self, migration_id: str | UUID | None) -> MigrationState | None:
        found = self.migration(migration_id)
        return found.state if found is not None else None

    def epoch(self) -> int:
        """The store's epoch: how many failovers were recorded on it (domain/failover.py)."""
        found = self.app.find(STORE_EPOCH_ID)
        return found.state.epoch if found is not None else 0
