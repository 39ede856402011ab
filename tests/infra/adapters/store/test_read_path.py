"""The read path's fast ways (issue 15) give exactly what the general ones give.

The mapper parses with pydantic's JSON parser and validates without ``model_validate``'s
wrapper, ``fold_events`` runs plain events straight through the reducer, and ``lenient_uuid``
parses a row id once: each is checked here against the general way on real histories, and
on the records that must still take the general way.
"""
from __future__ import annotations

import copy
import json
import uuid
from typing import Any, ClassVar

import pytest
from eventsourcing.application import project_aggregate
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import resolve_topic
from pydantic_core import from_json

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.model import EvolvingAggregate, upcast
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.store.codec import JSONBytes, PydanticMapper, UndecodableEvent, lenient_uuid
from schedfence.infra.adapters.store.codec import is_plain
from schedfence.infra.adapters.store.codec import CorruptHistory, fold_events

NS = "ns"
UNAVAILABLE = d.ChainObservation(failure="unavailable", detail="describe: unavailable")


class NotAMigrationStep(EvolvingAggregate.Event):
    """A plain event (the library's ``mutate`` around our ``apply``) the reducer rejects."""

    TOPIC: ClassVar[str] = "schedfence.test.NotAMigrationStep"


@pytest.fixture(scope="module")
def history() -> dict[str, Any]:
    """A finished migration whose middle is a run of reconciliations (``ChainVerified``, a v2
    class), among v1 and creation records: its stored records and its decoded events."""
    with open_service("sqlite:///:memory:", "sim", worker_id="w") as svc:
        svc.create_schedule(NS, "a")
        svc.destination.inject("start", "lose_response")
        mid = uuid.UUID(svc.rollback(NS, "a").migration_id)
        svc.worker.attempt(mid)
        mig = svc.app.repository.get(mid)
        for _ in range(25):
            mig.record(d.decide_chain(mig.state, UNAVAILABLE, mig.state.attempts + 1, "w"))
        svc.app.save(mig)
        svc.worker.attempt(mid)  # the destination answers again: owned, receipt, close
        records = list(svc.app.recorder.select_events(mid))
        events = list(svc.app.events.get(mid))
        assert svc.app.repository.get(mid).state.phase == "completed"
    return {"mid": mid, "records": records, "events": events}


def general_decode(record: StoredEvent) -> Any:
    """The general way: ``json.loads``, upcast, then the class's own constructor."""
    cls = resolve_topic(record.topic)
    state = json.loads(record.state)
    upcast(cls, state, state.pop("class_version", 1))
    return cls(**state)


def test_every_record_decodes_to_what_the_general_way_gives(history) -> None:
    mapper = PydanticMapper(transcoder=JSONBytes())
    topics = {r.topic for r in history["records"]}
    assert {Migration.ChainVerified.TOPIC, Migration.SourceClosed.TOPIC} <= topics
    for record in history["records"]:
        event = mapper.to_domain_event(record)
        assert event == general_decode(record) and type(event) is resolve_topic(record.topic)


@pytest.mark.parametrize("topic", [Migration.ChainVerified.TOPIC,  # v2: the dict path
                                   Migration.SourceClosed.TOPIC])  # v1: the JSON path
def test_a_payload_without_its_originator_fields_takes_them_from_the_row(history, topic) -> None:
    mapper = PydanticMapper(transcoder=JSONBytes())
    record = next(r for r in history["records"] if r.topic == topic)
    state = json.loads(record.state)
    del state["originator_id"], state["originator_version"]
    bare = StoredEvent(record.originator_id, record.originator_version, topic,
                       json.dumps(state).encode())
    assert mapper.to_domain_event(bare) == general_decode(record)
    # The payload's own copy, when present, is still what is validated.
    state.update(originator_id="garbage", originator_version=record.originator_version)
    with pytest.raises(UndecodableEvent, match="originator_id"):
        mapper.to_domain_event(StoredEvent(record.originator_id, record.originator_version,
                                           topic, json.dumps(state).encode()))


def test_json_that_pydantics_parser_refuses_is_read_as_json_loads_reads_it(history) -> None:
    """A lone surrogate escape: ``json.loads`` accepts it, pydantic's parser does not."""
    mapper = PydanticMapper(transcoder=JSONBytes())
    record = next(r for r in history["records"] if r.topic == Migration.ChainVerified.TOPIC)
    odd = StoredEvent(record.originator_id, record.originator_version, record.topic,
                      record.state.replace(b'"describe: unavailable"', b'"\\ud800"'))
    with pytest.raises(ValueError):
        from_json(odd.state)
    assert mapper.to_domain_event(odd) == general_decode(odd)
    assert mapper.to_domain_event(odd).detail == "\ud800"
    with pytest.raises(UndecodableEvent, match="not valid JSON"):
        mapper.to_domain_event(StoredEvent(record.originator_id, record.originator_version,
                                           record.topic, record.state[:-1]))


def test_the_fold_equals_the_librarys_projector_at_every_version(history) -> None:
    events = history["events"]
    assert any(is_plain(type(e)) for e in events) and not is_plain(type(events[0]))
    for k in range(1, len(events) + 1):
        assert fold_events(None, events[:k]) == project_aggregate(None, events[:k])
    full = project_aggregate(None, events)
    for k in (1, 3, len(events) // 2, len(events) - 1):  # from a loaded aggregate onwards
        start = project_aggregate(None, events[:k])
        assert fold_events(copy.deepcopy(start), events[k:]) == full
        assert fold_events(start, iter(events[k:])) is start and start == full


def test_an_event_the_reducer_rejects_mid_run_is_named(history) -> None:
    events = history["events"]
    k = len(events) // 2
    assert is_plain(type(events[k - 1])) and is_plain(type(events[k]))
    bad = NotAMigrationStep(originator_id=history["mid"], originator_version=k + 1)
    assert is_plain(NotAMigrationStep)
    with pytest.raises(CorruptHistory, match=rf"{history['mid']} version {k + 1} "
                       r"\(schedfence.test.NotAMigrationStep\) cannot be applied: TypeError"):
        fold_events(None, events[:k] + [bad] + events[k + 1:])


def test_an_event_of_another_aggregate_or_version_mid_run_is_refused(history) -> None:
    events = history["events"]
    k = len(events) // 2
    foreign = events[k].model_copy(update={"originator_id": uuid.uuid4()})
    with pytest.raises(CorruptHistory, match=f"version {k + 1} .*cannot be applied"):
        fold_events(None, events[:k] + [foreign] + events[k + 1:])
    with pytest.raises(CorruptHistory, match=f"version {k + 2} is missing"):
        fold_events(None, events[:k + 1] + events[k + 2:])
    with pytest.raises(CorruptHistory, match=f"version {k} .* is stored again"):
        fold_events(None, events[:k + 1] + events[k - 1:])


def test_lenient_uuid_parses_a_row_id_once_and_leaves_the_rest_alone() -> None:
    oid = uuid.uuid4()
    first, again = lenient_uuid(oid.hex), lenient_uuid(oid.hex)
    assert first == oid and again is first and lenient_uuid(str(oid)) == oid
    assert lenient_uuid(oid) is oid
    for raw in ("garbage", 7, b"\x00", None, ["not", "hashable"]):
        assert lenient_uuid(raw) == raw
