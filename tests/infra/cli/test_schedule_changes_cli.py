"""``schedule update | trigger | backfill`` and the scheduler, through the CLI on both stores:
each change shows in ``describe``; bad input is one ``invalid_argument`` line naming the
option and writes nothing; while fenced every change is ``migration_pending``."""
from __future__ import annotations

import json
import time

import pytest

from tests.infra.cli.cli_runs import ok, ok_json, run, store  # noqa: F401 (fixture)

NS = "ns"
SIM = ("--destination", "sim")


def create(store: str, sid: str = "s") -> None:
    ok(store, *SIM, "schedule", "create", NS, sid, "--interval", "10m", "--workflow-type", "W",
       "--task-queue", "q")


def events(store: str, sid: str = "s") -> list:
    return ok_json(store, "history", NS, sid)["events"]


def test_update_changes_only_the_parts_given(store: str) -> None:
    create(store)
    doc = ok_json(store, "schedule", "update", NS, "s", "--overlap", "buffer_all",
                  "--pause-on-failure", "--limit", "3", "--task-queue", "q2")
    assert doc["policies"] == {"overlap": "buffer_all", "catchup_window": 365 * 86400,
                               "pause_on_failure": True}
    assert (doc["action"]["workflow_type"], doc["action"]["task_queue"]) == ("W", "q2")
    assert doc["spec"]["intervals"] == [{"every": 600, "offset": 0}]
    assert doc["remaining_actions"] == 3
    doc = ok_json(store, "schedule", "update", NS, "s", "--cron", "@hourly", "--no-limit")
    assert doc["spec"]["cron_expressions"] == ["0 * * * *"] and doc["spec"]["intervals"] == []
    assert doc["remaining_actions"] is None and doc["policies"]["overlap"] == "buffer_all"


def test_trigger_and_backfill_start_through_the_scheduler_and_show_in_describe(store: str):
    create(store)
    ok(store, "schedule", "trigger", NS, "s")
    ok(store, "schedule", "backfill", NS, "s", "--start", "2026-01-01T00:00:00Z", "--end",
       "2026-01-01T00:30:00Z", "--overlap", "allow_all")
    assert ok_json(store, "schedule", "describe", NS, "s")["backfills"][0]["backfill_id"] == \
        "backfill-1"
    report = ok_json(store, *SIM, "scheduler", "--once")
    assert report["started"] == 5  # the trigger, then 00:00, 00:10, 00:20, 00:30
    doc = ok_json(store, "schedule", "describe", NS, "s")
    assert doc["backfills"] == [] and len(doc["running"]) == 5 and doc["action_count"] == 5
    text = ok(store, "schedule", "describe", NS, "s")
    assert "s-2026-01-01T00:30:00Z" in text and "backfill-1" in text


@pytest.mark.parametrize("args, field", [
    (["backfill", NS, "s", "--start", "2026-01-02T00:00Z", "--end", "2026-01-01T00:00Z"], "end"),
    (["backfill", NS, "s", "--start", "2026-01-01T00:00Z", "--end", "2999-01-01T00:00Z"], "end"),
    (["backfill", NS, "s", "--start", "yesterday", "--end", "2026-01-01T00:00Z"], "start"),
    (["update", NS, "s", "--interval", "0s"], "interval"),
    (["update", NS, "s", "--cron", "61 * * * *"], "cron"),
    (["update", NS, "s", "--tz", "Europe/Berlin"], "tz"),
    (["update", NS, "s", "--input", "{nope"], "input"),
    (["update", NS, "s"], "update"),
])
def test_bad_input_names_the_option_and_writes_nothing(store: str, args, field) -> None:
    create(store)
    before = events(store)
    done = run(store, "schedule", *args, "--json")
    assert done.exit_code == 1, done.stdout
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "invalid_argument" and error["message"].startswith(field)
    assert events(store) == before


def test_while_fenced_every_change_is_refused_and_writes_nothing(store: str) -> None:
    create(store)
    ok(store, *SIM, "rollback", NS, "s", "--request-id", "R1")
    before = events(store)
    for args in (["trigger", NS, "s"], ["update", NS, "s", "--overlap", "skip"],
                 ["backfill", NS, "s", "--start", "2026-01-01T00:00Z", "--end",
                  "2026-01-01T01:00Z"], ["pause", NS, "s"], ["delete", NS, "s"]):
        done = run(store, "schedule", *args, "--json")
        assert done.exit_code == 1
        assert json.loads(done.stdout)["error"]["code"] == "migration_pending"
    assert events(store) == before


def test_an_update_with_a_stale_conflict_token_is_refused_and_writes_nothing(store: str):
    create(store)
    token = ok_json(store, "schedule", "describe", NS, "s")["conflict_token"]
    ok(store, "schedule", "notes", NS, "s", "changed meanwhile")
    before = events(store)
    done = run(store, "schedule", "update", NS, "s", "--overlap", "allow_all",
               "--conflict-token", str(token), "--json")
    assert done.exit_code == 1
    assert json.loads(done.stdout)["error"]["code"] == "failed_precondition"
    assert events(store) == before
    fresh = ok_json(store, "schedule", "describe", NS, "s")["conflict_token"]
    doc = ok_json(store, "schedule", "update", NS, "s", "--overlap", "allow_all",
                  "--conflict-token", str(fresh))
    assert doc["policies"]["overlap"] == "allow_all" and doc["conflict_token"] > fresh


def test_a_scheduler_pass_with_nothing_due_writes_nothing(store: str) -> None:
    ok(store, *SIM, "schedule", "create", NS, "leap", "--cron", "0 0 29 2 *",
       "--workflow-type", "W", "--task-queue", "q")  # next due on 2028-02-29
    before = events(store, "leap")
    looked = []
    for _ in range(3):
        time.sleep(1.05)  # a cursor is whole seconds: each pass is a second later than the last
        report = ok_json(store, *SIM, "scheduler", "--once")
        assert report["ticks"] == 0 and report["started"] == 0
        looked.append(report["schedules"])
    assert events(store, "leap") == before
    assert looked == [1, 0, 0]  # new: looked at once; then not due until 2028 (the due index)
