"""Schema versions: old stored events are upcast on read, never rewritten; unknown ones stop us."""
from __future__ import annotations

import uuid
from typing import ClassVar

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic, register_topic, resolve_topic

from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.model import DomainEvent, EvolvingAggregate
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.key import ScheduleKey
from schedfence.infra.adapters.store.codec import UndecodableEvent
from schedfence.infra.application.service import open_service


class NoteAdded(EvolvingAggregate.Event):
    """A test-only event at schema v3, written as v1 and v2 by 'older releases'."""

    TOPIC: ClassVar[str] = "schedfence.test.NoteAdded"
    class_version: ClassVar[int] = 3
    text: str
    author: str
    source: str

    @staticmethod
    def upcast_v1_v2(state: dict) -> None:
        state["author"] = "unknown"

    @staticmethod
    def upcast_v2_v3(state: dict) -> None:
        state["source"] = "legacy:" + state["author"]


# Stand-alone event classes are not registered by an aggregate class, so register this one.
register_topic(NoteAdded.TOPIC, NoteAdded)


@pytest.fixture()
def service():
    svc = open_service("sqlite:///:memory:", "sim")
    yield svc
    svc.close()


def stored(payload: bytes, topic: str = "schedfence.test.NoteAdded") -> StoredEvent:
    return StoredEvent(originator_id=uuid.uuid4(), originator_version=2, topic=topic,
                       state=payload)


def test_v1_and_v2_payloads_are_upcast_to_the_current_version(service):
    oid = uuid.uuid4()
    base = f'"originator_id":"{oid}","originator_version":2,"timestamp":"2026-01-01T00:00:00Z"'
    v1 = service.app.mapper.to_domain_event(stored(('{' + base + ',"text":"a"}').encode()))
    v2 = service.app.mapper.to_domain_event(stored(
        ('{' + base + ',"text":"b","author":"ann","class_version":2}').encode()))
    assert (v1.text, v1.author, v1.source) == ("a", "unknown", "legacy:unknown")
    assert (v2.text, v2.author, v2.source) == ("b", "ann", "legacy:ann")
    # New writes carry their version marker, so a later release can upcast them in turn.
    again = service.app.mapper.to_stored_event(v2)
    assert b'"class_version":3' in again.state and get_topic(NoteAdded) == NoteAdded.TOPIC


def test_every_stored_event_type_has_an_explicit_topic_and_a_version():
    topics = []
    for aggregate, prefix in ((Migration, "schedfence.migration."),
                              (Schedule, "schedfence.schedule."),
                              (ScheduleKey, "schedfence.schedule_key.")):
        for cls in vars(aggregate).values():
            if isinstance(cls, type) and issubclass(cls, DomainEvent) and cls.__name__ != "Event":
                assert cls.TOPIC.startswith(prefix), cls
                assert isinstance(cls.class_version, int) and cls.class_version >= 1, cls
                assert resolve_topic(cls.TOPIC) is cls
                topics.append(cls.TOPIC)
    assert len(topics) == len(set(topics)) >= 20


def test_unknown_event_type_is_a_clear_error_naming_it(service):
    with pytest.raises(UndecodableEvent, match="schedfence.future.Thing") as info:
        service.app.mapper.to_domain_event(stored(b"{}", topic="schedfence.future.Thing"))
    assert info.value.code == "undecodable_event"


def test_a_newer_version_than_the_code_is_refused_not_guessed(service):
    oid = uuid.uuid4()
    payload = (f'{{"originator_id":"{oid}","originator_version":2,'
               f'"timestamp":"2026-01-01T00:00:00Z","request_id":"r","class_version":9}}')
    with pytest.raises(UndecodableEvent, match="v9"):
        service.app.mapper.to_domain_event(stored(payload.encode(),
                                                  Migration.StartClaimConsumed.TOPIC))


@pytest.fixture()
def stored_service(store_url: str):
    """A service on the test's store, SQLite or PostgreSQL (the mapper tests need neither)."""
    svc = open_service(store_url, "sim")
    yield svc
    svc.close()


def test_verify_names_the_log_position_of_an_undecodable_event(stored_service):
    service = stored_service
    service.create_schedule("ns", "a")
    bad = StoredEvent(originator_id=uuid.uuid4(), originator_version=1,
                      topic="schedfence.future.Thing", state=b"{}")
    service.app.recorder.insert_events([bad])
    position = service.event_count()
    with pytest.raises(UndecodableEvent, match=f"log position {position}"):
        service.verify()


def test_the_fast_path_for_v1_events_decodes_exactly_what_the_dict_path_does() -> None:
    """v1 records of v1 classes are parsed straight from bytes; the result must equal the
    general path's (json -> dict -> model), and bad bytes must still be undecodable."""
    import json

    from schedfence.infra.adapters.store.codec import JSONBytes, PydanticMapper
    mapper = PydanticMapper(transcoder=JSONBytes())
    mid = uuid.uuid4()
    event = Migration.OwnershipAccepted(originator_id=mid, originator_version=5,
                                        request_id="r1", attempt=2, worker="w",
                                        destination_first_run_id="run-1",
                                        evidence="chain_head")
    stored = mapper.to_stored_event(event)
    assert b'"class_version"' not in stored.state  # v1: the fast path applies
    fast = mapper.to_domain_event(stored)
    general = Migration.OwnershipAccepted(**json.loads(stored.state))
    assert fast == general == event and type(fast) is Migration.OwnershipAccepted
    broken = StoredEvent(mid, 5, stored.topic, stored.state.replace(b'"chain_head"', b'"x"'))
    with pytest.raises(UndecodableEvent, match="OwnershipAccepted"):
        mapper.to_domain_event(broken)
