"""From decoded events to an aggregate, fast: the read path's inner loop.

``fold_events`` (infra/adapters/store/fold.py) applies each stored event through its ``mutate``:
the library's checks (same aggregate, next version), our ``apply`` (the aggregate's ``evolve``
reducer), then the new version and modification time, several calls per event. On a long
history that costs about as much again as the reducer itself (benchmarks/RESULTS.md, "Replay
of a 10^4-event migration"). ``fold_plain`` runs the same steps for a run of ordinary events
with the state in a local variable, and hands anything else back to ``fold_events``.
"""
from __future__ import annotations

from typing import Any, Iterator

from eventsourcing.domain import CanMutateAggregate

from schedfence.domain.model import EvolvingAggregate

_PLAIN: dict[type, bool] = {}


def is_plain(event_class: type) -> bool:
    """Whether applying an event of this class is exactly the library's ``mutate`` around our
    ``apply``: check id and version, ``state = evolve(state, event)``, stamp version and time.
    Creation and snapshot events (their own ``mutate``) and any override are not."""
    plain = _PLAIN.get(event_class)
    if plain is None:
        plain = _PLAIN[event_class] = (
            getattr(event_class, "mutate", None) is CanMutateAggregate.mutate
            and getattr(event_class, "apply", None) is EvolvingAggregate.Event.apply)
    return plain


def fold_plain(aggregate: EvolvingAggregate, events: Iterator[Any]) -> Any | None:
    """Apply events from ``events`` to ``aggregate`` while each is a plain event (``is_plain``)
    of this aggregate at its next version that its reducer accepts. Returns the first event it
    did not apply, for the caller to apply the general way (which raises what is wrong with
    it, the reducer being pure), or None when ``events`` ran out. ``aggregate`` then holds the
    state, version and modification time of the last event applied, as ``mutate`` leaves them.
    """
    evolve, aggregate_id = type(aggregate).evolve, aggregate.id
    state, expected = getattr(aggregate, "state", None), aggregate.version + 1
    last = stopped = None
    for event in events:
        if event.originator_version != expected or event.originator_id != aggregate_id \
                or not is_plain(type(event)):
            stopped = event
            break
        try:
            state = evolve(state, event)
        except Exception:  # noqa: BLE001 - the caller applies it again and names the fault
            stopped = event
            break
        last, expected = event, expected + 1
    if last is not None:
        aggregate.state = state
        aggregate.version = last.originator_version
        aggregate.modified_on = last.timestamp
    return stopped
