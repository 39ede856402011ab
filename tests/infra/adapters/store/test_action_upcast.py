"""An action stored by an older release (one JSON ``input``, JSON memo and search attributes:
action v1) still loads, wherever it was stored: on ``Schedule.Created`` v3, on a forward's
``TemporalFenced`` v1 and the ``CreatedByMigration`` v1 it makes, on a rollback's
``RequestIdAssigned`` v4 and ``DestinationStartIssued`` v1 handovers, and in a snapshot's
state. Each is upcast on read to the payloads the older release sent for it (Temporal's
default converter), so a schedule keeps starting its workflows exactly as it did; the stored
bytes are never rewritten."""
from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from temporalio.converter import default as default_converter

from schedfence.domain.source.action import StartWorkflowAction, make_action
from schedfence.domain.forward.aggregate import ForwardMigration
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.model import EvolvingAggregate
from schedfence.domain.source.payload import Payload
from schedfence.domain.source.program import program_of
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.scheduling import start_request
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service

V1_ACTION = {"workflow_type": "Report", "task_queue": "q", "workflow_id": "rep",
             "input": {"region": "eu", "n": [1, 2]}, "memo": {"team": {"x": 1}},
             "search_attributes": {"Env": "prod"}}


def sent_by_v1(value: Any) -> Payload:
    """What the older release sent for a JSON value: Temporal's default converter."""
    p = default_converter().payload_converter.to_payloads([value])[0]
    return Payload.of(dict(p.metadata), p.data)


def assert_v1_upcast(action: StartWorkflowAction, doc: dict = V1_ACTION) -> None:
    assert action.inputs == (sent_by_v1(doc["input"]),)
    assert action.memo == {k: sent_by_v1(v) for k, v in doc["memo"].items()}
    assert action.search_attributes == {k: sent_by_v1(v)
                                        for k, v in doc["search_attributes"].items()}
    assert (action.execution_timeout, action.run_timeout, action.task_timeout,
            action.retry_policy, action.summary, action.details) == (None,) * 6


@pytest.fixture()
def service():
    svc = open_service("sqlite:///:memory:", "sim")
    yield svc
    svc.close()


def decode(service, cls: type, version: int, fields: dict[str, Any]) -> Any:
    """``fields`` stored as an older release stored ``cls`` at ``version``."""
    state = {"originator_id": str(uuid.uuid4()), "originator_version": 1,
             "timestamp": "2026-01-01T00:00:00+00:00", **fields}
    if issubclass(cls, EvolvingAggregate.Created):
        state["originator_topic"] = "schedfence.Schedule"
    if version > 1:
        state["class_version"] = version
    record = StoredEvent(originator_id=uuid.UUID(state["originator_id"]), originator_version=1,
                         topic=getattr(cls, "TOPIC"), state=json.dumps(state).encode())
    return service.app.mapper.to_domain_event(record)


def handover(action: dict) -> dict:
    return {"namespace": "ns", "schedule_id": "s", "incarnation": 1, "paused": False,
            "notes": "", "spec": make_spec(intervals=[(60, 0)]).model_dump(mode="json"),
            "action": action, "policies": None, "remaining_actions": None, "action_count": 0,
            "cursor": "2026-01-01T00:00:00Z", "buffered": [], "backfills": [],
            "recent_actions": [], "running": []}


def test_a_v1_action_document_reads_as_the_payloads_it_was_started_with():
    assert_v1_upcast(StartWorkflowAction.model_validate(V1_ACTION))
    nothing = StartWorkflowAction.model_validate({**V1_ACTION, "input": None})
    assert nothing.inputs == (sent_by_v1(None),)  # v1 started it with one null argument
    assert nothing.inputs[0].metadata_bytes() == {"encoding": b"binary/null"}


def test_a_v3_created_schedule_is_upcast_and_starts_as_before(service):
    event = decode(service, Schedule.Created, 3, {
        "namespace": "ns", "schedule_id": "s", "incarnation": 1, "paused": False,
        "notes": "", "destination_check": None, "epoch": 0,
        "spec": make_spec(intervals=[(60, 0)]).model_dump(mode="json"), "action": V1_ACTION,
        "policies": None, "remaining_actions": None})
    assert "input" not in event.action
    state = Schedule.evolve(None, event)
    assert_v1_upcast(program_of(state).action)
    start = start_request(state, {"workflow_id": "rep-x", "request_id": "r"})
    assert start.action == program_of(state).action


def test_handovers_of_old_events_are_upcast(service):
    fenced = decode(service, ForwardMigration.TemporalFenced, 1, {
        "request_id": "F", "conflict_token": "00", "handover": handover(dict(V1_ACTION))})
    assert_v1_upcast(StartWorkflowAction.model_validate(fenced.handover["action"]))
    created = decode(service, Schedule.CreatedByMigration, 1, {
        "namespace": "ns", "schedule_id": "s", "incarnation": 2, "request_id": "F",
        "migration_id": str(uuid.uuid4()), "handover": handover(dict(V1_ACTION))})
    assert_v1_upcast(program_of(Schedule.evolve(None, created)).action)
    assigned = decode(service, Migration.RequestIdAssigned, 4, {
        "namespace": "ns", "schedule_id": "s", "source_id": str(uuid.uuid4()),
        "incarnation": 1, "workflow_id": "temporal-sys-scheduler:s", "request_id": "R",
        "origin": "caller", "pre_paused": False, "pre_notes": "",
        "handover": handover(dict(V1_ACTION))})
    assert_v1_upcast(StartWorkflowAction.model_validate(assigned.handover["action"]))
    issued = decode(service, Migration.DestinationStartIssued, 1, {
        "request_id": "R", "attempt": 1, "worker": "w", "workflow_id": "x",
        "workflow_type": "t", "id_reuse_policy": "allow_duplicate",
        "id_conflict_policy": "fail", "input": {"handover": handover(dict(V1_ACTION))}})
    assert_v1_upcast(StartWorkflowAction.model_validate(
        issued.input["handover"]["action"]))


def test_an_old_snapshot_state_is_upcast(service):
    svc = service
    svc.create_schedule("ns", "s", spec=make_spec(intervals=[(60, 0)]),
                        action=make_action(workflow_type="Report", task_queue="q",
                                           workflow_id="rep", input={"region": "eu"}))
    schedule = svc.load.source("ns", "s")
    snapshot = Schedule.Snapshot.take(schedule)
    assert snapshot.state_version == Schedule.class_version == 2
    old = snapshot.model_copy(update={"state_version": 1,
                                      "state": {**snapshot.state, "action": dict(V1_ACTION)}})
    loaded: ScheduleState = old.mutate(None).state
    assert_v1_upcast(program_of(loaded).action)
    assert old.state["action"] == V1_ACTION  # what was stored stays as it was


def test_a_new_action_round_trips_its_document():
    action = make_action(workflow_type="W", task_queue="q", workflow_id="w",
                         inputs=(Payload.of({"encoding": b"binary/protobuf",
                                             "messageType": b"x.Y"}, b"\x00\xff"),),
                         execution_timeout=3600, task_timeout=10)
    assert StartWorkflowAction.model_validate(action.model_dump(mode="json")) == action
