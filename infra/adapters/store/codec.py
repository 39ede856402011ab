"""Storing pydantic events: a mapper that keeps schema versions and upcasts old events on read."""
from __future__ import annotations

import functools
import json
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from eventsourcing.utils import TopicError, get_topic
from pydantic_core import from_json

from schedfence.domain.errors import UndecodableEvent
from schedfence.domain.model import upcast
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
