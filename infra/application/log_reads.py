"""Reads over the event log itself, not the projections: a key's history, and the invariant
checker's run over the store (and across another copy of it). Given the store's application
and aggregates by the application service (infra/application/service.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator

from schedfence.infra.adapters.store.aggregates import Aggregates
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.infra.application.views import HistoryEntry

if TYPE_CHECKING:
    from schedfence.domain.invariants.checker import Violation

PROGRESS_EVERY = 500  # events read between two progress calls


def history(app: FenceApplication, load: Aggregates, namespace: str,
            schedule_id: str) -> list[HistoryEntry]:
    """Every event of the key, its incarnations and their migrations, in log order."""
    from schedfence.infra.adapters.store.history import key_events, kind_of, topic_of
    source = load.source(namespace, schedule_id)
    return [HistoryEntry(position, kind_of(e), str(e.originator_id), e.originator_version,
                         topic_of(e), e.timestamp.isoformat(), e.payload())
            for position, e in key_events(app, namespace, schedule_id,
                                          source.state.incarnation)]


def verify(app: FenceApplication, also: str | None = None,
           progress: Callable[[int], None] | None = None) -> list[Violation]:
    """The checker over this store; with ``also`` (another copy of it, e.g. the old
    active after a failover), over both, and across them (I4: one chain per migration; I21:
    the other copy's own starts with this store's, domain/invariants/once_across.py).
    ``progress(n)``: called with how many events of this store were read so far."""
    from schedfence.domain.invariants.checker import check_histories, check_history
    if also is None:
        return check_history(_decoded(app, progress))
    from schedfence.domain.invariants.once_across import once_across
    from schedfence.infra.adapters.replication.follower import open_copy
    other = open_copy(also)
    try:
        theirs, mine = check_histories([_decoded(other), _decoded(app, progress)])
        across = once_across(_decoded(app), _decoded(other))
    finally:
        other.close()
    return mine + across + [replace(v, message=f"in the other store: {v.message}")
                            for v in theirs]


def _decoded(app: FenceApplication,
             progress: Callable[[int], None] | None = None) -> Iterator[tuple[int, Any]]:
    for n, note in enumerate(app.notifications(), 1):
        if progress is not None and n % PROGRESS_EVERY == 0:
            progress(n)
        yield note.id, app.mapper.to_domain_event(note)
