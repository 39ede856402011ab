"""Storing pydantic events: a mapper that keeps schema versions and upcasts old events on read."""
from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Mapper, StoredEvent, Transcoder
from eventsourcing.utils import TopicError, get_topic, resolve_topic

from domain.errors import DomainError
from domain.model import upcast


_VERSION_KEY = b'"class_version"'  # present in stored JSON only for versions above 1


class UndecodableEvent(DomainError):
    """A stored event this code cannot read (unknown type, or a payload that does not fit)."""

    code = "undecodable_event"


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
        data = stored.state
        if self.cipher:
            data = self.cipher.decrypt(data)
        if self.compressor:
            data = self.compressor.decompress(data)
        where = _where(stored)
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
        state: dict[str, Any] = self.transcoder.decode(data)
        version = state.pop("class_version", 1)
        if version > current:
            raise UndecodableEvent(f"{stored.topic} v{version}{where} is newer than this code "
                                   f"(v{current})")
        try:
            upcast(cls, state, version)
            return cls(**state)
        except Exception as exc:  # pydantic ValidationError or a bad upcast
            raise UndecodableEvent(f"cannot decode {stored.topic}{where}: {exc}") from exc


def _where(stored: Any) -> str:
    """Name the event's place: log position when read from the log, else aggregate/version."""
    position = getattr(stored, "id", None)
    if position is not None:
        return f" at log position {position}"
    return f" (aggregate {stored.originator_id} version {stored.originator_version})"
