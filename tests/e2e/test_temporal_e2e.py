"""Rollbacks end to end against a real Temporal dev server and the real destination workflow.

After each scenario the invariant checker passes, and the chains at the workflow id are counted
by listing the server's runs (visibility), never from our own records.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from schedfence.domain.errors import SentinelBlocked
from schedfence.domain.ids import (DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE,
                                   destination_workflow_id)
from schedfence.infra.application.service import MigrationService, open_service
from tests.contract.temporal_env import (NS, TemporalEnv, schedule_cli,  # noqa: F401
                                         start_destination_worker, stop_process, temporal_env,
                                         wait_for)
from tests.helpers import Crash, Hooks

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def sid() -> str:
    return f"e2e-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def hooks() -> Hooks:
    return Hooks()


@pytest.fixture
def service(temporal_env: TemporalEnv, tmp_path: Path, hooks: Hooks) -> MigrationService:
    svc = open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                       crash_hook=hooks, worker_id="e2e")
    yield svc
    svc.close()


def evidence(service: MigrationService, sid: str) -> list[str]:
    return [e.data["evidence"] for e in service.history(NS, sid)
            if e.type.endswith("OwnershipAccepted")]


def assert_owned_by_one_chain(env: TemporalEnv, service: MigrationService, sid: str,
                              runs: int = 1) -> str:
    """Completed migration, clean log, and exactly one chain at the id, headed by our receipt."""
    mig = service.migration(NS, sid)
    assert mig.state == "completed", mig
    assert service.verify() == []
    chains = env.ops.chains(destination_workflow_id(sid), runs)
    assert list(chains) == [mig.destination_first_run_id]
    assert len(chains[mig.destination_first_run_id]) == runs
    return mig.destination_first_run_id


def test_happy_path_hands_the_schedule_to_a_running_workflow(temporal_env, service, sid):
    service.create_schedule(NS, sid, paused=False, notes="nightly settlement")
    assert service.rollback(NS, sid).outcome == "accepted"
    service.run_until_idle()
    first = assert_owned_by_one_chain(temporal_env, service, sid)
    assert evidence(service, sid) == ["start_created"]
    assert service.schedule(NS, sid).closed
    wid = destination_workflow_id(sid)
    run = temporal_env.destination.describe(NS, wid)
    assert (run.run_id, run.status, run.workflow_type) == (first, "running",
                                                           SCHEDULER_WORKFLOW_TYPE)
    # A real Temporal Schedule (the server's own scheduler runs it) took over the
    # *pre-migration* pause and notes (I3, I11); with no spec and no action it never acts.
    state = temporal_env.ops.describe_schedule(sid).schedule.state
    assert (state.paused, state.notes) == (False, "nightly settlement")
    # The server's own tools see it and work on it.
    assert sid in schedule_cli(temporal_env, "list")
    schedule_cli(temporal_env, "toggle", "--schedule-id", sid, "--pause", "--reason", "ops")
    doc = json.loads(schedule_cli(temporal_env, "describe", "--schedule-id", sid,
                                  "--output", "json"))
    assert doc["schedule"]["state"]["paused"] is True


def test_a_foreign_workflow_at_the_id_parks_and_keeps_the_source(temporal_env, service, sid):
    wid = destination_workflow_id(sid)
    service.create_schedule(NS, sid, notes="keep me")  # before: a running chain refuses it
    foreign = temporal_env.ops.create_schedule(sid)  # someone else's Temporal Schedule
    service.rollback(NS, sid)
    service.run_until_idle()
    mig = service.migration(NS, sid)
    assert (mig.state, mig.park_reason, mig.destination_first_run_id) == (
        "parked", "foreign_destination", None)
    source = service.schedule(NS, sid)
    assert not source.closed and source.paused
    assert service.verify() == []
    assert list(temporal_env.ops.chains(wid, 1)) == [foreign]


def test_a_running_sentinel_blocks_and_writes_nothing(temporal_env, service, sid):
    temporal_env.ops.start_dummy(destination_workflow_id(sid), sleep_seconds=600)
    service.create_schedule(NS, sid)
    before = service.event_count()
    with pytest.raises(SentinelBlocked):
        service.rollback(NS, sid)
    assert service.event_count() == before
    assert not service.schedule(NS, sid).migration_pending


@pytest.mark.parametrize("ending", ["completed", "terminated"])
def test_a_closed_sentinel_does_not_block(temporal_env, service, sid, ending):
    wid = destination_workflow_id(sid)
    dummy = temporal_env.ops.start_dummy(wid, sleep_seconds=0.05 if ending == "completed"
                                         else 600)
    if ending == "terminated":
        temporal_env.ops.terminate(wid)
    wait_for(lambda: temporal_env.destination.describe(NS, wid).status,
             lambda s: s == ending, 10, f"dummy {ending}")
    service.create_schedule(NS, sid)
    assert service.rollback(NS, sid).outcome == "accepted"
    service.run_until_idle()
    mig = service.migration(NS, sid)
    assert mig.state == "completed" and service.verify() == []
    chains = temporal_env.ops.chains(wid, 2)
    assert set(chains) == {dummy, mig.destination_first_run_id}
    assert [r.workflow_type for r in chains[dummy]] == [DUMMY_WORKFLOW_TYPE]


def test_a_chain_that_continued_as_new_before_the_receipt_is_accepted(temporal_env, service,
                                                                      sid, hooks):
    wid = destination_workflow_id(sid)
    service.create_schedule(NS, sid)
    service.rollback(NS, sid)
    hooks.crash_once("start.after_call")  # the start committed; its answer is never recorded
    with pytest.raises(Crash):
        service.run_until_idle()
    assert service.migration(NS, sid).state == "claimed"
    first = temporal_env.destination.describe(NS, wid).run_id
    temporal_env.ops.signal(wid, "force-continue-as-new")
    wait_for(lambda: temporal_env.destination.describe(NS, wid).run_id,
             lambda run: run != first, 10, "a continued run")
    service.run_until_idle()
    assert assert_owned_by_one_chain(temporal_env, service, sid, runs=2) == first
    # Reconciled through the chain head: the first run's request ids hold ours.
    assert evidence(service, sid) == ["chain_head"]
    assert service.migration(NS, sid).starts_issued == 1


def test_a_destination_terminated_after_a_close_failure_is_not_started_again(
        temporal_env, service, sid, hooks):
    wid = destination_workflow_id(sid)
    service.create_schedule(NS, sid)
    service.rollback(NS, sid)
    hooks.crash_once("close.before_append")
    with pytest.raises(Crash):
        service.run_until_idle()
    assert service.migration(NS, sid).state == "receipted"
    temporal_env.ops.terminate(wid)
    service.run_until_idle()
    first = assert_owned_by_one_chain(temporal_env, service, sid)
    assert temporal_env.destination.describe(NS, wid, first).status == "terminated"
    assert service.migration(NS, sid).starts_issued == 1


KILLED_WORKER = """
import os, signal, sys
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.temporal import TemporalDestination

def die(point):
    if point == "start.after_call":  # the start RPC has returned; nothing recorded it yet
        os.kill(os.getpid(), signal.SIGKILL)

service = open_service(sys.argv[1], TemporalDestination(sys.argv[2]), crash_hook=die,
                       worker_id="doomed")
service.run_until_idle()
"""


def test_a_worker_killed_between_start_and_receipt_leaves_one_chain(temporal_env, tmp_path,
                                                                    sid):
    store = f"sqlite:///{tmp_path / 'killed.db'}"
    with open_service(store, temporal_env.destination) as service:
        service.create_schedule(NS, sid)
        service.rollback(NS, sid)
    proc = subprocess.run([sys.executable, "-c", KILLED_WORKER, store,
                           temporal_env.server.target], cwd=REPO, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with open_service(store, temporal_env.destination, worker_id="survivor") as service:
        assert service.migration(NS, sid).state == "claimed"
        # Within the claim grace the doomed start may be in flight: one try leaves it (a
        # drain with retries would wait the grace out, then reconcile as below).
        service.run_until_idle(retry_for=0)
        assert service.migration(NS, sid).state == "claimed"
        service.worker.claim_grace = 0  # the grace has passed: reconcile
        service.run_until_idle()
        assert_owned_by_one_chain(temporal_env, service, sid)
        assert evidence(service, sid) == ["chain_head"]


# -- the CLI against the server ------------------------------------------------------------
def cli(env: TemporalEnv, store: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "schedfence.infra.cli", "--store", store, *args], cwd=REPO, timeout=60,
        capture_output=True, text=True, env=dict(os.environ, SCHEDFENCE_DESTINATION=env.url))


def test_the_cli_rolls_back_against_the_server_and_exits_cleanly(temporal_env, tmp_path, sid):
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    for args in (["schedule", "create", NS, sid], ["rollback", NS, sid, "--json"],
                 ["worker", "--until-idle", "--json"], ["verify", "--json"]):
        proc = cli(temporal_env, store, *args)
        assert (proc.returncode, proc.stderr) == (0, ""), args
    proc = cli(temporal_env, store, "status", NS, sid, "--json")
    assert (proc.returncode, proc.stderr) == (0, "")
    mig = json.loads(proc.stdout)["migration"]
    assert mig["state"] == "completed"
    chains = temporal_env.ops.chains(destination_workflow_id(sid), 1)
    assert list(chains) == [mig["destination_first_run_id"]]


def test_the_cli_reports_an_unreachable_server_in_one_line(tmp_path, sid):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "schedfence.infra.cli", "--store", f"sqlite:///{tmp_path / 'x.db'}",
             "--destination", "temporal://127.0.0.1:1/default", *args],
            cwd=REPO, timeout=60, capture_output=True, text=True)
    proc = run("schedule", "create", NS, sid)  # it checks for a running chain (I1)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: unavailable: ") and proc.stderr.count("\n") == 1
    with open_service(f"sqlite:///{tmp_path / 'x.db'}", "sim") as svc:  # nothing was written
        assert svc.event_count() == 0
        svc.create_schedule(NS, sid)  # with the simulator in the store, to try a rollback
    proc = run("rollback", NS, sid)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: unavailable: ") and proc.stderr.count("\n") == 1


def test_the_destination_worker_command_starts_and_stops_on_sigterm(temporal_env):
    proc, started = start_destination_worker(temporal_env.url, "--task-queue", "e2e-stop")
    assert started["event"] == "started" and started["task_queue"] == "e2e-stop"
    # Only the sentinel: the server's own scheduler runs the schedules a rollback creates.
    assert started["workflow_types"] == [DUMMY_WORKFLOW_TYPE]
    assert stop_process(proc) == 0
    assert json.loads(proc.stdout.read())["event"] == "stopped"
