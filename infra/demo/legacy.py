"""What an older release stored: the v1 ``RequestIdAssigned`` record, written raw.

An older release persisted a pending rollback without a durable request id (F8 in
docs/protocol.md).
This module writes exactly those bytes (v1 shape, no ``class_version`` marker) so tests and the
demo exercise the real upcast path instead of a look-alike event class. Stored events are never
rewritten: the record stays v1 forever and is upcast on every read.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from schedfence.domain.errors import MigrationPending
from schedfence.domain.ids import destination_workflow_id, schedule_aggregate_id
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.schedule import Schedule

from schedfence.infra.application.service import MigrationService
from schedfence.infra.adapters.store.codec import JSONBytes

V1_FIELDS = ("namespace", "schedule_id", "source_id", "incarnation", "workflow_id",
             "pre_paused", "pre_notes")


def legacy_v1_record(migration_id: UUID, *, namespace: str, schedule_id: str, source_id: str,
                     incarnation: int, workflow_id: str, pre_paused: bool, pre_notes: str,
                     timestamp: datetime | None = None) -> StoredEvent:
    """The stored bytes of a v1 ``RequestIdAssigned``: no request id, origin, claim or actor."""
    when = timestamp or datetime.now(timezone.utc)
    state: dict[str, Any] = {
        "originator_id": str(migration_id), "originator_version": 1,
        "timestamp": when.isoformat(), "originator_topic": Migration.TOPIC,
        "namespace": namespace, "schedule_id": schedule_id, "source_id": source_id,
        "incarnation": incarnation, "workflow_id": workflow_id, "pre_paused": pre_paused,
        "pre_notes": pre_notes,
    }
    return StoredEvent(originator_id=migration_id, originator_version=1,
                       topic=Migration.RequestIdAssigned.TOPIC, state=JSONBytes().encode(state))


def plant_legacy_v1(service: MigrationService, namespace: str, schedule_id: str, *,
                    migration_id: UUID | None = None) -> str:
    """Store an identity-less pending migration as an older release left it (F8).

    The v1 migration record and the source's fence (a current-version ``FencedForMigration``
    with no request id) go in one ``insert_events`` call, as the older release's single
    transition did. Returns the migration id.
    """
    view = service.schedule(namespace, schedule_id)
    source: Schedule = service.app.repository.get(
        schedule_aggregate_id(namespace, schedule_id, view.incarnation))
    if source.state.migration_pending:
        raise MigrationPending(f"schedule {namespace}/{schedule_id} is already fenced")
    mid = migration_id or uuid.uuid4()
    record = legacy_v1_record(
        mid, namespace=namespace, schedule_id=schedule_id, source_id=str(source.id),
        incarnation=view.incarnation, workflow_id=destination_workflow_id(schedule_id),
        pre_paused=source.state.paused, pre_notes=source.state.notes)
    source.fence_for_migration(None, mid)  # refuses a closed source before anything is written
    fence = [service.app.mapper.to_stored_event(e) for e in source.collect_events()]
    service.app.recorder.insert_events([record, *fence])
    return str(mid)
