"""The ``schedfence`` CLI, continued (see test_cli.py): ``verify`` and its exit codes, and the
worker, with the simulator persisted beside the events so separate invocations share one
destination."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from schedfence.domain.ids import destination_workflow_id, schedule_aggregate_id
from schedfence.domain.source.schedule import Schedule
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination, SqlSimState

from tests.infra.cli.cli_runs import (ROOT, events_in, ok, ok_json, run,  # noqa: F401
                                     stops_on_sigint, store, subprocess_cli)


# -- verify ------------------------------------------------------------------------------------
def test_verify_clean_store_exits_0(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a")
    ok(store, "worker", "--until-idle")
    assert ok(store, "verify").strip() == \
        f"invariants: OK ({events_in(store)} events, 1 migration checked)"


def test_verify_counts_events_not_log_positions(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    with open_service(store, SimulatedDestination()) as service:
        # A save that lost an optimistic-concurrency race, as a racing writer's would: on
        # PostgreSQL its sequence value is spent, a hole in the log positions.
        [first] = service.app.recorder.select_notifications(start=1, limit=1)
        with pytest.raises(IntegrityError):
            service.app.recorder.insert_events([StoredEvent(
                first.originator_id, first.originator_version, first.topic, first.state)])
    ok(store, "schedule", "create", "ns", "b")
    assert events_in(store) == 6
    doc = ok_json(store, "verify")
    assert (doc["ok"], doc["events"], doc["migrations"]) == (True, 6, 0)
    assert ok(store, "verify").strip() == "invariants: OK (6 events, 0 migrations checked)"


def test_verify_reports_violations_and_exits_1(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a")
    with open_service(store, SimulatedDestination()) as service:
        # Bypass the fence guard, as a buggy writer would: a pause while the fence is held.
        source = service.app.repository.get(schedule_aggregate_id("ns", "a", 1))
        source.trigger_event(Schedule.Paused, paused=False)
        service.app.save(source)
        bad_position = service.event_count()
    result = run(store, "verify")
    assert result.exit_code == 1
    assert "1 violation" in result.stdout
    assert any(line.strip().startswith("I1") and str(bad_position) in line
               for line in result.stdout.splitlines())
    doc = json.loads(run(store, "verify", "--json").stdout)
    assert doc["ok"] is False
    assert [(v["invariant"], bad_position in v["positions"]) for v in doc["violations"]] == \
        [("I1", True)]


# -- the worker --------------------------------------------------------------------------------
def test_simulator_is_shared_between_invocations(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    rid = ok_json(store, "rollback", "ns", "a")["request_id"]
    proc = subprocess_cli(store, "worker", "--until-idle", "--json")  # another process
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["migrations"] == {"completed": 1}
    doc = ok_json(store, "status", "ns", "a")
    assert doc["migration"]["state"] == "completed"
    state = SqlSimState(store)
    try:
        runs = SimulatedDestination(state).runs("ns", destination_workflow_id("a"))
    finally:
        state.dispose()
    assert [(r.first_execution_run_id, rid in r.request_ids) for r in runs] == \
        [(doc["migration"]["destination_first_run_id"], True)]


def test_worker_polls_until_ctrl_c_and_exits_cleanly(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "schedfence.infra.cli", "--store", store, "worker", "--poll-interval",
         "0.2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            if " pass 1: " in line:
                break
        assert any("migrations: completed 1" in line for line in seen), seen
        assert ", destination sim (the simulator kept in the store), polling every 0.2s" \
            in seen[0], seen  # the banner names the destination
    except BaseException:
        proc.kill()
        raise
    stdout, _ = stops_on_sigint(proc, settle=0.2)  # after a few idle passes (print nothing)
    assert stdout.strip().startswith("worker stopped after")
    assert ok_json(store, "status", "ns", "a")["migration"]["state"] == "completed"
