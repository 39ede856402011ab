"""Schedules that carry a spec, an action and policies: created through the service and the
CLI, read back (upcoming times, describe), refused field by field with nothing written, and a
schedule of old (no spec) still reads as one with no spec and no action."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.payload import Payload
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service
from tests.infra.cli.cli_runs import ok, ok_json, run, store  # noqa: F401 (fixture)

NS = "ns"
NOW = datetime(2027, 1, 1, 0, 0, 30, tzinfo=timezone.utc)  # after the creation time


def test_a_schedule_with_a_program_shows_it_and_its_next_times():
    with open_service("sqlite:///:memory:", "sim") as svc:
        view = svc.create_schedule(NS, "s", spec=make_spec(intervals=[(60, 15)]),
                                   action=make_action(workflow_type="W", task_queue="q",
                                                      workflow_id="act"),
                                   policies=make_policies(overlap="buffer_one"), limit=3)
        assert view.spec["intervals"] == [{"every": 60, "offset": 15}]
        assert (view.action["workflow_id"], view.policies["overlap"],
                view.remaining_actions) == ("act", "buffer_one", 3)
        times = svc.upcoming(NS, "s", 2, now=NOW)
        assert times == [datetime(2027, 1, 1, 0, 1, 15, tzinfo=timezone.utc),
                         datetime(2027, 1, 1, 0, 2, 15, tzinfo=timezone.utc)]
        assert all(t.tzinfo is timezone.utc for t in times)


def test_a_schedule_of_old_has_no_spec_no_action_and_no_times():
    with open_service("sqlite:///:memory:", "sim") as svc:
        view = svc.create_schedule(NS, "old", paused=True, notes="n")
        assert (view.spec, view.action, view.policies, view.remaining_actions) == \
            (None, None, None, None)
        assert svc.upcoming(NS, "old", now=NOW) == []


def test_a_v2_created_record_upcasts_to_a_schedule_without_a_program():
    fields = {"namespace": NS, "schedule_id": "s", "incarnation": 1, "paused": False,
              "notes": "", "destination_check": None, "epoch": 0}
    Schedule.Created.upcast_v2_v3(fields)
    assert (fields["spec"], fields["action"], fields["policies"],
            fields["remaining_actions"]) == (None, None, None, None)


@pytest.mark.parametrize("kwargs, field", [
    ({"spec": make_spec(intervals=[(60, 0)])}, "action"),
    ({"action": make_action(workflow_type="W", task_queue="q", workflow_id="a")}, "spec"),
    ({"policies": make_policies()}, "spec"),
    ({"spec": make_spec(intervals=[(60, 0)]),
      "action": make_action(workflow_type="W", task_queue="q", workflow_id="a"),
      "limit": -1}, "limit"),
])
def test_an_incomplete_program_is_refused_and_writes_nothing(kwargs, field):
    with open_service("sqlite:///:memory:", "sim") as svc:
        before = svc.event_count()
        with pytest.raises(InvalidArgument) as refused:
            svc.create_schedule(NS, "s", **kwargs)
        assert refused.value.message.startswith(field) and svc.event_count() == before


def test_the_cli_creates_and_describes_a_running_schedule(store: str) -> None:
    ok(store, "schedule", "create", NS, "rep", "--interval", "5m/1m", "--cron", "@daily",
       "--tz", "Europe/Berlin", "--workflow-type", "Report", "--task-queue", "q",
       "--input", '{"region": "eu"}', "--overlap", "buffer_all", "--limit", "7")
    doc = ok_json(store, "schedule", "describe", NS, "rep", "--next", "3")
    assert doc["spec"]["intervals"] == [{"every": 300, "offset": 60}]
    assert doc["spec"]["cron_expressions"] == ["0 0 * * *"]
    assert [Payload.model_validate(p).data_bytes() for p in doc["action"]["inputs"]] == \
        [b'{"region":"eu"}']  # one JSON argument, kept as the payload it is started with
    assert (doc["policies"]["overlap"], doc["remaining_actions"]) == ("buffer_all", 7)
    times = doc["next_action_times"]
    assert len(times) == 3 and times == sorted(times) and all(t.endswith("Z") for t in times)
    assert "next action times" in ok(store, "schedule", "describe", NS, "rep")


@pytest.mark.parametrize("args, field", [
    (["--cron", "61 * * * *"], "cron"),
    (["--interval", "0s"], "interval"),
    (["--interval", "5x"], "interval"),
    (["--interval", "5m", "--tz", "Nowhere/X"], "time_zone"),
    (["--interval", "5m", "--start", "2026-02-01T00:00Z", "--end", "2026-01-01T00:00Z"], "end"),
    (["--interval", "5m", "--input", "{nope"], "input"),
    (["--interval", "5m", "--catchup-window", "1s"], "catchup_window"),
])
def test_bad_cli_input_is_one_line_naming_the_field_and_writes_nothing(store: str, args,
                                                                      field) -> None:
    ok(store, "schedule", "create", NS, "keep")
    before = ok_json(store, "history", NS, "keep")["events"]
    done = run(store, "schedule", "create", NS, "bad", *args, "--workflow-type", "W",
               "--task-queue", "q", "--json")
    assert done.exit_code == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "invalid_argument" and error["message"].startswith(field)
    assert ok_json(store, "history", NS, "keep")["events"] == before
    assert run(store, "status", NS, "bad").exit_code == 1  # nothing was created


def test_action_events_round_trip_through_the_store_and_are_narrated():
    from schedfence.domain.source.runs import RUN_EVENTS
    from schedfence.domain.source.scheduling import tick
    from schedfence.projections.narration import narrate
    with open_service("sqlite:///:memory:", "sim") as svc:
        svc.create_schedule(NS, "s", spec=make_spec(intervals=[(2, 0)]),
                            action=make_action(workflow_type="W", task_queue="q",
                                               workflow_id="act"),
                            policies=make_policies(overlap="allow_all"))
        source = svc.load.source(NS, "s")
        cursor = datetime.fromisoformat(source.state.cursor.replace("Z", "+00:00"))
        source.record(tick(source.state, cursor + timedelta(seconds=7)))
        svc.app.save(source)
        assert svc.load.source(NS, "s").state == source.state  # decoded and folded again
        entries = svc.history(NS, "s")
        kinds = {e.type.rsplit(".", 1)[-1] for e in entries}
        assert {"TimesProcessed", "ActionStartIssued"} <= kinds
        assert all(narrate(e.type.rsplit(".", 1)[-1], e.data) is not None for e in entries
                   if e.type.rsplit(".", 1)[-1] in {c.__name__ for c in RUN_EVENTS})
        assert svc.verify() == []


def test_an_update_keeps_every_field_of_the_action_it_does_not_name():
    from schedfence.domain.source.action import RetryPolicy
    from schedfence.domain.source.payload import json_payload
    from schedfence.infra.cli.program import updated_action
    full = make_action(workflow_type="W", task_queue="q", workflow_id="w",
                       inputs=(Payload.of({"encoding": b"binary/protobuf"}, b"\x01\xff"),),
                       memo={"m": Payload.of({"encoding": b"binary/encrypted"}, b"\x00")},
                       search_attributes={"Env": Payload.of({"encoding": b"json/plain",
                                                             "type": b"Keyword"}, b'"prod"')},
                       execution_timeout=60, task_timeout=5,
                       retry_policy=RetryPolicy(maximum_attempts=3),
                       summary=json_payload("nightly"))
    doc = full.model_dump(mode="json")
    assert updated_action(doc, "s", {"task_queue": "q2"}) == \
        full.model_copy(update={"task_queue": "q2"})
    fresh = updated_action(doc, "s", {"input": {"a": 1}})
    assert fresh == full.model_copy(update={"inputs": (json_payload({"a": 1}),)})
    with pytest.raises(InvalidArgument, match="^input:"):
        make_action(workflow_type="W", task_queue="q", workflow_id="w", input=1,
                    inputs=(json_payload(2),))
