"""Schema versions and legacy data: an older release's v1 record, stored raw, is upcast on every
read (never rewritten), folds to ``legacy_pending``, fails closed and shows to operators."""
from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner
from eventsourcing.persistence import StoredEvent

from schedfence.domain.errors import AlreadyExists, RecoveryRefused
from schedfence.domain.rollback.aggregate import Migration
from schedfence.infra.cli.commands import cli
from schedfence.infra.adapters.store.codec import UndecodableEvent
from schedfence.infra.demo.legacy import legacy_v1_record, plant_legacy_v1
from schedfence.infra.application.service import open_service

from tests.helpers import (NS, SID, WID, given, nothing_written, refused, then,  # noqa: F401
                           when, world)

M = Migration


def stored_records(service, migration_id: str) -> list[StoredEvent]:
    return service.app.recorder.select_events(uuid.UUID(migration_id))


def planted(w) -> str:
    w.service.create_schedule(NS, SID, paused=False, notes="pre")
    return plant_legacy_v1(w.service, NS, SID)


def test_v1_record_is_stored_raw_and_loads_as_legacy_pending(world):
    w = world
    with given("the v1 record an older release wrote"):
        mid = planted(w)
    with then("the stored bytes are the v1 shape: no version marker, no id, claim or origin"):
        (record,) = stored_records(w.service, mid)
        raw = json.loads(record.state)
        assert record.topic == M.RequestIdAssigned.TOPIC
        assert not {"class_version", "request_id", "origin", "claim_armed", "actor"} & set(raw)
    with then("it is upcast on read to an identity-less migration"):
        event = w.service.app.mapper.to_domain_event(record)
        assert type(event) is M.RequestIdAssigned
        assert (event.request_id, event.origin, event.claim_armed) == (None, "legacy", False)
        view = w.service.migration(NS, SID)
        assert (view.state, view.request_id, view.request_id_origin, view.claim_armed) == \
            ("legacy_pending", None, "legacy", False)
        schedule = w.service.schedule(NS, SID)
        assert schedule.migration_pending and schedule.migration_id == mid
    assert w.service.verify() == []


def test_worker_fails_closed_writes_nothing_and_never_calls_the_destination(world):
    w = world
    with given("a legacy pending migration"):
        mid = planted(w)
        (before,) = stored_records(w.service, mid)
    with when("workers attempt it, repeatedly"), nothing_written(w.service):
        assert w.service.run_until_idle() >= 1
        assert w.service.worker.attempt(uuid.UUID(mid)) == "idle"
    with then("no destination call was made and the record was not rewritten"):
        assert w.hooks.seen("start.") == [] and w.hooks.seen("describe.") == []
        assert w.dest.start_log() == []
        (after,) = stored_records(w.service, mid)
        assert after.state == before.state and after.originator_version == 1
        assert w.service.migration(NS, SID).state == "legacy_pending"


def test_rollback_and_abort_are_refused_for_a_legacy_migration(world):
    w = world
    planted(w)
    for rid in ("R1", None):
        with refused(w.service, AlreadyExists):
            w.service.rollback(NS, SID, rid)
    with refused(w.service, RecoveryRefused):
        w.service.abort(NS, SID, "try", "op")


def test_new_records_carry_the_class_version_marker(world):
    w = world
    w.service.create_schedule(NS, SID)
    mid = w.service.rollback(NS, SID, "R1").migration_id
    record = stored_records(w.service, mid)[0]
    raw = json.loads(record.state)
    assert (raw["class_version"], raw["request_id"], raw["origin"], raw["claim_armed"]) == \
        (7, "R1", "caller", True)
    assert (raw["epoch"], raw["sentinel_check"]["current"]) == (0, None)
    assert raw["destination"]["namespace"] == NS  # v7: what it was accepted against
    event = w.service.app.mapper.to_domain_event(record)
    assert (event.request_id, event.origin) == ("R1", "caller")


def test_unknown_stored_type_is_a_clear_error_naming_it(world):
    """The removed look-alike class is not silently accepted: its topic is simply unknown."""
    w = world
    w.service.create_schedule(NS, SID)
    topic = "schedfence.migration.LegacyRollbackRequested"
    w.service.app.recorder.insert_events([StoredEvent(
        originator_id=uuid.uuid4(), originator_version=1, topic=topic, state=b"{}")])
    with pytest.raises(UndecodableEvent, match=f"unknown event type '{topic}' at log position"):
        w.service.verify()


def test_inconsistent_v2_identity_is_refused_on_read(world):
    """A v2 record may lack an id only as the legacy origin, and then never with a claim."""
    w = world
    w.service.create_schedule(NS, SID)
    base = json.loads(legacy_v1_record(uuid.uuid4(), namespace=NS, schedule_id=SID,
                                       source_id="s", incarnation=1, workflow_id=WID,
                                       pre_paused=False, pre_notes="").state)
    for bad in ({"origin": "caller", "claim_armed": False},
                {"origin": "legacy", "claim_armed": True}):
        doc = dict(base, class_version=2, request_id=None, actor="", **bad)
        record = StoredEvent(originator_id=uuid.UUID(doc["originator_id"]), originator_version=1,
                             topic=M.RequestIdAssigned.TOPIC, state=json.dumps(doc).encode())
        with pytest.raises(UndecodableEvent, match="RequestIdAssigned"):
            w.service.app.mapper.to_domain_event(record)


def test_upcast_fills_exactly_the_v2_fields():
    state = {"namespace": NS}
    M.RequestIdAssigned.upcast_v1_v2(state)
    assert state == {"namespace": NS, "request_id": None, "origin": "legacy",
                     "claim_armed": False, "actor": ""}


def test_legacy_migration_shows_in_status_and_list(file_store_url: str):
    store = file_store_url
    with open_service(store, "sim") as service:
        service.create_schedule(NS, SID)
        mid = plant_legacy_v1(service, NS, SID)
    runner = CliRunner()
    status = json.loads(runner.invoke(cli, ["--store", store, "status", NS, SID,
                                            "--json"]).stdout)
    assert (status["migration"]["state"], status["migration"]["migration_id"]) == \
        ("legacy_pending", mid)
    listed = json.loads(runner.invoke(cli, ["--store", store, "list", "--json"]).stdout)
    assert [r["migration_state"] for r in listed["schedules"]] == ["legacy_pending"]
    history = runner.invoke(cli, ["--store", store, "history", NS, SID]).stdout
    assert "RequestIdAssigned" in history and "origin=legacy" in history
