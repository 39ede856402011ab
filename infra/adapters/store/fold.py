"""Folding an aggregate's stored history: versions checked for gaps, each event applied by
its own ``mutate`` (``fold_events``), and the repository that loads with it.

A history that cannot be folded is ``CorruptHistory``, naming the aggregate, the version(s)
and the event. ``FenceApplication`` (eventstore.py) makes its repository a ``FenceRepository``.
"""
from __future__ import annotations

from typing import Any, Iterable
from uuid import UUID

from eventsourcing.application import Repository

from schedfence.domain.model import EvolvingAggregate
from schedfence.infra.adapters.store.codec import UndecodableEvent
from schedfence.infra.adapters.store.decode import fold_plain


class CorruptHistory(UndecodableEvent):
    """An aggregate's stored history cannot be folded: a version is missing, or the reducer
    rejects a stored event. The message names the aggregate, the version(s) and the event."""

    code = "corrupt_history"


def fold_events(aggregate: Any, events: Iterable[Any]) -> Any:
    """Apply stored events in order, refusing a gap in their versions. The library's default
    projector also asserts a runtime ``Protocol`` isinstance per event, which costs more than
    our reducer itself; every event here is one of our own classes, whose ``mutate`` the
    mapper has already resolved. Runs of ordinary events go through ``fold_plain``
    (infra/adapters/store/decode.py), which leaves to this loop any event it cannot apply."""
    expected = None if aggregate is None else aggregate.version + 1
    pending = iter(events)
    event = next(pending, None)
    while event is not None:
        version = event.originator_version
        if expected is None:  # the first of the history: version 1, or a snapshot's
            expected = version if isinstance(event, EvolvingAggregate.Snapshot) else 1
        if version < expected:
            raise CorruptHistory(
                f"aggregate {event.originator_id}: version {version} ({_topic(event)}) is "
                f"stored again after version {expected - 1} (repeated or out of order)")
        if version != expected:
            missing = f"version {expected} is" if version == expected + 1 else \
                f"versions {expected}..{version - 1} are"
            raise CorruptHistory(
                f"aggregate {event.originator_id}: {missing} missing from its stored history "
                f"(the next stored event is version {version}, {_topic(event)})")
        try:
            aggregate = event.mutate(aggregate)
        except UndecodableEvent:
            raise
        except Exception as exc:  # the reducer rejects what is stored
            text = str(exc)[:200]
            raise CorruptHistory(f"aggregate {event.originator_id} version {version} "
                                 f"({_topic(event)}) cannot be applied: {type(exc).__name__}"
                                 f"{': ' + text if text else ''}") from exc
        expected = version + 1
        if isinstance(aggregate, EvolvingAggregate):
            event = fold_plain(aggregate, pending)
            expected = aggregate.version + 1
        else:
            event = next(pending, None)
    return aggregate


def _topic(event: Any) -> str:
    return getattr(event, "TOPIC", None) or type(event).__name__


class FenceRepository(Repository[UUID]):
    def get(self, aggregate_id: UUID, **options: Any) -> Any:
        options.setdefault("projector_func", fold_events)
        return super().get(aggregate_id, **options)

