"""Storing pydantic events: a mapper that keeps schema versions and upcasts old events on read."""
from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from eventsourcing.utils import TopicError, get_topic, resolve_topic

from schedfence.domain.errors import UndecodableEvent
from schedfence.domain.model import upcast


_VERSION_KEY = b'"class_version"'  # present in stored JSON only for versions above 1


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
        where = _where(stored)
        if not isinstance(stored.originator_id, UUID):  # a raw row id (see lenient_uuid)
            raise UndecodableEvent(f"cannot decode {stored.topic}{where}: originator id "
                                   f"{str(stored.originator_id)[:80]!r} is not a UUID")
        data = stored.state
        try:
            if self.cipher:
                data = self.cipher.decrypt(data)
            if self.compressor:
                data = self.compressor.decompress(data)
        except Exception as exc:
            raise UndecodableEvent(f"cannot decrypt or decompress {stored.topic}{where}: "
                                   f"{_brief(exc)}") from exc
        try:
            cls = resolve_topic(stored.topic)
        except TopicError as exc:
            raise UndecodableEvent(f"unknown event type {stored.topic!r}{where}") from exc
        current = getattr(cls, "class_version", 1)
        if current == 1 and _VERSION_KEY not in data:
            # v1 record of a v1 class: nothing to upcast, so let pydantic parse the bytes
            # directly (several times faster than json.loads + validating a dict).
            try:
                return cls.model_validate_json(data)
            except Exception as exc:
                raise UndecodableEvent(f"cannot decode {stored.topic}{where}: {exc}") from exc
        try:
            state = self.transcoder.decode(data)
        except Exception as exc:  # JSONDecodeError, UnicodeDecodeError
            raise UndecodableEvent(f"cannot decode {stored.topic}{where}: stored state is not "
                                   f"valid JSON ({_brief(exc)})") from exc
        if not isinstance(state, dict):
            raise UndecodableEvent(f"cannot decode {stored.topic}{where}: stored state is a "
                                   f"JSON {type(state).__name__}, not an object")
        version = state.pop("class_version", 1)
        if type(version) is not int or version < 1:
            raise UndecodableEvent(f"cannot decode {stored.topic}{where}: class_version "
                                   f"{str(version)[:40]!r} is not a positive whole number")
        if version > current:
            raise UndecodableEvent(f"{stored.topic} v{version}{where} is newer than this code "
                                   f"(v{current})")
        try:
            upcast(cls, state, version)
            return cls(**state)
        except Exception as exc:  # pydantic ValidationError or a bad upcast
            raise UndecodableEvent(f"cannot decode {stored.topic}{where}: {exc}") from exc


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
    the recorder, which would fail the whole page) names the broken record."""
    if isinstance(originator_id, UUID):
        return originator_id
    try:
        return UUID(originator_id)
    except (ValueError, TypeError, AttributeError):
        return originator_id
