"""Storing pydantic events and loading them back: a mapper that keeps schema versions and
upcasts old events on read; then the fold of an aggregate's decoded history (``fold_events``:
versions checked for gaps, each event applied by its own ``mutate``, runs of ordinary events
the fast way, ``fold_plain``) and the repository that loads with it.

A history that cannot be folded is ``CorruptHistory``, naming the aggregate, the version(s)
and the event. ``FenceApplication`` (eventstore.py) makes its repository a ``FenceRepository``.
"""
from __future__ import annotations

import functools
import json
from typing import Any, Iterable, Iterator
from uuid import UUID

from eventsourcing.application import Repository
from eventsourcing.domain import CanMutateAggregate
from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from eventsourcing.utils import TopicError, get_topic
from pydantic_core import from_json

from schedfence.domain.errors import UndecodableEvent
from schedfence.domain.model import EvolvingAggregate, upcast
from schedfence.domain.topics import resolve_stored


_VERSION_KEY = b'"class_version"'  # present in stored JSON only for versions above 1
_ORIGINATOR_KEY = b'"originator_version"'  # absent: the row's columns supply it


class JSONBytes(Transcoder):
    def encode(self, obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()

    def decode(self, data: bytes) -> Any:
        return json.loads(data)


class PydanticMapper(Mapper[UUID]):
    """Writes ``class_version`` beside the fields (only above 1, as eventsourcing does) and
    runs ``upcast_vN_vN+1`` hooks up to the class's current version when reading."""

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        state = domain_event.model_dump(mode="json")
        version = getattr(type(domain_event), "class_version", 1)
        if version > 1:
            state["class_version"] = version
        data = self.transcoder.encode(state)
        if self.compressor:
            data = self.compressor.compress(data)
        if self.cipher:
            data = self.cipher.encrypt(data)
        return StoredEvent(originator_id=domain_event.originator_id,
                           originator_version=domain_event.originator_version,
                           topic=get_topic(type(domain_event)), state=data)

    def to_domain_event(self, stored: Any) -> Any:
        if not isinstance(stored.originator_id, UUID):  # a raw row id (see lenient_uuid)
            raise UndecodableEvent(f"cannot decode {stored.topic}{_where(stored)}: originator "
                                   f"id {str(stored.originator_id)[:80]!r} is not a UUID")
        data = stored.state
        try:
            if self.cipher:
                data = self.cipher.decrypt(data)
            if self.compressor:
                data = self.compressor.decompress(data)
        except Exception as exc:
            raise UndecodableEvent(f"cannot decrypt or decompress {stored.topic}"
                                   f"{_where(stored)}: {_brief(exc)}") from exc
        try:
            cls = resolve_stored(stored.topic)
        except TopicError as exc:
            raise UndecodableEvent(f"unknown event type {stored.topic!r}{_where(stored)}") \
                from exc
        current = getattr(cls, "class_version", 1)
        if current == 1 and _VERSION_KEY not in data and _ORIGINATOR_KEY in data:
            # v1 record of a v1 class: nothing to upcast, so let pydantic parse the bytes
            # directly (several times faster than json.loads + validating a dict). If that
            # fails, the general path below decides, and names the fault.
            try:
                return cls.__pydantic_validator__.validate_json(data)
            except ValueError:  # pydantic's ValidationError is one
                pass
        state, version = self._state_of(stored, data, current)
        try:
            if version < current:
                upcast(cls, state, version)
            # ``model_validate`` without its wrapper's argument checks (2.7 of its 6.7 µs)
            return cls.__pydantic_validator__.validate_python(state)
        except Exception as exc:  # pydantic ValidationError or a bad upcast
            raise UndecodableEvent(f"cannot decode {stored.topic}{_where(stored)}: {exc}") \
                from exc

    def _state_of(self, stored: Any, data: bytes, current: int) -> tuple[dict[str, Any], int]:
        """The record's fields, with the row's originator id and version where the payload
        leaves them out, and the schema version they were written at (at most ``current``)."""
        try:
            state = self._parse(data)
        except Exception as exc:  # JSONDecodeError, UnicodeDecodeError
            raise UndecodableEvent(f"cannot decode {stored.topic}{_where(stored)}: stored state "
                                   f"is not valid JSON ({_brief(exc)})") from exc
        if not isinstance(state, dict):
            raise UndecodableEvent(f"cannot decode {stored.topic}{_where(stored)}: stored state "
                                   f"is a JSON {type(state).__name__}, not an object")
        version = state.pop("class_version", 1)
        if type(version) is not int or version < 1:
            raise UndecodableEvent(f"cannot decode {stored.topic}{_where(stored)}: class_version"
                                   f" {str(version)[:40]!r} is not a positive whole number")
        if version > current:
            raise UndecodableEvent(f"{stored.topic} v{version}{_where(stored)} is newer than "
                                   f"this code (v{current})")
        if "originator_id" not in state:
            state["originator_id"] = stored.originator_id
        if "originator_version" not in state:
            state["originator_version"] = stored.originator_version
        return state, version

    def _parse(self, data: bytes) -> Any:
        """Our JSON through pydantic's parser (several times faster than ``json.loads``); what
        it refuses goes to the transcoder, which accepts or names the fault as it always did."""
        if type(self.transcoder) is JSONBytes:
            try:
                return from_json(data)
            except ValueError:
                pass
        return self.transcoder.decode(data)


def _where(stored: Any) -> str:
    """Name the event's place: its log position when read from the log, and its aggregate and
    version (the record's own columns, not its possibly broken payload)."""
    position = getattr(stored, "id", None)
    record = f"(aggregate {str(stored.originator_id)[:80]} version {stored.originator_version})"
    return f" at log position {position} {record}" if position is not None else f" {record}"


def _brief(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text[:200] + ' ...' if len(text) > 200 else text}"


def lenient_uuid(originator_id: Any) -> Any:
    """A recorder's row id as a UUID, or unchanged when it is not one, so that the mapper (not
    the recorder, which would fail the whole page) names the broken record. Every row of an
    aggregate's history carries the same id: parsing it once (``UUID(hex)`` costs about a
    third of SQLite's ``select_events``) and sharing the immutable UUID is the same value."""
    if isinstance(originator_id, UUID):
        return originator_id
    try:
        return _row_uuid(originator_id)
    except TypeError:  # unhashable: not an id SQLite returns, but not ours to fail on
        return _parse_uuid(originator_id)


def _parse_uuid(originator_id: Any) -> Any:
    try:
        return UUID(originator_id)
    except (ValueError, TypeError, AttributeError):
        return originator_id


_row_uuid = functools.lru_cache(maxsize=1024, typed=True)(_parse_uuid)


# -- folding a history --------------------------------------------------------------------
class CorruptHistory(UndecodableEvent):
    """An aggregate's stored history cannot be folded: a version is missing, or the reducer
    rejects a stored event. The message names the aggregate, the version(s) and the event."""

    code = "corrupt_history"


def fold_events(aggregate: Any, events: Iterable[Any]) -> Any:
    """Apply stored events in order, refusing a gap in their versions. The library's default
    projector also asserts a runtime ``Protocol`` isinstance per event, which costs more than
    our reducer itself; every event here is one of our own classes, whose ``mutate`` the
    mapper has already resolved. Runs of ordinary events go through ``fold_plain``
    (below), which leaves to this loop any event it cannot apply."""
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


# From decoded events to an aggregate, fast: the read path's inner loop. ``fold_events``
# applies each stored event through its ``mutate``: the library's checks (same aggregate, next
# version), our ``apply`` (the aggregate's ``evolve`` reducer), then the new version and
# modification time, several calls per event. On a long history that costs about as much
# again as the reducer itself (benchmarks/RESULTS.md, "Replay of a 10^4-event migration").
# ``fold_plain`` runs the same steps for a run of ordinary events with the state in a local
# variable, and hands anything else back to ``fold_events``.
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
