"""The events of one schedule key: the key, its incarnations and their migrations, in log order.

One reading of "the events of a key", for ``history`` and forensic replay alike.
"""
from __future__ import annotations

from typing import Any
from uuid import UUID

from schedfence.domain.ids import schedule_aggregate_id, schedule_key_id

from .eventstore import FenceApplication

PREFIXES = (("schedfence.migration.", "migration"), ("schedfence.schedule_key.", "key"),
            ("schedfence.schedule.", "schedule"), ("schedfence.forward.", "forward"))
_MIGRATION_KINDS = ("schedfence.migration.", "schedfence.forward.")  # created naming the key


def topic_of(event: Any) -> str:
    return getattr(type(event), "TOPIC", type(event).__name__)


def kind_of(event: Any) -> str:
    topic = topic_of(event)
    return next((kind for prefix, kind in PREFIXES if topic.startswith(prefix)), "other")


def key_events(app: FenceApplication, namespace: str, schedule_id: str,
               incarnation: int) -> list[tuple[int, Any]]:
    """Every event of the key, its incarnations and their migrations (both directions),
    decoded, in log order.

    A migration belongs to the key if a source fence names it or its creation names the key;
    both come before the migration's later events, so one pass over the log finds them all."""
    ids = {schedule_key_id(namespace, schedule_id)} | {
        schedule_aggregate_id(namespace, schedule_id, n) for n in range(1, incarnation + 1)}
    out = []
    for note in app.notifications():
        created = note.originator_version == 1 and note.topic.startswith(_MIGRATION_KINDS)
        if note.originator_id not in ids and not created:
            continue
        event = app.mapper.to_domain_event(note)
        if note.originator_id not in ids:  # a migration's creation: is it this key's?
            if (getattr(event, "namespace", None), getattr(event, "schedule_id", None)) != (
                    namespace, schedule_id):
                continue
            ids.add(note.originator_id)
        migration_id = getattr(event, "migration_id", None)
        if kind_of(event) == "schedule" and migration_id:
            ids.add(UUID(str(migration_id)))
        out.append((note.id, event))
    return out

